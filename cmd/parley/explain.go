package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/policy"
	"github.com/parleyhq/parley/policy/arbiter"
)

// gitState is what explain reads from a repository's ledger.
type gitState interface {
	History(f core.Field) ([]core.Claim, error)
	Current(f core.Field) (core.Claim, bool, error)
	Fields(p core.FieldPattern) ([]core.Field, error)
}

// stateLookup answers git() and git_values() from the ledger, with a claims file's git_values on
// top.
type stateLookup struct {
	state  gitState
	values arbiter.GitValues
}

func (l stateLookup) GitValue(f core.Field) (core.Value, bool, error) {
	if v, ok := l.values[f]; ok {
		return v, !v.Absent(), nil
	}
	if l.state == nil {
		return core.Value{}, false, nil
	}
	c, ok, err := l.state.Current(f)
	if err != nil || !ok {
		return core.Value{}, false, err
	}
	return c.Value, !c.Value.Absent(), nil
}

func (l stateLookup) GitFields(p core.FieldPattern) ([]core.Field, error) {
	fs, _ := l.values.GitFields(p)
	if l.state != nil {
		more, err := l.state.Fields(p)
		if err != nil {
			return nil, err
		}
		for _, f := range more {
			if _, dup := l.values[f]; !dup {
				fs = append(fs, f)
			}
		}
	}
	slices.SortFunc(fs, func(a, b core.Field) int { return strings.Compare(a.String(), b.String()) })
	return fs, nil
}

