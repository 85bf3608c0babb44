package gitops

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/core/fielddiff"
)

// Terraform has no GitOps sync to pause, but it has the same per-field pause in the resource
// itself: lifecycle { ignore_changes = [...] } stops the next apply from reverting an attribute.
// A yield on a Terraform attribute adds the attribute to that list; a resume removes it again.
//
// Parley records its entries in a comment line in the lifecycle block, the Terraform counterpart
// of the parley.dev/gates annotation:
//
//	lifecycle {
//	  # parley.dev/gates: {"added":"lifecycle","gates":[{"field":"tf:infra/kafka//aws_autoscaling_group.consumer#/desired_capacity","until":"2026-11-22T13:00:00Z","rule":"rank"}]}
//	  ignore_changes = [desired_capacity]
//	}
//
// "added" says what Parley created (the lifecycle block, or the ignore_changes attribute in a block
// the file had), so the last resume removes exactly that and gives back the file's bytes. Entries
// the file had before are never touched: an attribute already in ignore_changes (or
// ignore_changes = all) needs no gate.
//
// The edits are token edits inside the resource block: hclwrite parses the file and finds the
// resource, the resource body's tokens are changed where the list and the marker are, and
// everything else keeps its bytes. The result must parse with hcl/v2 or the edit is refused.
// hclwrite has no list editing of its own, hence the token work here.

// TargetKindTerraform is the Target.Kind of a gate in a Terraform resource; Target.Name is the
// resource address (without an instance key: the lifecycle block covers every instance).
const TargetKindTerraform = "resource"

const tfMarker = "# " + Annotation + ": "

// Forms of TF gates: what Parley created for the first of a resource's gates.
const (
	tfAddedLifecycle     = "lifecycle"      // the whole lifecycle block
	tfAddedIgnoreChanges = "ignore_changes" // the ignore_changes attribute of the file's block
)

// tfMarkerDoc is the JSON in the marker comment.
type tfMarkerDoc struct {
	Added string `json:"added,omitempty"`
	Gates []Gate `json:"gates"`
}

// isTerraform reports whether path is a Terraform file Parley gates in.
func isTerraform(path string) bool { return strings.HasSuffix(path, ".tf") }

// tfResourceAddress strips an instance key: aws_instance.web[0] -> aws_instance.web.
func tfResourceAddress(r string) string {
	if i := strings.IndexByte(r, '['); i >= 0 {
		return r[:i]
	}
	return r
}

// tfResource finds the resource block of f in the file.
func tfResource(path string, content []byte, f core.Field) (*hclwrite.File, *hclwrite.Body, string, error) {
	if f.Scheme != core.SchemeTerraform || f.Path == "" {
		return nil, nil, "", fmt.Errorf("%s: %s is not a Terraform attribute", path, f)
	}
	addr := tfResourceAddress(f.Resource)
	if strings.HasPrefix(addr, "data.") || strings.HasPrefix(addr, "module.") {
		return nil, nil, "", fmt.Errorf("%s: %s: only a managed resource's attributes can be ignored (lifecycle ignore_changes)", path, f)
	}
	// hclwrite parses with hclsyntax, which recurses before any depth check: refuse first.
	if err := fielddiff.CheckHCLNesting(path, content); err != nil {
		return nil, nil, "", err
	}
	file, diags := hclwrite.ParseConfig(content, path, hcl.InitialPos)
	if diags.HasErrors() {
		return nil, nil, "", fmt.Errorf("%w", diags)
	}
	body := findResource(file.Body(), addr)
	if body == nil {
		return nil, nil, "", fmt.Errorf("%s: no resource %s in the file", path, addr)
	}
	return file, body, addr, nil
}

var hclIdent = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

