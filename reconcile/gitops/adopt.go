package gitops

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/core/fielddiff"
)

// AdoptYAML writes v at field f of the Kubernetes object in content (a manifest, possibly with
// several documents), changing only that node and keeping comments and layout. The field's
// parents must exist: adoption replaces a value Git already sets (or adds a leaf to an existing
// map); it does not invent structure.
func AdoptYAML(path string, content []byte, f core.Field, v core.Value) ([]byte, bool, error) {
	if f.Scheme != core.SchemeKubernetes || f.Path == "" {
		return nil, false, fmt.Errorf("%s: %s is not a Kubernetes object field", path, f)
	}
	if v.Absent() || v.IsExpr() {
		return nil, false, fmt.Errorf("%s: %s: only a literal value can be adopted, not %s", path, f, v)
	}
	var decoded any
	if err := json.Unmarshal([]byte(v.JSON()), &decoded); err != nil {
		return nil, false, fmt.Errorf("%s: %s: %w", path, f, err)
	}
	nodes, err := readNodes(content)
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", path, err)
	}
	for _, n := range nodes {
		group, _ := splitAPIVersion(n.GetApiVersion())
		if group != f.Group || n.GetKind() != f.Kind || n.GetName() != f.Name || n.GetNamespace() != f.Namespace {
			continue
		}
		toks := f.PointerTokens()
		parent, err := n.Pipe(yaml.Lookup(toks[:len(toks)-1]...))
		if err != nil || parent == nil {
			return nil, false, fmt.Errorf("%s: %s: the parent of the field does not exist in Git; adoption does not create structure", path, f)
		}
		last := toks[len(toks)-1]
		newNode, err := valueNode(decoded)
		if err != nil {
			return nil, false, fmt.Errorf("%s: %s: %w", path, f, err)
		}
		var cur *yaml.RNode
		switch parent.YNode().Kind {
		case yaml.MappingNode:
			if fld := parent.Field(last); fld != nil {
				cur = fld.Value
			}
		case yaml.SequenceNode:
			i, err := strconv.Atoi(last)
			if err != nil || i < 0 || i >= len(parent.YNode().Content) {
				return nil, false, fmt.Errorf("%s: %s: no element %q in the list", path, f, last)
			}
			cur = yaml.NewRNode(parent.YNode().Content[i])
		default:
			return nil, false, fmt.Errorf("%s: %s: the parent is a scalar", path, f)
		}
		if cur != nil && sameScalar(cur.YNode(), newNode) {
			return content, false, nil
		}
		if cur != nil && cur.YNode().Kind == yaml.ScalarNode && newNode.Kind == yaml.ScalarNode {
			// Keep the node (and its comments); change its value and tag only.
			cur.YNode().Value, cur.YNode().Tag, cur.YNode().Style = newNode.Value, newNode.Tag, newNode.Style
		} else if parent.YNode().Kind == yaml.MappingNode {
			if err := parent.PipeE(yaml.SetField(last, yaml.NewRNode(newNode))); err != nil {
				return nil, false, fmt.Errorf("%s: %s: %w", path, f, err)
			}
		} else {
			i, _ := strconv.Atoi(last)
			parent.YNode().Content[i] = newNode
		}
		out, err := writeNodes(nodes)
		if err != nil {
			return nil, false, fmt.Errorf("%s: %w", path, err)
		}
		return out, true, nil
	}
	return nil, false, fmt.Errorf("%s: no %s %s/%s in the file", path, f.Kind, f.Namespace, f.Name)
}

func splitAPIVersion(av string) (group, version string) {
	if i := bytes.LastIndexByte([]byte(av), '/'); i >= 0 {
		return av[:i], av[i+1:]
	}
	return "", av
}

func sameScalar(a, b *yaml.Node) bool {
	return a.Kind == yaml.ScalarNode && b.Kind == yaml.ScalarNode && a.Value == b.Value && a.ShortTag() == b.ShortTag()
}

// valueNode builds the YAML node for a decoded JSON value.
func valueNode(v any) (*yaml.Node, error) {
	b, err := yaml.Marshal(v)
	if err != nil {
		return nil, err
	}
	n, err := yaml.Parse(string(b))
	if err != nil {
		return nil, err
	}
	return n.YNode(), nil
}

