package fielddiff

import (
	"errors"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// The fast reader: go.yaml.in/yaml/v3 spends most of a cold ledger's CPU scanning tokens, building
// events and allocating a node (with comments and positions) for each of them. Manifests use a small
// part of YAML, so this reader reads that part by hand, line by line, into the same yaml.Node tree
// yaml.v3 builds (the fields the flattening reads: Kind, Style, Tag, Value, Content), allocated in
// chunks, with plain scalars sharing the file's text. The flattening then runs unchanged on it.
// It is written by hand because no library reads only this much YAML; every rule below follows
// yaml.v3's scanner (scannerc.go) and parser (decode.go), not the YAML specification where the two
// differ, and the scalar types come from yaml.v3 itself (plainTag).
//
// It reads block mappings and sequences, flow collections (JSON), plain scalars (folded over lines),
// quoted scalars (with escapes and folding), literal and folded block scalars, comments, "---",
// anchors, aliases and merge keys (<<, resolved by the flattening as before).
//
// The contract, which FuzzFastReaderMatchesYAMLv3 and TestFastReaderOnRepository check: when the
// reader accepts a stream, yaml.v3 reads it without error into the same trees (aliases pointing
// at the same nodes); on anything else (tags, complex keys, directives, "...", tabs, CR, control
// characters, a scalar alone on its line, keys over lines, indentation yaml.v3 would read another
// way or refuse, ...) it declines and yaml.v3 reads the stream, so every error message stays
// yaml.v3's. Errors found while flattening also decline, for the same reason.
//
// The alias budget: the trees are the same, aliases included, so the flattening visits the same
// nodes the same number of times, and a document's visits (ParseCached adds them up against
// nodeBudget of the whole file) are the same whichever reader read it: the check's outcome is too.

// fastMaxDepth bounds the reader's recursion; the flattening refuses deeper documents anyway.
const fastMaxDepth = 90

// fastMaxKey is below yaml.v3's 1024 characters between a simple key's start and its ':'.
const fastMaxKey = 1000

// fastParseObjects reads content as parseYAMLObjects does, or returns ok=false when the stream is not
// one the fast reader reads, or reading it would fail.
// A stream past the YAML budgets is refused here (err, a *YAMLBudgetError) rather than declined:
// yaml.v3 would build the same trees, and more.
func fastParseObjects(p string, content []byte) (*yamlParser, bool, error) {
	roots, ok, over := fastDocuments(content)
	if over {
		return nil, false, tooManyNodes(p)
	}
	if !ok {
		return nil, false, nil
	}
	y := newYAMLParser(p, content)
	seen := map[objectKey]int{}
	for i, root := range roots {
		if err := y.readDocument(i+1, root, seen); err != nil {
			var budget *YAMLBudgetError
			if errors.As(err, &budget) {
				return nil, false, err
			}
			return nil, false, nil // yaml.v3's path gives the error, with its line numbers
		}
	}
	return y, true, nil
}

// fastDocuments returns the root node of each document of the stream, as yaml.v3's Decoder returns
// them (an empty document is a null scalar), or ok=false; over when it stopped at MaxYAMLNodes.
func fastDocuments(content []byte) (roots []*yaml.Node, ok, over bool) {
	if !fastReadable(content) {
		return nil, false, false
	}
	r := &fastReader{src: string(content)}
	r.nextLine()
	if r.col >= 0 { // content before any "---": an implicit document
		root := r.root()
		if root == nil {
			return nil, false, r.over
		}
		roots = append(roots, root)
	}
	for r.docStart {
		r.docStart = false
		if !r.endLine(r.i + 3) { // nothing but a comment may follow "---" here
			return nil, false, r.over
		}
		root := r.null()
		if r.col >= 0 {
			if root = r.root(); root == nil {
				return nil, false, r.over
			}
		}
		roots = append(roots, root)
	}
	if r.bad || r.i < len(r.src) {
		return nil, false, r.over
	}
	return roots, true, false
}

// fastReadable reports whether every character is one the reader handles as yaml.v3 does: printable
// ASCII and newlines, and UTF-8 from U+00A0 up, except the characters yaml.v3 reads as line breaks
// (U+2028, U+2029), the byte order mark and the non-characters it refuses. Tabs and carriage returns
// are refused too (yaml.v3 reads tabs differently by position). Templates need no check: a bare
// {{ .x }} reads as a flow mapping used as a key, which the reader declines (its keys are scalars),
// so parseYAMLObjects' template check finds nothing in a tree the reader built.
func fastReadable(content []byte) bool {
	for i := 0; i < len(content); {
		c := content[i]
		if c < utf8.RuneSelf {
			if c < ' ' && c != '\n' || c == 0x7f {
				return false
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(content[i:])
		if size == 1 || r < 0xA0 || r == 0x2028 || r == 0x2029 || r == 0xFEFF || r == 0xFFFE || r == 0xFFFF {
			return false
		}
		i += size
	}
	return true
}

// fastReader reads one stream. Between calls, i is the start of the next significant line (not
// blank, not a comment), line is the same, and col its indentation; col is -1 at the end of a
// document: the end of the stream, a "---" line (docStart), or something the reader declines (bad).
type fastReader struct {
	src      string
	i        int
	line     int
	col      int
	docStart bool
	bad      bool
	depth    int
	made     int  // nodes made, against MaxYAMLNodes
	over     bool // bad because made passed MaxYAMLNodes

	anchor  string                // an anchor read, for the next node made
	anchors map[string]*yaml.Node // the stream's anchors (yaml.v3 keeps them across documents)

	nodes []yaml.Node  // nodes are allocated from chunks of this
	ptrs  []*yaml.Node // and collections' Content from chunks of this
	stack []*yaml.Node // children of the collections being read
	buf   []byte       // where scalars that are not a piece of src are built
}

// nextLine moves from the line start r.i to the next significant line.
func (r *fastReader) nextLine() {
	r.col = -1
	for r.i < len(r.src) {
		j := r.i
		for j < len(r.src) && r.src[j] == ' ' {
			j++
		}
		switch {
		case j == len(r.src):
			r.i = j
			return
		case r.src[j] == '\n':
			r.i = j + 1
			continue
		case r.src[j] == '#':
			r.i = r.lineEnd(j) + 1
			continue
		}
		if j == r.i { // column 0: document markers and directives
			if r.marker(j, '-') {
				r.docStart = true
				return
			}
			if r.marker(j, '.') || r.src[j] == '%' {
				r.bad = true
				return
			}
		}
		r.line, r.col = r.i, j-r.i
		return
	}
	r.i = len(r.src)
}

// marker reports whether "---" or "..." (c three times) followed by a blank starts at j.
func (r *fastReader) marker(j int, c byte) bool {
	return j+3 <= len(r.src) && r.src[j] == c && r.src[j+1] == c && r.src[j+2] == c && r.blankz(j+3)
}

// blankz reports whether j is a space, a line break or the end, as yaml.v3's is_blankz (without
// tabs, which fastReadable refused).
func (r *fastReader) blankz(j int) bool {
	return j >= len(r.src) || r.src[j] == ' ' || r.src[j] == '\n'
}

func (r *fastReader) lineEnd(j int) int {
	if k := strings.IndexByte(r.src[j:], '\n'); k >= 0 {
		return j + k
	}
	return len(r.src)
}

func (r *fastReader) skipSpaces(j int) int {
	for j < len(r.src) && r.src[j] == ' ' {
		j++
	}
	return j
}

// endLine checks that only spaces and a comment follow j on its line, and moves to the next
// significant line. A '#' must follow a space to start a comment (yaml.v3 takes `"a"#b` as a
// comment, the specification does not: declined).
func (r *fastReader) endLine(j int) bool {
	j = r.skipSpaces(j)
	if j < len(r.src) && r.src[j] != '\n' {
		if r.src[j] != '#' || j == 0 || r.src[j-1] != ' ' {
			return false
		}
		j = r.lineEnd(j)
	}
	r.i = min(j+1, len(r.src))
	r.nextLine()
	return true
}

// node allocates a node; it takes the anchor read before it, as yaml.v3 registers an anchor when
// it makes the node (a collection's before its children, so they may refer to it).
// Fields are set one by one into the zeroed chunk: copying a whole yaml.Node costs write barriers
// for all its pointers.
func (r *fastReader) node(kind yaml.Kind, style yaml.Style, tag, value string) *yaml.Node {
	if r.made++; r.made > MaxYAMLNodes {
		// Declined from here on, and refused by fastParseObjects: the nodes made so far are
		// what yaml.v3 would make of the same text.
		r.bad, r.over = true, true
	}
	if len(r.nodes) == cap(r.nodes) {
		r.nodes = make([]yaml.Node, 0, r.chunk())
	}
	r.nodes = r.nodes[:len(r.nodes)+1]
	p := &r.nodes[len(r.nodes)-1]
	p.Kind, p.Style, p.Tag, p.Value = kind, style, tag, value
	if r.anchor != "" {
		if r.anchors == nil {
			r.anchors = map[string]*yaml.Node{}
		}
		p.Anchor = r.anchor
		r.anchors[r.anchor] = p
		r.anchor = ""
	}
	return p
}

func (r *fastReader) scalar(style yaml.Style, tag, value string) *yaml.Node {
	return r.node(yaml.ScalarNode, style, tag, value)
}

// null is an empty value, as yaml.v3 makes it.
func (r *fastReader) null() *yaml.Node { return r.scalar(0, "!!null", "") }

func (r *fastReader) plain(v string) *yaml.Node { return r.scalar(0, plainTag(v), v) }

// chunk is how many nodes to allocate at once: about what the rest of the text holds (a node
// takes about 12 bytes of a manifest; a chunk too small is followed by another), at most 256.
func (r *fastReader) chunk() int {
	return min((len(r.src)-r.i)/12+16, 256)
}

// open makes a collection node (its children follow) and counts its nesting; nil when it is too
// deep for the reader.
func (r *fastReader) open(kind yaml.Kind, tag string, style yaml.Style) *yaml.Node {
	if r.depth++; r.depth > fastMaxDepth {
		return nil
	}
	return r.node(kind, style, tag, "")
}

// close gives the collection n the children stacked since mark.
func (r *fastReader) close(n *yaml.Node, mark int) *yaml.Node {
	kids := r.stack[mark:]
	var content []*yaml.Node
	if len(kids) > 0 {
		if cap(r.ptrs)-len(r.ptrs) < len(kids) {
			r.ptrs = make([]*yaml.Node, 0, max(len(kids), r.chunk()))
		}
		n := len(r.ptrs)
		r.ptrs = append(r.ptrs, kids...)
		content = r.ptrs[n : n+len(kids) : n+len(kids)]
	}
	r.stack = r.stack[:mark]
	r.depth--
	n.Content = content
	return n
}

// anchorAt reads an anchor (&name) at j, for the next node, and returns the position after the
// blanks that follow it, or -1.
func (r *fastReader) anchorAt(j int) int {
	name, end := r.name(j + 1)
	if name == "" || r.anchor != "" || !r.blankz(end) {
		return -1
	}
	r.anchor = name
	return r.skipSpaces(end)
}

// alias reads an alias (*name) at j; end is the position after its name, or -1 when the anchor
// is unknown (yaml.v3's error) or an anchor was put on the alias.
func (r *fastReader) alias(j int) (n *yaml.Node, end int) {
	name, end := r.name(j + 1)
	target := r.anchors[name]
	if name == "" || target == nil || r.anchor != "" {
		return nil, -1
	}
	n = r.node(yaml.AliasNode, 0, "", name)
	n.Alias = target
	return n, end
}

// name reads an anchor's name at j: yaml.v3's is_alpha characters.
func (r *fastReader) name(j int) (string, int) {
	k := j
	for k < len(r.src) {
		c := r.src[k]
		if !(c >= '0' && c <= '9' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c == '_' || c == '-') {
			break
		}
		k++
	}
	return r.src[j:k], k
}

// plainTag is the tag yaml.v3 gives a plain scalar: resolve("", v) in its resolve.go, reached
// through Node.ShortTag, which calls exactly that for an untagged plain scalar. resolve looks
// further only at text whose first byte is in its resolveTable (signs, digits, '.', '<' and the
// first letters of its words); everything else is a string, which is decided here without the call.
// So are the other common cases, where resolve's rules are simple and its cost is not (a deferred
// function, a map, and for text such as 500m or 2.8.1 a regular expression): the words of its
// resolveMap, decimal integers, and text that starts with a digit but cannot be a number.
// TestPlainTagMatchesYAMLv3 and FuzzFastReaderMatchesYAMLv3 compare it with resolve.
func plainTag(v string) string {
	if v == "" {
		return "!!null"
	}
	switch c := v[0]; {
	case c >= '0' && c <= '9':
		if tag := numericTag(v); tag != "" {
			return tag
		}
	case c == '+' || c == '-' || c == '.':
	case strings.IndexByte("yYnNtTfFoO~<", c) >= 0:
		// resolve looks these up in its resolveMap, and takes anything not there for a string.
		switch v {
		case "true", "True", "TRUE", "false", "False", "FALSE":
			return "!!bool"
		case "~", "null", "Null", "NULL":
			return "!!null"
		case "<<":
			return "!!merge"
		}
		return "!!str"
	default:
		return "!!str"
	}
	n := yaml.Node{Kind: yaml.ScalarNode, Value: v}
	return n.ShortTag()
}

// numericTag is resolve's tag for text that starts with a digit, where it is simple to decide, or
// "" (resolve decides): a decimal integer is !!int; text with a byte no integer (in any base
// ParseInt reads) or float has, or with two dots, is !!str, unless it may be a timestamp.
func numericTag(v string) string {
	if decimalInt(v) {
		return "!!int"
	}
	if len(v) > 4 && v[4] == '-' {
		return "" // maybe a timestamp (2006-01-02...)
	}
	dots := 0
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c >= '0' && c <= '9', c >= 'a' && c <= 'f', c >= 'A' && c <= 'F',
			c == 'x', c == 'X', c == 'o', c == 'O', c == '_', c == '+', c == '-':
		case c == '.':
			dots++
		default:
			return "!!str"
		}
	}
	if dots > 1 {
		return "!!str"
	}
	return ""
}

// decimalInt reports whether v is a decimal integer without sign or leading zero that fits an
// int64 whatever its digits (at most 18): yaml.v3 reads it as !!int with the value its text says.
func decimalInt(v string) bool {
	if v == "" || len(v) > 18 || v[0] == '0' && len(v) > 1 {
		return false
	}
	for i := 0; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' {
			return false
		}
	}
	return true
}

