package report

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"

	"github.com/parleyhq/parley/core"
)

// hostileVerdict puts s everywhere a repository, a commit or a claim can put text in a verdict.
func hostileVerdict(s string) core.Verdict {
	claim := core.Claim{Field: core.K8sField("apps", "Deployment", "prod", "web", "/metadata/annotations/"+s),
		Actor: core.Actor{Name: s}, Intent: core.Intent(s), Value: core.CanonicalJSONValue(`"` + strings.ReplaceAll(s, `"`, "") + `"`),
		At: time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)}
	return core.Verdict{Field: claim.Field, Decision: core.DecisionHold, Rule: s, Winner: &claim, Losers: []core.Claim{claim},
		Explanation: []core.Step{{Rule: s, Outcome: s, Detail: s}}}
}

// live lists what in rendered HTML would act on readers: links, images, elements Parley did not
// write, and @mentions or #references outside code.
func live(html string) []string {
	var out []string
	ours := map[string]bool{"h3": true, "p": true, "table": true, "thead": true, "tbody": true, "tr": true, "th": true, "td": true,
		"code": true, "details": true, "summary": true, "ul": true, "li": true, "strong": true, "blockquote": true, "pre": true}
	for _, m := range regexp.MustCompile(`<([a-z][a-z0-9]*)`).FindAllStringSubmatch(html, -1) {
		if !ours[m[1]] {
			out = append(out, "<"+m[1]+">")
		}
	}
	text := regexp.MustCompile(`(?s)<code>.*?</code>|<pre.*?</pre>|<!--.*?-->`).ReplaceAllString(html, "")
	return append(out, regexp.MustCompile(`[@#][A-Za-z0-9]`).FindAllString(text, -1)...)
}

// FuzzCommentCarriesNothingLive: whatever text a verdict carries, the rendered comment has no
// link, image, HTML, mention or reference from it, and its table rows keep their five cells.
func FuzzCommentCarriesNothingLive(f *testing.F) {
	for _, s := range []string{"@acme/security", "x`| @octocat | ![i](https://evil.example/k.png) |", "<img src=x>", "```\n@a\n```", "see #12 www.evil.example"} {
		f.Add(s)
	}
	md := goldmark.New(goldmark.WithExtensions(extension.GFM))
	f.Fuzz(func(t *testing.T, s string) {
		body := Comment(Input{Generated: time.Date(2026, 11, 20, 10, 5, 0, 0, time.UTC), Verdicts: []core.Verdict{hostileVerdict(s)}, Problems: []string{s}})
		var out bytes.Buffer
		if err := md.Convert([]byte(body), &out); err != nil {
			t.Fatal(err)
		}
		html := out.String()
		if l := live(html); len(l) > 0 {
			t.Fatalf("text %q made %q live:\n%s\n---\n%s", s, l, body, html)
		}
		for _, row := range regexp.MustCompile(`(?s)<tr>.*?</tr>`).FindAllString(html, -1) {
			if n := strings.Count(row, "<td") + strings.Count(row, "<th"); n != 5 {
				t.Fatalf("text %q: a row with %d cells:\n%s", s, n, row)
			}
		}
	})
}
