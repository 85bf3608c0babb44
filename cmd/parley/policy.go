package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/parleyhq/parley/app/review"
	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/internal/codeowners"
	"github.com/parleyhq/parley/policy"
	"github.com/parleyhq/parley/policy/arbiter"
)

// newPolicyCmd is 'parley policy' and its subcommands.
func newPolicyCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "Work with Parley policies",
		Long:  "Commands for Parley's HCL policy (.parley/policy.hcl). The language is described in docs/policy.md.",
		Example: `  parley policy check
  parley policy check internal/demo/policy.hcl
  parley policy diff .parley/policy.hcl --base origin/main`,
	}
	cmd.AddCommand(newPolicyCheckCmd(), newPolicyDiffCmd())
	return cmd
}

func newPolicyDiffCmd() *cobra.Command {
	var dir, base, at string
	var asJSON, exitCode bool
	cmd := &cobra.Command{
		Use:   "diff [FILE] [--base BRANCH] [--repo DIR]",
		Short: "Show which verdicts a new policy changes now, and which past changes it would have decided otherwise",
		Long: `Diff judges every field of the base branch's ledger under the base's policy (.parley/policy.hcl
on the base) and under FILE (default: .parley/policy.hcl in --repo's work tree), and prints:

  now         the fields whose verdict differs now (--at, default the current time): each field's
              standing claims, the claim behind Git's value and the field's history, judged as
              'parley explain' judges them. This is what merging the new policy changes.
  as changed  the fields whose last change would have been decided otherwise, each change judged
              as it was made (the change is the claim, at its own time, against the value before).

A verdict differs when its decision differs, or when another claim wins. Each field is listed with
its decision and deciding rule under both policies. It is what the GitHub App shows on a pull
request that changes the policy, and what parley review shows for a branch that changes it. The
base is --base, else origin/HEAD, else main or master, as for parley review.

--json prints {policy, base, at, fields, now, changes, as_changed}, each change as
{field, old, new} with the decision, rule, winner and until of both verdicts.

Exit status: 0 when the diff is printed (with --exit-code: only when no verdict differs, else 1),
1 when FILE is not a valid policy, 2 for bad input.`,
		Example: `  parley policy diff
  parley policy diff new-policy.hcl --repo ../infra --base origin/main
  parley policy diff --json --at 2026-11-20T10:00:00Z`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			now := time.Now().UTC()
			if at != "" {
				t, err := time.Parse(time.RFC3339, at)
				if err != nil {
					return usageErr(fmt.Errorf("--at %q: want an RFC 3339 time such as 2026-11-22T10:00:00Z", at))
				}
				now = t.UTC()
			}
			file := filepath.Join(dir, policy.DefaultFile)
			if len(args) == 1 {
				file = args[0]
			}
			next, err := loadPolicy(cmd, file)
			if err != nil {
				return err
			}
			base, err := reviewBase(dir, base)
			if err != nil {
				return usageErr(err)
			}
			repo, err := openRepoAt(cmd, dir, base)
			if err != nil {
				return err
			}
			defer repo.Close()
			src, name, err := repo.policySource()
			if err != nil {
				return usageErr(err)
			}
			old, err := policy.Parse(src, name)
			if err != nil {
				return findingsErr(fmt.Errorf("the base's policy is invalid:\n%w", err))
			}
			branch, err := repo.Branch(repo.branch)
			if err != nil {
				return err
			}
			d, err := review.DiffPolicy(cmd.Context(), old, next, branch, now)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				err = writeJSON(out, struct {
					Policy string `json:"policy"`
					Base   string `json:"base"`
					review.PolicyDiff
				}{file, name, d})
			} else {
				fmt.Fprintf(out, "%s against %s:\n", file, name)
				for _, line := range review.RenderPolicyDiff(d, 0) {
					fmt.Fprintln(out, line)
				}
			}
			if err != nil {
				return err
			}
			if exitCode && d.Differs() {
				return findingsErr(fmt.Errorf("%d verdict(s) differ now, %d last change(s) would have been decided otherwise", len(d.Now), len(d.AsChanged)))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&dir, "repo", ".", "the repository")
	f.StringVar(&base, "base", "", "the branch whose policy and ledger the new policy is compared with (default: origin/HEAD, else main, else master)")
	f.StringVar(&at, "at", "", "judge the standing claims at this RFC 3339 time (default: now)")
	f.BoolVar(&asJSON, "json", false, "print the diff as JSON")
	f.BoolVar(&exitCode, "exit-code", false, "exit 1 when a verdict differs")
	return cmd
}