// root reads a document's root node at the current line: a block collection or a flow collection.
func (r *fastReader) root() *yaml.Node {
	t := r.line + r.col
	var n *yaml.Node
	if c := r.src[t]; c == '[' || c == '{' {
		var end int
		if n, end = r.flow(t); n == nil || !r.endLine(end) {
			return nil
		}
	} else {
		n = r.block()
	}
	if n == nil || r.col >= 0 || r.bad { // anything left in the document, at any indentation
		return nil
	}
	return n
}

// block reads the block collection that starts on the current line.
func (r *fastReader) block() *yaml.Node {
	t := r.line + r.col
	if r.dashAt(t) {
		return r.sequence(r.col)
	}
	anchor := r.anchor // the mapping's, not its first key's
	r.anchor = ""
	if key, after := r.keyAt(t); key != nil {
		r.anchor = anchor
		return r.mapping(r.col, key, after)
	}
	return nil // a scalar on a line of its own (multi-line plain or quoted scalars are declined)
}

// dashAt reports whether a block sequence entry ("- " or "-" at the line's end) starts at t.
func (r *fastReader) dashAt(t int) bool {
	return r.src[t] == '-' && r.blankz(t+1)
}

// mapping reads a block mapping whose keys are at column col; its first key was read already.
// yaml.v3's indentation for the values is col.
func (r *fastReader) mapping(col int, key *yaml.Node, after int) *yaml.Node {
	n := r.open(yaml.MappingNode, "!!map", 0)
	if n == nil {
		return nil
	}
	mark := len(r.stack)
	for {
		value := r.mappingValue(after, col)
		if value == nil {
			return nil
		}
		r.stack = append(r.stack, key, value)
		if r.over {
			return nil
		}
		if r.col != col {
			break
		}
		if key, after = r.keyAt(r.line + col); key == nil {
			return nil
		}
	}
	if r.col > col { // more indented than a key, after a value: yaml.v3 continues or refuses
		return nil
	}
	return r.close(n, mark)
}