// AdoptTF writes v into the Terraform attribute f in content, keeping the file's structure and
// comments: hclwrite replaces the attribute's expression and nothing else. Only attributes of the
// resource itself and of its nested blocks (/block/index/attr) can be set; the attribute must
// already exist.
func AdoptTF(path string, content []byte, f core.Field, v core.Value) ([]byte, bool, error) {
	if f.Scheme != core.SchemeTerraform {
		return nil, false, fmt.Errorf("%s: %s is not a Terraform attribute", path, f)
	}
	if v.Absent() || v.IsExpr() {
		return nil, false, fmt.Errorf("%s: %s: only a literal value can be adopted, not %s", path, f, v)
	}
	// hclwrite parses with hclsyntax, which recurses before any depth check: refuse first.
	if err := fielddiff.CheckHCLNesting(path, content); err != nil {
		return nil, false, err
	}
	file, diags := hclwrite.ParseConfig(content, path, hcl.InitialPos)
	if diags.HasErrors() {
		return nil, false, fmt.Errorf("%w", diags)
	}
	body := findResource(file.Body(), f.Resource)
	if body == nil {
		return nil, false, fmt.Errorf("%s: no %s in the file", path, f.Resource)
	}
	toks := f.PointerTokens()
	for len(toks) > 1 {
		if len(toks) < 3 {
			return nil, false, fmt.Errorf("%s: %s: want /attribute or /block/index/attribute", path, f)
		}
		i, err := strconv.Atoi(toks[1])
		if err != nil {
			return nil, false, fmt.Errorf("%s: %s: block index %q is not a number", path, f, toks[1])
		}
		var blocks []*hclwrite.Block
		for _, b := range body.Blocks() {
			if b.Type() == toks[0] {
				blocks = append(blocks, b)
			}
		}
		if i >= len(blocks) {
			return nil, false, fmt.Errorf("%s: %s: no block %s number %d", path, f, toks[0], i)
		}
		body, toks = blocks[i].Body(), toks[2:]
	}
	attr := body.GetAttribute(toks[0])
	if attr == nil {
		return nil, false, fmt.Errorf("%s: %s: the attribute is not set in Git; adoption does not create it", path, f)
	}
	newExpr := []byte(v.JSON()) // canonical JSON literals are valid HCL literals
	if err := fielddiff.CheckHCLExpressionNesting(path, newExpr); err != nil {
		return nil, false, fmt.Errorf("%s: value: %w", f, err)
	}
	if _, d := hclsyntax.ParseExpression(newExpr, path, hcl.InitialPos); d.HasErrors() {
		return nil, false, fmt.Errorf("%s: %s: value %s is not an HCL literal: %w", path, f, v, d)
	}
	old := bytes.TrimSpace(attr.Expr().BuildTokens(nil).Bytes())
	if bytes.Equal(old, newExpr) {
		return content, false, nil
	}
	toksNew, d := hclsyntax.LexExpression(newExpr, path, hcl.InitialPos)
	if d.HasErrors() {
		return nil, false, fmt.Errorf("%s: %s: %w", path, f, d)
	}
	var wt hclwrite.Tokens
	for _, tk := range toksNew {
		if tk.Type == hclsyntax.TokenEOF {
			continue
		}
		wt = append(wt, &hclwrite.Token{Type: tk.Type, Bytes: tk.Bytes})
	}
	// The new value keeps the old one's distance from "=" and the rest of the line its bytes.
	if old := attr.Expr().BuildTokens(nil); len(old) > 0 && len(wt) > 0 {
		wt[0].SpacesBefore = old[0].SpacesBefore
	}
	body.SetAttributeRaw(toks[0], wt)
	// Not file.Bytes(): that runs hclwrite's formatter over the whole file.
	return file.BuildTokens(nil).Bytes(), true, nil
}

func findResource(b *hclwrite.Body, addr string) *hclwrite.Body {
	for _, blk := range b.Blocks() {
		l := blk.Labels()
		var a string
		switch {
		case blk.Type() == "resource" && len(l) == 2:
			a = l[0] + "." + l[1]
		case blk.Type() == "data" && len(l) == 2:
			a = "data." + l[0] + "." + l[1]
		case blk.Type() == "module" && len(l) == 1:
			a = "module." + l[0]
		}
		if a == addr {
			return blk.Body()
		}
	}
	return nil
}