// tfTraversal is the ignore_changes entry for f's path, read against the resource body: an
// attribute's map keys become ["key"] and list indexes [n]; a nested block's index [n] and its
// attributes .name, so /tags/Name is tags["Name"] and /ebs_block_device/0/volume_size is
// ebs_block_device[0].volume_size.
func tfTraversal(body *hclwrite.Body, f core.Field) (string, error) {
	toks := f.PointerTokens()
	if len(toks) == 0 || !hclIdent.MatchString(toks[0]) {
		return "", fmt.Errorf("%s: the path does not start with an attribute name", f)
	}
	var b strings.Builder
	b.WriteString(toks[0])
	inBlock := body.GetAttribute(toks[0]) == nil && len(blocksOf(body, toks[0])) > 0
	cur := body
	for i := 1; i < len(toks); i++ {
		t := toks[i]
		if n, err := strconv.Atoi(t); err == nil && n >= 0 && strconv.Itoa(n) == t {
			fmt.Fprintf(&b, "[%d]", n)
			if inBlock {
				blocks := blocksOf(cur, toks[i-1])
				if n >= len(blocks) {
					return "", fmt.Errorf("%s: no block %s number %d", f, toks[i-1], n)
				}
				cur = blocks[n].Body()
			}
			continue
		}
		if inBlock && hclIdent.MatchString(t) {
			b.WriteString("." + t)
			inBlock = cur.GetAttribute(t) == nil && len(blocksOf(cur, t)) > 0
			continue
		}
		q, _ := json.Marshal(t) // a string always marshals; JSON string escapes are HCL's too, except for ${ and %{
		if strings.Contains(t, "${") || strings.Contains(t, "%{") {
			return "", fmt.Errorf("%s: key %q holds a template sequence", f, t)
		}
		b.WriteString("[" + string(q) + "]")
		inBlock = false
	}
	if _, d := hclsyntax.ParseTraversalAbs([]byte(b.String()), "", hcl.InitialPos); d.HasErrors() {
		return "", fmt.Errorf("%s: %s is not a Terraform attribute path: %w", f, b.String(), d)
	}
	return b.String(), nil
}

func blocksOf(body *hclwrite.Body, typ string) []*hclwrite.Block {
	var out []*hclwrite.Block
	for _, blk := range body.Blocks() {
		if blk.Type() == typ {
			out = append(out, blk)
		}
	}
	return out
}

// AddTFGate adds g.Field's attribute to the resource's lifecycle ignore_changes and records it in
// the marker. changed is false when the attribute is already ignored (by Parley or by the file).
func AddTFGate(path string, content []byte, g Gate) ([]byte, bool, error) {
	file, body, _, err := tfResource(path, content, g.Field)
	if err != nil {
		return nil, false, err
	}
	entry, err := tfTraversal(body, g.Field)
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", path, err)
	}
	g.Form, g.AddedSyncOption = "", false
	toks := body.BuildTokens(nil)
	ed := tfEditor{toks: toks}
	lc := ed.findBlock(0, len(toks), "lifecycle")
	if lc == nil {
		if len(toks) == 0 || !lineEnd(toks[len(toks)-1]) {
			return nil, false, fmt.Errorf("%s: %s is written on one line; Parley adds a lifecycle block only to a block written over several lines", path, g.Field.Resource)
		}
		ind := ed.indent(0, len(toks), 2)
		mk, err := markerToken(tfMarkerDoc{Added: tfAddedLifecycle, Gates: []Gate{g}}, ind+2)
		if err != nil {
			return nil, false, err
		}
		ins := hclwrite.Tokens{tok(hclsyntax.TokenIdent, "lifecycle", ind), tok(hclsyntax.TokenOBrace, "{", 1), newline(), mk}
		ins = append(ins, attributeTokens("ignore_changes", entry, ind+2)...)
		ins = append(ins, tok(hclsyntax.TokenCBrace, "}", ind), newline())
		ed.toks = append(ed.toks, ins...)
		return ed.finish(path, file, body)
	}
	if !lineEnd(toks[lc.open+1]) || lc.close == 0 || !lineEnd(toks[lc.close-1]) {
		return nil, false, fmt.Errorf("%s: the lifecycle block of %s is written on one line; Parley edits only one written over several lines", path, g.Field.Resource)
	}
	mi, doc, err := ed.marker(lc.open+1, lc.close)
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", path, err)
	}
	attr := ed.findAttr(lc.open+1, lc.close, "ignore_changes")
	if attr == nil {
		if mi >= 0 {
			return nil, false, fmt.Errorf("%s: the lifecycle block of %s has Parley's marker but no ignore_changes", path, g.Field.Resource)
		}
		ind := ed.indent(lc.open+1, lc.close, toks[lc.close].SpacesBefore+2)
		mk, err := markerToken(tfMarkerDoc{Added: tfAddedIgnoreChanges, Gates: []Gate{g}}, ind)
		if err != nil {
			return nil, false, err
		}
		ins := append(hclwrite.Tokens{mk}, attributeTokens("ignore_changes", entry, ind)...)
		ed.insert(lc.close, ins...)
		return ed.finish(path, file, body)
	}
	list, err := ed.list(attr)
	if err != nil {
		return nil, false, fmt.Errorf("%s: %s: %w", path, g.Field.Resource, err)
	}
	if list == nil { // ignore_changes = all
		return content, false, nil
	}
	for _, e := range list.elems {
		if ed.text(e[0], e[1]) == entry {
			return content, false, nil // ignored already, by the file or by an earlier gate
		}
	}
	ed.addElem(list, entry)
	// The marker goes on the line before ignore_changes; an existing one is rewritten in place.
	if mi >= 0 {
		doc.Gates = append(doc.Gates, g)
		mk, err := markerToken(doc, ed.toks[mi].SpacesBefore)
		if err != nil {
			return nil, false, err
		}
		ed.toks[mi] = mk
	} else {
		mk, err := markerToken(tfMarkerDoc{Gates: []Gate{g}}, ed.toks[attr.name].SpacesBefore)
		if err != nil {
			return nil, false, err
		}
		ed.insert(attr.name, mk)
	}
	return ed.finish(path, file, body)
}