// mappingValue reads the value after a key's ':' (at after - 1).
func (r *fastReader) mappingValue(after, col int) *yaml.Node {
	j := r.skipSpaces(after)
	if j < len(r.src) && r.src[j] == '&' {
		if j = r.anchorAt(j); j < 0 {
			return nil
		}
	}
	if j < len(r.src) && r.src[j] != '\n' && r.src[j] != '#' {
		return r.inlineValue(j, col)
	}
	if !r.endLine(j) {
		return nil
	}
	switch {
	case r.col > col:
		return r.block()
	case r.col == col && r.dashAt(r.line+col):
		return r.sequence(col) // a sequence at its key's indentation
	}
	return r.null()
}

// sequence reads a block sequence whose dashes are at column col. yaml.v3's indentation for the
// entries is col, also for a sequence at its parent key's indentation (it opens no level then).
func (r *fastReader) sequence(col int) *yaml.Node {
	n := r.open(yaml.SequenceNode, "!!seq", 0)
	if n == nil {
		return nil
	}
	mark := len(r.stack)
	for {
		item := r.entry(r.line+col+1, col)
		if item == nil {
			return nil
		}
		r.stack = append(r.stack, item)
		if r.over {
			return nil
		}
		if r.col != col || !r.dashAt(r.line+col) {
			break
		}
	}
	if r.col > col {
		return nil
	}
	return r.close(n, mark)
}

