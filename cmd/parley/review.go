package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/parleyhq/parley/app/report"
	"github.com/parleyhq/parley/app/review"
	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/policy"
	"github.com/parleyhq/parley/policy/arbiter"
)

func newReviewCmd() *cobra.Command {
	var dir, base, head, author, at string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "review --head REV [--repo DIR] [--base REV]",
		Short: "Judge a branch as Parley judges a pull request, offline",
		Long: `Review gathers the claims a branch makes against its base (the fields it changes, Claim and
Yield trailers, the intent and motivation of its commits), sets them against Git's claims on the
default branch's ledger, and prints the verdict on every field under the default branch's policy
(.parley/policy.hcl). It is the check the GitHub App runs on a pull request, without GitHub.

Exit status: 0 when nothing is vetoed, 1 when a claim is vetoed, 2 for bad input.`,
		Example: `  parley review --repo ./infra --head my-branch
  parley review --head HEAD --base origin/main --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if head == "" {
				return usageErr(fmt.Errorf("--head is required (the branch or commit to judge)"))
			}
			now := time.Now().UTC()
			if at != "" {
				t, err := time.Parse(time.RFC3339, at)
				if err != nil {
					return usageErr(fmt.Errorf("--at %q: want an RFC 3339 time", at))
				}
				now = t
			}
			repo, err := openRepo(cmd, dir)
			if err != nil {
				return err
			}
			defer repo.Close()
			if base == "" {
				base = repo.branch
			}
			src, err := openReviewSource(cmd, dir, base, head)
			if err != nil {
				return usageErr(err)
			}
			polSrc, polName, err := repo.policySource()
			if err != nil {
				return usageErr(err)
			}
			pol, err := policy.Parse(polSrc, polName)
			if err != nil {
				return findingsErr(fmt.Errorf("the default branch's policy is invalid:\n%w", err))
			}
			id, last := src.HeadCommit()
			if author != "" {
				id = core.Identity{Source: core.SourceGitHubUser, ID: author}
			}
			pr := review.PullRequest{BaseSHA: src.BaseSHA(), MergeBaseSHA: src.MergeBaseSHA(), HeadSHA: src.HeadSHA(), Title: head, Author: id, Updated: last.Time}
			res, err := review.Evaluate(cmd.Context(), pr, src, pol, repo, nil, now)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				if err := enc.Encode(struct {
					report.Document
					Conclusion string   `json:"conclusion"`
					Problems   []string `json:"problems,omitempty"`
				}{report.Document{Schema: report.Schema, Head: pr.HeadSHA, Generated: now, Verdicts: res.Verdicts},
					report.Conclusion(res.Verdicts), res.Problems}); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(out, "%s (%s...%s)\n", report.Headline(res.Verdicts)[4:], short(pr.BaseSHA), short(pr.HeadSHA))
				for _, s := range res.Sources {
					fmt.Fprintf(out, "  %s\n", s)
				}
				for _, v := range res.Verdicts {
					fmt.Fprintf(out, "\n%s", arbiter.Explain(v))
				}
				for _, p := range res.Problems {
					fmt.Fprintf(out, "\nproblem: %s\n", p)
				}
				fmt.Fprintf(out, "\nconclusion: %s\n", report.Conclusion(res.Verdicts))
			}
			if report.Conclusion(res.Verdicts) == "failure" {
				return findingsErr(fmt.Errorf("a claim was vetoed"))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&dir, "repo", ".", "repository directory")
	f.StringVar(&base, "base", "", "base revision (default: the default branch)")
	f.StringVar(&head, "head", "", "the branch or commit to judge (required)")
	f.StringVar(&author, "author", "", "GitHub login to judge the claims as (default: the head commit's author email)")
	f.StringVar(&at, "at", "", "judge at this RFC 3339 time (default: now)")
	f.BoolVar(&asJSON, "json", false, "print the verdicts as JSON (schema parley.dev/verdicts/v2, plus conclusion and problems)")
	return cmd
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
