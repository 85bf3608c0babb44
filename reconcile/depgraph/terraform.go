package depgraph

import (
	"fmt"
	"math/big"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/core/fielddiff"
)

// maxDepth bounds how deep blocks and object literals are walked.
const maxDepth = 100

type tfFile struct {
	path string
	body *hclsyntax.Body
}

// parseTF parses one .tf file; a file that does not parse is reported and skipped.
func (b *builder) parseTF(p string, content []byte) (f tfFile, ok bool) {
	defer func() {
		// hclsyntax is robust, but a graph that answers for the rest of the repository is worth more
		// than a crash on one file.
		if r := recover(); r != nil {
			b.errs = append(b.errs, fmt.Errorf("%s: parsing failed: %v", p, r))
			ok = false
		}
	}()
	// recover cannot catch the parser's stack overflow (a fatal error): refuse deep nesting first.
	if err := fielddiff.CheckHCLNesting(p, content); err != nil {
		b.errs = append(b.errs, err)
		return tfFile{}, false
	}
	file, diags := hclsyntax.ParseConfig(content, p, hcl.InitialPos)
	if diags.HasErrors() {
		b.errs = append(b.errs, hclError(p, diags))
		return tfFile{}, false
	}
	body, isSyntax := file.Body.(*hclsyntax.Body)
	if !isSyntax {
		b.errs = append(b.errs, fmt.Errorf("%s: not native HCL syntax", p))
		return tfFile{}, false
	}
	return tfFile{path: p, body: body}, true
}

// hclError reports the first error of a failed parse as file:line:col: summary; detail.
func hclError(p string, diags hcl.Diagnostics) error {
	errs := diags.Errs()
	for _, d := range diags {
		if d.Severity != hcl.DiagError {
			continue
		}
		where := p
		if d.Subject != nil {
			where = fmt.Sprintf("%s:%d:%d", p, d.Subject.Start.Line, d.Subject.Start.Column)
		}
		msg := d.Summary
		if d.Detail != "" {
			msg += "; " + d.Detail
		}
		if len(errs) > 1 {
			msg += fmt.Sprintf(" (and %d more errors)", len(errs)-1)
		}
		return fmt.Errorf("%s: %s", where, msg)
	}
	return fmt.Errorf("%s: %w", p, diags)
}

// moduleCall is a module block of the module being read.
type moduleCall struct {
	child   string   // the called module's directory, "" when its source is not a module of this repository
	outputs []string // the child's output names
	site    string   // DIR//module.NAME
}

// terraform adds the edges of every module.
func (b *builder) terraform(modules map[string][]tfFile) {
	outputs := map[string][]string{}
	for dir, files := range modules {
		for _, f := range files {
			for _, blk := range f.body.Blocks {
				if blk.Type == "output" && len(blk.Labels) == 1 {
					outputs[dir] = append(outputs[dir], blk.Labels[0])
				}
			}
		}
	}
	dirs := make([]string, 0, len(modules))
	for dir := range modules {
		dirs = append(dirs, dir)
	}
	slices.Sort(dirs)
	for _, dir := range dirs {
		w := &tfWalker{b: b, mod: dir, calls: map[string]*moduleCall{}}
		for _, f := range modules[dir] {
			for _, blk := range f.body.Blocks {
				if blk.Type != "module" || len(blk.Labels) != 1 {
					continue
				}
				call := &moduleCall{site: dir + "//module." + blk.Labels[0]}
				if child, ok := localSource(dir, blk.Body); ok {
					if _, isModule := modules[child]; isModule {
						call.child, call.outputs = child, outputs[child]
					}
				}
				w.calls[blk.Labels[0]] = call
			}
		}
		for _, f := range modules[dir] {
			w.file(f.body)
		}
	}
}

// localSource returns the directory a module block's literal local source ("./x", "../x") names,
// when it is inside the repository.
func localSource(dir string, body *hclsyntax.Body) (string, bool) {
	a := body.Attributes["source"]
	if a == nil {
		return "", false
	}
	v, diags := a.Expr.Value(nil)
	if diags.HasErrors() || v.IsNull() || !v.IsKnown() || v.Type() != cty.String {
		return "", false
	}
	src := v.AsString()
	if !strings.HasPrefix(src, "./") && !strings.HasPrefix(src, "../") && src != "." && src != ".." {
		return "", false // a registry, Git or archive source: not this repository's files
	}
	child := path.Join(dir, src)
	if child == ".." || strings.HasPrefix(child, "../") || strings.HasPrefix(child, "/") {
		return "", false
	}
	return child, true
}

