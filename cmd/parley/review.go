package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"time"

	tfjson "github.com/hashicorp/terraform-json"
	"github.com/spf13/cobra"

	"github.com/parleyhq/parley/app/report"
	"github.com/parleyhq/parley/app/review"
	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/policy"
	"github.com/parleyhq/parley/policy/arbiter"
	"github.com/parleyhq/parley/reconcile/tfplan"
	"github.com/parleyhq/parley/trailers"
	"github.com/parleyhq/parley/trailers/ledger"
)

func newReviewCmd() *cobra.Command {
	var dir, base, head, author, at string
	var plan planFlags
	var asJSON bool
	var budget core.Budget
	cmd := &cobra.Command{
		Use:   "review (--head REV | --plan PLAN.json) [--base BRANCH] [--repo DIR]",
		Short: "Judge a branch as Parley judges a pull request, or a Terraform plan, offline",
		Long: `Review gathers the claims a branch makes against its base (the fields it changes, Claim and
Yield trailers, the intent and motivation of its commits), sets them against Git's claims on the
base's ledger, and prints the verdict on every field under the base's policy (.parley/policy.hcl).
It is the check the GitHub App runs on a pull request, without GitHub.

The base is --base (a local or remote-tracking branch), else, in a GitHub Actions pull request
job, the branch GITHUB_BASE_REF names (local, else origin/NAME: actions/checkout leaves the merge
commit detached and the branches only as origin/*), else the branch origin/HEAD names (as
origin/NAME), else a local main or master; with none of them review stops and asks for --base. The
output names the base, its commit and why it was taken ("base: origin/main at 1a2b3c4 (origin/HEAD
names it ...)"; in a fork's clone origin/HEAD is the fork's own branch: pass --base upstream/main).
The branch being judged never supplies its own policy or history: a --head that is the base's
commit itself (--head main where main is the base) is refused. A commit counts as the actor its
author email names only when a key the base policy lists for that actor signed it, and the
branch's claims are judged as the head commit's author and, on the fields of the files each
touched, as every other commit's author: the least favourable verdict stands.

Each verdict says what it means for the branch's own change ("branch:"): it wins; it is
deferred by a freeze (until its end); it loses to a claim that holds the field (whose, until
when); it is vetoed; or it asks people. The conclusion is the check run's: success when the
branch's change wins on every field it changes, action_required when a freeze defers it or people
must decide, failure when it is vetoed or loses, neutral when it changes no claimed field.

Exit status: 0 when the conclusion would let a required check pass (success, neutral), 1 when it
would not (failure, action_required), 2 for bad input.

What a branch contains is judged within a budget, as the App judges a pull request: a file above
--max-file-size (default 8 MiB, the ledger's cap) is not read, a file changing more than
--max-fields-per-file fields (20000) and the files past --max-fields (50000 for the whole
branch) are not judged, nor a value longer than --max-value-size (64 KiB). Each is printed as a
problem ("k8s/prod/big.yaml: 19.9 MB, above the 8 MiB Parley reads; not judged"), the
conclusion is then at best action_required, and the exit status 1: padding a file past the budget
is no way around a veto. So is a file, or a YAML document in it, that does not read (a syntax
error, nesting deeper than 100 levels, aliases past the node budget, a template): it is named,
the file's other documents are judged, and the change cannot pass.

With --plan, review judges a Terraform plan instead of a branch: the JSON of
'terraform show -json PLANFILE' ("-" reads it from standard input). Every attribute the plan
creates, updates, replaces or deletes becomes a claim by the plan's author (--author, default the
author of the repository's HEAD commit, or of the pull request's head when HEAD is GitHub's test
merge) with --intent and --motivation; attributes Terraform reports as drifted (resource_drift)
are claims by an unknown outside actor (terraform-drift). Each is judged against the ledger and
policy of --base, else of GITHUB_BASE_REF's branch, else of the default branch (origin/main or
origin/master when HEAD is detached with no local branch), and printed, one verdict per
attribute. The plan's resources are addressed in --module-dir (the root module's directory in
the repository, where terraform plan ran; modules called with a local source map to their own
directories). Values the plan marks sensitive are printed as "(sensitive)", never as themselves.
docs/plans.md has more.

Exit status with --plan: 0 when no attribute the plan changes is vetoed, held or escalated; 1 when
the plan's value of an attribute is vetoed, or an attribute it changes is held or escalated (humans
must decide before the plan is applied); verdicts on drift alone are printed but do not fail the
run; 2 for bad input (a missing or malformed plan, an unsupported format_version, a plan over
64 MiB, bad flags).`,
		Example: `  parley review --repo ./infra --head my-branch
  parley review --head HEAD --base origin/main --json
  terraform -chdir=infra/kafka show -json plan.out > plan.json
  parley review --plan plan.json --module-dir infra/kafka --author github-user:alice --intent performance`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			now := time.Now().UTC()
			if at != "" {
				t, err := time.Parse(time.RFC3339, at)
				if err != nil {
					return usageErr(fmt.Errorf("--at %q: want an RFC 3339 time", at))
				}
				now = t
			}
			if plan.file != "" {
				if head != "" {
					return usageErr(fmt.Errorf("--plan judges a Terraform plan; it does not take --head"))
				}
				return reviewPlan(cmd, dir, base, author, plan, asJSON, now)
			}
			if plan.moduleDir != "." || plan.intent != "" || plan.motivation != "" || plan.summary != "" {
				return usageErr(fmt.Errorf("--module-dir, --intent, --motivation and --summary go with --plan"))
			}
			if head == "" {
				return usageErr(fmt.Errorf("--head is required (the branch or commit to judge), or --plan (a Terraform plan to judge)"))
			}
			chosen, err := chooseBase(dir, base)
			if err != nil {
				return usageErr(err)
			}
			base := chosen.Ref
			// The policy and the ledger come from the base, never from the branch being judged.
			repo, err := openRepoAt(cmd, dir, base)
			if err != nil {
				if errors.Is(err, ledger.ErrNoBranch) {
					return usageErr(fmt.Errorf("--base %s: the policy and the ledger are read from a branch: name a local or remote-tracking branch: %w", base, err))
				}
				return err
			}
			defer repo.Close()
			src, err := openReviewSource(cmd, dir, base, head)
			if err != nil {
				return usageErr(err)
			}
			if src.BaseSHA() == src.HeadSHA() {
				// A branch judged against itself brings its own policy and history and changes
				// nothing: it would pass whatever it holds (a branch named main, with no origin/HEAD).
				return usageErr(fmt.Errorf("--head %s is the base itself: the base %s (%s) is commit %s too, so the branch would be judged "+
					"under its own policy and history; name the branch the changes merge into with --base (e.g. --base upstream/main)",
					head, base, chosen.How, short(src.BaseSHA())))
			}
			polSrc, polName, err := repo.policySource()
			if err != nil {
				return usageErr(err)
			}
			pol, err := policy.Parse(polSrc, polName)
			if err != nil {
				return findingsErr(fmt.Errorf("the default branch's policy is invalid:\n%w", err))
			}
			src.SetOpenPGPKeys(pol.OpenPGPKeyring())
			id, last := src.HeadCommit()
			if author != "" {
				id = core.Identity{Source: core.SourceGitHubUser, ID: author}
			}
			pr := review.PullRequest{BaseSHA: src.BaseSHA(), MergeBaseSHA: src.MergeBaseSHA(), HeadSHA: src.HeadSHA(), Title: head, Author: id, Updated: last.Time, Budget: budget}
			// Every commit of the branch stands behind its claims: each author, as far as the
			// commit's signature proves them, is judged too on the files the commit touched.
			if pr.Contributors, err = src.CommitAuthors(cmd.Context(), last.SHA, nil); err != nil {
				return err
			}
			res, err := review.Evaluate(cmd.Context(), pr, src, pol, repo, nil, now)
			if err != nil {
				return err
			}
			pc, err := reviewPolicyChange(cmd, repo, src, pol, now)
			if err != nil {
				return err
			}
			conclusion := res.Conclusion()
			if pc != nil {
				conclusion = pc.conclusion(conclusion)
			}
			out := cmd.OutOrStdout()
			if asJSON {
				if res.Verdicts == nil {
					res.Verdicts = []core.Verdict{} // a branch that changes no field (only the policy, say)
				}
				outcomes := make([]fieldOutcome, len(res.Verdicts))
				for i, v := range res.Verdicts {
					outcomes[i] = fieldOutcome{Field: v.Field, Outcome: res.Outcomes[i]}
				}
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				if err := enc.Encode(struct {
					report.Document
					Base         reviewedBase   `json:"base"`
					Outcomes     []fieldOutcome `json:"outcomes"`
					Conclusion   string         `json:"conclusion"`
					Problems     []string       `json:"problems,omitempty"`
					PolicyChange *policyChange  `json:"policy_change,omitempty"`
				}{report.Document{Schema: report.Schema, Head: pr.HeadSHA, Generated: now, Verdicts: res.Verdicts},
					reviewedBase{Ref: base, Commit: pr.BaseSHA, ChosenBy: chosen.How}, outcomes, conclusion, res.Problems, pc}); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(out, "%s (%s...%s)\n", report.Headline(res.Verdicts, len(res.Problems))[4:], short(pr.BaseSHA), short(pr.HeadSHA))
				fmt.Fprintf(out, "  base: %s at %s (%s)\n", base, short(pr.BaseSHA), chosen.How)
				for _, s := range res.Sources {
					fmt.Fprintf(out, "  %s\n", s)
				}
				for i, v := range res.Verdicts {
					first, rest, _ := strings.Cut(arbiter.Explain(v), "\n")
					fmt.Fprintf(out, "\n%s\n  branch:   %s\n%s", first, res.Outcomes[i].Text(), rest)
				}
				for _, p := range res.Problems {
					fmt.Fprintf(out, "\nproblem: %s\n", p)
				}
				if pc != nil {
					fmt.Fprintf(out, "\n%s", pc.text())
				}
				fmt.Fprintf(out, "\nconclusion: %s\n", conclusion)
			}
			if pc != nil && pc.Invalid != "" {
				return findingsErr(fmt.Errorf("the branch's policy is invalid"))
			}
			return reviewExit(conclusion, res.Unjudged)
		},
	}
	f := cmd.Flags()
	f.StringVar(&dir, "repo", ".", "repository directory")
	f.StringVar(&base, "base", "", "the branch the changes (or the plan) merge into, whose policy and ledger judge them, local or remote-tracking such as origin/main (default: GITHUB_BASE_REF's branch in a pull request job, else origin/HEAD, else main, else master)")
	f.StringVar(&head, "head", "", "the branch or commit to judge (required unless --plan)")
	f.StringVar(&author, "author", "", "GitHub login to judge the claims as (default: the head commit's author email); with --plan, an identity SOURCE:ID such as git-author:alice@example.com or github-user:alice (default: the HEAD commit's author)")
	f.StringVar(&at, "at", "", "judge at this RFC 3339 time (default: now); with --plan, also the time of the plan's and the drift's claims")
	f.BoolVar(&asJSON, "json", false, "print the verdicts as JSON (schema parley.dev/verdicts/v2, plus base, conclusion and problems; with --plan parley.dev/plan-review/v1)")
	def := core.DefaultBudget()
	f.Int64Var(&budget.FileBytes, "max-file-size", def.FileBytes, "the largest file read, in bytes")
	f.IntVar(&budget.FieldsPerFile, "max-fields-per-file", def.FieldsPerFile, "the most fields one file may change and be judged")
	f.IntVar(&budget.FieldsPerChange, "max-fields", def.FieldsPerChange, "the most fields the branch may change in all; files past it are not judged")
	f.IntVar(&budget.ValueBytes, "max-value-size", def.ValueBytes, "the longest value judged, in bytes of JSON")
	f.StringVar(&plan.file, "plan", "", "judge this Terraform plan: the JSON of terraform show -json PLANFILE (- for standard input)")
	f.StringVar(&plan.moduleDir, "module-dir", ".", "with --plan: the root module's directory relative to the repository root (where terraform plan ran)")
	f.StringVar(&plan.intent, "intent", "", "with --plan: the intent of the plan's changes, such as performance (default: none declared)")
	f.StringVar(&plan.summary, "summary", "", "with --plan: also append the verdicts as Markdown to this file, such as $GITHUB_STEP_SUMMARY")
	f.StringVar(&plan.motivation, "motivation", "", `with --plan: the motivation of the plan's changes, as the Motivation trailer writes it, such as "incident INC-4211 severity=high"`)
	return cmd
}

