package review

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/internal/ghmarkdown"
	"github.com/parleyhq/parley/policy"
	"github.com/parleyhq/parley/policy/arbiter"
	"github.com/parleyhq/parley/trailers/ledger"
)

// PolicyChange is one field's verdict under the base's policy (Old) and under a proposed
// replacement (New).
type PolicyChange struct {
	Field    core.Field
	Old, New core.Verdict
}

// Differs reports whether the new policy decides the field otherwise: another decision, or the
// same decision for another claim (another actor, or another value, wins). A verdict that only
// names another rule for the same outcome does not differ.
func (c PolicyChange) Differs() bool {
	if c.Old.Decision != c.New.Decision {
		return true
	}
	a, b := c.Old.Winner, c.New.Winner
	if a == nil || b == nil {
		return (a == nil) != (b == nil)
	}
	return a.Actor.Identity.Source != b.Actor.Identity.Source || a.Actor.Identity.ID != b.Actor.Identity.ID ||
		a.Yield != b.Yield || !a.Value.Equal(b.Value)
}

// MarshalJSON writes the change for scripts: the field, and each verdict's decision, rule, winner
// and until (not the explanation: `parley explain --json` gives that for a field).
func (c PolicyChange) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Field core.Field   `json:"field"`
		Old   briefVerdict `json:"old"`
		New   briefVerdict `json:"new"`
	}{c.Field, brief(c.Old), brief(c.New)})
}

type briefVerdict struct {
	Decision core.Decision `json:"decision"`
	Rule     string        `json:"rule,omitempty"`
	Winner   *core.Claim   `json:"winner,omitempty"`
	Until    time.Time     `json:"until,omitzero"`
}

func brief(v core.Verdict) briefVerdict {
	return briefVerdict{Decision: v.Decision, Rule: v.Rule, Winner: v.Winner, Until: v.Until}
}

// PolicyDiff is what replacing the base's policy with another changes, in two views.
//
// Now is the view that matters for merging: every field's standing claims (the claim behind Git's
// value and the field's history, as `parley explain` reads them) judged at At under both
// policies. A field whose standing owner the new policy removes, whose freeze it ends or whose
// writers it narrows shows here: it is what the verdicts would be the moment the change merges.
//
// AsChanged is the view of the past: each field's last change judged as it was made (the change is
// the claim, against the value before it, at its own time) under both policies. It shows the
// changes the ledger holds that the new policy would have decided otherwise, such as a value the
// new bounds would have vetoed, though Git's value now stands under either policy.
type PolicyDiff struct {
	At     time.Time      `json:"at"`
	Fields int            `json:"fields"` // the fields judged now: every field the ledger holds
	Now    []PolicyChange `json:"now"`    // the fields whose verdict differs now, by address
	// Changes is how many fields have a last change (a field only claimed or yielded has none).
	Changes   int            `json:"changes"`
	AsChanged []PolicyChange `json:"as_changed"` // the last changes decided otherwise, by address
}

// Differs reports whether the new policy changes any verdict, now or as the last changes were
// judged.
func (d PolicyDiff) Differs() bool { return len(d.Now) > 0 || len(d.AsChanged) > 0 }

// histories is a GitState that reads every field's history in one pass over its index, as the
// ledger's Branch does: reading each field by itself costs a query of the branch's yield patterns
// and one of its claims for every field, twice (Current and History).
type histories interface {
	EachField(ctx context.Context, p core.FieldPattern, fn func(ledger.FieldHistory) error) error
}

