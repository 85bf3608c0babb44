package reconcile

import (
	"bytes"
	"strings"
	"testing"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"

	"github.com/parleyhq/parley/core"
)

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