// entry reads a sequence entry whose text starts at j, after its dash.
func (r *fastReader) entry(j, col int) *yaml.Node {
	k := r.skipSpaces(j)
	if k < len(r.src) && r.src[k] == '&' {
		if k = r.anchorAt(k); k < 0 {
			return nil
		}
	}
	if k == len(r.src) || r.src[k] == '\n' || r.src[k] == '#' {
		if !r.endLine(k) {
			return nil
		}
		if r.col > col {
			return r.block()
		}
		return r.null()
	}
	if r.anchor == "" {
		if key, after := r.keyAt(k); key != nil {
			return r.mapping(k-r.line, key, after) // "- key: value": a mapping at the key's column
		}
	}
	return r.inlineValue(k, col)
}

// keyAt reads a simple key of a block mapping at t and returns it and the position after its ':',
// or nil when t does not start a key the reader reads.
func (r *fastReader) keyAt(t int) (*yaml.Node, int) {
	if c := r.src[t]; c == '"' || c == '\'' {
		v, style, end, multiline := r.quoted(t)
		if end < 0 || multiline || end-t > fastMaxKey || end >= len(r.src) || r.src[end] != ':' || !r.blankz(end+1) {
			return nil, -1
		}
		return r.scalar(style, "!!str", v), end + 1
	}
	if !r.plainStart(t, false) {
		return nil, -1
	}
	for j := t; j < len(r.src); j++ {
		switch r.src[j] {
		case '\n':
			return nil, -1
		case '#':
			if r.src[j-1] == ' ' { // a comment: the line is a scalar
				return nil, -1
			}
		case ':':
			if !r.blankz(j + 1) {
				continue
			}
			if j-t > fastMaxKey { // too long for yaml.v3's simple keys
				return nil, -1
			}
			return r.plain(strings.TrimRight(r.src[t:j], " ")), j + 1
		}
	}
	return nil, -1
}