// DiffPolicy judges every field of the base branch's ledger (git) under old (the base's policy) and
// under new, now and as each field's last change was made; see PolicyDiff. Each field is read once
// and judged once per policy and view; git() and git_values() in the policies are answered from
// one memo of the ledger shared by both policies, so a condition such as the HPA's owner_when, which
// lists a namespace's HorizontalPodAutoscalers for every Deployment, reads the ledger once per
// namespace, not once per field. The App shows the result on a pull request that changes the
// policy, and `parley policy diff` and `parley review` print it offline.
func DiffPolicy(ctx context.Context, old, new *policy.Policy, git GitState, now time.Time) (PolicyDiff, error) {
	d := PolicyDiff{At: now.UTC(), Now: []PolicyChange{}, AsChanged: []PolicyChange{}}
	lookup := &memoLookup{git: git, values: map[core.Field]memoValue{}, fields: map[string][]core.Field{}}
	oldArb, newArb := arbiter.New(old), arbiter.New(new)
	judge := func(f core.Field, cur core.Claim, hasCur bool, hist []core.Claim) {
		if hasCur {
			lookup.values[f] = memoValue{v: cur.Value, ok: !cur.Value.Absent()}
		} else {
			lookup.values[f] = memoValue{}
		}
		// Now: Git's value stands as the claim Git holds, against everything the field has seen.
		in := arbiter.Input{Field: f, Now: d.At, Lookup: lookup, History: hist}
		if hasCur {
			c := cur
			in.Git = &c
		}
		d.Fields++
		if c := (PolicyChange{Field: f, Old: oldArb.Decide(in), New: newArb.Decide(in)}); c.Differs() {
			d.Now = append(d.Now, c)
		}
		if !hasCur {
			return // yielded or only claimed: no change to judge as it was made
		}
		// As changed: the commit that set Git's value is the claim, against the value before it
		// and its history up to then, at its own time (a freeze or a claim's lifetime as then).
		then := arbiter.Input{Field: f, Now: cur.At, Lookup: lookup, Live: []core.Claim{cur}}
		for i, c := range hist {
			if c.Evidence.Commit == cur.Evidence.Commit {
				then.History = hist[:i]
				break
			}
			if !c.Yield {
				prev := c
				then.Git = &prev
			}
		}
		d.Changes++
		if c := (PolicyChange{Field: f, Old: oldArb.Decide(then), New: newArb.Decide(then)}); c.Differs() {
			d.AsChanged = append(d.AsChanged, c)
		}
	}
	if hs, ok := git.(histories); ok {
		err := hs.EachField(ctx, core.FieldPattern{}, func(h ledger.FieldHistory) error {
			cur, hasCur := h.Current()
			hist := make([]core.Claim, len(h.Entries))
			for i, e := range h.Entries {
				hist[i] = e.Claim
			}
			judge(h.Field, cur, hasCur, hist)
			return nil
		})
		if err != nil {
			return PolicyDiff{}, fmt.Errorf("policy diff: read the ledger: %w", err)
		}
	} else {
		fields, err := git.Fields(core.FieldPattern{})
		if err != nil {
			return PolicyDiff{}, fmt.Errorf("policy diff: list fields: %w", err)
		}
		for _, f := range fields {
			if err := ctx.Err(); err != nil {
				return PolicyDiff{}, err
			}
			cur, hasCur, err := git.Current(f)
			if err != nil {
				return PolicyDiff{}, fmt.Errorf("policy diff: current claim on %s: %w", f, err)
			}
			hist, err := git.History(f)
			if err != nil {
				return PolicyDiff{}, fmt.Errorf("policy diff: history of %s: %w", f, err)
			}
			judge(f, cur, hasCur, hist)
		}
	}
	byAddress := func(a, b PolicyChange) int { return strings.Compare(a.Field.String(), b.Field.String()) }
	slices.SortStableFunc(d.Now, byAddress)
	slices.SortStableFunc(d.AsChanged, byAddress)
	return d, nil
}

// memoLookup answers git() and git_values() from the ledger, each field's value and each pattern's
// fields read once for the whole diff. Fields already judged are answered from what the pass read.
type memoLookup struct {
	git    GitState
	values map[core.Field]memoValue
	fields map[string][]core.Field
}

type memoValue struct {
	v  core.Value
	ok bool
}

func (m *memoLookup) GitValue(f core.Field) (core.Value, bool, error) {
	if mv, ok := m.values[f]; ok {
		return mv.v, mv.ok, nil
	}
	c, ok, err := m.git.Current(f)
	if err != nil {
		return core.Value{}, false, err
	}
	mv := memoValue{}
	if ok {
		mv = memoValue{v: c.Value, ok: !c.Value.Absent()}
	}
	m.values[f] = mv
	return mv.v, mv.ok, nil
}

func (m *memoLookup) GitFields(p core.FieldPattern) ([]core.Field, error) {
	key := p.String()
	if fs, ok := m.fields[key]; ok {
		return slices.Clone(fs), nil
	}
	// As policy.Overlay answers without a head: the ledger's fields, sorted by address.
	fs, err := policy.Overlay{Git: m.git}.GitFields(p)
	if err != nil {
		return nil, err
	}
	m.fields[key] = fs
	return slices.Clone(fs), nil
}

