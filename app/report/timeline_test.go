package report

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/core"
)

// contestedVerdict: the HPA's live 7 replicas win over Git's 3 (set by the platform team) and a
// cost bot's 2 that expired an hour ago.
func contestedVerdict(name string) core.Verdict {
	v := verdict(name, core.DecisionYield)
	git := core.Claim{Field: v.Field, Actor: core.Actor{Name: "platform", Identity: core.Identity{Source: core.SourceGitAuthor, ID: "dana@parley.example"}}, Value: core.StringValue("3"), Intent: core.IntentBaseline, At: now.Add(-48 * time.Hour)}
	cost := core.Claim{Field: v.Field, Actor: core.Actor{Name: "cost: bot#1", Identity: core.Identity{Source: core.SourceGitAuthor, ID: "cost@parley.example"}}, Value: core.StringValue("2"), Intent: core.IntentCost,
		At: now.Add(-3 * time.Hour), Expires: now.Add(-time.Hour)}
	v.Losers = []core.Claim{git, cost}
	return v
}

func TestTimelineDrawsEveryClaimOfAContestedField(t *testing.T) {
	tl := Timeline(contestedVerdict("web"), now)
	if !strings.HasPrefix(tl, "\n```mermaid\ngantt\n") || !strings.HasSuffix(tl, "```\n") {
		t.Fatalf("not a fenced Mermaid Gantt chart:\n%s", tl)
	}
	for _, want := range []string{
		"title k8s apps/Deployment/prod/web /spec/replicas", // ':' and '#' are Mermaid syntax
		"dateFormat X",
		"section hpa\n  7 (availability) :active, " + itoa(now.Unix()),
		"section platform\n  3 (baseline) :done, " + itoa(now.Add(-48*time.Hour).Unix()),
		"section cost bot 1\n  2 (cost) :done, " + itoa(now.Add(-3*time.Hour).Unix()) + ", " + itoa(now.Add(-time.Hour).Unix()),
		"section verdict\n  yield by standing-owner :milestone, " + itoa(now.Unix()) + ", 0s",
	} {
		if !strings.Contains(tl, want) {
			t.Errorf("timeline lacks %q:\n%s", want, tl)
		}
	}
	// Every task line is "text :tag, start, end" with nothing in text that Mermaid would parse.
	task := regexp.MustCompile(`^  [^:#;]+ :(active|done|crit|milestone), \d+, (\d+|0s)$`)
	for _, line := range strings.Split(tl, "\n") {
		if strings.HasPrefix(line, "  ") && strings.Contains(line, " :") && !task.MatchString(line) {
			t.Errorf("task line %q", line)
		}
	}
}

func TestTimelinesOnlyForContestedFieldsAndAtMostThree(t *testing.T) {
	if got := Timelines([]core.Verdict{verdict("web", core.DecisionYield)}, now); got != "" {
		t.Errorf("an uncontested verdict got a timeline:\n%s", got)
	}
	var vs []core.Verdict
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		vs = append(vs, contestedVerdict(n))
	}
	if n := strings.Count(Timelines(vs, now), "```mermaid"); n != maxTimelines {
		t.Errorf("%d timelines for 5 contested fields, want %d", n, maxTimelines)
	}
	body := Comment(Input{Head: "abc", Generated: now, Verdicts: vs[:1]})
	if !strings.Contains(body, "<details open><summary>Timeline of the contested fields</summary>\n\n```mermaid") {
		t.Errorf("the comment lacks the timeline:\n%s", body)
	}
	if _, err := Extract(body); err != nil {
		t.Errorf("the timeline broke the comment's data: %v", err)
	}
}

func TestMermaidText(t *testing.T) {
	for in, want := range map[string]string{
		"a:b#c;d`e\nf":          "a b c d e f",
		"":                      "-",
		"   ":                   "-",
		strings.Repeat("x", 50): strings.Repeat("x", 39) + "…",
	} {
		if got := mermaidText(in, 40); got != want {
			t.Errorf("mermaidText(%q) = %q, want %q", in, got, want)
		}
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