// plainStart reports whether a plain scalar may start at t, as yaml.v3's fetch_next_token decides
// (in a flow collection '?' and ':' are always indicators).
func (r *fastReader) plainStart(t int, flow bool) bool {
	switch r.src[t] {
	case '-':
		return !r.blankz(t + 1)
	case '?', ':':
		return !flow && !r.blankz(t+1)
	case ',', '[', ']', '{', '}', '#', '&', '*', '!', '|', '>', '\'', '"', '%', '@', '`', ' ', '\n':
		return false
	}
	return true
}

// inlineValue reads a value that starts at j, on the line of its key or dash, and moves past it.
// indent is yaml.v3's indentation level there (for block scalars).
func (r *fastReader) inlineValue(j, indent int) *yaml.Node {
	switch c := r.src[j]; {
	case c == '"' || c == '\'':
		v, style, end, _ := r.quoted(j)
		if end < 0 || !r.endLine(end) {
			return nil
		}
		return r.scalar(style, "!!str", v)
	case c == '[' || c == '{':
		n, end := r.flow(j)
		if n == nil || !r.endLine(end) {
			return nil
		}
		return n
	case c == '|' || c == '>':
		return r.blockScalar(j, indent)
	case c == '*':
		n, end := r.alias(j)
		if n == nil || !r.endLine(end) {
			return nil
		}
		return n
	case !r.plainStart(j, false):
		return nil // anchors, aliases, tags, "- - x", ...
	}
	n, end := r.plainValue(j, indent)
	if n == nil || !r.endLine(end) {
		return nil
	}
	return n
}

// plainValue reads a plain scalar in a block collection whose indentation (yaml.v3's) is indent,
// and returns the position where its last line ends (a line break, the end, or a comment). Lines
// indented past indent continue it, folded as yaml.v3's scan_plain_scalar folds them: one line break
// is a space, n+1 line breaks are n newlines.
func (r *fastReader) plainValue(j, indent int) (*yaml.Node, int) {
	k := r.plainLine(j)
	if k < 0 {
		return nil, -1
	}
	v := strings.TrimRight(r.src[j:k], " ")
	folded := false
	for k < len(r.src) && r.src[k] == '\n' {
		next, breaks := k+1, 0 // the next line that is not empty, and the empty lines before it
		for {
			e := r.skipSpaces(next)
			if e >= len(r.src) || r.src[e] != '\n' {
				break
			}
			breaks++
			next = e + 1
		}
		t := r.skipSpaces(next)
		if t >= len(r.src) || t-next <= indent || r.src[t] == '#' {
			break // less indented, the end or a comment: the scalar ended at k
		}
		e := r.plainLine(t)
		if e < 0 {
			return nil, -1
		}
		if !folded {
			r.buf = append(r.buf[:0], v...)
			folded = true
		}
		if breaks == 0 {
			r.buf = append(r.buf, ' ')
		}
		for ; breaks > 0; breaks-- {
			r.buf = append(r.buf, '\n')
		}
		r.buf = append(r.buf, strings.TrimRight(r.src[t:e], " ")...)
		k = e
	}
	if folded {
		v = string(r.buf)
	}
	return r.plain(v), k
}

// plainLine returns where a plain scalar's text on one line ends: the line break, the end, or a
// comment; -1 at a ": ", where yaml.v3 would read a key it refuses there.
func (r *fastReader) plainLine(j int) int {
	k := j
	for ; k < len(r.src); k++ {
		c := r.src[k]
		if c == '\n' || c == '#' && k > j && r.src[k-1] == ' ' {
			return k
		}
		if c == ':' && r.blankz(k+1) {
			return -1
		}
	}
	return k
}