type tfWalker struct {
	b     *builder
	mod   string
	calls map[string]*moduleCall

	block   core.Field            // the block being read (Path "")
	display string                // how Via names it: "aws_x.y", "local.l"
	scope   map[string]core.Field // iteration symbols (each, count, dynamic iterators) -> the field they read
	leaves  []core.Field          // the block's fields, for the Kubernetes bridge
}

func (w *tfWalker) file(body *hclsyntax.Body) {
	for _, blk := range body.Blocks {
		if blk.Type == "locals" {
			for _, a := range sortedAttrs(blk.Body) {
				w.start("local." + a.Name)
				w.expr(w.block, a.Expr, 0)
			}
			continue
		}
		addr, ok := fielddiff.TFBlockAddress(blk)
		if !ok || blk.Type == "variable" {
			continue // variables (literal defaults), provider, terraform, moved, import, check
		}
		w.start(addr)
		w.scope["each"] = w.block.Child("for_each")
		w.scope["count"] = w.block.Child("count")
		w.body(w.block, blk.Body, 0, blk.Type)
		switch blk.Type {
		case "module":
			w.moduleArgs(blk)
		case "resource":
			w.bridge(blk)
		}
	}
}

func (w *tfWalker) start(addr string) {
	w.block = core.TFField(w.mod, addr, "")
	w.display = addr
	w.scope = map[string]core.Field{}
	w.leaves = w.leaves[:0]
}

// skipped are the arguments that name things rather than read values, by the block that holds them.
func skipped(blockType, attr string) bool {
	switch blockType {
	case "resource", "data":
		return attr == "provider"
	case "module":
		return attr == "source" || attr == "version" || attr == "providers"
	case "lifecycle":
		return attr == "ignore_changes"
	case "dynamic":
		return attr == "iterator"
	}
	return false
}

func (w *tfWalker) body(f core.Field, body *hclsyntax.Body, depth int, blockType string) {
	if depth > maxDepth {
		return
	}
	for _, a := range sortedAttrs(body) {
		if !skipped(blockType, a.Name) {
			w.expr(f.Child(a.Name), a.Expr, depth+1)
		}
	}
	counts := map[string]int{}
	for _, blk := range body.Blocks {
		typ := blk.Type
		for _, l := range blk.Labels {
			typ += "." + l
		}
		i := counts[typ]
		counts[typ]++
		child := f.Child(typ, strconv.Itoa(i))
		if blk.Type != "dynamic" || len(blk.Labels) != 1 {
			w.body(child, blk.Body, depth+1, blk.Type)
			continue
		}
		// for_each is read in the enclosing scope; content sees the iterator, named by the label
		// unless an iterator argument renames it.
		if fe := blk.Body.Attributes["for_each"]; fe != nil {
			w.expr(child.Child("for_each"), fe.Expr, depth+1)
		}
		iter := blk.Labels[0]
		if it := blk.Body.Attributes["iterator"]; it != nil {
			if name := hcl.ExprAsKeyword(it.Expr); name != "" {
				iter = name
			}
		}
		outer := w.scope
		w.scope = make(map[string]core.Field, len(outer)+1)
		for k, v := range outer {
			w.scope[k] = v
		}
		w.scope[iter] = child.Child("for_each")
		for _, a := range sortedAttrs(blk.Body) {
			if a.Name != "for_each" && a.Name != "iterator" {
				w.expr(child.Child(a.Name), a.Expr, depth+1)
			}
		}
		content := map[string]int{}
		for _, inner := range blk.Body.Blocks {
			j := content[inner.Type]
			content[inner.Type]++
			w.body(child.Child(inner.Type, strconv.Itoa(j)), inner.Body, depth+2, inner.Type)
		}
		w.scope = outer
	}
}

func sortedAttrs(b *hclsyntax.Body) []*hclsyntax.Attribute {
	attrs := make([]*hclsyntax.Attribute, 0, len(b.Attributes))
	for _, a := range b.Attributes {
		attrs = append(attrs, a)
	}
	slices.SortFunc(attrs, func(x, y *hclsyntax.Attribute) int { return x.SrcRange.Start.Byte - y.SrcRange.Start.Byte })
	return attrs
}

