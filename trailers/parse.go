package trailers

import (
	"strings"
)

// Options are the settings git's trailer code reads from its command line and configuration.
type Options struct {
	// NoDivider does not treat a line starting with "---" as the end of the message (git's
	// --no-divider; also what git log's %(trailers) and git commit --trailer do).
	NoDivider bool
	// CommentChar is core.commentChar; 0 means '#'.
	CommentChar byte
	// Separators is trailer.separators; "" means ":". The first one is used when writing.
	Separators string
	// Keys are configured trailer keys (trailer.<key>.key). A line whose key starts a configured key
	// (case-insensitively) counts as a recognised trailer for the 25% rule, and is printed with the
	// configured spelling.
	Keys []string
}

func (o Options) comment() byte {
	if o.CommentChar == 0 {
		return '#'
	}
	return o.CommentChar
}

func (o Options) separators() string {
	if o.Separators == "" {
		return ":"
	}
	return o.Separators
}

// Trailer is one trailer as `git interpret-trailers --parse` prints it.
type Trailer struct {
	Key, Value string
	// Line is the 1-based line of the input where the trailer starts.
	Line int
}

// isSpace is git's isspace: SP, HT, LF and CR only.
func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// isAlnum is git's isalnum: ASCII letters and digits only.
func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// scissors is the line `git commit --cleanup=scissors` writes, after the comment character and a space.
const scissors = " ------------------------ >8 ------------------------\n"

// block is a located trailer block: msg[start:end] holds the trailer lines.
type block struct {
	msg         string
	start, end  int
	blankBefore bool // the line before start is blank
}

// cutNUL stops the message at its first NUL byte, where git's C strings end.
func cutNUL(msg string) string {
	if i := strings.IndexByte(msg, 0); i >= 0 {
		return msg[:i]
	}
	return msg
}

// locate finds the trailer block the way trailer.c's trailer_info_get does.
func locate(msg string, o Options) block {
	patchStart := len(msg)
	if !o.NoDivider {
		patchStart = findPatchStart(msg)
	}
	end := patchStart - ignoreNonTrailer(msg, patchStart, o.comment())
	start := findTrailerStart(msg, end, o)
	return block{msg: msg, start: start, end: end, blankBefore: endsWithBlankLine(msg, start)}
}

// findPatchStart returns the offset of the first line starting with "---" and a whitespace character.
func findPatchStart(s string) int {
	for i := 0; i < len(s); {
		if len(s)-i > 3 && s[i] == '-' && s[i+1] == '-' && s[i+2] == '-' && isSpace(s[i+3]) {
			return i
		}
		i = nextLine(s, i)
	}
	return len(s)
}

// nextLine returns the offset after the newline that ends the line at i (or len(s)).
func nextLine(s string, i int) int {
	if j := strings.IndexByte(s[i:], '\n'); j >= 0 {
		return i + j + 1
	}
	return len(s)
}

// lastLine returns the start of the last line of s[:n], treating a final newline as part of that
// line; -1 when n is 0 (git's last_line).
func lastLine(s string, n int) int {
	if n == 0 {
		return -1
	}
	if n == 1 {
		return 0
	}
	if j := strings.LastIndexByte(s[:n-1], '\n'); j >= 0 {
		return j + 1
	}
	return 0
}

// isBlankLine reports whether the line at i holds only whitespace (git's is_blank_line: it reads
// to the newline or the end of the message).
func isBlankLine(s string, i int) bool {
	for ; i < len(s) && s[i] != '\n'; i++ {
		if !isSpace(s[i]) {
			return false
		}
	}
	return true
}

func endsWithBlankLine(s string, n int) bool {
	l := lastLine(s, n)
	return l >= 0 && isBlankLine(s, l)
}

// locateScissors returns the offset where the scissors line cuts s[:n] (git's wt_status_locate_end,
// with current git's guard that only an earlier cut wins).
func locateScissors(s string, n int, comment byte) int {
	if len(s) >= 1+len(scissors) && s[0] == comment && s[1:1+len(scissors)] == scissors {
		return 0
	}
	// Search for "\n" + comment + scissors without allocating the pattern.
	for from := 0; ; {
		j := strings.Index(s[from:], scissors)
		if j < 0 {
			return n
		}
		p := from + j // offset of the space after the comment character
		if p >= 2 && s[p-1] == comment && s[p-2] == '\n' {
			if p-1 < n {
				return p - 1
			}
			return n
		}
		from = p + 1
	}
}

