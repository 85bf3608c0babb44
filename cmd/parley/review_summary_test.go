package main

import (
	"strings"
	"testing"
)

// A plan's addresses and values come from the pull request under review: in the job summary they
// are text, never HTML, a table cell break or a link.
func TestSummaryCellsAreText(t *testing.T) {
	got := mdCell("x|y <img src=x onerror=alert(1)> [a](https://evil.example) *b* `c`\nd")
	want := `x\|y &lt;img src=x onerror=alert(1)&gt; \[a\](https://evil.example) \*b\* ` + "\\`c\\` d"
	if got != want {
		t.Errorf("mdCell = %s\nwant    %s", got, want)
	}
	if mdCell("") != "—" {
		t.Errorf("an empty cell is %q", mdCell(""))
	}
}

func TestSummaryGoesWithPlan(t *testing.T) {
	dir, _ := demoRepo(t)
	code, _, stderr := runCLI(t, "review", "--repo", dir, "--head", "HEAD", "--summary", "summary.md")
	if code != exitUsage || !strings.Contains(stderr, "--summary go with --plan") {
		t.Fatalf("--summary without --plan: exit %d: %s", code, stderr)
	}
}
