package fielddiff

import (
	"bytes"
	"fmt"
	"path"
	"strconv"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/parleyhq/parley/core"
)

// Terraform addresses: resource "t" "n" is t.n, data "t" "n" is data.t.n, module "m" is module.m,
// variable "v" is var.v, output "o" is output.o, and each locals attribute is local.<name> (pointer
// ""). Provider and terraform blocks are settings, not resources, and are left out.
//
// Within a block, attribute a is /a; nested blocks are /<type>/<index>/... counted per type in source
// order (a dynamic "tag" block is /dynamic.tag/<index>); object literals with static keys descend
// (tags = {team = "x"} is /tags/team). Literal values are canonical JSON; any other expression
// (a reference, a function call) is its source text, normalised by hclwrite's formatter with
// comments dropped, so reformatting does not count as a change.

func parseTF(p string, content []byte) ([]leaf, error) {
	file, diags := hclsyntax.ParseConfig(content, p, hcl.InitialPos)
	if diags.HasErrors() {
		return nil, fmt.Errorf("%w", diags)
	}
	body, ok := file.Body.(*hclsyntax.Body)
	if !ok {
		return nil, fmt.Errorf("%s: not native HCL syntax", p)
	}
	module := path.Dir(p)
	t := tfParser{src: content, module: module, defined: map[string]hcl.Range{}}
	for _, blk := range body.Blocks {
		var addr string
		switch {
		case blk.Type == "resource" && len(blk.Labels) == 2:
			addr = blk.Labels[0] + "." + blk.Labels[1]
		case blk.Type == "data" && len(blk.Labels) == 2:
			addr = "data." + blk.Labels[0] + "." + blk.Labels[1]
		case blk.Type == "module" && len(blk.Labels) == 1:
			addr = "module." + blk.Labels[0]
		case blk.Type == "variable" && len(blk.Labels) == 1:
			addr = "var." + blk.Labels[0]
		case blk.Type == "output" && len(blk.Labels) == 1:
			addr = "output." + blk.Labels[0]
		case blk.Type == "locals":
			for _, a := range sortedAttrs(blk.Body) {
				if err := t.define("local."+a.Name, a.SrcRange); err != nil {
					return nil, err
				}
				if err := t.expr(core.TFField(module, "local."+a.Name, ""), a.Expr, 0); err != nil {
					return nil, err
				}
			}
			continue
		default:
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
}

func (t *tfParser) define(addr string, r hcl.Range) error {
	if first, dup := t.defined[addr]; dup {
		return fmt.Errorf("%s: %s is defined twice: at %s and at %s", first.Filename, addr, first, r)
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
		return fmt.Errorf("%s: blocks nested deeper than %d levels", b.SrcRange, maxDepth)
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
		return fmt.Errorf("%s: expression nested deeper than %d levels", e.Range(), maxDepth)
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
			for i, it := range obj.Items {
				if err := t.expr(f.Child(keys[i]), it.ValueExpr, depth+1); err != nil {
					return err
				}
			}
			return nil
		}
	}
	t.leaves = append(t.leaves, leaf{key: f.String(), field: f, value: t.value(e)})
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
			if b, err := ctyjson.Marshal(v, v.Type()); err == nil {
				if cv, err := core.ParseJSONValue(b); err == nil {
					return cv
				}
			}
		}
	}
	return core.ExprValue(normaliseExpr(e.Range().SliceBytes(t.src)))
}

// normaliseExpr drops comments and newlines from expression source and lets hclwrite's formatter
// decide the spacing, so only a change of meaning changes the text.
func normaliseExpr(src []byte) string {
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
