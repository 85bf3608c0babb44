// Package inspect gathers what Parley's pages show about a repository: for each field its verdict
// under the policy with every rule's outcome, the history of Git's value from the ledger, the live
// claims standing on it, the freezes and holds that constrained it and the gates Parley wrote. The
// same gathering serves `parley report` (a local repository) and `parley serve` (its clone of a
// repository, with the drift state's live claims); app/pages draws the result.
package inspect

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/parleyhq/parley/app/pages"
	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/policy"
	"github.com/parleyhq/parley/policy/arbiter"
	"github.com/parleyhq/parley/reconcile/driftstate"
	"github.com/parleyhq/parley/reconcile/gitops"
)

// Ledger is what inspect reads of a repository's claim history (a trailers/ledger.Ledger brought
// up to date with the branch).
type Ledger interface {
	History(f core.Field) ([]core.Claim, error)
	Current(f core.Field) (core.Claim, bool, error)
	Fields(p core.FieldPattern) ([]core.Field, error)
}

// Source is one repository's branch as inspect reads it.
type Source struct {
	Repository string
	Ledger     Ledger
	Policy     *policy.Policy
	// Files are the branch's files, read for the gates Parley wrote; nil: no gates shown.
	Files map[string][]byte
	// Live are the standing claims made outside Git (the drift state's), on any field.
	Live []core.Claim
	// Holds are holds in force, on any field (ChatOps); each window's label names who held it.
	Holds map[core.Field][]pages.Window
	// Dependents answers a field's dependents for the verdict (the dependency graph); nil: none.
	Dependents func(core.Field) []core.Dependent
	// Drift is the repository's drift state: each field's claims made outside Git, standing or
	// closed, and the drift verdicts with their evidence. nil: none.
	Drift DriftState
}

// DriftState is what inspect reads of a drift state (a driftstate.DB).
type DriftState interface {
	Claims(ctx context.Context, f core.Field, all bool) ([]driftstate.Claim, error)
	Verdicts(ctx context.Context, f core.Field) ([]driftstate.Record, error)
}

// Inspector gathers pages from one Source. Not safe for concurrent use (its arbiter caches).
type Inspector struct {
	src   Source
	arb   *arbiter.Arbiter
	gates map[core.Field][]pages.Gate
}

// New reads the gates of src's files once; the fields' pages are gathered on demand.
func New(src Source) *Inspector {
	in := &Inspector{src: src, arb: arbiter.New(src.Policy), gates: map[core.Field][]pages.Gate{}}
	paths := make([]string, 0, len(src.Files))
	for p := range src.Files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		ext := strings.ToLower(p[strings.LastIndexByte(p, '.')+1:])
		if ext != "yaml" && ext != "yml" && ext != "tf" || !strings.Contains(string(src.Files[p]), gitops.Annotation) {
			continue
		}
		listed, err := gitops.ListGates(p, src.Files[p])
		if err != nil {
			continue // a file Parley cannot read holds no gate Parley manages; parley gates reports it
		}
		for _, l := range listed {
			in.gates[l.Field] = append(in.gates[l.Field], pages.Gate{Field: l.Field, File: p, Rule: l.Rule, Until: l.Until})
		}
	}
	return in
}

// Fields lists the fields matching p (the zero pattern: every field) that have claims in Git,
// standing live claims or drift verdicts, sorted.
func (in *Inspector) Fields(p core.FieldPattern) ([]core.Field, error) {
	fs, err := in.src.Ledger.Fields(p)
	if err != nil {
		return nil, fmt.Errorf("list fields matching %s: %w", p, err)
	}
	seen := map[core.Field]bool{}
	for _, f := range fs {
		seen[f] = true
	}
	for _, c := range in.src.Live {
		if !seen[c.Field] && (p.Scheme == "" || p.Match(c.Field)) {
			seen[c.Field] = true
			fs = append(fs, c.Field)
		}
	}
	if in.src.Drift != nil {
		// The fields drift was judged on, Git's claims or not.
		recs, err := in.src.Drift.Verdicts(context.Background(), core.Field{})
		if err != nil {
			return nil, fmt.Errorf("list the drift state's fields: %w", err)
		}
		for _, r := range recs {
			if f := r.Verdict.Field; !seen[f] && (p.Scheme == "" || p.Match(f)) {
				seen[f] = true
				fs = append(fs, f)
			}
		}
	}
	slices.SortFunc(fs, func(a, b core.Field) int { return strings.Compare(a.String(), b.String()) })
	return fs, nil
}

// Field gathers field f's page for the time at.
func (in *Inspector) Field(f core.Field, at time.Time) (pages.Field, error) {
	page := pages.Field{Repository: in.src.Repository, Field: f, At: at}
	hist, err := in.src.Ledger.History(f)
	if err != nil {
		return page, fmt.Errorf("read the history of %s: %w", f, err)
	}
	page.Git = hist
	for _, c := range in.src.Live {
		if c.Field == f {
			page.Live = append(page.Live, c)
		}
	}
	if in.src.Drift != nil {
		live, drift, err := driftOf(context.Background(), in.src.Drift, f)
		if err != nil {
			return page, err
		}
		page.Live, page.Drift = append(page.Live, live...), drift
	}
	slices.SortStableFunc(page.Live, func(a, b core.Claim) int { return a.At.Compare(b.At) })

	input := arbiter.Input{Field: f, Now: at, History: slices.Concat(hist, page.Live), Lookup: lookup{in.src.Ledger}}
	if c, ok, err := in.src.Ledger.Current(f); err != nil {
		return page, fmt.Errorf("read Git's claim on %s: %w", f, err)
	} else if ok {
		input.Git = &c
	}
	for _, c := range page.Live {
		if !c.ExpiredAt(at) {
			input.Live = append(input.Live, c)
		}
	}
	if in.src.Dependents != nil {
		input.Dependents = in.src.Dependents(f)
	}
	page.Verdict = in.arb.Decide(input)
	page.Windows = in.windows(f, page)
	return page, nil
}