// ignoreNonTrailer returns how many bytes at the end of s[:n] are not part of the message proper:
// a final run of comment lines, blank lines and an old-style Conflicts: block, and anything from the
// scissors line on (commit.c's ignore_non_trailer).
func ignoreNonTrailer(s string, n int, comment byte) int {
	boc := 0
	inConflicts := false
	cutoff := locateScissors(s, n, comment)
	for bol := 0; bol < cutoff; {
		next := n
		if j := strings.IndexByte(s[bol:n], '\n'); j >= 0 {
			next = bol + j + 1
		}
		switch {
		case s[bol] == comment || s[bol] == '\n':
			if boc == 0 {
				boc = bol
			}
		case strings.HasPrefix(s[bol:], "Conflicts:\n"):
			inConflicts = true
			if boc == 0 {
				boc = bol
			}
		case inConflicts && s[bol] == '\t':
			// a path in the conflicts block
		case boc != 0:
			boc = 0
			inConflicts = false
		}
		bol = next
	}
	if boc != 0 {
		return n - boc
	}
	return n - cutoff
}

// gitGenerated are the prefixes of trailers git writes itself; they are recognised as trailers.
var gitGenerated = [...]string{"Signed-off-by: ", "(cherry picked from commit "}

// findSeparator returns the offset of the separator in the line at s[i:], or -1 (trailer.c's
// find_separator: a key of ASCII letters, digits and '-', optional spaces or tabs, a separator).
func findSeparator(s string, i int, seps string) int {
	ws := false
	for c := i; c < len(s); c++ {
		ch := s[c]
		if strings.IndexByte(seps, ch) >= 0 {
			return c - i
		}
		if !ws && (isAlnum(ch) || ch == '-') {
			continue
		}
		if c != i && (ch == ' ' || ch == '\t') {
			ws = true
			continue
		}
		break
	}
	return -1
}

// hasPrefixFold reports whether key (n bytes of it) is a case-insensitive prefix of conf, git's
// strncasecmp(tok, conf, n) == 0.
func hasPrefixFold(tok string, conf string) bool {
	if len(tok) > len(conf) {
		return false
	}
	return asciiEqualFold(tok, conf[:len(tok)])
}

// findTrailerStart scans backward from end for the start of the trailer block (trailer.c's
// find_trailer_start); end when there is none.
func findTrailerStart(s string, end int, o Options) int {
	comment := o.comment()
	seps := o.separators()
	// The first paragraph is the title and cannot hold trailers.
	endOfTitle := 0
	for endOfTitle < end {
		if s[endOfTitle] != comment && isBlankLine(s, endOfTitle) {
			break
		}
		endOfTitle = nextLine(s, endOfTitle)
	}
	onlySpaces := true
	recognised := false
	trailerLines, nonTrailerLines, continuations := 0, 0, 0
	for l := lastLine(s, end); l >= endOfTitle; l = lastLine(s, l) {
		if s[l] == comment {
			nonTrailerLines += continuations
			continuations = 0
			continue
		}
		if isBlankLine(s, l) {
			if onlySpaces {
				continue
			}
			nonTrailerLines += continuations
			if recognised && trailerLines*3 >= nonTrailerLines {
				return nextLine(s, l)
			}
			if trailerLines > 0 && nonTrailerLines == 0 {
				return nextLine(s, l)
			}
			return end
		}
		onlySpaces = false
		generated := false
		for _, p := range gitGenerated {
			if strings.HasPrefix(s[l:], p) {
				generated = true
				break
			}
		}
		if generated {
			trailerLines++
			continuations = 0
			recognised = true
			continue
		}
		sep := findSeparator(s, l, seps)
		switch {
		case sep >= 1 && !isSpace(s[l]):
			trailerLines++
			continuations = 0
			if recognised {
				continue
			}
			tok := s[l : l+sep]
			for _, k := range o.Keys {
				if hasPrefixFold(tok, k) {
					recognised = true
					break
				}
			}
		case isSpace(s[l]):
			continuations++
		default:
			nonTrailerLines += 1 + continuations
			continuations = 0
		}
	}
	return end
}