// RemoveTFGate removes Parley's ignore_changes entry for f and its record; the last one removes
// what Parley created for the first. changed is false when Parley has no gate on f there.
func RemoveTFGate(path string, content []byte, f core.Field) ([]byte, bool, error) {
	file, body, _, err := tfResource(path, content, f)
	if err != nil {
		return nil, false, err
	}
	toks := body.BuildTokens(nil)
	ed := tfEditor{toks: toks}
	lc := ed.findBlock(0, len(toks), "lifecycle")
	if lc == nil {
		return content, false, nil
	}
	mi, doc, err := ed.marker(lc.open+1, lc.close)
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", path, err)
	}
	gi := -1
	for i, g := range doc.Gates {
		if g.Field == f {
			gi = i
		}
	}
	if mi < 0 || gi < 0 {
		return content, false, nil
	}
	entry, err := tfTraversal(body, f)
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", path, err)
	}
	doc.Gates = append(doc.Gates[:gi], doc.Gates[gi+1:]...)
	if attr := ed.findAttr(lc.open+1, lc.close, "ignore_changes"); attr != nil {
		if list, err := ed.list(attr); err == nil && list != nil {
			for _, e := range list.elems {
				if ed.text(e[0], e[1]) == entry {
					ed.removeElem(list, e)
					break
				}
			}
		}
	}
	if len(doc.Gates) > 0 {
		mk, err := markerToken(doc, ed.toks[mi].SpacesBefore)
		if err != nil {
			return nil, false, err
		}
		ed.toks[mi] = mk
		return ed.finish(path, file, body)
	}
	ed.remove(mi, mi+1)
	// The last gate: take away what Parley created, if nothing else has moved in since.
	lc = ed.findBlock(0, len(ed.toks), "lifecycle")
	attr := ed.findAttr(lc.open+1, lc.close, "ignore_changes")
	if attr == nil {
		return ed.finish(path, file, body)
	}
	list, err := ed.list(attr)
	if err != nil || list == nil || len(list.elems) > 0 {
		return ed.finish(path, file, body)
	}
	switch doc.Added {
	case tfAddedLifecycle:
		if ed.onlyItem(lc.open+1, lc.close, attr) && lc.close+1 < len(ed.toks) && ed.toks[lc.close+1].Type == hclsyntax.TokenNewline {
			ed.remove(lc.name, lc.close+2) // the block, its closing brace and that line's end
		}
	case tfAddedIgnoreChanges:
		ed.remove(attr.name, attr.end+1)
	}
	return ed.finish(path, file, body)
}

