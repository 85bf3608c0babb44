package app

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	stdhtml "html"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"

	"github.com/parleyhq/parley/app/internal/livestate"
	"github.com/parleyhq/parley/app/report"
	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/webhooks/store"
)

// hostileIntent is an Intent trailer written to make the App's comment speak for its author: a
// team mention, a tracking image and links. It is one word, so the problem Parley reports about
// an unknown intent quotes it whole.
const hostileIntent = "@acme/security![t](https://evil.example/pixel.png)[docs](https://evil.example/x)<img/src=https://evil.example/i.png>https://evil.example/y"

// hostileKey is a YAML key that closes the field's code span, opens a table cell and mentions a
// user.
const hostileKey = "x`| @octocat | ![i](https://evil.example/k.png) |"

// renderGFM renders Markdown as GitHub does (tables, autolinks, strikethrough) with goldmark.
func renderGFM(t testing.TB, md string) string {
	t.Helper()
	var out bytes.Buffer
	if err := goldmark.New(goldmark.WithExtensions(extension.GFM)).Convert([]byte(md), &out); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// shown is the text a reader of rendered Markdown sees: no tags, entities read, no zero-width
// spaces. A test looking for a sentence in a body Parley escapes looks in what GitHub shows.
func shown(t testing.TB, md string) string {
	t.Helper()
	text := regexp.MustCompile(`<[^>]*>`).ReplaceAllString(renderGFM(t, md), "")
	return strings.ReplaceAll(stdhtml.UnescapeString(text), "\u200b", "")
}

// liveParts lists what in rendered HTML would act on readers: links, images, raw HTML elements
// Parley did not write, and @mentions or #references outside code.
func liveParts(html string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`<(a|img|script|iframe)\b[^>]*>`).FindAllString(html, -1) {
		out = append(out, m)
	}
	text := regexp.MustCompile(`(?s)<code>.*?</code>|<pre.*?</pre>|<!--.*?-->`).ReplaceAllString(html, "")
	out = append(out, regexp.MustCompile(`[@#][A-Za-z0-9][\w/-]*`).FindAllString(text, -1)...)
	return out
}

func TestCommentCarriesNothingLiveFromTheRepository(t *testing.T) {
	dir, git := remote(t)
	git("checkout", "-q", "rightsize")
	web := strings.Replace(webYAML, "  replicas: 3\n", "  replicas: 3\n  template:\n    metadata:\n      annotations:\n        \""+strings.ReplaceAll(hostileKey, `"`, `\"`)+"\": \"v\"\n", 1)
	if err := os.WriteFile(filepath.Join(dir, "k8s/prod/web.yaml"), []byte(web), 0o644); err != nil {
		t.Fatal(err)
	}
	git("commit", "-q", "-am", "Annotate\n\nIntent: "+hostileIntent+"\nMotivation: budget\n")
	git("update-ref", "refs/pull/7/head", "HEAD")
	git("checkout", "-q", "main")
	h, gh := handler(t)
	base, head := git("rev-parse", "main"), git("rev-parse", "refs/pull/7/head")
	if err := h.Handle(context.Background(), store.Delivery{ID: "d1", Event: "pull_request", Body: prEvent(t, dir, base, head, "opened")}); err != nil {
		t.Fatal(err)
	}
	comments := gh.Comments("acme/infra#7")
	if len(comments) != 1 {
		t.Fatalf("want one comment, got %d", len(comments))
	}
	body := comments[0].Body
	if !strings.Contains(body, "acme/security") || !strings.Contains(body, "pixel") || !strings.Contains(body, "octocat") {
		t.Fatalf("the test's hostile texts did not reach the comment, so it proves nothing:\n%s", body)
	}
	html := renderGFM(t, body)
	if live := liveParts(html); len(live) > 0 {
		t.Errorf("the comment carries live parts from data: %q\n%s", live, body)
	}
	// Every table row has the table's six cells: no cell came from the YAML key.
	for _, row := range regexp.MustCompile(`(?s)<tr>.*?</tr>`).FindAllString(html, -1) {
		if n := strings.Count(row, "<td") + strings.Count(row, "<th"); n != 6 {
			t.Errorf("a table row has %d cells, want 6: %s", n, row)
		}
	}
	runs := gh.CheckRuns("acme/infra")
	if len(runs) != 1 {
		t.Fatalf("check runs %+v", runs)
	}
	if live := liveParts(renderGFM(t, runs[0].Summary)); len(live) > 0 {
		t.Errorf("the check run carries live parts from data: %q", live)
	}
	// What readers extract still says what the data said: escaping is for display only.
	doc, err := report.Extract(body)
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, v := range doc.Verdicts {
		found = found || strings.Contains(v.Field.String(), "@octocat")
	}
	if !found {
		t.Errorf("the hidden document lost the hostile field's name: %+v", doc.Verdicts)
	}
}

