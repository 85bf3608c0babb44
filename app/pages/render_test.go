package pages

import (
	"bytes"
	"encoding/xml"
	"html"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/core"
)

// xss is data that must come out escaped wherever the pages print it.
const xss = "<script>alert(1)</script>"

var base = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

func mustField(t testing.TB, s string) core.Field {
	t.Helper()
	f, err := core.ParseField(s)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func mustValue(t testing.TB, v any) core.Value {
	t.Helper()
	val, err := core.JSONValue(v)
	if err != nil {
		t.Fatal(err)
	}
	return val
}

// fieldFixture is a field with a realistic history: three commits by two teams, the HPA scaling it
// twice, on-call yielding then claiming it for an incident, a freeze, a gate, and a yield verdict.
func fieldFixture(t testing.TB) Field {
	f := mustField(t, "k8s:apps/Deployment/prod/web#/spec/replicas")
	platform := core.Actor{Name: "platform", Identity: core.Identity{Source: core.SourceGitAuthor, ID: "alice@example.com", Name: "Alice"}}
	cost := core.Actor{Name: "cost", Identity: core.Identity{Source: core.SourceGitHubTeam, ID: "acme/finops"}}
	hpa := core.Actor{Name: "hpa", Identity: core.Identity{Source: core.SourceKubeUser, ID: "system:serviceaccount:kube-system:horizontal-pod-autoscaler"}}
	oncall := core.Actor{Name: "oncall", Identity: core.Identity{Source: core.SourceGitHubUser, ID: "bob"}}

	git := []core.Claim{
		{Field: f, Actor: platform, Value: mustValue(t, 3), Intent: core.IntentBaseline, At: base.Add(-30 * 24 * time.Hour),
			Evidence: core.Evidence{Source: "git", Commit: "1111111111111111111111111111111111111111"}},
		{Field: f, Actor: cost, Value: mustValue(t, 2), Intent: core.IntentCost, Motivation: core.Motivation{Kind: core.MotivationBudget, Ref: "FIN-12"},
			At: base.Add(-10 * 24 * time.Hour), Evidence: core.Evidence{Source: "git", Commit: "2222222222222222222222222222222222222222", PR: 41, Explicit: true}},
		{Field: f, Actor: platform, Value: mustValue(t, 3), Intent: core.IntentAvailability,
			Motivation: core.Motivation{Kind: core.MotivationIncident, Ref: "INC-4211", Severity: core.SeverityHigh},
			At:         base.Add(-2 * 24 * time.Hour), Evidence: core.Evidence{Source: "git", Commit: "3333333333333333333333333333333333333333", PR: 57}},
	}
	live := []core.Claim{
		{Field: f, Actor: hpa, Value: mustValue(t, 5), Intent: core.IntentAvailability, At: base.Add(-24 * time.Hour),
			Evidence: core.Evidence{Source: "k8s-audit", EventIDs: []string{"7c1e0a00-0001"}}},
		{Field: f, Actor: hpa, Value: mustValue(t, 7), Intent: core.IntentAvailability, At: base.Add(-3 * time.Hour),
			Evidence: core.Evidence{Source: "k8s-audit", EventIDs: []string{"7c1e0a00-0002"}}},
		// The yield's motivation carries markup, to prove it is escaped everywhere it shows.
		{Field: f, Actor: oncall, Yield: true, Intent: core.IntentAvailability,
			Motivation: core.Motivation{Kind: core.MotivationIncident, Ref: xss}, At: base.Add(-2 * time.Hour),
			Evidence: core.Evidence{Source: "github-comment", Explicit: true}},
		{Field: f, Actor: oncall, Value: mustValue(t, 6), Intent: core.IntentAvailability,
			Motivation: core.Motivation{Kind: core.MotivationIncident, Ref: "INC-4211", Severity: core.SeverityHigh},
			At:         base.Add(-time.Hour), Expires: base.Add(4 * time.Hour), Evidence: core.Evidence{Source: "github-comment", Explicit: true}},
	}
	winner := live[3]
	return Field{
		Repository: "acme/deploy",
		Field:      f,
		At:         base,
		Verdict: core.Verdict{
			Field: f, Decision: core.DecisionYield, Winner: &winner, Losers: []core.Claim{git[2], live[1]},
			Rule: "rank", Until: base.Add(4 * time.Hour), Recheck: base.Add(4 * time.Hour),
			Explanation: []core.Step{
				{Rule: "freeze.peak-sales", Outcome: "not applicable", Detail: "The freeze covers writes to Git, not live claims"},
				{Rule: "bounds.replicas", Outcome: "passed", Detail: "6 is within the bounds 2 to 20"},
				{Rule: "rank", Outcome: "decided", Detail: "oncall outranks platform and hpa for intent availability during INC-4211"},
			},
		},
		Git:  git,
		Live: live,
		Windows: []Window{
			{Kind: WindowGate, Label: "rank", From: base.Add(-time.Hour)},
			{Kind: WindowFreeze, Label: "peak-sales", From: base.Add(-5 * 24 * time.Hour), Until: base.Add(24 * time.Hour)},
		},
		Drift: []DriftVerdict{{
			At: base.Add(-3 * time.Hour), Evidence: "k8s audit event 7c1e0a00-0002 by system:serviceaccount:kube-system:horizontal-pod-autoscaler",
			Verdict: core.Verdict{Field: f, Decision: core.DecisionEnforceGit, Rule: "default", Winner: &git[2]},
		}},
	}
}

var testLinks = Links{
	Index: "/repos/acme/deploy/",
	Field: func(f core.Field) string { return "/repos/acme/deploy/field?f=" + url.QueryEscape(f.String()) },
}

func renderString(t *testing.T, fn func(io.Writer) error) string {
	t.Helper()
	var b bytes.Buffer
	if err := fn(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// elem is an element of a rendered page with its ancestors, outermost first.
type elem struct {
	name      string
	attr      map[string]string
	ancestors []*elem
}

func (e *elem) classes() []string { return strings.Fields(e.attr["class"]) }

func (e *elem) within(match func(*elem) bool) bool {
	return slices.ContainsFunc(e.ancestors, match)
}

var voidMeta = regexp.MustCompile(`(<(?:meta|link) [^>]*[^/])>`)

// parsePage checks that a page is well formed (every element closed, in order, attributes quoted)
// by reading it as XML, which html/template's output is apart from the void <meta> elements, and
// returns its elements in document order.
func parsePage(t *testing.T, doc string) []*elem {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(voidMeta.ReplaceAllString(doc, "$1/>")))
	d.Strict = true
	var all, stack []*elem
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("page is not well formed: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			e := &elem{name: tok.Name.Local, attr: map[string]string{}, ancestors: slices.Clone(stack)}
			for _, a := range tok.Attr {
				name := a.Name.Local
				if a.Name.Space != "" {
					name = a.Name.Space + ":" + name
				}
				e.attr[name] = a.Value
			}
			all = append(all, e)
			stack = append(stack, e)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		}
	}
	if len(stack) != 0 {
		t.Fatalf("%d elements left open", len(stack))
	}
	return all
}

func named(name string) func(*elem) bool { return func(e *elem) bool { return e.name == name } }

// checkLayout asserts what every page shares: the doctype, the head, landmarks, one <h1>, headings
// in order, one <style>, no script, nothing from other hosts, unique ids.
func checkLayout(t *testing.T, doc string, els []*elem) {
	t.Helper()
	if !strings.HasPrefix(doc, "<!doctype html>\n<html lang=\"en\">") {
		t.Errorf("page does not start with the doctype and <html lang=\"en\">: %.60q", doc)
	}
	for _, want := range []string{`<meta charset="utf-8">`, `<meta name="viewport" content="width=device-width, initial-scale=1">`, "<title>", "overflow-x:auto", "system-ui"} {
		if !strings.Contains(doc, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	// The one link is the empty inline icon, which keeps browsers from asking for /favicon.ico.
	const icon = `<link rel="icon" href="data:,">`
	if !strings.Contains(doc, icon) {
		t.Errorf("page lacks %s", icon)
	}
	for _, banned := range []string{"<script", "http://", "https://", "<link", "<img", "@import", "url("} {
		if strings.Contains(strings.ToLower(strings.Replace(doc, icon, "", 1)), banned) {
			t.Errorf("page contains %q", banned)
		}
	}
	count := map[string]int{}
	ids := map[string]bool{}
	var levels []int
	var refs []string
	for _, e := range els {
		count[e.name]++
		if id, ok := e.attr["id"]; ok {
			if ids[id] {
				t.Errorf("id %q is used twice", id)
			}
			ids[id] = true
		}
		if len(e.name) == 2 && e.name[0] == 'h' && e.name[1] >= '1' && e.name[1] <= '6' {
			levels = append(levels, int(e.name[1]-'0'))
		}
		if e.name == "th" && !e.within(named("thead")) && e.attr["scope"] == "" {
			t.Errorf("a <th> has no scope")
		}
		if e.name == "th" && e.within(named("thead")) && e.attr["scope"] != "col" {
			t.Errorf("a header cell's scope is %q, want col", e.attr["scope"])
		}
		if e.name == "table" {
			// Each table's first child is its caption (checked below through the count), and it
			// sits in a wrapper that scrolls sideways.
			if !e.within(func(a *elem) bool { return a.name == "div" && strings.Contains(a.attr["class"], "scroll") }) {
				t.Errorf("a table is not inside a scrolling wrapper")
			}
		}
		for _, id := range strings.Fields(e.attr["aria-labelledby"]) {
			refs = append(refs, id)
		}
	}
	// An id may come after the element naming it, so references are checked once all are known.
	for _, id := range refs {
		if !ids[id] {
			t.Errorf("aria-labelledby names id %q, which does not exist", id)
		}
	}
	if count["h1"] != 1 {
		t.Errorf("%d <h1>, want 1", count["h1"])
	}
	if count["style"] != 1 {
		t.Errorf("%d <style>, want 1", count["style"])
	}
	if count["header"] != 1 || count["main"] != 1 {
		t.Errorf("landmarks: %d <header>, %d <main>, want 1 each", count["header"], count["main"])
	}
	if count["caption"] != count["table"] {
		t.Errorf("%d tables but %d captions", count["table"], count["caption"])
	}
	if len(levels) == 0 || levels[0] != 1 {
		t.Fatalf("headings %v do not start with <h1>", levels)
	}
	for i := 1; i < len(levels); i++ {
		if levels[i] > levels[i-1]+1 {
			t.Errorf("headings skip a level: %v", levels)
		}
	}
}

func TestRenderField(t *testing.T) {
	p := fieldFixture(t)
	doc := renderString(t, func(w io.Writer) error { return RenderField(w, p, testLinks) })
	els := parsePage(t, doc)
	checkLayout(t, doc, els)

	if n := strings.Count(doc, "<h1"); n != 1 {
		t.Errorf("%d <h1> in the text, want 1", n)
	}
	if !strings.Contains(doc, "<h1><code>"+html.EscapeString(p.Field.String())+"</code></h1>") {
		t.Errorf("the <h1> is not the field")
	}
	if !strings.Contains(doc, `<nav aria-label="Repository"><ul><li><a href="/repos/acme/deploy/">`) {
		t.Errorf("no navigation to the index")
	}

	// Every claim drawn carries class "claim" and data-actor, and nothing else has class claim.
	want := len(p.Git) + len(p.Live)
	if n := strings.Count(doc, `class="claim`); n != want {
		t.Errorf(`%d class="claim..., want %d`, n, want)
	}
	var drawn []*elem
	for _, e := range els {
		if slices.Contains(e.classes(), "claim") {
			if !e.within(named("svg")) {
				t.Errorf("a <%s> outside the SVG has class claim", e.name)
			}
			if e.attr["data-actor"] == "" {
				t.Errorf("a drawn claim has no data-actor")
			}
			drawn = append(drawn, e)
		}
	}
	if len(drawn) != want {
		t.Errorf("svg .claim matches %d elements, want %d", len(drawn), want)
	}
	var actors, classes []string
	for _, e := range drawn {
		actors = append(actors, e.attr["data-actor"])
		classes = append(classes, e.attr["class"])
	}
	if got, want := strings.Join(actors, ","), "platform,cost,platform,hpa,hpa,oncall,oncall"; got != want {
		t.Errorf("drawn claims' actors = %s, want %s", got, want)
	}
	if got := classes[5]; got != "claim live yield" {
		t.Errorf("the yield is drawn with class %q", got)
	}

	// The picture is an image with a title and a description that exist.
	var svg *elem
	for _, e := range els {
		if e.name == "svg" && e.attr["role"] == "img" {
			svg = e
			break
		}
	}
	if svg == nil {
		t.Fatal(`no <svg role="img">`)
	}
	if !strings.Contains(svg.attr["viewBox"], "0 0 960 ") || svg.attr["width"] != "100%" {
		t.Errorf("svg viewBox %q width %q", svg.attr["viewBox"], svg.attr["width"])
	}
	labels := strings.Fields(svg.attr["aria-labelledby"])
	if len(labels) != 2 {
		t.Fatalf("svg aria-labelledby = %q, want a title and a desc", svg.attr["aria-labelledby"])
	}
	for i, name := range []string{"title", "desc"} {
		if !strings.Contains(doc, "<"+name+` id="`+labels[i]+`">`) {
			t.Errorf("aria-labelledby names %q but no <%s> has that id", labels[i], name)
		}
	}

	// Lanes: Git, then live actors as they first claimed, then window kinds in their fixed order
	// (the fixture lists the gate before the freeze).
	var lanes []string
	for _, m := range regexp.MustCompile(`<text class="lane-label"[^>]*>([^<]*)`).FindAllStringSubmatch(doc, -1) {
		lanes = append(lanes, m[1])
	}
	if got, want := strings.Join(lanes, ","), "Git,hpa,oncall,Freeze,Gate"; got != want {
		t.Errorf("lanes = %s, want %s", got, want)
	}
	if !strings.Contains(doc, ">verdict: yield</text>") {
		t.Errorf("no verdict line label")
	}
	if n := strings.Count(doc, `class="tick-label"`) - 1; n < 4 || n > 6 { // one is the "UTC" caption
		t.Errorf("%d axis ticks, want 4 to 6", n)
	}
	for _, w := range []string{`class="window freeze"`, `class="window gate"`} {
		if !strings.Contains(doc, w) {
			t.Errorf("no %s", w)
		}
	}

	// The claims table lists the same claims as the picture.
	rows := 0
	for _, e := range els {
		if e.name == "tr" && e.within(named("tbody")) &&
			e.within(func(a *elem) bool { return a.attr["aria-labelledby"] == "claims-caption" }) {
			rows++
		}
	}
	if rows != want {
		t.Errorf("claims table has %d rows, want %d", rows, want)
	}

	// Every rule's outcome, the verdict's facts, times in UTC.
	for _, s := range p.Verdict.Explanation {
		for _, text := range []string{s.Rule, s.Outcome, s.Detail} {
			if !strings.Contains(doc, html.EscapeString(text)) {
				t.Errorf("explanation text %q missing", text)
			}
		}
	}
	for _, text := range []string{
		"acme/deploy", ">yield</span>", "The live actor holds the field", "oncall: 6 (intent availability",
		"platform: 3 (intent availability", "<code>rank</code>", "2026-03-02 13:00 UTC", "2026-03-02 09:00 UTC",
		"Drift verdicts", ">enforce-git</span>", "commit 333333333333", "pull request #57", "event 7c1e0a00-0001",
		"open-ended", "does not expire", "still in force", "peak-sales",
	} {
		if !strings.Contains(doc, html.EscapeString(text)) && !strings.Contains(doc, text) {
			t.Errorf("page lacks %q", text)
		}
	}

	// Data with markup is escaped, never raw.
	if strings.Contains(doc, xss) {
		t.Errorf("raw markup from data in the page")
	}
	if !strings.Contains(doc, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Errorf("escaped markup from data not in the page")
	}
}

func TestRenderFieldWithoutLinksOrClaims(t *testing.T) {
	p := Field{Repository: "acme/deploy", Field: mustField(t, "k8s:core/ConfigMap/prod/settings#/data/LOG_LEVEL"), At: base,
		Verdict: core.Verdict{Decision: core.DecisionEnforceGit, Rule: "default"}}
	doc := renderString(t, func(w io.Writer) error { return RenderField(w, p, Links{}) })
	checkLayout(t, doc, parsePage(t, doc))
	for _, want := range []string{"Nothing to draw", "No claims:", "No freeze, hold or gate", "No explanation was recorded"} {
		if !strings.Contains(doc, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	for _, banned := range []string{"<svg", "<nav", "<a ", "Drift verdicts", `class="claim`} {
		if strings.Contains(doc, banned) {
			t.Errorf("page contains %q", banned)
		}
	}
}

func TestRenderPullRequest(t *testing.T) {
	fx := fieldFixture(t)
	tf := core.TFField("infra/kafka", "aws_autoscaling_group.consumer", "/desired_capacity")
	p := PullRequest{
		Repository: "acme/deploy", Number: 57, Title: "Scale web for the launch " + xss,
		Head: "3333333333333333333333333333333333333333abcdef", At: base,
		Verdicts: []core.Verdict{fx.Verdict, {Field: tf, Decision: core.DecisionEscalate, Rule: "no-rule",
			Ask: []string{"@acme/platform"}, Explanation: []core.Step{{Rule: "no-rule", Outcome: "decided", Detail: "no rule ranks these claims"}}}},
	}

	doc := renderString(t, func(w io.Writer) error { return RenderPullRequest(w, p, testLinks) })
	els := parsePage(t, doc)
	checkLayout(t, doc, els)
	if !strings.Contains(doc, "<h1>Pull request #57: Scale web for the launch &lt;script&gt;") {
		t.Errorf("the <h1> is not the pull request")
	}
	if !strings.Contains(doc, "<code>333333333333</code>") || strings.Contains(doc, "3333333333333") {
		t.Errorf("head commit not shortened to 12 characters")
	}
	for _, f := range []core.Field{fx.Field, tf} {
		href := html.EscapeString(testLinks.Field(f))
		if n := strings.Count(doc, `href="`+href+`"`); n != 2 { // the table row and the section heading
			t.Errorf("%d links to %s, want 2", n, f)
		}
	}
	if !strings.Contains(doc, `href="/repos/acme/deploy/"`) {
		t.Errorf("no link to the index")
	}
	sections := 0
	for _, e := range els {
		if e.name == "section" && strings.HasPrefix(e.attr["id"], "verdict-") {
			sections++
		}
	}
	if sections != 2 {
		t.Errorf("%d verdict sections, want 2", sections)
	}
	for _, text := range []string{"freeze.peak-sales", "no rule ranks these claims", ">escalate</span>", "People are asked to decide."} {
		if !strings.Contains(doc, text) {
			t.Errorf("page lacks %q", text)
		}
	}

	bare := renderString(t, func(w io.Writer) error { return RenderPullRequest(w, p, Links{}) })
	checkLayout(t, bare, parsePage(t, bare))
	if strings.Contains(bare, "<a ") || strings.Count(bare, "href=") != 1 || strings.Contains(bare, "<nav") { // the one href: the inline icon
		t.Errorf("links without Links")
	}

	empty := renderString(t, func(w io.Writer) error {
		return RenderPullRequest(w, PullRequest{Repository: "acme/deploy", Number: 58, Title: "Docs", Head: "abc", At: base}, testLinks)
	})
	checkLayout(t, empty, parsePage(t, empty))
	if !strings.Contains(empty, "Parley judged no fields in this pull request.") || strings.Contains(empty, "<table") {
		t.Errorf("an empty pull request does not say so")
	}
}

func TestRenderIndex(t *testing.T) {
	fx := fieldFixture(t)
	tf := core.TFField("infra/kafka", "aws_autoscaling_group.consumer", "/desired_capacity")
	p := Index{
		Repository: "acme/deploy", At: base,
		Fields: []FieldSummary{
			{Field: fx.Field, Verdict: fx.Verdict, Claims: 7},
			{Field: tf, Verdict: core.Verdict{Field: tf, Decision: core.DecisionHold, Rule: "hold.chatops"}, Claims: 2},
		},
		Gates: []Gate{
			{Field: fx.Field, File: "clusters/prod/apps.yaml", Rule: "rank", Until: base.Add(4 * time.Hour)},
			{Field: tf, File: "infra/kafka/main.tf", Rule: "hold.chatops"},
		},
	}
	doc := renderString(t, func(w io.Writer) error { return RenderIndex(w, p, testLinks) })
	checkLayout(t, doc, parsePage(t, doc))
	if !strings.Contains(doc, "<h1>acme/deploy</h1>") {
		t.Errorf("the <h1> is not the repository")
	}
	for _, f := range []core.Field{fx.Field, tf} {
		href := html.EscapeString(testLinks.Field(f))
		if n := strings.Count(doc, `href="`+href+`"`); n != 2 { // the fields table and the gates table
			t.Errorf("%d links to %s, want 2", n, f)
		}
	}
	for _, text := range []string{"2026-03-02 13:00 UTC", "until resumed", "clusters/prod/apps.yaml", ">hold</span>", `<td class="num">7</td>`} {
		if !strings.Contains(doc, text) {
			t.Errorf("page lacks %q", text)
		}
	}

	bare := renderString(t, func(w io.Writer) error { return RenderIndex(w, p, Links{}) })
	checkLayout(t, bare, parsePage(t, bare))
	if strings.Contains(bare, "<a ") || strings.Count(bare, "href=") != 1 {
		t.Errorf("links without Links")
	}

	empty := renderString(t, func(w io.Writer) error { return RenderIndex(w, Index{Repository: "acme/empty", At: base}, testLinks) })
	checkLayout(t, empty, parsePage(t, empty))
	for _, want := range []string{"No field has claims.", "Parley wrote no gates."} {
		if !strings.Contains(empty, want) {
			t.Errorf("empty index lacks %q", want)
		}
	}
}

// A link a caller builds badly is neutralised by html/template, not passed to the browser.
func TestUnsafeLinkNeutralised(t *testing.T) {
	fx := fieldFixture(t)
	links := Links{Index: "javascript:alert(1)", Field: func(core.Field) string { return "javascript:alert(2)" }}
	doc := renderString(t, func(w io.Writer) error {
		return RenderIndex(w, Index{Repository: "acme/deploy", Fields: []FieldSummary{{Field: fx.Field, Verdict: fx.Verdict}}}, links)
	})
	if strings.Contains(doc, "javascript:") {
		t.Errorf("a javascript: link reached the page")
	}
}

func TestDeterministic(t *testing.T) {
	fx := fieldFixture(t)
	pr := PullRequest{Repository: "acme/deploy", Number: 57, Title: "t", Head: "abc", At: base, Verdicts: []core.Verdict{fx.Verdict}}
	idx := Index{Repository: "acme/deploy", At: base, Fields: []FieldSummary{{Field: fx.Field, Verdict: fx.Verdict, Claims: 7}}}
	for name, fn := range map[string]func(io.Writer) error{
		"field": func(w io.Writer) error { return RenderField(w, fx, testLinks) },
		"pr":    func(w io.Writer) error { return RenderPullRequest(w, pr, testLinks) },
		"index": func(w io.Writer) error { return RenderIndex(w, idx, testLinks) },
	} {
		first := renderString(t, fn)
		for range 5 {
			if again := renderString(t, fn); again != first {
				t.Errorf("%s: two renders of the same input differ", name)
				break
			}
		}
	}
}

func TestRenderFieldToFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "field.html")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	fx := fieldFixture(t)
	if err := RenderField(f, fx, testLinks); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := renderString(t, func(w io.Writer) error { return RenderField(w, fx, testLinks) })
	if string(got) != want {
		t.Errorf("the file differs from the rendered page")
	}
	if !strings.HasSuffix(string(got), "</html>\n") {
		t.Errorf("the file is not a whole page")
	}
}

func TestAxisTicks(t *testing.T) {
	for _, span := range []time.Duration{
		90 * time.Second, 7 * time.Minute, time.Hour, 5 * time.Hour, 26 * time.Hour, 3 * 24 * time.Hour,
		30 * 24 * time.Hour, 45 * 24 * time.Hour, 400 * 24 * time.Hour, 3 * 365 * 24 * time.Hour,
	} {
		start := base.Add(17*time.Minute + 23*time.Second)
		end := start.Add(span)
		ticks := axisTicks(start, end)
		if len(ticks) < 4 || len(ticks) > 6 {
			t.Errorf("span %v: %d ticks, want 4 to 6", span, len(ticks))
		}
		for i, tk := range ticks {
			if tk.at.Before(start) || tk.at.After(end) || tk.label == "" {
				t.Errorf("span %v: tick %d at %v %q is outside %v..%v or unlabelled", span, i, tk.at, tk.label, start, end)
			}
			if i > 0 && !tk.at.After(ticks[i-1].at) {
				t.Errorf("span %v: ticks not increasing", span)
			}
		}
	}
}

func TestTimeSpanWidensAnInstant(t *testing.T) {
	f := mustField(t, "k8s:apps/Deployment/prod/web#/spec/replicas")
	p := Field{Field: f, At: base, Git: []core.Claim{{Field: f, Value: mustValue(t, 1), At: base}}}
	start, end := timeSpan(p)
	if !start.Equal(base) || end.Sub(start) != time.Hour {
		t.Errorf("span %v..%v, want an hour from %v", start, end, base)
	}
	if tl := buildTimeline(p); tl == nil || len(tl.Bars) != 1 || float64(tl.Bars[0].W) < tlMinBar {
		t.Errorf("a claim at the only instant is not drawn visibly: %+v", tl)
	}
}

func TestTruncateRunes(t *testing.T) {
	if got := truncateRunes(strings.Repeat("é", 30), 24); got != strings.Repeat("é", 23)+"…" {
		t.Errorf("truncateRunes = %q", got)
	}
	if got := truncateRunes("short", 24); got != "short" {
		t.Errorf("truncateRunes = %q", got)
	}
}

// TestIndexSaysWhenItListsTheFirstFieldsOnly: an index cut to its first fields says so.
func TestIndexSaysWhenItListsTheFirstFieldsOnly(t *testing.T) {
	f, err := core.ParseField("k8s:apps/Deployment/prod/web#/spec/replicas")
	if err != nil {
		t.Fatal(err)
	}
	idx := Index{Repository: "acme/infra", Fields: []FieldSummary{{Field: f, Verdict: core.Verdict{Field: f, Decision: core.DecisionAdopt, Rule: "rank"}, Claims: 2}}, Total: 1200}
	var b strings.Builder
	if err := RenderIndex(&b, idx, Links{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "The first 1 of 1200 fields with claims") {
		t.Errorf("the cut is not said:\n%s", b.String())
	}
	idx.Total = 1
	b.Reset()
	if err := RenderIndex(&b, idx, Links{}); err != nil || strings.Contains(b.String(), "The first") {
		t.Errorf("a whole index says it is cut: %v", err)
	}
}
