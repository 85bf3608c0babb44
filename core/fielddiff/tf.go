package fielddiff

import (
	"bytes"
	"fmt"
	"math/big"
	"strconv"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/parleyhq/parley/core"
)

// Terraform addresses: resource "t" "n" is t.n, data "t" "n" is data.t.n, module "m" is module.m,
// variable "v" is var.v (its default, type and description are fields), output "o" is output.o, and
// each locals attribute is local.<name> (pointer "", or into its object literal). Provider, terraform,
// moved, import and check blocks are settings, not resources, and set no field. The module is the
// file's directory, "." at the root. (A .tf.json file goes to the YAML reader and, having no
// apiVersion, sets no field.)
//
// Within a block, attribute a is /a (count and for_each included); nested blocks are
// /<type>/<index>/... counted per type in source order (a dynamic "tag" block is
// /dynamic.tag/<index>); object literals with static keys descend (tags = {team = "x"} is
// /tags/team); lists and tuples are one value. Literal values (no variables, no function calls:
// Value(nil) succeeds) are canonical JSON; any other expression is its source text, normalised by
// hclwrite's formatter with comments, line breaks and trailing commas dropped, so reformatting does
// not count as a change.

func parseTF(p string, content []byte) ([]leaf, error) {
	// Before hclsyntax: it recurses before anything could look at the depth.
	if err := CheckHCLNesting(p, content); err != nil {
		return nil, err
	}
	file, diags := hclsyntax.ParseConfig(content, p, hcl.InitialPos)
	if diags.HasErrors() {
		return nil, hclError(p, diags)
	}
	body, ok := file.Body.(*hclsyntax.Body)
	if !ok {
		return nil, fmt.Errorf("%s: not native HCL syntax", p)
	}
	module := moduleDir(p)
	t := tfParser{src: content, module: module, defined: map[string]hcl.Range{}}
	for _, blk := range body.Blocks {
		if blk.Type == "locals" {
			for _, a := range sortedAttrs(blk.Body) {
				if err := t.define("local."+a.Name, a.SrcRange); err != nil {
					return nil, err
				}
				if err := t.expr(core.TFField(module, "local."+a.Name, ""), a.Expr, 0); err != nil {
					return nil, err
				}
			}
			continue
		}
		addr, ok := TFBlockAddress(blk)
		if !ok {
			continue
		}
		if err := t.define(addr, blk.DefRange()); err != nil {
			return nil, err
		}
		if err := t.body(core.TFField(module, addr, ""), blk.Body, 0); err != nil {
			return nil, err
		}
	}
	return t.leaves, nil
}

type tfParser struct {
	src     []byte
	module  string
	defined map[string]hcl.Range
	leaves  []leaf
	obj     *core.Field // the resource of the last leaf (its Path empty), shared by its leaves
}

// sameResource reports whether f is a field of the resource obj.
func sameResource(obj, f core.Field) bool {
	f.Path = ""
	return obj == f
}

// pos is a range's start as file:line:col, the form editors and CI annotations understand.
func pos(r hcl.Range) string {
	return fmt.Sprintf("%s:%d:%d", r.Filename, r.Start.Line, r.Start.Column)
}

// hclError reports the first error of a failed parse as file:line:col: summary; detail.
func hclError(p string, diags hcl.Diagnostics) error {
	for _, d := range diags {
		if d.Severity != hcl.DiagError {
			continue
		}
		where := p
		if d.Subject != nil {
			where = pos(*d.Subject)
		}
		msg := d.Summary
		if d.Detail != "" {
			msg += "; " + d.Detail
		}
		if n := len(diags.Errs()) - 1; n > 0 {
			msg += fmt.Sprintf(" (and %d more errors)", n)
		}
		return fmt.Errorf("%s: %s", where, msg)
	}
	return fmt.Errorf("%s: %w", p, diags)
}

func (t *tfParser) define(addr string, r hcl.Range) error {
	if first, dup := t.defined[addr]; dup {
		return fmt.Errorf("%s: %s is defined twice: at %s and at %s", first.Filename, addr, pos(first), pos(r))
	}
	t.defined[addr] = r
	return nil
}

