package arbiter

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/parleyhq/parley/core"
)

// flip is one change of a field's value by a different actor than the previous change.
type flip struct {
	at       time.Time
	actor    string
	value    core.Value
	evidence string
}

// oscillation looks for actors flipping the field back and forth in the policy's window. When it
// finds at least the configured number of flips by two or more actors, the field is held at Git's
// value and humans are asked, citing every flip.
func (d *decision) oscillation() (core.Verdict, bool) {
	o := d.p.Oscillation
	if o.Flips == 0 {
		return core.Verdict{}, false
	}
	// Fewer changes than flips needed: nothing to look at (the common case, kept cheap).
	if len(d.in.History)+len(d.in.Live) <= o.Flips {
		d.step("oscillation", "none", d.a.texts.oscNone)
		return core.Verdict{}, false
	}
	flips := d.flips()
	var recent []flip
	from := d.in.Now.Add(-o.Window)
	for _, f := range flips {
		if !f.at.Before(from) && !f.at.After(d.in.Now) {
			recent = append(recent, f)
		}
	}
	actors := map[string]bool{}
	for _, f := range recent {
		actors[f.actor] = true
	}
	if len(recent) < o.Flips || len(actors) < 2 {
		d.step("oscillation", "none", fmt.Sprintf("%d flip(s) by %d actor(s) in the last %s (a hold needs %d by two or more actors)",
			len(recent), len(actors), fmtDuration(o.Window), o.Flips))
		return core.Verdict{}, false
	}
	last := recent[len(recent)-1].at
	until := last.Add(o.Hold)
	if !d.in.Now.Before(until) {
		d.step("oscillation", "hold over", fmt.Sprintf("%d flips ended with the hold, which ran until %s", len(recent), fmtTime(until)))
		return core.Verdict{}, false
	}
	cites := make([]string, len(recent))
	for i, f := range recent {
		cites[i] = fmtTime(f.at) + " " + f.actor + " set " + f.value.String() + " (" + f.evidence + ")"
	}
	names := make([]string, 0, len(actors))
	for a := range actors {
		names = append(names, a)
	}
	slices.Sort(names)
	d.step("oscillation", "hold", fmt.Sprintf("%s flipped the value %d times in the last %s (threshold %d): %s; the field is held until %s and humans are asked",
		strings.Join(names, " and "), len(recent), fmtDuration(o.Window), o.Flips, strings.Join(cites, "; "), fmtTime(until)))
	if len(d.p.Rules) > 0 {
		d.step("rules", "not reached", "the field is held, so no rule is consulted until the hold ends")
	}
	for _, v := range d.activeLive() {
		v.status = lost
	}
	d.noteRecheck(until)
	v := d.verdict(core.DecisionHold, "oscillation", d.git) // asks the escalation's people, or the code owners
	v.Until = until
	return v, true
}

// flips lists value changes between different actors over the history and the live claims,
// oldest first.
func (d *decision) flips() []flip {
	// An entry points into d.in's slices rather than copying the claim: with a history of a
	// window's claims per judgement, the copies were the largest allocation of a judgement.
	type entry struct {
		c     *core.Claim
		actor string
	}
	n := len(d.in.History) + len(d.in.Live)
	seen := make(map[claimKey]bool, n)
	seq := make([]entry, 0, n)
	add := func(c *core.Claim) {
		if c.Yield || c.Value.Absent() {
			return
		}
		k := keyOf(*c)
		if seen[k] {
			return
		}
		seen[k] = true
		name := ""
		if c.Evidence.Commit != "" || c.Evidence.Source == "git" {
			name = "git"
		} else if a := d.a.resolve(c.Actor.Identity); a != nil {
			name = a.Name
		} else {
			name = c.Actor.Identity.String()
		}
		seq = append(seq, entry{c, name})
	}
	// The claims as given (not normalised): history records what actors did.
	for i := range d.in.History {
		add(&d.in.History[i])
	}
	for i := range d.in.Live {
		add(&d.in.Live[i])
	}
	slices.SortStableFunc(seq, func(a, b entry) int { return compareClaims(a.c, b.c) })
	var out []flip
	for i := 1; i < len(seq); i++ {
		prev, cur := seq[i-1], seq[i]
		if cur.c.Value.Equal(prev.c.Value) || cur.actor == prev.actor {
			continue
		}
		out = append(out, flip{at: cur.c.At, actor: cur.actor, value: cur.c.Value, evidence: evidenceText(cur.c.Evidence)})
	}
	return out
}

// claimKey is what makes two claims one entry of the flips' sequence: the same identity
// (Identity.String), value and time. Built without joining strings: a history of a few hundred
// claims per judgement made it a large share of a judgement's allocations.
type claimKey struct {
	source, id, value string
	at                int64
}

// keyOf is c's claimKey. Identities compare as Identity.String does (source ":" id): a source
// holding a colon is split at the string's first colon, so that two identities whose strings are
// equal share a key.
func keyOf(c core.Claim) claimKey {
	src, id := string(c.Actor.Identity.Source), c.Actor.Identity.ID
	if i := strings.IndexByte(src, ':'); i >= 0 {
		s := src + ":" + id
		src, id = s[:i], s[i+1:]
	}
	return claimKey{source: src, id: id, value: c.Value.String(), at: c.At.UnixNano()}
}

func evidenceText(e core.Evidence) string {
	var parts []string
	if e.Commit != "" {
		c := e.Commit
		if len(c) > 12 {
			c = c[:12]
		}
		parts = append(parts, "commit "+c)
	}
	if e.PR != 0 {
		parts = append(parts, "PR #"+strconv.Itoa(e.PR))
	}
	if len(e.EventIDs) > 0 {
		parts = append(parts, "event "+strings.Join(e.EventIDs, ", "))
	}
	if len(parts) == 0 {
		if e.Source != "" {
			return e.Source
		}
		return "no evidence recorded"
	}
	if e.Source != "" && e.Commit == "" {
		return e.Source + " " + strings.Join(parts, ", ")
	}
	return strings.Join(parts, ", ")
}