// entry is one logical line of the trailer block: a trailer with its continuation lines, or a
// non-trailer line.
type entry struct {
	off  int    // offset in the message
	text string // including continuation lines and the final newline
	sep  int    // separator offset within text, or -1
}

// entries splits the block into logical lines the way trailer_info_get does: a whitespace-led line
// continues the previous entry only if that entry is a trailer.
func (b block) entries(o Options, visit func(entry)) {
	seps := o.separators()
	s := b.msg
	var cur entry
	have := false
	for i := b.start; i < b.end; {
		j := nextLine(s, i)
		if j > b.end {
			j = b.end
		}
		if have && cur.sep >= 1 && isSpace(s[i]) {
			cur.text = s[cur.off:j]
			i = j
			continue
		}
		if have {
			visit(cur)
		}
		cur = entry{off: i, text: s[i:j], sep: findSeparator(s[:j], i, seps)}
		have = true
		i = j
	}
	if have {
		visit(cur)
	}
}

// trimSpace trims git's whitespace.
func trimSpace(s string) string {
	i, j := 0, len(s)
	for i < j && isSpace(s[i]) {
		i++
	}
	for j > i && isSpace(s[j-1]) {
		j--
	}
	return s[i:j]
}

// tokenLen is git's token_len_without_separator: the key without trailing non-alphanumerics.
func tokenLen(tok string) int {
	n := len(tok)
	for n > 0 && !isAlnum(tok[n-1]) {
		n--
	}
	return n
}

// canonicalKey returns the configured spelling of key, if key names a configured key.
func canonicalKey(key string, keys []string) string {
	if len(keys) == 0 {
		return key
	}
	n := tokenLen(key)
	for _, k := range keys {
		if hasPrefixFold(key[:n], k) {
			return k
		}
	}
	return key
}

// unfold joins continuation lines: each newline and the whitespace after it become one space.
func unfold(v string) string {
	if strings.IndexByte(v, '\n') < 0 {
		return v
	}
	var b strings.Builder
	b.Grow(len(v))
	for i := 0; i < len(v); {
		c := v[i]
		i++
		if c == '\n' {
			for i < len(v) && isSpace(v[i]) {
				i++
			}
			b.WriteByte(' ')
			continue
		}
		b.WriteByte(c)
	}
	return trimSpace(b.String())
}

// lineAt returns the 1-based line number of offset off in s.
func lineAt(s string, off int) int { return strings.Count(s[:off], "\n") + 1 }

// Parse returns the trailers of msg's trailer block exactly as `git interpret-trailers --parse`
// lists them: keys trimmed (and spelled as configured), values unfolded and trimmed, comment lines
// and non-trailer lines left out.
func Parse(msg string, opts Options) []Trailer {
	msg = cutNUL(msg)
	b := locate(msg, opts)
	if b.start >= b.end {
		return nil
	}
	comment := opts.comment()
	var out []Trailer
	line, lineOff := 1, 0
	b.entries(opts, func(e entry) {
		if e.text[0] == comment || e.sep < 1 {
			return
		}
		line += strings.Count(msg[lineOff:e.off], "\n")
		lineOff = e.off
		out = append(out, Trailer{
			Key:   canonicalKey(trimSpace(e.text[:e.sep]), opts.Keys),
			Value: unfold(trimSpace(e.text[e.sep+1:])),
			Line:  line,
		})
	})
	return out
}

// Format renders trailers as `git interpret-trailers --parse` prints them with the default separator.
func Format(ts []Trailer) string { return FormatWith(ts, Options{}) }

// FormatWith renders trailers as git prints them under opts: "Key: value\n" with the first separator.
func FormatWith(ts []Trailer, opts Options) string {
	var b strings.Builder
	for _, t := range ts {
		writeTrailer(&b, t.Key, t.Value, opts.separators())
	}
	return b.String()
}

// writeTrailer is trailer.c's print_tok_val.
func writeTrailer(b *strings.Builder, key, value, seps string) {
	last := byte(0)
	for i := len(key) - 1; i >= 0; i-- {
		if !isSpace(key[i]) {
			last = key[i]
			break
		}
	}
	if last == 0 {
		return
	}
	b.WriteString(key)
	if strings.IndexByte(seps, last) < 0 {
		b.WriteByte(seps[0])
		b.WriteByte(' ')
	}
	b.WriteString(value)
	b.WriteByte('\n')
}