// fieldOutcome is one entry of review --json's outcomes: what the verdict on the field means for
// the branch's own change.
type fieldOutcome struct {
	Field core.Field `json:"field"`
	report.Outcome
}

// reviewExit is review's exit status for a conclusion: 0 when it would let a required check pass
// (success, neutral), 1 when it would not, as on GitHub.
func reviewExit(conclusion string, unjudged bool) error {
	switch {
	case report.Passes(conclusion):
		return nil
	case unjudged && conclusion == "action_required":
		return findingsErr(fmt.Errorf("part of the branch was not judged (see the problems): it cannot pass"))
	case conclusion == "failure":
		return findingsErr(fmt.Errorf("the branch's change may not happen: a value is vetoed, or another claim holds a field it changes (see the verdicts)"))
	}
	return findingsErr(fmt.Errorf("the branch's change waits: a freeze defers it or people must decide (conclusion %s)", conclusion))
}

// reviewedBase is the base a review judged against, in its JSON: the ref, its commit, and why that
// ref was taken.
type reviewedBase struct {
	Ref      string `json:"ref"`
	Commit   string `json:"commit"`
	ChosenBy string `json:"chosen_by"`
}

// openReviewSource opens the branch to judge. In a shallow clone (CI checks out one commit by
// default) the merge base may not have been fetched: the history is deepened from origin, a
// little more each time, and the user told; the error names what to fetch when that is not enough.
func openReviewSource(cmd *cobra.Command, dir, base, head string) (*review.GitSource, error) {
	src, err := review.OpenGitSource(dir, base, head)
	if !errors.Is(err, review.ErrNoMergeBase) || !isShallow(dir) || !hasOrigin(dir) {
		return src, err
	}
	for _, depth := range []string{"--deepen=50", "--deepen=200", "--deepen=1000", "--unshallow"} {
		fmt.Fprintf(cmd.ErrOrStderr(), "parley: no merge base of %s and %s in this shallow clone: git fetch %s origin\n", base, head, depth)
		fetch := exec.CommandContext(cmd.Context(), "git", "-C", dir, "fetch", "--quiet", depth, "origin")
		if out, ferr := fetch.CombinedOutput(); ferr != nil {
			return nil, fmt.Errorf("%w; git fetch %s origin failed: %v: %s", err, depth, ferr, strings.TrimSpace(string(out)))
		}
		if src, err = review.OpenGitSource(dir, base, head); !errors.Is(err, review.ErrNoMergeBase) {
			return src, err
		}
		if !isShallow(dir) {
			break
		}
	}
	return nil, err
}