// describe is a verdict as the diff lists it: its decision and rule, and who wins when the other
// side's verdict has the same decision for another claim.
func describe(v core.Verdict, withWinner bool) string {
	s := fmt.Sprintf("%s (rule %s", v.Decision, orNone(v.Rule))
	if withWinner {
		if v.Winner != nil {
			s += ", " + v.Winner.Actor.String() + " wins with " + v.Winner.Value.String()
		} else {
			s += ", no winner"
		}
	}
	return s + ")"
}

// RenderPolicyDiff writes the diff as lines for people: the fields whose verdict differs now,
// then the last changes decided otherwise, each with its decision and deciding rule before and
// after. At most max fields are listed in each view (0: all), the rest counted.
func RenderPolicyDiff(d PolicyDiff, max int) []string {
	var lines []string
	b := &lineWriter{lines: &lines}
	fmt.Fprintf(b, "Now (%s), judging each field's standing claims (Git's value and the field's history): %d of %d fields change their verdict under the new policy.\n",
		d.At.Format(time.RFC3339), len(d.Now), d.Fields)
	list := func(cs []PolicyChange) {
		for i, c := range cs {
			if max > 0 && i == max {
				fmt.Fprintf(b, "- and %d more\n", len(cs)-max)
				break
			}
			same := c.Old.Decision == c.New.Decision
			fmt.Fprintf(b, "- %s: %s -> %s\n", c.Field, describe(c.Old, same), describe(c.New, same))
		}
	}
	list(d.Now)
	fmt.Fprintf(b, "As each field's last change was judged when it was made: %d of %d changes would have been decided otherwise.\n",
		len(d.AsChanged), d.Changes)
	list(d.AsChanged)
	return lines
}

// MarkdownPolicyDiff is RenderPolicyDiff as Markdown for a pull request's comment and check run:
// addresses and rule names are the repository's and the pull request's text, so each is quoted as
// code, never read as Markdown.
func MarkdownPolicyDiff(d PolicyDiff, max int) string {
	var b strings.Builder
	// No time in the text: the App renders the same body for the same verdicts, so a redelivery or
	// a review event that changes nothing writes nothing.
	fmt.Fprintf(&b, "**What changes now**, each field's standing claims (Git's value and the field's history) judged under both policies: "+
		"**%d of %d fields** change their verdict.\n", len(d.Now), d.Fields)
	code := func(v core.Verdict, withWinner bool) string {
		s := ghmarkdown.Code(string(v.Decision)) + " (rule " + ghmarkdown.Code(orNone(v.Rule))
		if withWinner && v.Winner != nil {
			s += ", " + ghmarkdown.Code(v.Winner.Actor.String()) + " wins with " + ghmarkdown.Code(v.Winner.Value.String())
		}
		return s + ")"
	}
	list := func(cs []PolicyChange) {
		for i, c := range cs {
			if max > 0 && i == max {
				fmt.Fprintf(&b, "- and %d more (`parley policy diff` lists them all)\n", len(cs)-max)
				break
			}
			same := c.Old.Decision == c.New.Decision
			fmt.Fprintf(&b, "- %s: %s → %s\n", ghmarkdown.Code(c.Field.String()), code(c.Old, same), code(c.New, same))
		}
	}
	list(d.Now)
	fmt.Fprintf(&b, "\nAs each field's last change was judged when it was made: %d of %d changes would have been decided otherwise.\n",
		len(d.AsChanged), d.Changes)
	list(d.AsChanged)
	return b.String()
}

// PolicyChangeConclusion is the check conclusion of a pull request that changes the policy, given
// fields, the conclusion of the fields it claims (Result.Conclusion). A new policy that does not
// parse (or no policy at all) fails: merged, nothing would be judged. A valid one waits for the
// approval of a policy owner at the head (action_required, or failure when a field is vetoed
// anyway), whether or not it changes a verdict now: the diff is what the owner reviews, and a
// policy that changes nothing today decides every later claim. Once approved the fields decide, as
// for any other pull request, and an approved change to the policy that claims no field passes.
// Offline review cannot see approvals and passes approved false.
//
// It is its own function, apart from report.Conclusion of the fields' verdicts, so the rules for
// the two can change independently.
func PolicyChangeConclusion(fields string, invalid, approved bool) string {
	switch {
	case invalid:
		return "failure"
	case !approved && fields == "failure":
		return "failure"
	case !approved:
		return "action_required"
	case fields == "neutral":
		return "success"
	}
	return fields
}

// lineWriter collects what is written to it as lines.
type lineWriter struct{ lines *[]string }

func (w *lineWriter) Write(p []byte) (int, error) {
	*w.lines = append(*w.lines, strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