// ListTFGates lists Parley's gates in a Terraform file.
func ListTFGates(path string, content []byte) ([]Listed, error) {
	if err := fielddiff.CheckHCLNesting(path, content); err != nil {
		return nil, err
	}
	file, diags := hclwrite.ParseConfig(content, path, hcl.InitialPos)
	if diags.HasErrors() {
		return nil, fmt.Errorf("%w", diags)
	}
	var out []Listed
	for _, blk := range file.Body().Blocks() {
		l := blk.Labels()
		if blk.Type() != "resource" || len(l) != 2 {
			continue
		}
		toks := blk.Body().BuildTokens(nil)
		ed := tfEditor{toks: toks}
		lc := ed.findBlock(0, len(toks), "lifecycle")
		if lc == nil {
			continue
		}
		_, doc, err := ed.marker(lc.open+1, lc.close)
		if err != nil {
			return nil, fmt.Errorf("%s: resource %s.%s: %w", path, l[0], l[1], err)
		}
		for _, g := range doc.Gates {
			out = append(out, Listed{Gate: g, Target: Target{Kind: TargetKindTerraform, Name: l[0] + "." + l[1]}})
		}
	}
	return out, nil
}

// tfEditor edits a resource body's tokens.
type tfEditor struct{ toks hclwrite.Tokens }

// span is a block or attribute found at the top level of a token range: name is the index of its
// name token; for a block open and close are its braces; for an attribute eq is the =, end the
// token that ends its line.
type span struct{ name, open, close, eq, end int }

func lineEnd(t *hclwrite.Token) bool {
	return t.Type == hclsyntax.TokenNewline || (t.Type == hclsyntax.TokenComment && bytes.HasSuffix(t.Bytes, []byte("\n")))
}

func opens(t hclsyntax.TokenType) bool {
	return t == hclsyntax.TokenOBrace || t == hclsyntax.TokenOBrack || t == hclsyntax.TokenOParen ||
		t == hclsyntax.TokenTemplateInterp || t == hclsyntax.TokenTemplateControl || t == hclsyntax.TokenOQuote || t == hclsyntax.TokenOHeredoc
}

func closes(t hclsyntax.TokenType) bool {
	return t == hclsyntax.TokenCBrace || t == hclsyntax.TokenCBrack || t == hclsyntax.TokenCParen ||
		t == hclsyntax.TokenTemplateSeqEnd || t == hclsyntax.TokenCQuote || t == hclsyntax.TokenCHeredoc
}

// items walks the top-level items of toks[from:to]: fn gets the index of each line's first token.
func (e *tfEditor) items(from, to int, fn func(i int) bool) {
	depth, start := 0, true
	for i := from; i < to; i++ {
		t := e.toks[i]
		if depth == 0 && start && t.Type != hclsyntax.TokenNewline && t.Type != hclsyntax.TokenComment {
			if !fn(i) {
				return
			}
		}
		start = false
		switch {
		case opens(t.Type):
			depth++
		case closes(t.Type):
			depth--
		}
		if depth == 0 && lineEnd(t) {
			start = true
		}
	}
}

// closeOf is the index of the token closing the one opened at i.
func (e *tfEditor) closeOf(i, to int) int {
	depth := 0
	for j := i; j < to; j++ {
		switch {
		case opens(e.toks[j].Type):
			depth++
		case closes(e.toks[j].Type):
			depth--
			if depth == 0 {
				return j
			}
		}
	}
	return -1
}

func (e *tfEditor) findBlock(from, to int, typ string) *span {
	var out *span
	e.items(from, to, func(i int) bool {
		t := e.toks[i]
		if t.Type == hclsyntax.TokenIdent && string(t.Bytes) == typ && i+1 < to && e.toks[i+1].Type == hclsyntax.TokenOBrace {
			if c := e.closeOf(i+1, to); c > 0 {
				out = &span{name: i, open: i + 1, close: c}
				return false
			}
		}
		return true
	})
	return out
}

func (e *tfEditor) findAttr(from, to int, name string) *span {
	var out *span
	e.items(from, to, func(i int) bool {
		t := e.toks[i]
		if t.Type == hclsyntax.TokenIdent && string(t.Bytes) == name && i+1 < to && e.toks[i+1].Type == hclsyntax.TokenEqual {
			s := &span{name: i, eq: i + 1, end: -1}
			depth := 0
			for j := i + 2; j < to; j++ {
				switch {
				case opens(e.toks[j].Type):
					depth++
				case closes(e.toks[j].Type):
					depth--
				}
				if depth == 0 && lineEnd(e.toks[j]) {
					s.end = j
					break
				}
			}
			if s.end > 0 {
				out = s
			}
			return false
		}
		return true
	})
	return out
}