func isShallow(dir string) bool {
	out, err := exec.Command("git", "-C", dir, "rev-parse", "--is-shallow-repository").Output()
	return err == nil && strings.TrimSpace(string(out)) == "true"
}

func hasOrigin(dir string) bool {
	return exec.Command("git", "-C", dir, "remote", "get-url", "origin").Run() == nil
}

// gitHubTestMerge is the message of the commit GitHub makes for refs/pull/N/merge, the commit a
// pull_request job checks out: "Merge HEAD_SHA into BASE_SHA".
var gitHubTestMerge = regexp.MustCompile(`^Merge [0-9a-f]{40} into [0-9a-f]{40}\n?$`)

// planAuthorCommit is the commit whose author a plan is by when no --author is given: HEAD, or,
// when HEAD is GitHub's test merge of a pull request (actions/checkout's default for
// pull_request events), its second parent, the pull request's head: the merge commit's author
// is whoever GitHub chose, not necessarily who wrote the change.
func planAuthorCommit(dir string) string {
	out, err := explainGit(dir, "log", "-1", "--format=%P%n%B", "HEAD")
	if err != nil {
		return "HEAD"
	}
	parents, msg, _ := strings.Cut(string(out), "\n")
	if len(strings.Fields(parents)) == 2 && gitHubTestMerge.MatchString(strings.TrimRight(msg, "\n")) {
		return "HEAD^2"
	}
	return "HEAD"
}