// windows are the freezes covering f within the page's time span, the holds on it and the gates
// Parley wrote for it.
func (in *Inspector) windows(f core.Field, page pages.Field) []pages.Window {
	start := page.At
	for _, c := range slices.Concat(page.Git, page.Live) {
		if c.At.Before(start) {
			start = c.At
		}
	}
	var out []pages.Window
	for _, fz := range in.src.Policy.Freezes {
		if !fz.AppliesTo(f) {
			continue
		}
		// The occurrences that overlap the span, a bounded number of them (a daily freeze over a
		// year-long history would otherwise draw hundreds).
		cursor := start
		for range 50 {
			s, e, _ := fz.Window(cursor)
			if s.IsZero() || s.After(page.At) {
				break
			}
			out = append(out, pages.Window{Kind: pages.WindowFreeze, Label: fz.Name, From: s, Until: e})
			if !e.After(cursor) {
				break
			}
			cursor = e
		}
	}
	out = append(out, in.src.Holds[f]...)
	if v := page.Verdict; v.Decision == core.DecisionHold {
		// The arbiter holds the field (oscillation, a rule's hold) until v.Until; open-ended when zero.
		out = append(out, pages.Window{Kind: pages.WindowHold, Label: "held by " + v.Rule, From: page.At, Until: v.Until})
	}
	for _, g := range in.gates[f] {
		// A gate records until when, not since when: it stands for the verdict that wrote it, so
		// it is drawn from that verdict's winning claim when the page's verdict is it.
		from := page.At
		if w := page.Verdict.Winner; w != nil && page.Verdict.Decision == core.DecisionYield && w.At.Before(from) {
			from = w.At
		}
		label := "gate in " + g.File
		if g.Rule != "" {
			label += " (" + g.Rule + ")"
		}
		out = append(out, pages.Window{Kind: pages.WindowGate, Label: label, From: from, Until: g.Until})
	}
	return out
}

// Index gathers the index of the fields matching p, and each field's page: of the first limit
// fields in order of address when limit > 0 (a large repository's index then answers in
// reasonable time; Index.Total says how many there are).
func (in *Inspector) Index(p core.FieldPattern, at time.Time, limit int) (pages.Index, []pages.Field, error) {
	idx := pages.Index{Repository: in.src.Repository, At: at}
	fs, err := in.Fields(p)
	if err != nil {
		return idx, nil, err
	}
	idx.Total = len(fs)
	if limit > 0 && len(fs) > limit {
		fs = fs[:limit]
	}
	fields := make([]pages.Field, 0, len(fs))
	for _, f := range fs {
		page, err := in.Field(f, at)
		if err != nil {
			return idx, nil, err
		}
		fields = append(fields, page)
		idx.Fields = append(idx.Fields, pages.FieldSummary{Field: f, Verdict: page.Verdict, Claims: len(page.Git) + len(page.Live)})
	}
	gated := make([]core.Field, 0, len(in.gates))
	for f := range in.gates {
		gated = append(gated, f)
	}
	slices.SortFunc(gated, func(a, b core.Field) int { return strings.Compare(a.String(), b.String()) })
	for _, f := range gated {
		idx.Gates = append(idx.Gates, in.gates[f]...)
	}
	return idx, fields, nil
}

// driftOf reads the drift state's claims and verdicts on f: each claim closed since (its actor let
// go of it) ends there on the timeline.
func driftOf(ctx context.Context, st DriftState, f core.Field) ([]core.Claim, []pages.DriftVerdict, error) {
	claims, err := st.Claims(ctx, f, true)
	if err != nil {
		return nil, nil, err
	}
	live := make([]core.Claim, 0, len(claims))
	for _, c := range claims {
		cl := c.Claim
		if !c.Closed.IsZero() && (cl.Expires.IsZero() || c.Closed.Before(cl.Expires)) {
			cl.Expires = c.Closed
		}
		live = append(live, cl)
	}
	recs, err := st.Verdicts(ctx, f)
	if err != nil {
		return nil, nil, err
	}
	verdicts := make([]pages.DriftVerdict, 0, len(recs))
	for _, rec := range recs {
		verdicts = append(verdicts, pages.DriftVerdict{At: rec.At, Verdict: rec.Verdict, Evidence: evidenceText(rec)})
	}
	return live, verdicts, nil
}

// evidenceText says in words what a drift verdict was judged on and what it did.
func evidenceText(rec driftstate.Record) string {
	var parts []string
	if len(rec.Evidence) > 0 {
		parts = append(parts, "events "+strings.Join(rec.Evidence, ", "))
	}
	if rec.Action != "" {
		a := rec.Action
		if rec.Commit != "" {
			a += " in " + rec.Commit[:min(12, len(rec.Commit))]
		}
		if rec.PR != 0 {
			a += fmt.Sprintf(" (pull request #%d)", rec.PR)
		}
		parts = append(parts, a)
	}
	if rec.Note != "" {
		parts = append(parts, rec.Note)
	}
	return strings.Join(parts, "; ")
}

// lookup answers the policy's git() and git_values() from the ledger.
type lookup struct{ l Ledger }

func (k lookup) GitValue(f core.Field) (core.Value, bool, error) {
	c, ok, err := k.l.Current(f)
	if err != nil || !ok {
		return core.Value{}, false, err
	}
	return c.Value, !c.Value.Absent(), nil
}

func (k lookup) GitFields(p core.FieldPattern) ([]core.Field, error) { return k.l.Fields(p) }
