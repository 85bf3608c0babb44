package main

import (
	"strings"
	"testing"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/reconcile/tfplan"
)

// A plan's addresses and values come from the pull request under review: in the job summary they
// are text, never HTML, a table cell break or a link.
func TestSummaryCellsAreText(t *testing.T) {
	got := mdCell("x|y <img src=x onerror=alert(1)> [a](https://evil.example) *b* `c`\nd")
	for _, live := range []string{"<img", "](", "x|y", "*b*", "`c`", "\n"} {
		if strings.Contains(got, live) {
			t.Errorf("mdCell = %s: %q is live", got, live)
		}
	}
	if mdCell("") != "—" {
		t.Errorf("an empty cell is %q", mdCell(""))
	}
}

// TestSummaryMentionsAndLinksAreText is issue 34 problem 6: the Plan column and the problem
// lines left @org/team mentions, #123 references and bare URLs live (GitHub notifies the team,
// links the issue and the URL), unlike the rest of Parley's output, which goes through
// ghmarkdown. A plan's values and notes are the pull request's words.
func TestSummaryMentionsAndLinksAreText(t *testing.T) {
	hostile := "ping @acme/platform about #123, see https://evil.example/x and www.evil.example"
	field := core.Field{Scheme: core.SchemeTerraform, Module: ".", Resource: "aws_instance.web", Path: "/tags/note"}
	res := tfplan.Result{Notes: []string{"module source " + hostile}}
	js := []tfplan.Judgement{{
		Verdict: core.Verdict{Field: field, Decision: core.DecisionHold},
		Changes: []tfplan.Change{{Field: field, Address: "aws_instance.web", Action: tfplan.ActionUpdate, Old: core.StringValue("x"), New: core.StringValue(hostile)}},
		Blocks:  core.DecisionHold,
	}}
	out := planSummary(res, js, core.Identity{Source: core.SourceGitHubUser, ID: "octocat"}, ".", "failure")
	for _, live := range []string{"@acme", "#123", "https://", "www.evil"} {
		if strings.Contains(out, live) {
			t.Errorf("the summary leaves %q live:\n%s", live, out)
		}
	}
	if !strings.Contains(out, "@\u200bacme/platform") || !strings.Contains(out, "#\u200b123") {
		t.Errorf("the mention and the reference should still read as written:\n%s", out)
	}
}

func TestSummaryGoesWithPlan(t *testing.T) {
	dir, _ := demoRepo(t)
	code, _, stderr := runCLI(t, "review", "--repo", dir, "--head", "HEAD", "--summary", "summary.md")
	if code != exitUsage || !strings.Contains(stderr, "--summary go with --plan") {
		t.Fatalf("--summary without --plan: exit %d: %s", code, stderr)
	}
}