// planFlags are review's --plan mode flags.
type planFlags struct {
	file, moduleDir, intent, motivation, summary string
}

// reviewPlan is review --plan: judge a Terraform plan's changes against the default branch.
func reviewPlan(cmd *cobra.Command, dir, base, author string, pf planFlags, asJSON bool, now time.Time) error {
	now = now.UTC()
	var p *tfjson.Plan
	var err error
	if pf.file == "-" {
		if p, err = tfplan.ReadPlan(cmd.InOrStdin()); err != nil {
			err = fmt.Errorf("plan on standard input: %w", err)
		}
	} else {
		p, err = tfplan.ReadPlanFile(pf.file)
	}
	if err != nil {
		return usageErr(err)
	}
	res, err := tfplan.Extract(p, tfplan.Options{ModuleDir: pf.moduleDir})
	if err != nil {
		return usageErr(fmt.Errorf("--module-dir: %w", err))
	}
	opts := tfplan.ClaimOptions{Intent: core.Intent(strings.ToLower(strings.TrimSpace(pf.intent))), At: now}
	if pf.motivation != "" {
		if opts.Motivation, err = trailers.ParseMotivation(pf.motivation); err != nil {
			return usageErr(fmt.Errorf("--motivation %q: %w", pf.motivation, err))
		}
	}
	if author != "" {
		if opts.Author, err = parsePlanAuthor(author); err != nil {
			return usageErr(err)
		}
	}

	// The ledger and the policy come from --base, else the pull request's base in a GitHub Actions
	// job, else the default branch: in actions/checkout's layout (a detached merge commit, the
	// branches only as origin/*) the first two are what names a branch at all.
	if base == "" {
		if base, err = prBase(dir); err != nil {
			return usageErr(err)
		}
	}
	repo, err := openRepoAt(cmd, dir, base)
	if err != nil {
		if errors.Is(err, ledger.ErrNoBranch) && base != "" {
			return usageErr(fmt.Errorf("--base %s: the policy and the ledger are read from a branch: name a local or remote-tracking branch: %w", base, err))
		}
		return err
	}
	defer repo.Close()
	polSrc, polName, err := repo.policySource()
	if err != nil {
		return usageErr(err)
	}
	pol, err := policy.Parse(polSrc, polName)
	if err != nil {
		return findingsErr(fmt.Errorf("the default branch's policy is invalid:\n%w", err))
	}
	if author == "" {
		// The HEAD commit's author, as far as its signature proves it; in a pull request job, the
		// pull request's head commit rather than the merge commit GitHub made for the job.
		rev := planAuthorCommit(dir)
		src, err := review.OpenGitSource(dir, rev, rev)
		if err != nil {
			return usageErr(fmt.Errorf("the plan's author: read the HEAD commit's author (or give --author): %w", err))
		}
		src.SetOpenPGPKeys(pol.OpenPGPKeyring())
		opts.Author, _ = src.HeadCommit()
	}

	js, err := tfplan.Judge(cmd.Context(), pol, res, repo, opts, now)
	if err != nil {
		return err
	}
	verdicts := make([]core.Verdict, len(js))
	for i, j := range js {
		verdicts[i] = j.Verdict
	}
	conclusion := res.Conclusion(js)
	if pf.summary != "" {
		if err := appendSummary(pf.summary, planSummary(res, js, opts.Author, pf.moduleDir, conclusion)); err != nil {
			return err
		}
	}
	out := cmd.OutOrStdout()
	if asJSON {
		doc := tfplan.NewDocument(res, js, opts.Author, pf.moduleDir, now)
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(doc); err != nil {
			return err
		}
	} else {
		version := "terraform " + res.TerraformVersion
		if res.TerraformVersion == "" {
			version = "terraform version unknown"
		}
		fmt.Fprintf(out, "%s (plan by %s, %s, format %s)\n", report.Headline(verdicts, len(res.Notes))[4:], opts.Author, version, res.FormatVersion)
		if opts.Intent != "" || !opts.Motivation.IsZero() {
			fmt.Fprintf(out, "  intent %s, motivation %s\n", orNoneText(string(opts.Intent)), orNoneText(opts.Motivation.String()))
		}
		for _, j := range js {
			text := arbiter.Explain(j.Verdict)
			first, rest, _ := strings.Cut(text, "\n")
			fmt.Fprintf(out, "\n%s\n", first)
			for _, c := range j.Changes {
				fmt.Fprintf(out, "  plan:     %s\n", c)
			}
			switch j.Blocks {
			case core.DecisionVeto:
				fmt.Fprintf(out, "  blocks:   the plan's value is vetoed\n")
			case core.DecisionHold, core.DecisionEscalate:
				fmt.Fprintf(out, "  blocks:   the field is %s: humans must decide before the plan is applied\n", map[core.Decision]string{core.DecisionHold: "held", core.DecisionEscalate: "escalated"}[j.Blocks])
			}
			fmt.Fprint(out, rest)
		}
		for _, n := range res.Notes {
			fmt.Fprintf(out, "\nproblem: %s\n", n)
		}
		fmt.Fprintf(out, "\nconclusion: %s\n", conclusion)
	}
	switch conclusion {
	case "failure":
		return findingsErr(fmt.Errorf("the plan changes a field the policy vetoes"))
	case "action_required":
		if res.Unjudged {
			return findingsErr(fmt.Errorf("part of the plan was not judged (see the problems): it cannot pass"))
		}
		return findingsErr(fmt.Errorf("the plan changes a field that is held or escalated: humans must decide"))
	}
	return nil
}

// parsePlanAuthor reads --author in --plan mode: SOURCE:ID with a known identity source, or a
// bare GitHub login as review takes it.
func parsePlanAuthor(s string) (core.Identity, error) {
	if src, id, ok := strings.Cut(s, ":"); ok {
		for _, k := range core.KnownSources() {
			if string(k) == src {
				if id == "" {
					return core.Identity{}, fmt.Errorf("--author %q: no id after %s:", s, src)
				}
				// Whoever runs parley names the author: their word stands in for a signature, as
				// their choice of repository and policy does.
				var proof core.Proof
				if k == core.SourceGitAuthor {
					proof.Vouched = "--author, given to parley review"
				}
				return core.Identity{Source: k, ID: id, Proof: proof}, nil
			}
		}
		return core.Identity{}, fmt.Errorf("--author %q: unknown identity source %q (want one of git-author, github-user, github-team, k8s-user, field-manager, aws-principal)", s, src)
	}
	return core.Identity{Source: core.SourceGitHubUser, ID: s}, nil
}

func orNoneText(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
