// Package ghmarkdown places text that Parley did not write (a field's name, a trailer's intent, a
// claim's value, a commenter's command) into GitHub Flavored Markdown so that it reads as that
// text and nothing more: no @mention, #reference, link, image, HTML, emphasis or extra table cell
// can come from it. Each function is for one place in a document: Text for running text, a list
// item or a quote, Cell for a table cell, Code and CodeCell for inline code, Fence for a code
// block, HTML for text inside an HTML element.
//
// GitHub turns @name and #n into links after rendering, on the text it shows, so escaping the
// Markdown is not enough for them: a zero-width space after @ and # keeps the text as it reads
// but leaves GitHub nothing to link. Inside code GitHub links nothing, so Code and Fence need no
// such mark. No library does this for GitHub's dialect (goldmark and blackfriday render Markdown;
// they do not write it), hence this small package.
package ghmarkdown

import "strings"

// zwsp is a zero-width space: after @ or # it stops GitHub's mention and reference links without
// changing what a reader sees.
const zwsp = "\u200b"

// Text escapes s for running Markdown text on one line: every ASCII punctuation character that
// Markdown or GitHub gives a meaning to is backslash-escaped (so no emphasis, link, image, code
// span, table cell, autolink such as https://... or www...., math or strikethrough starts), <, >
// and & become entities (no HTML), @ and # are followed by a zero-width space (no mention or
// reference), and line breaks become spaces (no new block, no new table row).
func Text(s string) string {
	var b strings.Builder
	b.Grow(len(s) + len(s)/4)
	for _, r := range oneLine(s) {
		switch r {
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '&':
			b.WriteString("&amp;")
		case '@', '#':
			b.WriteRune(r)
			b.WriteString(zwsp)
		case '\\', '`', '*', '_', '{', '}', '[', ']', '(', ')', '+', '-', '.', '!', '|', '~', ':', '$', '=', '^':
			b.WriteByte('\\')
			b.WriteRune(r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Cell escapes s for a table cell: Text, with "—" for an empty cell. GFM splits a row at every |
// not preceded by a backslash before it reads the cells, and Text escapes every |.
func Cell(s string) string {
	if s == "" {
		return "—"
	}
	return Text(s)
}

// Code renders s as an inline code span: the fence is one backtick longer than the longest run of
// backticks in s, so s cannot close it, and a space pads a text that starts or ends with a
// backtick or a space (Markdown strips one from each side). Line breaks become spaces. Do not use
// it inside a table cell: CodeCell is for that.
func Code(s string) string {
	s = oneLine(s)
	if s == "" {
		s = " "
	}
	fence := strings.Repeat("`", longestRun(s, '`')+1)
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") || strings.HasPrefix(s, " ") || strings.HasSuffix(s, " ") {
		s = " " + s + " "
	}
	return fence + s + fence
}

// CodeCell renders s as inline code inside a table cell: as Code, with every | escaped, since GFM
// splits the row before it reads code spans (and drops the backslash inside them).
func CodeCell(s string) string {
	return strings.ReplaceAll(Code(s), "|", `\|`)
}

// Fence renders s as a fenced code block with the given info string ("" or a language such as
// "mermaid"): the fence is longer than any run of backticks in s, so no line of s can close it.
// The block ends with a line break.
func Fence(s, info string) string {
	fence := strings.Repeat("`", max(3, longestRun(s, '`')+1))
	if !strings.HasSuffix(s, "\n") {
		s += "\n"
	}
	return fence + oneLine(info) + "\n" + s + fence + "\n"
}

// HTML escapes s for text inside an HTML element (<summary>, <code>): Markdown is not read there,
// but GitHub still links @mentions and #references in what it shows, so @ and # get their
// zero-width space; line breaks become spaces so an HTML block is not ended early.
func HTML(s string) string {
	var b strings.Builder
	for _, r := range oneLine(s) {
		switch r {
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '&':
			b.WriteString("&amp;")
		case '"':
			b.WriteString("&quot;")
		case '@', '#':
			b.WriteRune(r)
			b.WriteString(zwsp)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// oneLine replaces every line break (and other C0 control but the tab) with a space.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r < ' ' && r != '\t' || r == '\u2028' || r == '\u2029' || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}

func longestRun(s string, c byte) int {
	best, run := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			run++
			best = max(best, run)
		} else {
			run = 0
		}
	}
	return best
}