// quoted reads a single- or double-quoted scalar with yaml.v3's escapes and line folding; end is
// the position after the closing quote, or -1. multiline reports a scalar over several lines, which
// cannot be a key.
func (r *fastReader) quoted(t int) (v string, style yaml.Style, end int, multiline bool) {
	q := r.src[t]
	style = yaml.DoubleQuotedStyle
	if q == '\'' {
		style = yaml.SingleQuotedStyle
	}
	for j := t + 1; j < len(r.src); j++ { // most quoted scalars are one line without escapes
		c := r.src[j]
		if c == q && (q == '"' || j+1 == len(r.src) || r.src[j+1] != '\'') {
			return r.src[t+1 : j], style, j + 1, false
		}
		if c == '\n' || c == q || c == '\\' && q == '"' {
			break
		}
	}
	end = r.foldQuoted(t+1, q)
	return string(r.buf), style, end, end >= 0 && strings.IndexByte(r.src[t:end], '\n') >= 0
}

// foldQuoted is yaml.v3's scan_flow_scalar from j, after the opening quote q: it leaves the value
// in r.buf and returns the position after the closing quote, or -1.
func (r *fastReader) foldQuoted(j int, q byte) int {
	src, single := r.src, q == '\''
	r.buf = r.buf[:0]
	for {
		if src[j-1] == '\n' && (r.marker(j, '-') || r.marker(j, '.')) || j >= len(src) {
			return -1 // a document marker or the end inside the scalar: yaml.v3 refuses it
		}
		leadingBlanks := false
	chars:
		for j < len(src) && src[j] != ' ' && src[j] != '\n' {
			c := src[j]
			switch {
			case single && c == '\'' && j+1 < len(src) && src[j+1] == '\'':
				r.buf = append(r.buf, '\'')
				j += 2
			case c == q:
				break chars
			case !single && c == '\\' && j+1 < len(src) && src[j+1] == '\n':
				j += 2 // an escaped line break: the lines join without a space
				leadingBlanks = true
				break chars
			case !single && c == '\\':
				n := r.escape(j + 1)
				if n < 0 {
					return -1
				}
				j += 1 + n
			default:
				r.buf = append(r.buf, c)
				j++
			}
		}
		if j < len(src) && src[j] == q {
			return j + 1
		}
		spaces, leadingBreak, trailing := 0, false, 0
		for ; j < len(src) && (src[j] == ' ' || src[j] == '\n'); j++ {
			switch {
			case src[j] == ' ':
				if !leadingBlanks {
					spaces++
				}
			case !leadingBlanks:
				spaces, leadingBreak, leadingBlanks = 0, true, true
			default:
				trailing++
			}
		}
		if leadingBreak && trailing == 0 {
			r.buf = append(r.buf, ' ') // a single line break folds into a space
		}
		for ; trailing > 0; trailing-- {
			r.buf = append(r.buf, '\n')
		}
		for ; spaces > 0; spaces-- {
			r.buf = append(r.buf, ' ')
		}
	}
}

// escape appends the character of the escape sequence whose letter is at j (after the backslash)
// and returns how many bytes the sequence takes after the backslash, or -1. The escapes are
// yaml.v3's (scan_flow_scalar), which refuses surrogates: JSON's "\ud83d\ude00" is declined.
func (r *fastReader) escape(j int) int {
	if j >= len(r.src) {
		return -1
	}
	var s string
	switch r.src[j] {
	case '0':
		s = "\x00"
	case 'a':
		s = "\x07"
	case 'b':
		s = "\x08"
	case 't':
		s = "\x09"
	case 'n':
		s = "\x0A"
	case 'v':
		s = "\x0B"
	case 'f':
		s = "\x0C"
	case 'r':
		s = "\x0D"
	case 'e':
		s = "\x1B"
	case ' ':
		s = " "
	case '"':
		s = "\""
	case '\'':
		s = "'"
	case '\\':
		s = "\\"
	case 'N':
		s = "\u0085"
	case '_':
		s = "\u00A0"
	case 'L':
		s = "\u2028"
	case 'P':
		s = "\u2029"
	case 'x':
		return r.hexEscape(j, 2)
	case 'u':
		return r.hexEscape(j, 4)
	case 'U':
		return r.hexEscape(j, 8)
	default:
		return -1 // unknown escapes and the escaped line break
	}
	r.buf = append(r.buf, s...)
	return 1
}