// onlyItem reports whether attr is the only item in toks[from:to] (comments aside).
func (e *tfEditor) onlyItem(from, to int, attr *span) bool {
	only := true
	e.items(from, to, func(i int) bool {
		if i != attr.name {
			only = false
		}
		return only
	})
	return only
}

// marker finds Parley's marker comment among the top-level lines of toks[from:to].
func (e *tfEditor) marker(from, to int) (int, tfMarkerDoc, error) {
	depth := 0
	for i := from; i < to; i++ {
		t := e.toks[i]
		switch {
		case opens(t.Type):
			depth++
		case closes(t.Type):
			depth--
		}
		if depth == 0 && t.Type == hclsyntax.TokenComment && bytes.HasPrefix(t.Bytes, []byte(tfMarker)) {
			var doc tfMarkerDoc
			raw := bytes.TrimSpace(t.Bytes[len(tfMarker):])
			if err := json.Unmarshal(raw, &doc); err != nil {
				return -1, doc, fmt.Errorf("Parley's %s comment does not read: %w", Annotation, err)
			}
			return i, doc, nil
		}
	}
	return -1, tfMarkerDoc{}, nil
}

// tfList is a list expression: the brackets and each element's first and last token.
type tfList struct {
	open, close int
	elems       [][2]int
	multiline   bool
}

// list reads the ignore_changes expression: nil for "all", an error for anything but a list.
func (e *tfEditor) list(attr *span) (*tfList, error) {
	first := attr.eq + 1
	if t := e.toks[first]; t.Type == hclsyntax.TokenIdent && string(t.Bytes) == "all" && first+1 == attr.end {
		return nil, nil
	}
	if e.toks[first].Type != hclsyntax.TokenOBrack {
		return nil, fmt.Errorf("ignore_changes is not a list of attributes")
	}
	c := e.closeOf(first, len(e.toks))
	if c < 0 || c+1 != attr.end {
		return nil, fmt.Errorf("ignore_changes is not a list of attributes")
	}
	l := &tfList{open: first, close: c}
	depth, start := 0, -1
	for i := first + 1; i < c; i++ {
		t := e.toks[i]
		if lineEnd(t) || t.Type == hclsyntax.TokenComment {
			l.multiline = true
			continue
		}
		if depth == 0 && t.Type == hclsyntax.TokenComma {
			if start >= 0 {
				l.elems = append(l.elems, [2]int{start, i - 1})
			}
			start = -1
			continue
		}
		if start < 0 {
			start = i
		}
		switch {
		case opens(t.Type):
			depth++
		case closes(t.Type):
			depth--
		}
	}
	if start >= 0 {
		last := c - 1
		for last > start && (lineEnd(e.toks[last]) || e.toks[last].Type == hclsyntax.TokenComment) {
			last--
		}
		l.elems = append(l.elems, [2]int{start, last})
	}
	return l, nil
}

// text is the tokens' bytes without the spaces between them: how entries compare.
func (e *tfEditor) text(from, to int) string {
	var b strings.Builder
	for i := from; i <= to; i++ {
		if e.toks[i].Type == hclsyntax.TokenNewline || e.toks[i].Type == hclsyntax.TokenComment {
			continue
		}
		b.Write(e.toks[i].Bytes)
	}
	return b.String()
}

// addElem appends entry to the list in the list's own layout.
func (e *tfEditor) addElem(l *tfList, entry string) {
	et := entryTokens(entry)
	if !l.multiline {
		switch {
		case len(l.elems) == 0:
			e.insert(l.open+1, et...)
		case e.toks[l.elems[len(l.elems)-1][1]+1].Type == hclsyntax.TokenComma: // [a,] -> [a, c,]
			et[0].SpacesBefore = 1
			e.insert(l.elems[len(l.elems)-1][1]+2, append(et, tok(hclsyntax.TokenComma, ",", 0))...)
		default: // [a] -> [a, c]
			et[0].SpacesBefore = 1
			e.insert(l.elems[len(l.elems)-1][1]+1, append(hclwrite.Tokens{tok(hclsyntax.TokenComma, ",", 0)}, et...)...)
		}
		return
	}
	if len(l.elems) == 0 {
		et[0].SpacesBefore = e.toks[l.close].SpacesBefore + 2
		at := l.open + 1
		for at < l.close && !lineEnd(e.toks[at]) {
			at++
		}
		e.insert(at+1, append(et, tok(hclsyntax.TokenComma, ",", 0), newline())...)
		return
	}
	last := l.elems[len(l.elems)-1]
	et[0].SpacesBefore = e.toks[last[0]].SpacesBefore
	if e.toks[last[1]+1].Type == hclsyntax.TokenComma {
		at := last[1] + 2
		for at < l.close && !lineEnd(e.toks[at]) {
			at++
		}
		e.insert(at+1, append(et, tok(hclsyntax.TokenComma, ",", 0), newline())...)
		return
	}
	e.insert(last[1]+1, append(hclwrite.Tokens{tok(hclsyntax.TokenComma, ",", 0), newline()}, et...)...)
}

