package ghmarkdown

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"
)

// hostile is text an attacker could put in a trailer, a YAML key or a comment.
var hostile = []string{
	"@acme/security please look",
	"ping @octocat and mail a@evil.example",
	"![t](https://evil.example/pixel.png?pr=1)",
	"[docs](https://evil.example) and https://evil.example/x and www.evil.example",
	"<img src=https://evil.example/p.png> <a href=x>y</a> <details>",
	"a`b|c`@d `` ``` ",
	"`| injected | cell |`",
	"line one\n| x | y |\n@line-two\r\n# heading",
	"**bold** _em_ ~~strike~~ $x^2$ <https://evil.example>",
	"\\|\\`\\@ trailing backslash \\",
	"see #123 and GH-1",
	"",
}

// render is GitHub Flavored Markdown as goldmark renders it (tables, autolinks, strikethrough).
func render(t testing.TB, md string) string {
	t.Helper()
	var out bytes.Buffer
	if err := goldmark.New(goldmark.WithExtensions(extension.GFM)).Convert([]byte(md), &out); err != nil {
		t.Fatalf("render %q: %v", md, err)
	}
	return out.String()
}

// mention is what GitHub turns into a mention or a reference in shown text: @ or # followed by a
// name or a number.
var mention = regexp.MustCompile(`[@#][A-Za-z0-9]`)

// live reports what in rendered HTML came alive from data: any element other than those the
// test's own frame made, an autolink, a mention or a reference outside code.
func live(html string, allowed ...string) string {
	tags := regexp.MustCompile(`<(/?)([a-z0-9]+)`).FindAllStringSubmatch(html, -1)
	ok := map[string]bool{}
	for _, a := range allowed {
		ok[a] = true
	}
	for _, m := range tags {
		if !ok[m[2]] {
			return "element <" + m[2] + ">"
		}
	}
	// GitHub links no mention or reference inside code.
	text := regexp.MustCompile(`(?s)<code>.*?</code>`).ReplaceAllString(html, "")
	if m := mention.FindString(text); m != "" {
		return "mention or reference " + m
	}
	return ""
}

func TestTextCarriesNothingLive(t *testing.T) {
	for _, s := range hostile {
		html := render(t, "Intent: "+Text(s)+"\n")
		if l := live(html, "p"); l != "" {
			t.Errorf("Text(%q) rendered %s:\n%s", s, l, html)
		}
		if got, want := visible(html), strings.Join(strings.Fields("Intent: "+s), " "); squash(got) != squash(want) {
			t.Errorf("Text(%q) reads %q, want %q", s, got, want)
		}
	}
}

func TestCellsStayInTheirColumn(t *testing.T) {
	for _, s := range hostile {
		for name, esc := range map[string]func(string) string{"Cell": Cell, "CodeCell": CodeCell} {
			md := "| field | winner |\n|---|---|\n| " + esc(s) + " | " + esc(s) + " |\n"
			html := render(t, md)
			if l := live(html, "table", "thead", "tbody", "tr", "th", "td", "code"); l != "" {
				t.Errorf("%s(%q) rendered %s:\n%s", name, s, l, html)
			}
			if n := strings.Count(html, "<td"); n != 2 {
				t.Errorf("%s(%q): %d cells in the row, want 2:\n%s", name, s, n, html)
			}
			if n := strings.Count(html, "<tr"); n != 2 {
				t.Errorf("%s(%q): %d rows, want 2:\n%s", name, s, n, html)
			}
		}
	}
}

func TestCodeKeepsItsText(t *testing.T) {
	for _, s := range hostile {
		html := render(t, "field "+Code(s)+" changed\n")
		if l := live(html, "p", "code"); l != "" {
			t.Errorf("Code(%q) rendered %s:\n%s", s, l, html)
		}
		if strings.Count(html, "<code>") != 1 {
			t.Errorf("Code(%q): want exactly one code span:\n%s", s, html)
		}
	}
}

func TestFenceHoldsItsLines(t *testing.T) {
	for _, s := range hostile {
		html := render(t, "before\n\n"+Fence(s, "")+"\nafter @x\n")
		if !strings.Contains(html, "<p>after @x</p>") || strings.Count(html, "<pre>") != 1 {
			t.Errorf("Fence(%q) did not hold its lines:\n%s", s, html)
		}
	}
}

func TestHTMLInSummary(t *testing.T) {
	for _, s := range hostile {
		html := render(t, "<details><summary>Why <code>"+HTML(s)+"</code></summary>\n\nbody\n</details>\n")
		if l := live(html, "details", "summary", "code", "p"); l != "" {
			t.Errorf("HTML(%q) rendered %s:\n%s", s, l, html)
		}
	}
}

// visible is the text a reader sees in rendered HTML: tags dropped, entities and zero-width
// spaces undone.
func visible(html string) string {
	s := regexp.MustCompile(`<[^>]*>`).ReplaceAllString(html, "")
	s = strings.NewReplacer("&lt;", "<", "&gt;", ">", "&amp;", "&", "&quot;", `"`, zwsp, "").Replace(s)
	return strings.TrimSpace(s)
}

func squash(s string) string { return strings.Join(strings.Fields(s), " ") }

// FuzzCell: whatever the text, a row with it in both cells renders two cells and nothing live.
func FuzzCell(f *testing.F) {
	for _, s := range hostile {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for name, esc := range map[string]func(string) string{"Cell": Cell, "CodeCell": CodeCell} {
			html := render(t, "| a | b |\n|---|---|\n| "+esc(s)+" | "+esc(s)+" |\n")
			if l := live(html, "table", "thead", "tbody", "tr", "th", "td", "code"); l != "" {
				t.Fatalf("%s(%q) rendered %s:\n%s", name, s, l, html)
			}
			if n := strings.Count(html, "<td"); n != 2 {
				t.Fatalf("%s(%q): %d cells, want 2:\n%s", name, s, n, html)
			}
		}
	})
}