func (r *fastReader) hexEscape(j, digits int) int {
	if j+1+digits > len(r.src) {
		return -1
	}
	value := 0
	for _, c := range []byte(r.src[j+1 : j+1+digits]) {
		switch {
		case c >= '0' && c <= '9':
			value = value<<4 + int(c-'0')
		case c >= 'a' && c <= 'f':
			value = value<<4 + int(c-'a'+10)
		case c >= 'A' && c <= 'F':
			value = value<<4 + int(c-'A'+10)
		default:
			return -1
		}
	}
	if value >= 0xD800 && value <= 0xDFFF || value > 0x10FFFF {
		return -1
	}
	r.buf = utf8.AppendRune(r.buf, rune(value))
	return 1 + digits
}

// blockScalar reads a literal (|) or folded (>) block scalar whose indicator is at t: a port of
// yaml.v3's scan_block_scalar and scan_block_scalar_breaks, over lines. indent is yaml.v3's
// indentation level (parser.indent) at the scalar.
func (r *fastReader) blockScalar(t, indent int) *yaml.Node {
	literal := r.src[t] == '|'
	chomping, increment, j := r.blockHeader(t + 1)
	if j < 0 {
		return nil
	}
	src := r.src
	p, ls := j, j // position and the start of its line
	ind := 0
	if increment > 0 {
		ind = indent + increment
	}
	// breaks eats indentation and empty lines, counting the line breaks into *trailing, and fixes
	// the indentation from the first lines when no indicator gave it.
	breaks := func(trailing *int) {
		maxIndent := 0
		for {
			for (ind == 0 || p-ls < ind) && p < len(src) && src[p] == ' ' {
				p++
			}
			maxIndent = max(maxIndent, p-ls)
			if p >= len(src) || src[p] != '\n' {
				break
			}
			*trailing++
			p++
			ls = p
		}
		if ind == 0 {
			ind = max(maxIndent, indent+1, 1)
		}
	}
	s := r.buf[:0]
	trailing := 0
	breaks(&trailing)
	leadingBreak, leadingBlank := false, false
	for p-ls == ind && p < len(src) {
		trailingBlank := src[p] == ' '
		if !literal && leadingBreak && !leadingBlank && !trailingBlank {
			if trailing == 0 {
				s = append(s, ' ') // fold a single line break into a space
			}
		} else if leadingBreak {
			s = append(s, '\n')
		}
		leadingBreak = false
		for ; trailing > 0; trailing-- {
			s = append(s, '\n')
		}
		leadingBlank = src[p] == ' '
		e := r.lineEnd(p)
		s = append(s, src[p:e]...)
		p = e
		if p < len(src) {
			leadingBreak = true
			p++
			ls = p
		}
		breaks(&trailing)
	}
	if chomping != -1 && leadingBreak {
		s = append(s, '\n')
	}
	if chomping == 1 {
		for ; trailing > 0; trailing-- {
			s = append(s, '\n')
		}
	}
	r.buf = s
	style := yaml.LiteralStyle
	if !literal {
		style = yaml.FoldedStyle
	}
	n := r.scalar(style, "!!str", string(s))
	r.i = ls // the first line that is not the scalar's
	if p >= len(src) {
		r.i = len(src)
	}
	r.nextLine()
	return n
}

// blockHeader reads a block scalar's indicators after its | or > at j: chomping (-1 strip, 0 clip,
// +1 keep) and the indentation increment, in either order, then an optional comment; it returns
// the start of the next line, or -1.
func (r *fastReader) blockHeader(j int) (chomping, increment, next int) {
	src := r.src
	chomp := func() {
		if j < len(src) && (src[j] == '+' || src[j] == '-') {
			chomping = 1
			if src[j] == '-' {
				chomping = -1
			}
			j++
		}
	}
	digit := func() bool {
		if j < len(src) && src[j] >= '0' && src[j] <= '9' {
			if src[j] == '0' {
				return false // yaml.v3: an indentation indicator equal to 0
			}
			increment = int(src[j] - '0')
			j++
		}
		return true
	}
	if j < len(src) && (src[j] == '+' || src[j] == '-') {
		chomp()
		if !digit() {
			return 0, 0, -1
		}
	} else {
		if !digit() {
			return 0, 0, -1
		}
		if increment > 0 {
			chomp()
		}
	}
	j = r.skipSpaces(j)
	if j < len(src) && src[j] == '#' {
		j = r.lineEnd(j)
	}
	if j < len(src) && src[j] != '\n' {
		return 0, 0, -1
	}
	return chomping, increment, min(j+1, len(src))
}