func sortedAttrs(b *hclsyntax.Body) []*hclsyntax.Attribute {
	attrs := make([]*hclsyntax.Attribute, 0, len(b.Attributes))
	for _, a := range b.Attributes {
		attrs = append(attrs, a)
	}
	// Source order makes errors and leaves deterministic; Parse sorts leaves by address anyway.
	for i := 1; i < len(attrs); i++ {
		for j := i; j > 0 && attrs[j].SrcRange.Start.Byte < attrs[j-1].SrcRange.Start.Byte; j-- {
			attrs[j], attrs[j-1] = attrs[j-1], attrs[j]
		}
	}
	return attrs
}

func (t *tfParser) body(f core.Field, b *hclsyntax.Body, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("%s: blocks nested deeper than %d levels", pos(b.SrcRange), maxDepth)
	}
	for _, a := range sortedAttrs(b) {
		if err := t.expr(f.Child(a.Name), a.Expr, depth+1); err != nil {
			return err
		}
	}
	counts := map[string]int{}
	for _, blk := range b.Blocks {
		typ := blk.Type
		for _, l := range blk.Labels {
			typ += "." + l
		}
		i := counts[typ]
		counts[typ]++
		if err := t.body(f.Child(typ, strconv.Itoa(i)), blk.Body, depth+1); err != nil {
			return err
		}
	}
	return nil
}

func (t *tfParser) expr(f core.Field, e hclsyntax.Expression, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("%s: expression nested deeper than %d levels", pos(e.Range()), maxDepth)
	}
	if obj, ok := e.(*hclsyntax.ObjectConsExpr); ok && len(obj.Items) > 0 {
		keys := make([]string, len(obj.Items))
		static := true
		for i, it := range obj.Items {
			k, ok := staticKey(it.KeyExpr)
			if !ok {
				static = false
				break
			}
			keys[i] = k
		}
		if static {
			last := make(map[string]int, len(keys))
			for i, k := range keys {
				last[k] = i
			}
			for i, it := range obj.Items {
				if last[keys[i]] != i {
					continue // a repeated key: the last one is the value, as when Terraform evaluates it
				}
				if err := t.expr(f.Child(keys[i]), it.ValueExpr, depth+1); err != nil {
					return err
				}
			}
			return nil
		}
	}
	if t.obj == nil || !sameResource(*t.obj, f) {
		obj := f
		obj.Path = ""
		t.obj = &obj
	}
	t.leaves = append(t.leaves, leaf{key: f.String(), obj: t.obj, path: f.Path, value: t.value(e)})
	return nil
}

// staticKey returns an object key written as a bare word or a literal string.
func staticKey(e hclsyntax.Expression) (string, bool) {
	if k, ok := e.(*hclsyntax.ObjectConsKeyExpr); ok {
		if name := hcl.ExprAsKeyword(k.Wrapped); name != "" && !k.ForceNonLiteral {
			return name, true
		}
		e = k.Wrapped
	}
	if len(e.Variables()) > 0 {
		return "", false
	}
	v, diags := e.Value(nil)
	if diags.HasErrors() || !v.IsKnown() || v.IsNull() || v.Type().FriendlyName() != "string" {
		return "", false
	}
	return v.AsString(), true
}

// value is an expression's canonical value: JSON for literals, normalised source otherwise.
func (t *tfParser) value(e hclsyntax.Expression) core.Value {
	if len(e.Variables()) == 0 {
		if v, diags := e.Value(nil); !diags.HasErrors() && v.IsWhollyKnown() {
			if cv, ok := primitiveValue(v); ok {
				return cv
			}
			if b, err := ctyjson.Marshal(v, v.Type()); err == nil {
				if cv, err := core.ParseJSONValue(b); err == nil {
					return cv
				}
			}
		}
	}
	return core.ExprValue(normaliseExpr(e.Range().SliceBytes(t.src)))
}