func newExplainCmd() *cobra.Command {
	var repo, claimsFile, policyFile, at string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "explain FIELD",
		Short: "Decide whose claim wins a field, and explain why",
		Long: `Explain arbitrates the claims on FIELD under the policy and prints the verdict: the decision, the
winner and losers, the rule that decided, when to look again, and every rule considered.

FIELD is an address such as k8s:apps/Deployment/prod/web#/spec/replicas, or a pattern such as
'tf:**//aws_autoscaling_group.*#/desired_capacity' to explain every matching field.

Claims come from the Git ledger of --repo (default: the current directory; the claim Git holds,
and its history), from a claims file (--claims, see docs/claims-format.md) alone, or both (--repo
and --claims): then the file adds live claims to Git's.
The policy is --policy, else .parley/policy.hcl on the default branch of --repo, else
./.parley/policy.hcl.

Exit status 1 when a verdict vetoes a claim.`,
		Example: `  parley explain 'k8s:apps/Deployment/prod/web#/spec/replicas' --repo ./infra
  parley explain 'tf:**//*' --repo ./infra --claims live.json --at 2026-11-22T10:00:00Z --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			// --repo defaults to the current directory, as for ledger and review; a claims file
			// given alone stands alone (with ./.parley/policy.hcl), as it always has.
			if claimsFile != "" && !cmd.Flags().Changed("repo") {
				repo = ""
			}
			var single core.Field
			pattern, perr := core.ParseFieldPattern(args[0])
			if f, err := core.ParseField(args[0]); err == nil {
				single = f
			} else if perr != nil {
				return usageErr(fmt.Errorf("FIELD: %w", perr))
			}

			var cs *arbiter.ClaimSet
			if claimsFile != "" {
				f, err := os.Open(claimsFile)
				if err != nil {
					return usageErr(fmt.Errorf("read claims: %w", err))
				}
				cs, err = arbiter.ReadClaims(f)
				f.Close()
				if err != nil {
					return usageErr(fmt.Errorf("%s: %w", claimsFile, err))
				}
			}
			now := time.Now().UTC()
			switch {
			case at != "":
				t, err := time.Parse(time.RFC3339, at)
				if err != nil {
					return usageErr(fmt.Errorf("--at %q: want an RFC 3339 time such as 2026-11-22T10:00:00Z", at))
				}
				now = t.UTC()
			case cs != nil && !cs.At.IsZero():
				now = cs.At
			}

			var state gitState
			var p *policy.Policy
			var err error
			if repo != "" {
				r, err := openRepo(cmd, repo)
				if err != nil {
					return err
				}
				defer r.Close()
				state = r
				if policyFile == "" {
					src, name, err := r.policySource()
					if err != nil {
						return usageErr(err)
					}
					if p, err = parsePolicy(cmd, src, name); err != nil {
						return err
					}
				}
			}
			if p == nil {
				if policyFile == "" {
					policyFile = policy.DefaultFile
				}
				if p, err = loadPolicy(cmd, policyFile); err != nil {
					return err
				}
			}

			fields, err := explainFields(single, pattern, state, cs)
			if err != nil {
				return err
			}
			if len(fields) == 0 {
				return usageErr(fmt.Errorf("no field matches %s", args[0]))
			}
			arb := arbiter.New(p)
			lookup := stateLookup{state: state}
			if cs != nil {
				lookup.values = cs.Values
			}
			verdicts := make([]core.Verdict, 0, len(fields))
			for _, f := range fields {
				in, err := explainInput(f, now, state, cs)
				if err != nil {
					return err
				}
				in.Lookup = lookup
				verdicts = append(verdicts, arb.Decide(in))
			}
			out := cmd.OutOrStdout()
			if asJSON {
				if !single.IsZero() {
					err = writeJSON(out, verdicts[0])
				} else {
					err = writeJSON(out, verdicts)
				}
			} else {
				for i, v := range verdicts {
					if i > 0 {
						fmt.Fprintln(out)
					}
					if _, err = io.WriteString(out, arbiter.Explain(v)); err != nil {
						break
					}
				}
			}
			if err != nil {
				return err
			}
			vetoes := 0
			for _, v := range verdicts {
				if v.Decision == core.DecisionVeto {
					vetoes++
				}
			}
			if vetoes > 0 {
				return findingsErr(fmt.Errorf("%d verdict(s) veto a claim", vetoes))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&repo, "repo", ".", "repository whose Git ledger holds the claims (with --claims alone: none)")
	cmd.Flags().StringVar(&claimsFile, "claims", "", "claims file (JSON, see docs/claims-format.md)")
	cmd.Flags().StringVar(&policyFile, "policy", "", "policy file (default: .parley/policy.hcl of --repo's default branch)")
	cmd.Flags().StringVar(&at, "at", "", "decide at this time (RFC 3339; default: the claims file's at, else now)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the verdict as JSON")
	return cmd
}

// explainFields lists the fields to explain: the one named, or every field the ledger or the
// claims file knows that matches the pattern.
func explainFields(single core.Field, pattern core.FieldPattern, state gitState, cs *arbiter.ClaimSet) ([]core.Field, error) {
	if !single.IsZero() {
		return []core.Field{single}, nil
	}
	seen := map[core.Field]bool{}
	var out []core.Field
	if state != nil {
		fs, err := state.Fields(pattern)
		if err != nil {
			return nil, fmt.Errorf("list fields matching %s: %w", pattern, err)
		}
		for _, f := range fs {
			seen[f] = true
			out = append(out, f)
		}
	}
	if cs != nil {
		for _, f := range cs.Fields() {
			if pattern.Match(f) && !seen[f] {
				seen[f] = true
				out = append(out, f)
			}
		}
	}
	slices.SortFunc(out, func(a, b core.Field) int { return strings.Compare(a.String(), b.String()) })
	return out, nil
}

// explainInput gathers the claims on f: Git's claim and history from the ledger when there is one
// (else from the claims file), live claims from the claims file.
func explainInput(f core.Field, now time.Time, state gitState, cs *arbiter.ClaimSet) (arbiter.Input, error) {
	in := arbiter.Input{Field: f, Now: now}
	if cs != nil {
		in = cs.Input(f, now)
	}
	if state != nil {
		c, ok, err := state.Current(f)
		if err != nil {
			return in, fmt.Errorf("read Git's claim on %s: %w", f, err)
		}
		if ok && (cs == nil || in.Git == nil) {
			in.Git = &c
		}
		h, err := state.History(f)
		if err != nil {
			return in, fmt.Errorf("read history of %s: %w", f, err)
		}
		in.History = append(h, in.History...)
	}
	return in, nil
}
