package main

import (
	"bytes"
	"strconv"
	"strings"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/policy"
)

// patternWarning is a pattern of the policy that matches no field of the repository, with the
// address it comes closest to matching.
type patternWarning struct {
	File    string `json:"file"`
	Line    int    `json:"line"`
	Column  int    `json:"column"`
	Block   string `json:"block"` // `field "replicas"`, `rule "incident-first"`, `freeze "peak-sales"`
	Pattern string `json:"pattern"`
	// Nearest is the repository's field address the pattern is fewest edits away from matching;
	// "" when the repository has no field.
	Nearest string `json:"nearest,omitempty"`
	Edits   int    `json:"edits,omitempty"` // how many characters to change for the pattern to match Nearest
}

func (w patternWarning) String() string {
	s := w.File + ":" + strconv.Itoa(w.Line) + ":" + strconv.Itoa(w.Column) + ": warning: " + w.Block + " pattern " +
		strconv.Quote(w.Pattern) + " matches no field of the repository"
	if w.Nearest != "" {
		s += "; nearest field: " + w.Nearest
	}
	return s
}

// policyPattern is one pattern the policy writes, and where.
type policyPattern struct {
	block   string
	pattern core.FieldPattern
}

// policyPatterns lists the field patterns of the policy's field blocks (match), rules and freezes
// (fields), in that order. Patterns inside expressions (git_values) are built per field and are
// not listed.
func policyPatterns(p *policy.Policy) []policyPattern {
	var out []policyPattern
	for _, fr := range p.Fields {
		for _, m := range fr.Match {
			out = append(out, policyPattern{block: `field "` + fr.Name + `"`, pattern: m})
		}
	}
	for _, r := range p.Rules {
		for _, m := range r.Fields {
			out = append(out, policyPattern{block: `rule "` + r.Name + `"`, pattern: m})
		}
	}
	for _, fz := range p.Freezes {
		for _, m := range fz.Fields {
			out = append(out, policyPattern{block: `freeze "` + fz.Name + `"`, pattern: m})
		}
	}
	return out
}

// unmatchedPatterns warns about every pattern of the policy that matches none of fields (the
// repository's, sorted by address), each with the field it is nearest to matching. src is the
// policy's text, read for each pattern's line and column.
func unmatchedPatterns(p *policy.Policy, src []byte, file string, fields []core.Field) []patternWarning {
	var out []patternWarning
	addrs := make([]string, len(fields))
	for i, f := range fields {
		addrs[i] = f.String()
	}
	for _, pp := range policyPatterns(p) {
		matched := false
		for _, f := range fields {
			if pp.pattern.Match(f) {
				matched = true
				break
			}
		}
		if matched {
			continue
		}
		w := patternWarning{File: file, Block: pp.block, Pattern: pp.pattern.String()}
		w.Line, w.Column = patternPosition(src, pp)
		if w.Nearest, w.Edits = nearestAddress(pp.pattern.String(), addrs); w.Nearest == "" {
			w.Edits = 0 // no field at all: nothing to measure against
		}
		out = append(out, w)
	}
	return out
}

// patternPosition finds where the policy writes the pattern: its quoted text after the block's
// header, else the header itself, else the file's start. The parsed policy keeps no positions for
// patterns, and the text is what the user wrote (patterns are canonicalised only in case of
// escapes, where the header is the next best place to point at).
func patternPosition(src []byte, pp policyPattern) (line, col int) {
	kind, name, _ := strings.Cut(pp.block, " ")
	header := bytes.Index(src, []byte(kind+" "+name))
	at := header
	if header >= 0 {
		if i := bytes.Index(src[header:], []byte(strconv.Quote(pp.pattern.String()))); i >= 0 {
			at = header + i + 1
		}
	}
	if at < 0 {
		return 1, 1
	}
	line = 1 + bytes.Count(src[:at], []byte("\n"))
	col = at - bytes.LastIndexByte(src[:at], '\n')
	return line, col
}

// nearestAddress returns the address of addrs (sorted) that pattern is fewest edits away from
// matching, and the number of edits. A wildcard makes many addresses equally near (aws_vpc.* is
// four edits from any aws_ resource): among those the address nearest the pattern's own text
// wins, then the first. A pattern without # (every field of the objects it names) is measured
// against the addresses' objects.
func nearestAddress(pattern string, addrs []string) (string, int) {
	best, bestD, bestText := "", -1, 0
	objectOnly := !strings.Contains(pattern, "#")
	prev := ""
	for _, a := range addrs {
		s := a
		if objectOnly {
			s, _, _ = strings.Cut(a, "#")
			if s == prev {
				continue // another field of the object just measured: sorted, they are adjacent
			}
			prev = s
		}
		limit := bestD
		if bestD < 0 {
			limit = len(pattern) + len(s)
		}
		d := globDistance(pattern, s, limit)
		if d > limit {
			continue
		}
		// Plain edit distance, the wildcards as written: the tie-break.
		text := globDistance(strings.ReplaceAll(pattern, "*", "\x00"), s, len(pattern)+len(s))
		if bestD < 0 || d < bestD || text < bestText {
			best, bestD, bestText = a, d, text
		}
	}
	return best, bestD
}

// globDistance is the edit distance (insertions, deletions, substitutions of one byte) between
// text and the nearest string pattern matches, where * matches any run of bytes other than / and
// ** any run at all (a close bound of the pattern grammar: enough to rank candidates). It stops
// once the distance is sure to exceed limit and then returns limit+1.
func globDistance(pattern, text string, limit int) int {
	type tok struct {
		c    byte
		star int // 0: the literal c; 1: *; 2: **
	}
	var toks []tok
	for i := 0; i < len(pattern); i++ {
		switch {
		case strings.HasPrefix(pattern[i:], "**"):
			toks = append(toks, tok{star: 2})
			i++
		case pattern[i] == '*':
			toks = append(toks, tok{star: 1})
		default:
			toks = append(toks, tok{c: pattern[i]})
		}
	}
	prev := make([]int, len(text)+1)
	cur := make([]int, len(text)+1)
	for j := range prev {
		prev[j] = j // the text's first j bytes, inserted
	}
	for _, t := range toks {
		low := limit + 1
		switch t.star {
		case 0:
			cur[0] = prev[0] + 1
			for j := 1; j <= len(text); j++ {
				sub := prev[j-1]
				if text[j-1] != t.c {
					sub++
				}
				cur[j] = min(sub, prev[j]+1, cur[j-1]+1)
			}
		case 1:
			cur[0] = prev[0] // a star matching nothing
			for j := 1; j <= len(text); j++ {
				cur[j] = min(prev[j], cur[j-1]+1)
				if text[j-1] != '/' {
					cur[j] = min(cur[j], cur[j-1])
				}
			}
		case 2:
			// ** stands for whole segments: it may consume anything, / included, but ends only
			// before a / or at the end of the text. Without that it would swallow any address
			// but its last bytes, and every address would be as near as any other.
			ext := prev[0]
			cur[0] = prev[0]
			for j := 1; j <= len(text); j++ {
				ext = min(ext, prev[j])
				cur[j] = min(prev[j], cur[j-1]+1)
				if j == len(text) || text[j] == '/' {
					cur[j] = min(cur[j], ext)
				}
			}
		}
		for _, v := range cur {
			low = min(low, v)
		}
		if low > limit {
			return limit + 1
		}
		prev, cur = cur, prev
	}
	return prev[len(text)]
}
