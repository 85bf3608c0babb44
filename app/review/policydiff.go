package review

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/policy"
	"github.com/parleyhq/parley/policy/arbiter"
)

// PolicyChange is one field's verdict under a policy and under a proposed replacement.
type PolicyChange struct {
	Field    core.Field
	Old, New core.Verdict
}

// Flipped reports whether the new policy decides the field otherwise.
func (c PolicyChange) Flipped() bool { return c.Old.Decision != c.New.Decision }

// PolicyDiff judges the latest change of every field in the ledger under old and under new, and
// returns the verdicts, the fields whose decision flips first, then by address. The latest change
// is judged as it came: the commit that set Git's value is the claim, against the value before it
// (its history up to then), so that bounds, writers and rules that a policy applies to changes are
// all in play. It is what a pull request that changes the policy would do to the changes the ledger
// holds; the App shows it on such a pull request and `parley policy diff` prints it offline.
//
// Each change is judged as of when it was made, so that a claim's lifetime or a freeze window is
// what it was then.
func PolicyDiff(ctx context.Context, old, new *policy.Policy, git GitState) ([]PolicyChange, error) {
	fields, err := git.Fields(core.FieldPattern{})
	if err != nil {
		return nil, fmt.Errorf("policy diff: list fields: %w", err)
	}
	lookup := policy.Overlay{Git: git}
	oldArb, newArb := arbiter.New(old), arbiter.New(new)
	out := make([]PolicyChange, 0, len(fields))
	for _, f := range fields {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		cur, ok, err := git.Current(f)
		if err != nil {
			return nil, fmt.Errorf("policy diff: current claim on %s: %w", f, err)
		}
		if !ok {
			continue // yielded or only claimed: no change to judge
		}
		hist, err := git.History(f)
		if err != nil {
			return nil, fmt.Errorf("policy diff: history of %s: %w", f, err)
		}
		in := arbiter.Input{Field: f, Now: cur.At, Lookup: lookup, Live: []core.Claim{cur}}
		for i, c := range hist {
			if c.Evidence.Commit == cur.Evidence.Commit {
				in.History = hist[:i]
				break
			}
			if !c.Yield {
				prev := c
				in.Git = &prev
			}
		}
		out = append(out, PolicyChange{Field: f, Old: oldArb.Decide(in), New: newArb.Decide(in)})
	}
	sort.SliceStable(out, func(i, j int) bool {
		if a, b := out[i].Flipped(), out[j].Flipped(); a != b {
			return a
		}
		return out[i].Field.String() < out[j].Field.String()
	})
	return out, nil
}

// RenderPolicyDiff writes the changes as lines for people: a count, then each field that flips
// with its decision and deciding rule before and after, then how many fields keep their decision.
func RenderPolicyDiff(changes []PolicyChange) []string {
	var lines []string
	b := &lineWriter{lines: &lines}
	flips := 0
	for _, c := range changes {
		if c.Flipped() {
			flips++
		}
	}
	fmt.Fprintf(b, "%d of %d fields in the ledger change their verdict under the new policy.\n", flips, len(changes))
	for _, c := range changes {
		if !c.Flipped() {
			break
		}
		fmt.Fprintf(b, "- %s: %s (rule %s) -> %s (rule %s)\n", c.Field, c.Old.Decision, orNone(c.Old.Rule), c.New.Decision, orNone(c.New.Rule))
	}
	if kept := len(changes) - flips; kept > 0 {
		fmt.Fprintf(b, "%d fields keep their verdict.\n", kept)
	}
	return lines
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