// expr records the dependencies of the field f set by e, entering object literals with static keys.
func (w *tfWalker) expr(f core.Field, e hclsyntax.Expression, depth int) {
	if depth > maxDepth {
		return
	}
	if obj, ok := e.(*hclsyntax.ObjectConsExpr); ok && len(obj.Items) > 0 {
		keys := make([]string, len(obj.Items))
		static := true
		for i, it := range obj.Items {
			if keys[i], static = staticKey(it.KeyExpr); !static {
				break
			}
		}
		if static {
			for i, it := range obj.Items {
				w.expr(f.Child(keys[i]), it.ValueExpr, depth+1)
			}
			return
		}
	}
	w.leaves = append(w.leaves, f)
	for _, tr := range e.Variables() {
		w.reference(f, tr)
	}
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
	if diags.HasErrors() || !v.IsKnown() || v.IsNull() || v.Type() != cty.String || v.IsMarked() {
		return "", false
	}
	return v.AsString(), true
}

// reference adds the edges for field f reading traversal tr.
func (w *tfWalker) reference(f core.Field, tr hcl.Traversal) {
	if len(tr) == 0 {
		return
	}
	via := traversalText(tr) + " is read by " + w.describe(f)
	rest := tr[1:]
	name := func(i int) (string, bool) {
		if i < len(rest) {
			if a, ok := rest[i].(hcl.TraverseAttr); ok {
				return a.Name, true
			}
		}
		return "", false
	}
	root := tr.RootName()
	if src, ok := w.scope[root]; ok {
		w.b.add(src, f, via)
		return
	}
	switch root {
	case "self", "path", "terraform", "each", "count":
		return
	case "var":
		if n, ok := name(0); ok {
			w.b.add(core.TFField(w.mod, "var."+n, ""), f, via)
		}
	case "local":
		if n, ok := name(0); ok {
			w.b.add(core.TFField(w.mod, "local."+n, pointer(rest[1:])), f, via)
		}
	case "data":
		t, ok1 := name(0)
		n, ok2 := name(1)
		if ok1 && ok2 {
			w.b.add(core.TFField(w.mod, "data."+t+"."+n, pointer(skipInstance(rest[2:]))), f, via)
		}
	case "module":
		n, ok := name(0)
		if !ok {
			return
		}
		call := w.calls[n]
		if call == nil || call.child == "" {
			w.b.add(core.TFField(w.mod, "module."+n, ""), f, via) // opaque: any argument may shape any output
			return
		}
		after := skipInstance(rest[1:])
		outs := call.outputs
		if len(after) > 0 {
			a, isAttr := after[0].(hcl.TraverseAttr)
			if !isAttr {
				return
			}
			outs = []string{a.Name}
			after = after[1:]
		} else {
			after = nil
		}
		for _, o := range outs {
			from := core.TFField(call.child, "output."+o, "/value"+pointer(after))
			w.b.edges = append(w.b.edges, edge{from: from, to: f, via: via, kind: exit, site: call.site})
		}
	default:
		if n, ok := name(0); ok {
			w.b.add(core.TFField(w.mod, root+"."+n, pointer(skipInstance(rest[1:]))), f, via)
		}
	}
}

// skipInstance drops an instance key (aws_x.y[0], aws_x.y["a"]) that follows a resource's name.
func skipInstance(steps hcl.Traversal) hcl.Traversal {
	if len(steps) > 0 {
		if _, ok := steps[0].(hcl.TraverseIndex); ok {
			return steps[1:]
		}
	}
	return steps
}

// pointer is the JSON pointer of attribute and index steps, up to the first other step (a splat)
// or key that is not a literal.
func pointer(steps hcl.Traversal) string {
	var b strings.Builder
	for _, s := range steps {
		var tok string
		switch s := s.(type) {
		case hcl.TraverseAttr:
			tok = s.Name
		case hcl.TraverseIndex:
			k, ok := keyText(s.Key)
			if !ok {
				return b.String()
			}
			tok = k
		default:
			return b.String()
		}
		b.WriteByte('/')
		b.WriteString(core.EscapePointerToken(tok))
	}
	return b.String()
}

func keyText(v cty.Value) (string, bool) {
	if v.IsNull() || !v.IsKnown() || v.IsMarked() {
		return "", false
	}
	switch v.Type() {
	case cty.String:
		return v.AsString(), true
	case cty.Number:
		if i, acc := v.AsBigFloat().Int64(); acc == big.Exact {
			return strconv.FormatInt(i, 10), true
		}
	}
	return "", false
}