func newPolicyCheckCmd() *cobra.Command {
	var dir string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "check [FILE] [--repo DIR]",
		Short: "Check a policy file and report its errors as file:line:col: message",
		Long: `Check parses and validates a policy (default: .parley/policy.hcl in --repo, the current
directory). Every problem is printed to stderr as file:line:col: message, and the command
exits 1. A valid policy prints a summary, and notes on whom it believes: trust_unsigned_git_authors
= true (commit emails believed without a signature), or actors that match git_authors but list no
signing_keys; and what unknown_actors lets any identity no actor vouches for declare.

With --repo named, the patterns of the policy's field blocks (match), rules and freezes (fields) are
also checked against the fields of the repository's default branch (its ledger): a pattern that
matches no field is a warning, file:line:col: warning: ..., with the field address it is fewest
edits away from matching (k8s:v1/ConfigMap/... where fields are addressed k8s:core/ConfigMap/...,
or a misspelled kind). Warnings do not change the exit status: a pattern may be written for
fields still to come.

--json prints {file, valid, summary, notes, warnings, errors} instead, each warning as {file, line,
column, block, pattern, nearest, edits} and each error as {file, line, column, message}.`,
		Example: `  parley policy check
  parley policy check path/to/policy.hcl
  parley policy check --repo ../infra --json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			file := filepath.Join(dir, policy.DefaultFile)
			if len(args) == 1 {
				file = args[0]
			} else if _, err := os.Stat(file); errors.Is(err, fs.ErrNotExist) {
				return usageErr(fmt.Errorf("no %s in %s: run `parley init` to write a starter policy, or name the file to check", policy.DefaultFile, dir))
			}
			src, err := os.ReadFile(file)
			if err != nil {
				return usageErr(fmt.Errorf("read policy: %w", err))
			}
			res := policyCheckResult{File: file, Notes: []string{}, Warnings: []patternWarning{}, Errors: []policyError{}}
			p, perr := policy.Parse(src, file)
			var diags policy.Diagnostics
			switch {
			case errors.As(perr, &diags):
				for _, d := range diags {
					res.Errors = append(res.Errors, policyError(d))
				}
			case perr != nil:
				res.Errors = []policyError{{File: file, Message: perr.Error()}}
			}
			if p != nil && perr == nil {
				res.Valid = true
				res.Summary = fmt.Sprintf("%d intents, %d motivations, %d actors, %d fields, %d rules, %d freezes",
					len(p.Intents), len(p.Motivations), len(p.Actors), len(p.Fields), len(p.Rules), len(p.Freezes))
				res.Notes = append(res.Notes, p.TrustNotes()...)
				if cmd.Flags().Changed("repo") {
					repo, err := openRepo(cmd, dir)
					if err != nil {
						return err
					}
					fields, err := repo.Fields(core.FieldPattern{})
					repo.Close()
					if err != nil {
						return fmt.Errorf("list the fields of %s: %w", dir, err)
					}
					res.Warnings = unmatchedPatterns(p, src, file, fields)
				}
			}
			out := cmd.OutOrStdout()
			if asJSON {
				if err := writeJSON(out, res); err != nil {
					return err
				}
			} else if res.Valid {
				fmt.Fprintf(out, "%s: ok (%s)\n", file, res.Summary)
				for _, n := range res.Notes {
					fmt.Fprintf(out, "note: %s\n", n)
				}
				for _, w := range res.Warnings {
					fmt.Fprintln(out, w.String())
				}
			} else {
				for _, d := range res.Errors {
					fmt.Fprintln(cmd.ErrOrStderr(), policy.Diagnostic(d).String())
				}
			}
			if !res.Valid {
				return findingsErr(fmt.Errorf("policy %s has %d error(s)", file, len(res.Errors)))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "repo", ".", "the repository whose work tree holds .parley/policy.hcl (when no FILE is given); named explicitly, the policy's patterns are also checked against its fields")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}

// policyCheckResult is what policy check found, as --json prints it.
type policyCheckResult struct {
	File     string           `json:"file"`
	Valid    bool             `json:"valid"`
	Summary  string           `json:"summary,omitempty"`
	Notes    []string         `json:"notes"`
	Warnings []patternWarning `json:"warnings"`
	Errors   []policyError    `json:"errors"`
}

// policyError is a policy.Diagnostic as --json writes it.
type policyError struct {
	File    string `json:"file"`
	Line    int    `json:"line"`
	Column  int    `json:"column"`
	Message string `json:"message"`
}

// loadPolicy loads a policy file. Diagnostics go to stderr, one per line, and make a findings
// error (exit 1); a file that cannot be read is a usage error (exit 2).
func loadPolicy(cmd *cobra.Command, file string) (*policy.Policy, error) {
	src, err := os.ReadFile(file)
	if err != nil {
		return nil, usageErr(fmt.Errorf("read policy: %w", err))
	}
	return parsePolicy(cmd, src, file)
}

func parsePolicy(cmd *cobra.Command, src []byte, name string) (*policy.Policy, error) {
	p, err := policy.Parse(src, name)
	var diags policy.Diagnostics
	if errors.As(err, &diags) {
		for _, d := range diags {
			fmt.Fprintln(cmd.ErrOrStderr(), d.String())
		}
		return nil, findingsErr(fmt.Errorf("policy %s has %d error(s)", name, len(diags)))
	}
	if err != nil {
		return nil, findingsErr(err)
	}
	return p, nil
}

func newInitCmd() *cobra.Command {
	var file string
	var force bool
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Write a commented starter policy",
		Long: `Init writes a commented starter policy to .parley/policy.hcl (or --file), showing every construct
of the language. It refuses to overwrite an existing file unless --force is given.`,
		Example: `  parley init
  parley init --file policy.hcl --force`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := os.Stat(file); err == nil && !force {
				return usageErr(fmt.Errorf("%s already exists (use --force to overwrite it)", file))
			}
			if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
				return fmt.Errorf("init %s: %w", file, err)
			}
			// Write to a temporary file and rename, so a failure never leaves half a policy.
			tmp, err := os.CreateTemp(filepath.Dir(file), ".policy-*.hcl")
			if err != nil {
				return fmt.Errorf("init %s: %w", file, err)
			}
			_, werr := tmp.WriteString(policy.Starter)
			cerr := tmp.Close()
			if err := errors.Join(werr, cerr); err != nil {
				os.Remove(tmp.Name())
				return fmt.Errorf("init %s: %w", file, err)
			}
			if err := os.Rename(tmp.Name(), file); err != nil {
				os.Remove(tmp.Name())
				return fmt.Errorf("init %s: %w", file, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s; check it with: parley policy check %s\n", file, file)
			return nil
		},
	}
	cmd.Flags().StringVar(&file, "file", policy.DefaultFile, "where to write the policy")
	cmd.Flags().BoolVar(&force, "force", false, "overwrite an existing file")
	return cmd
}

func newSimulateCmd() *cobra.Command {
	var policyFile string
	var brief, asJSON bool
	cmd := &cobra.Command{
		Use:   "simulate EVENTS.jsonl",
		Short: "Replay a timeline of claims and clock ticks through a policy and print each verdict change",
		Long: `Simulate reads events (one JSON object per line: claims, Git commits, Git values and clock ticks;
see docs/claims-format.md), replays them through the policy, and prints every verdict that changes,
with its explanation. Verdicts are also re-evaluated at their recheck times (claim expiries, freeze
boundaries, escalation timeouts) between events.

The policy is --policy, or policy.hcl next to the events file. When a verdict asks people and the
policy names nobody, the code owners of the file a git event names as defining the field are asked,
read from a CODEOWNERS file next to the events (.github/CODEOWNERS, CODEOWNERS or docs/CODEOWNERS).`,
		Example: "  parley simulate examples/hpa-vs-cost/events.jsonl",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if policyFile == "" {
				policyFile = filepath.Join(filepath.Dir(args[0]), "policy.hcl")
			}
			p, err := loadPolicy(cmd, policyFile)
			if err != nil {
				return err
			}
			f, err := os.Open(args[0])
			if err != nil {
				return usageErr(fmt.Errorf("read events: %w", err))
			}
			defer f.Close()
			events, err := arbiter.ReadEvents(f)
			if err != nil {
				return usageErr(fmt.Errorf("%s: %w", args[0], err))
			}
			changes, err := arbiter.SimulateWith(p, events, scenarioOwners(filepath.Dir(args[0])))
			if err != nil {
				return usageErr(fmt.Errorf("%s: %w", args[0], err))
			}
			out := cmd.OutOrStdout()
			switch {
			case asJSON:
				if changes == nil {
					changes = []arbiter.Change{}
				}
				return writeJSON(out, changes)
			case brief:
				_, err = io.WriteString(out, arbiter.RenderBrief(changes))
			default:
				_, err = io.WriteString(out, arbiter.RenderChanges(changes))
			}
			return err
		},
	}
	cmd.Flags().StringVar(&policyFile, "policy", "", "policy file (default: policy.hcl next to the events)")
	cmd.Flags().BoolVar(&brief, "brief", false, "one line per verdict change")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the changes as JSON")
	return cmd
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// scenarioOwners answers who owns a scenario's files from the CODEOWNERS file in its directory,
// as GitHub would in a repository whose root is that directory.
func scenarioOwners(dir string) arbiter.OwnersOf {
	file, err := codeowners.FindInDir(dir)
	return func(_ core.Field, path string) arbiter.Owners {
		ask, from := codeowners.Ask(file, err, path)
		return arbiter.Owners{Ask: ask, From: from}
	}
}