// flow reads a flow sequence or mapping of scalars, aliases and flow collections that starts at t;
// end is the position after its closing bracket. Anchors, empty keys or values, "? " and
// single-pair mappings inside sequences are declined.
func (r *fastReader) flow(t int) (n *yaml.Node, end int) {
	kind, tag, closing := yaml.SequenceNode, "!!seq", byte(']')
	if r.src[t] == '{' {
		kind, tag, closing = yaml.MappingNode, "!!map", '}'
	}
	n = r.open(kind, tag, yaml.FlowStyle)
	if n == nil {
		return nil, -1
	}
	mark := len(r.stack)
	j := r.flowSpace(t + 1)
	if j < 0 {
		return nil, -1
	}
	for j < len(r.src) && r.src[j] != closing {
		if kind == yaml.MappingNode {
			key, after := r.flowKey(j)
			if key == nil {
				return nil, -1
			}
			r.stack = append(r.stack, key)
			if j = r.flowSpace(after); j < 0 || r.src[j] == ',' || r.src[j] == '}' {
				return nil, -1 // an empty value
			}
		}
		item, after := r.flowItem(j)
		if item == nil {
			return nil, -1
		}
		r.stack = append(r.stack, item)
		if r.over {
			return nil, -1
		}
		if j = r.flowSpace(after); j < 0 {
			return nil, -1
		}
		if r.src[j] == ',' {
			if j = r.flowSpace(j + 1); j < 0 {
				return nil, -1 // yaml.v3 allows one trailing comma: the loop ends at the closing bracket
			}
		} else if r.src[j] != closing {
			return nil, -1
		}
	}
	return r.close(n, mark), j + 1
}

// flowSpace skips spaces, line breaks and comments inside a flow collection and returns the next
// character's position, or -1 at the end or a document marker (yaml.v3 checks no indentation inside
// flow collections).
func (r *fastReader) flowSpace(j int) int {
	for ; j < len(r.src); j++ {
		switch r.src[j] {
		case ' ', '\n':
			continue
		case '#':
			if r.src[j-1] != ' ' && r.src[j-1] != '\n' {
				return -1 // yaml.v3 takes "a,#b" as a comment, the specification does not
			}
			j = r.lineEnd(j)
			continue
		}
		if r.src[j-1] == '\n' && (r.marker(j, '-') || r.marker(j, '.')) {
			return -1
		}
		return j
	}
	return -1
}

func (r *fastReader) flowItem(j int) (*yaml.Node, int) {
	switch r.src[j] {
	case '[', '{':
		return r.flow(j)
	case '"', '\'':
		v, style, end, _ := r.quoted(j)
		if end < 0 {
			return nil, -1
		}
		return r.scalar(style, "!!str", v), end
	case '*':
		n, end := r.alias(j)
		if n == nil || end < len(r.src) && !r.blankz(end) && strings.IndexByte(",]}", r.src[end]) < 0 {
			return nil, -1
		}
		return n, end
	}
	if !r.plainStart(j, true) {
		return nil, -1
	}
	return r.flowPlain(j)
}

// flowKey reads a flow mapping's key at j and returns the position after its ':'. After a quoted
// key the ':' may touch the value, as in JSON; after a plain key it must be followed by a blank.
func (r *fastReader) flowKey(j int) (*yaml.Node, int) {
	var key *yaml.Node
	var end int
	switch r.src[j] {
	case '"', '\'':
		v, style, e, multiline := r.quoted(j)
		if e < 0 || multiline {
			return nil, -1
		}
		key, end = r.scalar(style, "!!str", v), r.skipSpaces(e)
	default:
		if !r.plainStart(j, true) {
			return nil, -1
		}
		if key, end = r.flowPlain(j); key == nil {
			return nil, -1
		}
		end = r.skipSpaces(end)
	}
	if end >= len(r.src) || r.src[end] != ':' || end-j > fastMaxKey {
		return nil, -1
	}
	return key, end + 1
}

// flowPlain reads a plain scalar inside a flow collection: it ends at a flow indicator, a ": " or the
// line's end. yaml.v3 would continue it on the next line unless that starts with ',', ']' or '}'.
func (r *fastReader) flowPlain(j int) (*yaml.Node, int) {
	k := j
	for ; k < len(r.src); k++ {
		c := r.src[k]
		if c == '\n' || c == ',' || c == '[' || c == ']' || c == '{' || c == '}' || c == ':' && r.blankz(k+1) {
			break
		}
		if c == '#' && r.src[k-1] == ' ' {
			break // a comment ends the scalar
		}
		if c == '?' {
			return nil, -1
		}
	}
	v := strings.TrimRight(r.src[j:k], " ")
	if k < len(r.src) && r.src[k] == '\n' {
		m := k
		for m < len(r.src) && (r.src[m] == ' ' || r.src[m] == '\n') {
			m++
		}
		if m >= len(r.src) || strings.IndexByte(",]}#", r.src[m]) < 0 {
			return nil, -1
		}
	}
	return r.plain(v), j + len(v)
}