// traversalText writes a traversal as Terraform source would: var.x, aws_x.y[0].id, a["k"].
func traversalText(tr hcl.Traversal) string {
	var b strings.Builder
	for _, s := range tr {
		switch s := s.(type) {
		case hcl.TraverseRoot:
			b.WriteString(s.Name)
		case hcl.TraverseAttr:
			b.WriteString("." + s.Name)
		case hcl.TraverseIndex:
			if k, ok := keyText(s.Key); ok {
				if s.Key.Type() == cty.String {
					k = strconv.Quote(k)
				}
				b.WriteString("[" + k + "]")
			} else {
				b.WriteString("[?]")
			}
		case hcl.TraverseSplat:
			b.WriteString("[*]")
		}
	}
	return b.String()
}

// describe names field f of the block being read for Via: "aws_x.y (data.POOL_MAX)", with " in DIR"
// outside the root module.
func (w *tfWalker) describe(f core.Field) string {
	s := w.display
	if toks := f.PointerTokens(); len(toks) > 0 {
		s += " (" + strings.Join(toks, ".") + ")"
	}
	if w.mod != "." {
		s += " in " + w.mod
	}
	return s
}

// moduleArgs passes each argument of a call to a module of this repository to the child's variable.
func (w *tfWalker) moduleArgs(blk *hclsyntax.Block) {
	call := w.calls[blk.Labels[0]]
	if call == nil || call.child == "" {
		return
	}
	for _, a := range sortedAttrs(blk.Body) {
		switch a.Name {
		case "source", "version", "providers", "count", "for_each", "depends_on":
			continue
		}
		via := w.display + " passes " + a.Name + " to var." + a.Name + " of module " + call.child
		if w.mod != "." {
			via = w.display + " in " + w.mod + " passes " + a.Name + " to var." + a.Name + " of module " + call.child
		}
		w.b.edges = append(w.b.edges, edge{
			from: w.block.Child(a.Name), to: core.TFField(call.child, "var."+a.Name, ""),
			via: via, kind: enter, site: call.site,
		})
	}
}

// bridgeKinds are the Terraform resources that apply a Kubernetes object, and the fields of it
// their data attributes land in.
var bridgeKinds = map[string]struct {
	kind string
	data map[string]string // Terraform attribute -> Kubernetes field
}{
	"kubernetes_config_map":    {"ConfigMap", map[string]string{"data": "data", "binary_data": "binaryData"}},
	"kubernetes_config_map_v1": {"ConfigMap", map[string]string{"data": "data", "binary_data": "binaryData"}},
	"kubernetes_secret":        {"Secret", map[string]string{"data": "data", "binary_data": "data"}},
	"kubernetes_secret_v1":     {"Secret", map[string]string{"data": "data", "binary_data": "data"}},
}

// bridge joins a kubernetes_config_map or kubernetes_secret resource's data to the object it applies.
func (w *tfWalker) bridge(blk *hclsyntax.Block) {
	k, ok := bridgeKinds[blk.Labels[0]]
	if !ok {
		return
	}
	var name, ns string
	for _, m := range blk.Body.Blocks {
		if m.Type != "metadata" {
			continue
		}
		name, _ = literalString(m.Body, "name")
		ns, _ = literalString(m.Body, "namespace")
		break
	}
	if name == "" {
		return
	}
	if ns == "" {
		ns = "default"
	}
	obj := core.K8sField("", k.kind, ns, name, "")
	for _, leaf := range w.leaves {
		toks := leaf.PointerTokens()
		if len(toks) == 0 {
			continue
		}
		field, ok := k.data[toks[0]]
		if !ok {
			continue
		}
		to := obj.Child(append([]string{field}, toks[1:]...)...)
		what := k.kind + " " + ns + "/" + name
		if len(toks) > 1 {
			what += " key " + strings.Join(toks[1:], ".")
		} else {
			what += " " + field
		}
		w.b.add(leaf, to, w.describe(leaf)+" is applied as "+what)
	}
}

func literalString(body *hclsyntax.Body, attr string) (string, bool) {
	a := body.Attributes[attr]
	if a == nil {
		return "", false
	}
	v, diags := a.Expr.Value(nil)
	if diags.HasErrors() || v.IsNull() || !v.IsKnown() || v.IsMarked() || v.Type() != cty.String {
		return "", false
	}
	return v.AsString(), true
}
