package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/parleyhq/parley/app/report"
	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/internal/ghmarkdown"
	"github.com/parleyhq/parley/reconcile/tfplan"
)

// planSummary is review --plan's verdicts as Markdown, for a CI job's summary page
// ($GITHUB_STEP_SUMMARY) or an Atlantis comment: the headline, one table row per change the plan
// makes with what blocks it, each verdict's reasons, problems and the conclusion. Values are the
// judgement's (sensitive ones already "(sensitive)"), and every piece of the plan is escaped: a
// plan's addresses and values come from the pull request being judged.
func planSummary(res tfplan.Result, js []tfplan.Judgement, author core.Identity, moduleDir, conclusion string) string {
	verdicts := make([]core.Verdict, len(js))
	for i, j := range js {
		verdicts[i] = j.Verdict
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n\n", report.Headline(verdicts, len(res.Notes)))
	tf := "terraform " + res.TerraformVersion
	if res.TerraformVersion == "" {
		tf = "terraform version unknown"
	}
	fmt.Fprintf(&b, "Terraform plan of %s by %s (%s), judged by `parley review --plan`: **%s**\n\n", mdCell(moduleDir), mdCell(author.String()), mdCell(tf), conclusion)
	if len(js) > 0 {
		b.WriteString("| Field | Plan | Decision | Blocks the plan |\n|---|---|---|---|\n")
		for _, j := range js {
			var plan []string
			for _, c := range j.Changes {
				plan = append(plan, mdCell(c.String()))
			}
			blocks := "no"
			switch j.Blocks {
			case core.DecisionVeto:
				blocks = "**yes**: the plan's value is vetoed"
			case core.DecisionHold, core.DecisionEscalate:
				blocks = fmt.Sprintf("**yes**: %s, humans must decide", j.Blocks)
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", mdCell(j.Verdict.Field.String()), strings.Join(plan, "<br>"), mdCell(string(j.Verdict.Decision)), blocks)
		}
		b.WriteString("\n")
		for _, j := range js {
			fmt.Fprintf(&b, "<details><summary>Why %s: %s</summary>\n\n%s\n</details>\n\n", ghmarkdown.HTML(j.Verdict.Field.String()), ghmarkdown.HTML(string(j.Verdict.Decision)), report.Explanation(j.Verdict))
		}
	}
	for _, n := range res.Notes {
		fmt.Fprintf(&b, "- problem: %s\n", mdCell(n))
	}
	return b.String()
}

// mdCell places text of the plan (addresses, values, notes: the pull request's words) in a table
// cell or a line of the summary as ghmarkdown does in every other Parley document: no line break,
// table pipe, HTML, emphasis, link or autolink, and no @mention or #reference GitHub would notify
// or link.
func mdCell(s string) string { return ghmarkdown.Cell(s) }

// appendSummary appends text to file (created if missing), as GitHub's $GITHUB_STEP_SUMMARY wants.
func appendSummary(file, text string) error {
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("--summary: %w", err)
	}
	if _, err := f.WriteString(text); err != nil {
		f.Close()
		return fmt.Errorf("--summary %s: %w", file, err)
	}
	return f.Close()
}
