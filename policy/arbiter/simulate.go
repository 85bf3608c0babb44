package arbiter

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/policy"
)

// Change is a verdict that differs from the previous verdict on its field.
// Its JSON is what parley simulate --json prints (docs/schemas/simulate.schema.json).
type Change struct {
	At      time.Time    `json:"at"`
	Cause   string       `json:"cause"` // the event ("event 3: note") or "recheck" when a verdict's recheck time came
	Verdict core.Verdict `json:"verdict"`
}

type simField struct {
	file    string // the file that defines the field, from its git events
	git     *core.Claim
	live    []core.Claim // latest claim per identity
	history []core.Claim
	last    *core.Verdict
}

// Simulate replays events through the policy and returns every verdict change, in time order.
// After each event the fields it touches are decided again (all fields after a git-value or tick
// event); between events, fields are decided again at their verdicts' recheck times, so expiries
// and freeze boundaries show up when they happen.
func Simulate(p *policy.Policy, events []Event) ([]Change, error) {
	return SimulateWith(p, events, nil)
}

// OwnersOf answers who owns the file that defines a field (file "" when no git event named one):
// the people asked when a verdict asks and the policy names nobody.
type OwnersOf func(f core.Field, file string) Owners

// SimulateWith is Simulate with the code owners of the files that define the fields; nil: unknown.
func SimulateWith(p *policy.Policy, events []Event, owners OwnersOf) ([]Change, error) {
	arb := New(p)
	fields := map[core.Field]*simField{}
	var order []core.Field
	values := GitValues{}
	var changes []Change

	decide := func(f core.Field, now time.Time, cause string) {
		st := fields[f]
		in := Input{Field: f, Live: st.live, Git: st.git, History: st.history, Now: now, Lookup: values}
		if owners != nil {
			in.Owners = func() Owners { return owners(f, st.file) }
		}
		v := arb.Decide(in)
		if st.last == nil || signature(*st.last) != signature(v) {
			changes = append(changes, Change{At: now, Cause: cause, Verdict: v})
		}
		st.last = &v
	}
	rechecks := func(upTo time.Time) {
		for {
			var next core.Field
			var at time.Time
			for _, f := range order {
				st := fields[f]
				if st.last == nil || st.last.Recheck.IsZero() || !st.last.Recheck.Before(upTo) {
					continue
				}
				if at.IsZero() || st.last.Recheck.Before(at) {
					next, at = f, st.last.Recheck
				}
			}
			if at.IsZero() {
				return
			}
			decide(next, at, "recheck")
		}
	}
	field := func(f core.Field) *simField {
		st, ok := fields[f]
		if !ok {
			st = &simField{}
			fields[f] = st
			order = append(order, f)
		}
		return st
	}

	for i, ev := range events {
		at, err := time.Parse(time.RFC3339, ev.At)
		if err != nil {
			return nil, fmt.Errorf("event %d: at %q is not an RFC 3339 time", i+1, ev.At)
		}
		at = at.UTC()
		rechecks(at)
		cause := fmt.Sprintf("event %d", i+1)
		if ev.Note != "" {
			cause += ": " + ev.Note
		}
		var touched []core.Field
		switch ev.Kind {
		case EventTick:
			touched = order
		case EventGitValue:
			f, err := core.ParseField(ev.Field)
			if err != nil {
				return nil, fmt.Errorf("event %d: %w", i+1, err)
			}
			v, err := core.ParseJSONValue(ev.Value)
			if err != nil {
				return nil, fmt.Errorf("event %d: %w", i+1, err)
			}
			values[f] = v
			touched = order
		case EventGit, EventClaim:
			c, err := ev.Claim(core.Field{}, at)
			if err != nil {
				return nil, fmt.Errorf("event %d: %w", i+1, err)
			}
			st := field(c.Field)
			st.history = append(st.history, c)
			if ev.Kind == EventGit {
				if ev.File != "" {
					st.file = ev.File
				}
				st.git = &c
				values[c.Field] = c.Value
			} else {
				st.live = slices.DeleteFunc(st.live, func(o core.Claim) bool {
					return o.Actor.Identity.String() == c.Actor.Identity.String()
				})
				st.live = append(st.live, c)
			}
			touched = []core.Field{c.Field}
		}
		for _, f := range touched {
			decide(f, at, cause)
		}
	}
	return changes, nil
}

// signature is what makes two verdicts on a field different for a person: the decision, the rule,
// who wins with what, until when, who is asked, and who loses with what.
func signature(v core.Verdict) string {
	var b strings.Builder
	b.WriteString(string(v.Decision) + "|" + v.Rule + "|")
	if v.Winner != nil {
		b.WriteString(v.Winner.Actor.String() + "=" + v.Winner.Value.String())
	}
	b.WriteString("|" + v.Until.String() + "|" + strings.Join(v.Ask, ",") + "|")
	if v.Proposed != nil {
		b.WriteString("proposed " + v.Proposed.Actor.String() + "=" + v.Proposed.Value.String() + "|")
	}
	for _, l := range v.Losers {
		b.WriteString(l.Actor.String() + "=" + l.Value.String() + ";")
	}
	return b.String()
}

// RenderChanges renders a simulation as text: each change's time and cause, then the verdict.
func RenderChanges(changes []Change) string {
	var b strings.Builder
	for i, c := range changes {
		if i > 0 {
			b.WriteString("\n")
		}
		b.WriteString("@ " + fmtTime(c.At) + " (" + c.Cause + ")\n")
		b.WriteString(Explain(c.Verdict))
	}
	return b.String()
}

// RenderBrief renders one line per change.
func RenderBrief(changes []Change) string {
	var b strings.Builder
	for _, c := range changes {
		v := c.Verdict
		b.WriteString(fmtTime(c.At) + "  " + v.Field.String() + "  " + string(v.Decision))
		if v.Winner != nil {
			b.WriteString(" " + v.Winner.Actor.String() + "=" + v.Winner.Value.String())
		}
		if !v.Until.IsZero() {
			b.WriteString(" until " + fmtTime(v.Until))
		}
		b.WriteString("  [" + v.Rule + "]  (" + c.Cause + ")\n")
	}
	return b.String()
}