// primitiveValue is the canonical JSON of a string, bool or integer without the detour through
// ctyjson, which formats every number through a 512-bit big.Float (a third of ParseTF's time).
func primitiveValue(v cty.Value) (core.Value, bool) {
	if v.IsNull() || v.IsMarked() {
		return core.Value{}, false
	}
	switch v.Type() {
	case cty.String:
		return core.CanonicalJSONValue(jsonString(v.AsString())), true
	case cty.Bool:
		return boolValue(v.True()), true
	case cty.Number:
		if i, acc := v.AsBigFloat().Int64(); acc == big.Exact {
			return core.CanonicalJSONValue(strconv.FormatInt(i, 10)), true
		}
	}
	return core.Value{}, false
}

// normaliseExpr drops comments and newlines from expression source and lets hclwrite's formatter
// decide the spacing, so only a change of meaning changes the text. A bare reference
// (var.region, aws_vpc.main.id), the most common expression by far, is already in that form: it is
// taken as it is instead of lexed twice (a tenth of a Terraform repository's first index).
func normaliseExpr(src []byte) string {
	if isBareReference(src) {
		return string(src)
	}
	return formatExpr(src)
}

// isBareReference reports whether src is identifiers joined by single dots, nothing else: one token
// per identifier and dot, which the formatter never spaces (FuzzBareReferenceNeedsNoFormatting).
// HCL identifiers may hold '-' and digits after their first character.
func isBareReference(src []byte) bool {
	segmentStart := true
	for _, c := range src {
		switch {
		case c == '.':
			if segmentStart {
				return false
			}
			segmentStart = true
		case c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z':
			segmentStart = false
		case '0' <= c && c <= '9' || c == '-':
			if segmentStart {
				return false
			}
		default:
			return false
		}
	}
	return len(src) > 0 && !segmentStart
}

// formatExpr is normaliseExpr's general case: lex, drop layout, format.
func formatExpr(src []byte) string {
	toks, diags := hclsyntax.LexExpression(src, "", hcl.InitialPos)
	if diags.HasErrors() {
		return string(bytes.TrimSpace(src))
	}
	kept := toks[:0:0]
	for _, tok := range toks {
		switch tok.Type {
		case hclsyntax.TokenComment, hclsyntax.TokenNewline, hclsyntax.TokenEOF:
			continue
		}
		kept = append(kept, tok)
	}
	var b bytes.Buffer
	prevEnd := 0
	for i, tok := range kept {
		// A trailing comma before a closing bracket or brace is layout, not meaning.
		if tok.Type == hclsyntax.TokenComma && i+1 < len(kept) &&
			(kept[i+1].Type == hclsyntax.TokenCBrack || kept[i+1].Type == hclsyntax.TokenCBrace) {
			continue
		}
		// Tokens that touch in the source (inside a template, around a dot) must keep touching;
		// any gap (spaces, comments, newlines) becomes one space for the formatter to settle.
		if b.Len() > 0 && tok.Range.Start.Byte > prevEnd {
			b.WriteByte(' ')
		}
		b.Write(tok.Bytes)
		prevEnd = tok.Range.End.Byte
	}
	return string(bytes.TrimSpace(hclwrite.Format(b.Bytes())))
}

// TFBlockAddress is the address a top-level Terraform block has in field addresses:
// TYPE.NAME for a resource, data.TYPE.NAME, module.NAME, var.NAME for a variable, output.NAME.
// It is false for other blocks (locals, provider, terraform, moved, import, check).
func TFBlockAddress(blk *hclsyntax.Block) (string, bool) {
	switch {
	case blk.Type == "resource" && len(blk.Labels) == 2:
		return blk.Labels[0] + "." + blk.Labels[1], true
	case blk.Type == "data" && len(blk.Labels) == 2:
		return "data." + blk.Labels[0] + "." + blk.Labels[1], true
	case blk.Type == "module" && len(blk.Labels) == 1:
		return "module." + blk.Labels[0], true
	case blk.Type == "variable" && len(blk.Labels) == 1:
		return "var." + blk.Labels[0], true
	case blk.Type == "output" && len(blk.Labels) == 1:
		return "output." + blk.Labels[0], true
	}
	return "", false
}
