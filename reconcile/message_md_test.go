package reconcile

import (
	"bytes"
	stdhtml "html"
	"regexp"
	"strings"
	"testing"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/reconcile/gitops"
)

// hostile is text a drift event or a repository puts in front of Parley, written to make a pull
// request speak for its author: a team mention, an issue reference, a tracking image, a link, HTML
// and an autolink.
const hostile = "@acme/security #12 ![t](https://evil.example/p.png) [docs](https://evil.example/x) <img src=https://evil.example/i.png> https://evil.example/y"

// renderGFM renders Markdown as GitHub does (tables, autolinks, strikethrough) with goldmark.
func renderGFM(t testing.TB, md string) string {
	t.Helper()
	var out bytes.Buffer
	if err := goldmark.New(goldmark.WithExtensions(extension.GFM)).Convert([]byte(md), &out); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// liveParts lists what in rendered HTML would act on readers: links, images, raw HTML elements,
// and @mentions or #references outside code.
func liveParts(html string) []string {
	out := regexp.MustCompile(`<(a|img|script|iframe)\b[^>]*>`).FindAllString(html, -1)
	text := regexp.MustCompile(`(?s)<code>.*?</code>|<pre.*?</pre>|<!--.*?-->`).ReplaceAllString(html, "")
	return append(out, regexp.MustCompile(`[@#][A-Za-z0-9][\w/-]*`).FindAllString(text, -1)...)
}

// A drift pull request's body says what the data said and nothing more: a hostile actor, value,
// intent, motivation, rule explanation, object, chart or file name carries no mention, reference,
// link, image or HTML into it, while the people the policy asks are still mentioned.
func TestDriftPullRequestBodyCarriesNothingLiveFromTheData(t *testing.T) {
	field := core.K8sField("apps", "Deployment", "prod", "web@acme"+"/x", "/spec/replicas")
	claim := &core.Claim{Field: field, Value: core.StringValue(hostile), Intent: core.Intent(hostile),
		Motivation: core.Motivation{Kind: "incident", Ref: hostile},
		Actor:      core.Actor{Name: hostile, Identity: core.Identity{Source: core.SourceGitHubUser, ID: "octocat"}},
		Evidence:   core.Evidence{Source: "argocd", EventIDs: []string{hostile}}}
	steps := []core.Step{{Rule: "ask", Outcome: "asked", Detail: "code owners of " + hostile},
		{Rule: "result", Outcome: "vetoed", Detail: hostile + " is vetoed"}}
	files := []string{"k8s/" + hostile + ".yaml"}
	pl := gitops.Placement{RemoteCharts: []string{hostile}}

	propose := core.Verdict{Field: field, Decision: core.DecisionEscalate, Rule: hostile, Proposed: claim,
		Ask: []string{"@acme/sre"}, Explanation: steps}
	nobody := propose
	nobody.Ask = nil
	yield := core.Verdict{Field: field, Decision: core.DecisionYield, Rule: hostile, Winner: claim, Explanation: steps}
	for name, body := range map[string]string{
		"propose": bodyOf(message(propose, ActionPropose, files, proposeNote(propose))),
		"nobody":  bodyOf(message(nobody, ActionAsk, nil, askNote(nobody))),
		"yield":   bodyOf(message(yield, ActionGate, files, remoteNote(field, pl))),
	} {
		if !strings.Contains(body, "evil.example") || !strings.Contains(body, "acme/security") {
			t.Fatalf("%s: the hostile text did not reach the body, so the test proves nothing:\n%s", name, body)
		}
		html := renderGFM(t, body)
		var live []string
		for _, p := range liveParts(html) {
			if p != "@acme/sre" {
				live = append(live, p)
			}
		}
		if len(live) > 0 {
			t.Errorf("%s: the body carries live parts from data: %q\n%s\n---\n%s", name, live, body, html)
		}
		if name == "propose" && !strings.Contains(html, "@acme/sre") {
			t.Errorf("%s: the team the policy asks is no longer mentioned:\n%s", name, html)
		}
	}
}

// shown is the text a reader of rendered Markdown sees: no tags, entities read, no zero-width
// spaces. Tests that look for a sentence in a body look in what GitHub shows, not in its escapes.
func shown(t testing.TB, md string) string {
	t.Helper()
	text := regexp.MustCompile(`<[^>]*>`).ReplaceAllString(renderGFM(t, md), "")
	return strings.ReplaceAll(stdhtml.UnescapeString(text), "\u200b", "")
}

func bodyOf(_, body, _ string) string { return body }

// A value quoted in the explanation cannot close the code block a pull request asking people to
// decide shows it in, and so cannot write Markdown (a mention, an image) into the pull request.
func TestAskBodyKeepsTheExplanationInItsBlock(t *testing.T) {
	v := core.Verdict{Field: image, Decision: core.DecisionHold, Rule: "oscillation",
		Explanation: []core.Step{{Rule: "result", Outcome: "hold", Detail: "the value \"x\n```\n@acme/security ![t](https://evil.example/p.png)\n```\" flipped"}}}
	_, body, _ := message(v, ActionAsk, nil, "")
	var out bytes.Buffer
	if err := goldmark.New(goldmark.WithExtensions(extension.GFM)).Convert([]byte(body), &out); err != nil {
		t.Fatal(err)
	}
	html := out.String()
	if strings.Count(html, "<pre>") != 1 || strings.Contains(html, "<img") {
		t.Errorf("the explanation left its code block:\n%s\n---\n%s", body, html)
	}
	pre := html[strings.Index(html, "<pre>"):]
	if !strings.Contains(pre[:strings.Index(pre, "</pre>")], "@acme/security") {
		t.Errorf("the explanation is not all inside the block:\n%s", html)
	}
}