func TestStickyCommentIsOnlyTheAppsOwn(t *testing.T) {
	dir, git := remote(t)
	h, gh := handler(t)
	gh.AppSlug = "parley-acme" // the App's slug on this GitHub: its comments are by parley-acme[bot]
	base, head := git("rev-parse", "main"), git("rev-parse", "refs/pull/7/head")
	// A workflow and another App post Parley's marker first, with verdicts that approve everything.
	forged := report.Marker + "\n### Parley: 1 field, 1 enforce-git\n\n<!-- parley:verdicts {\"schema\":\"parley.dev/verdicts/v2\",\"generated\":\"2026-11-20T10:00:00Z\",\"verdicts\":[{\"field\":\"tf:infra/kafka//aws_autoscaling_group.consumer#/desired_capacity\",\"decision\":\"enforce-git\"}]} -->\n"
	actions := gh.AddComment("acme/infra#7", "github-actions[bot]", forged)
	other := gh.AddComment("acme/infra#7", "parley[bot]", forged) // another App whose slug is "parley"
	deliver := func(id string) {
		t.Helper()
		if err := h.Handle(context.Background(), store.Delivery{ID: id, Event: "pull_request", Body: prEvent(t, dir, base, head, "opened")}); err != nil {
			t.Fatal(err)
		}
	}
	deliver("d1")
	deliver("d2") // the second judgement finds the App's comment, not the forged ones
	var cs []report.PRComment
	for _, c := range gh.Comments("acme/infra#7") {
		cs = append(cs, report.PRComment{ID: c.ID, Author: c.User, Body: c.Body})
	}
	if len(cs) != 3 {
		t.Fatalf("want the two forged comments and the App's own, got %d: %+v", len(cs), cs)
	}
	for _, c := range cs {
		if (c.ID == actions || c.ID == other) && c.Body != forged {
			t.Errorf("Parley edited %s's comment %d", c.Author, c.ID)
		}
	}
	doc, read, err := report.ExtractSticky(cs, "parley-acme[bot]")
	if err != nil {
		t.Fatal(err)
	}
	if read.Author != "parley-acme[bot]" || read.ID == actions || read.ID == other {
		t.Errorf("read comment %d by %s, want the App's own", read.ID, read.Author)
	}
	if len(doc.Verdicts) != 1 || doc.Verdicts[0].Decision != "veto" {
		t.Errorf("verdicts read: %+v, want the App's veto", doc.Verdicts)
	}
	if _, _, err := report.ExtractSticky(cs[:2], "parley-acme[bot]"); !errors.Is(err, report.ErrNoData) {
		t.Errorf("without the App's comment: %v, want ErrNoData", err)
	}
}

func TestCommandRepliesCarryNothingLiveFromTheCommand(t *testing.T) {
	dir, _ := remote(t)
	h, gh := handler(t)
	live, err := livestate.Open(context.Background(), filepath.Join(t.TempDir(), "live.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	h.Live = live
	c := &Comments{PullRequests: h, Live: live}
	// Commands are refused on closed pull requests, so Parley reads this one's state first.
	gh.SetPullRequest("acme/infra", 7, map[string]any{"number": 7, "state": "open", "title": "Right-size the consumers",
		"user": map[string]any{"login": "cost-optimizer[bot]"}})
	gh.SetPermission("acme/infra", "mallory", "read")
	for i, body := range []string{
		// Code spans are no command text (chatops reads the comment as GitHub renders it), so the
		// hostile parts stand in the paragraph's own text.
		"/parley hold reason=\"@acme/security <b>x</b> ![t](https://evil.example/p.png) [x](https://evil.example) |x|\"", // refused: no permission
		"/parley claim @acme/security![t](https://evil.example/p.png) = 3 |x|",                                           // malformed: a parse error quoting it
	} {
		if err := c.Handle(context.Background(), store.Delivery{ID: fmt.Sprint("c", i), Event: "issue_comment",
			Body: commentEvent(t, dir, int64(600+i), "mallory", "User", body)}); err != nil {
			t.Fatal(err)
		}
		reply := lastReply(gh)
		if !strings.Contains(reply, "acme/security") {
			t.Fatalf("the reply does not quote the command, so the test proves nothing: %q", reply)
		}
		var live []string
		for _, l := range liveParts(renderGFM(t, reply)) {
			if l != "@mallory" { // the reply mentions its commenter on purpose
				live = append(live, l)
			}
		}
		if len(live) > 0 {
			t.Errorf("reply to %q carries live parts %q:\n%s", body, live, reply)
		}
	}
}

// A file over the App's budget is named in the check run, which does not pass: padding a file past
// the budget is no way around a veto.
func TestCheckRunNamesFilesOverTheBudget(t *testing.T) {
	dir, git := remote(t)
	h, gh := handler(t)
	h.Budget = core.Budget{FileBytes: 64}
	base, head := git("rev-parse", "main"), git("rev-parse", "refs/pull/7/head")
	if err := h.Handle(context.Background(), store.Delivery{ID: "d1", Event: "pull_request", Body: prEvent(t, dir, base, head, "opened")}); err != nil {
		t.Fatal(err)
	}
	runs := gh.CheckRuns("acme/infra")
	if len(runs) != 1 || runs[0].Conclusion != "action_required" {
		t.Fatalf("check runs %+v: want action_required, the vetoed file being unjudged", runs)
	}
	if !strings.Contains(runs[0].Summary, `Problem: infra/kafka/main\.tf\: 119 bytes, above the 64 bytes Parley reads; not judged`) {
		t.Errorf("the check run does not name the file:\n%s", runs[0].Summary)
	}
}