// removeElem removes one element and the separator that goes with it: the inverse of addElem.
func (e *tfEditor) removeElem(l *tfList, el [2]int) {
	s, end := el[0], el[1]
	if e.toks[end+1].Type == hclsyntax.TokenComma {
		end++
		if l.multiline && lineEnd(e.toks[s-1]) && e.toks[end+1].Type == hclsyntax.TokenNewline {
			end++
		}
		e.remove(s, end+1)
		return
	}
	for c := s - 1; c > l.open; c-- {
		if e.toks[c].Type == hclsyntax.TokenComma {
			e.remove(c, end+1)
			return
		}
		if !lineEnd(e.toks[c]) && e.toks[c].Type != hclsyntax.TokenComment {
			break
		}
	}
	if l.multiline && lineEnd(e.toks[s-1]) && e.toks[end+1].Type == hclsyntax.TokenNewline {
		end++
	}
	e.remove(s, end+1)
}

// indent is the indentation of the first item in toks[from:to], or def.
func (e *tfEditor) indent(from, to, def int) int {
	ind := def
	e.items(from, to, func(i int) bool {
		ind = e.toks[i].SpacesBefore
		return false
	})
	return ind
}

func (e *tfEditor) insert(at int, ts ...*hclwrite.Token) {
	e.toks = append(e.toks[:at], append(append(hclwrite.Tokens{}, ts...), e.toks[at:]...)...)
}

func (e *tfEditor) remove(from, to int) { e.toks = append(e.toks[:from], e.toks[to:]...) }

// finish writes the edited body back and checks the whole file still parses.
func (e *tfEditor) finish(path string, file *hclwrite.File, body *hclwrite.Body) ([]byte, bool, error) {
	body.Clear()
	body.AppendUnstructuredTokens(e.toks)
	// Not file.Bytes(): that runs hclwrite's formatter over the whole file.
	out := file.BuildTokens(nil).Bytes()
	if _, d := hclsyntax.ParseConfig(out, path, hcl.InitialPos); d.HasErrors() {
		return nil, false, fmt.Errorf("%s: the edited file does not parse (the edit is refused): %w", path, d)
	}
	return out, true, nil
}

func tok(t hclsyntax.TokenType, s string, spaces int) *hclwrite.Token {
	return &hclwrite.Token{Type: t, Bytes: []byte(s), SpacesBefore: spaces}
}

func newline() *hclwrite.Token { return tok(hclsyntax.TokenNewline, "\n", 0) }

func markerToken(doc tfMarkerDoc, indent int) (*hclwrite.Token, error) {
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	return tok(hclsyntax.TokenComment, tfMarker+string(b)+"\n", indent), nil
}

// entryTokens lexes an ignore_changes entry (a traversal tfTraversal built and checked).
func entryTokens(entry string) hclwrite.Tokens {
	lexed, _ := hclsyntax.LexExpression([]byte(entry), "", hcl.InitialPos)
	var out hclwrite.Tokens
	for _, t := range lexed {
		if t.Type != hclsyntax.TokenEOF {
			out = append(out, &hclwrite.Token{Type: t.Type, Bytes: t.Bytes})
		}
	}
	return out
}

// attributeTokens is the line `name = [entry]`.
func attributeTokens(name, entry string, indent int) hclwrite.Tokens {
	out := hclwrite.Tokens{tok(hclsyntax.TokenIdent, name, indent), tok(hclsyntax.TokenEqual, "=", 1), tok(hclsyntax.TokenOBrack, "[", 1)}
	out = append(out, entryTokens(entry)...)
	return append(out, tok(hclsyntax.TokenCBrack, "]", 0), newline())
}
