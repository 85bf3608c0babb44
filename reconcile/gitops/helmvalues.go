package gitops

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	yamlv3 "go.yaml.in/yaml/v3"
	"helm.sh/helm/v3/pkg/chartutil"
	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/reconcile/internal/yamlvalue"
)

// Adoption at the source, for an object a chart in the repository renders: the live value goes
// into the release's values (a HelmRelease's spec.values), at the key that produces the field.
// The key is found by rendering, not by reading templates: each scalar of the release's values
// (the chart's values.yaml under the release's own) is set to the wanted value in turn, and a key
// maps when that rendering gives the field the wanted value and leaves every other field of the
// object as it was. Exactly one key must map; otherwise nothing is guessed.

// ValuesKey is a path of keys into a release's values, such as ["resources", "requests", "cpu"].
type ValuesKey []string

func (k ValuesKey) String() string { return strings.Join(k, ".") }

// HelmValuesKey finds the key of the release's values that produces f's value, by rendering: the
// one key whose change to want renders f as want and changes nothing else in f's object. It
// returns every key that maps when there is not exactly one, and the release's manager.
func (inv *Inventory) HelmValuesKey(f core.Field, want core.Value) (key ValuesKey, mapping []ValuesKey, m Manager, err error) {
	p := inv.objects[objectKey{f.Group, f.Kind, f.Namespace, f.Name}]
	if p == nil || p.release == nil {
		return nil, nil, Manager{}, fmt.Errorf("%s is not rendered from a chart in the repository", objectName(f))
	}
	m = inv.managers[p.managers[0]]
	var wantVal any
	if err := json.Unmarshal([]byte(want.JSON()), &wantVal); err != nil || want.IsExpr() {
		return nil, nil, m, fmt.Errorf("only a literal value can be written into values, not %s", want)
	}
	d := &discovery{files: inv.files, helm: inv.helm}
	base, err := d.render(p.release)
	if err != nil {
		return nil, nil, m, err
	}
	before := renderedObject(base, f)
	chartVals, err := releaseValues(d, p.release)
	if err != nil {
		return nil, nil, m, err
	}
	for _, k := range scalarKeys(chartVals, nil) {
		h := *p.release
		h.values = chartutil.CoalesceTables(setKey(nil, k, wantVal), copyMap(p.release.values))
		docs, err := d.render(&h)
		if err != nil {
			continue // a value of the wrong type for the templates: not this key
		}
		after := renderedObject(docs, f)
		if after == nil {
			continue
		}
		if v, ok := valueAt(after, f); !ok || !v.Equal(want) {
			continue
		}
		if !onlyFieldDiffers(before, after, f) {
			continue
		}
		mapping = append(mapping, k)
	}
	if len(mapping) != 1 {
		return nil, mapping, m, nil
	}
	return mapping[0], mapping, m, nil
}

// releaseValues is the chart's values.yaml with the release's values over it.
func releaseValues(d *discovery, h *helmSource) (map[string]any, error) {
	var chartVals map[string]any
	if b, ok := d.files[joinDir(h.chartDir, "values.yaml")]; ok {
		var err error
		if chartVals, err = unmarshalStringMap(b); err != nil {
			return nil, fmt.Errorf("%s/values.yaml: %w", h.chartDir, err)
		}
	}
	return chartutil.CoalesceTables(copyMap(h.values), chartVals), nil
}

func joinDir(dir, name string) string {
	if dir == "." {
		return name
	}
	return dir + "/" + name
}

// scalarKeys lists the paths to every scalar (or list) in a values tree, sorted.
func scalarKeys(m map[string]any, prefix ValuesKey) []ValuesKey {
	var out []ValuesKey
	for _, k := range slices.Sorted(maps.Keys(m)) {
		p := append(append(ValuesKey(nil), prefix...), k)
		if sub, ok := m[k].(map[string]any); ok && len(sub) > 0 {
			out = append(out, scalarKeys(sub, p)...)
			continue
		}
		out = append(out, p)
	}
	return out
}

func setKey(m map[string]any, k ValuesKey, v any) map[string]any {
	if m == nil {
		m = map[string]any{}
	}
	if len(k) == 1 {
		m[k[0]] = v
		return m
	}
	sub, _ := m[k[0]].(map[string]any)
	m[k[0]] = setKey(sub, k[1:], v)
	return m
}

func copyMap(m map[string]any) map[string]any {
	b, _ := json.Marshal(m)
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	if out == nil {
		out = map[string]any{}
	}
	return out
}

// renderedObject is f's object among a rendering's documents, or nil.
func renderedObject(docs []renderedDoc, f core.Field) *yamlv3.Node {
	for _, r := range docs {
		if r.doc.key == (objectKey{f.Group, f.Kind, f.Namespace, f.Name}) {
			return r.doc.node
		}
	}
	return nil
}

// onlyFieldDiffers reports whether two renderings of an object differ in f's value alone.
func onlyFieldDiffers(before, after *yamlv3.Node, f core.Field) bool {
	b, errB := yamlvalue.NodeValue(before)
	a, errA := yamlvalue.NodeValue(after)
	if errB != nil || errA != nil {
		return false
	}
	drop := func(v any) any {
		toks := f.PointerTokens()
		cur := v
		for i, t := range toks {
			last := i == len(toks)-1
			switch c := cur.(type) {
			case map[string]any:
				if last {
					delete(c, t)
					return v
				}
				cur = c[t]
			case []any:
				n, err := strconv.Atoi(t)
				if err != nil || n < 0 || n >= len(c) {
					return v
				}
				if last {
					c[n] = nil
					return v
				}
				cur = c[n]
			default:
				return v
			}
		}
		return v
	}
	bj, _ := json.Marshal(drop(b))
	aj, _ := json.Marshal(drop(a))
	return string(bj) == string(aj)
}

// AdoptHelmValue writes v at key into the HelmRelease t's spec.values, keeping the file's layout
// and comments (kyaml), and refuses an edit helm-controller's types would not read.
func AdoptHelmValue(path string, content []byte, t Target, key ValuesKey, v core.Value) ([]byte, bool, error) {
	if t.Kind != KindHelmRelease {
		return nil, false, fmt.Errorf("%s: %s: values are written only into a HelmRelease", path, t)
	}
	var decoded any
	if err := json.Unmarshal([]byte(v.JSON()), &decoded); err != nil || v.IsExpr() || v.Absent() {
		return nil, false, fmt.Errorf("%s: only a literal value can be written into values, not %s", path, v)
	}
	fieldPath := append([]string{"spec", "values"}, key...)
	// edit finds the HelmRelease, decodes it with helm-controller's types before and after, and
	// writes the file only when something changed; the gates are not touched.
	return edit(path, content, t, func(n *yaml.RNode, gates []Gate) ([]Gate, bool, error) {
		if cur, _ := n.Pipe(yaml.Lookup(fieldPath...)); cur != nil {
			if s, err := cur.String(); err == nil {
				if have, err := yamlvalue.Unmarshal([]byte(s)); err == nil {
					if hj, _ := json.Marshal(have); string(hj) == v.JSON() {
						return gates, false, nil
					}
				}
			}
		}
		newNode, err := valueNode(decoded)
		if err != nil {
			return nil, false, err
		}
		parent, err := lookupCreate(n, yaml.MappingNode, fieldPath[:len(fieldPath)-1]...)
		if err != nil {
			return nil, false, fmt.Errorf("spec.values.%s: %w", key, err)
		}
		if err := parent.PipeE(yaml.SetField(fieldPath[len(fieldPath)-1], yaml.NewRNode(newNode))); err != nil {
			return nil, false, fmt.Errorf("spec.values.%s: %w", key, err)
		}
		return gates, true, nil
	}, nil)
}

// objectName is "Deployment prod/web".
func objectName(f core.Field) string {
	if f.Namespace == "" {
		return f.Kind + " " + f.Name
	}
	return f.Kind + " " + f.Namespace + "/" + f.Name
}

// Where an adopted value is written, for a release of a chart in the repository.
const (
	ValuesInFile        = "values-file"        // a values file of the repository
	ValuesInObject      = "values-object"      // an Argo CD source's helm.valuesObject
	ValuesInHelmRelease = "helmrelease-values" // a Flux HelmRelease's spec.values
)

// ValuesTarget is where an adopted Helm value is written: a values file of the repository, or
// the Application's (ApplicationSet template's) helm.valuesObject, or a HelmRelease's spec.values.
type ValuesTarget struct {
	File string // repository path of the file to edit
	Kind string // ValuesInFile, ValuesInObject or ValuesInHelmRelease
	// Target is the Application, ApplicationSet or HelmRelease of the release (for a values file,
	// the one whose source lists it).
	Target Target
	// Source is, for an Argo CD release, which source of the Application (of the ApplicationSet's
	// template) it is: an index into spec.sources, -1 for spec.source. -1 for a HelmRelease.
	Source int
}

// HelmValuesTarget says where the value of key (HelmValuesKey's answer for f) is written so that
// the release renders it.
//
// A Flux HelmRelease takes it in its spec.values. An Argo CD source passes Helm its valueFiles in
// order, then helm.valuesObject (or, without one, the helm.values string), later winning; so the
// key goes where the release already sets it last: into helm.valuesObject if that sets it, into
// the last listed values file that sets it otherwise. A key only helm.values sets is an error:
// Parley does not rewrite a YAML string inside YAML. A key no values of the release set goes into
// helm.valuesObject when the source has one or lists no values files, else into the last listed
// values file. The chart's values.yaml is the default of every release of the chart and is written
// only when the source lists it in valueFiles; a values file another release also lists is not
// written either, nor is a valuesObject created next to a helm.values string (Argo CD would then
// ignore the string), nor an ApplicationSet template's valuesObject written when the template
// generates several releases from the repository.
func (inv *Inventory) HelmValuesTarget(f core.Field, key ValuesKey) (ValuesTarget, error) {
	p := inv.objects[objectKey{f.Group, f.Kind, f.Namespace, f.Name}]
	if p == nil || p.release == nil {
		return ValuesTarget{}, fmt.Errorf("%s is not rendered from a chart in the repository", objectName(f))
	}
	if len(key) == 0 {
		return ValuesTarget{}, fmt.Errorf("%s: no values key", objectName(f))
	}
	if len(p.managers) > 1 {
		var names []string
		for _, i := range p.managers {
			names = append(names, inv.managers[i].Target.String())
		}
		return ValuesTarget{}, fmt.Errorf("%s is rendered by several releases (%s): writing one's values would leave the others", objectName(f), strings.Join(names, ", "))
	}
	m := inv.managers[p.managers[0]]
	h := p.release
	if !h.argo {
		if m.Target.Kind != KindHelmRelease {
			return ValuesTarget{}, fmt.Errorf("%s: %s is not a HelmRelease or an Argo CD Helm source", objectName(f), m.Target)
		}
		return ValuesTarget{File: m.File, Kind: ValuesInHelmRelease, Target: m.Target, Source: -1}, nil
	}
	src, err := inv.argoSourceIndex(m, h)
	if err != nil {
		return ValuesTarget{}, fmt.Errorf("%s: %s in %s: %w", objectName(f), m.Target, m.File, err)
	}
	srcName := sourceField(src)
	if m.Target.Kind == "ApplicationSet" {
		srcName = "spec.template." + srcName
	}
	where := fmt.Sprintf("%s's %s", m.Target, srcName)
	object := func() (ValuesTarget, error) {
		if m.Target.Kind == "ApplicationSet" {
			if charts := inv.chartPaths(m); len(charts) > 1 {
				return ValuesTarget{}, fmt.Errorf("%s: the key %s belongs in %s.helm.valuesObject, which is the template of every Application the ApplicationSet generates (charts %s): writing it would change them all",
					objectName(f), key, where, strings.Join(charts, ", "))
			}
		}
		return ValuesTarget{File: m.File, Kind: ValuesInObject, Target: m.Target, Source: src}, nil
	}
	file := func(name string) (ValuesTarget, error) {
		return ValuesTarget{File: name, Kind: ValuesInFile, Target: m.Target, Source: src}, nil
	}
	if h.hasObject && hasValuesKey(h.valuesObject, key) {
		return object()
	}
	if h.hasValues && !h.hasObject && hasValuesKey(h.valuesString, key) {
		return ValuesTarget{}, fmt.Errorf("%s: the key %s is set in %s.helm.values, a YAML string, which Parley does not rewrite: set it there by hand, or move the values into helm.valuesObject",
			objectName(f), key, where)
	}
	shared := inv.sharedValueFiles(h)
	last := -1
	for i, name := range h.valueFiles {
		vals, err := unmarshalStringMap(inv.files[name])
		if err != nil {
			return ValuesTarget{}, fmt.Errorf("%s: values file %s: %w", objectName(f), name, err)
		}
		if hasValuesKey(vals, key) {
			last = i
		}
	}
	if last >= 0 && shared[h.valueFiles[last]] == "" {
		return file(h.valueFiles[last])
	}
	// No values file Parley may write sets the key: it goes where it overrides every file.
	canObject := h.hasObject || !h.hasValues // a new valuesObject would silence helm.values
	if h.hasObject || len(h.valueFiles) == 0 {
		if canObject {
			return object()
		}
		return ValuesTarget{}, fmt.Errorf("%s: %s has helm.values, a YAML string, and no values file: Parley does not rewrite the string, and a helm.valuesObject next to it would make Argo CD ignore it; set %s by hand",
			objectName(f), where, key)
	}
	lastFile := h.valueFiles[len(h.valueFiles)-1]
	if shared[lastFile] == "" {
		return file(lastFile)
	}
	if canObject {
		return object()
	}
	return ValuesTarget{}, fmt.Errorf("%s: %s's last values file %s is also a values file of %s, and %s has helm.values, a YAML string, next to which a helm.valuesObject would make Argo CD ignore it; set %s by hand",
		objectName(f), where, lastFile, shared[lastFile], where, key)
}

// sourceField names an Argo CD source: spec.source, or spec.sources[i].
func sourceField(i int) string {
	if i < 0 {
		return "spec.source"
	}
	return fmt.Sprintf("spec.sources[%d]", i)
}

// hasValuesKey reports whether a values tree sets key (to anything, null included).
func hasValuesKey(m map[string]any, key ValuesKey) bool {
	cur := m
	for i, k := range key {
		v, ok := cur[k]
		if !ok {
			return false
		}
		if i == len(key)-1 {
			return true
		}
		if cur, ok = v.(map[string]any); !ok {
			return false
		}
	}
	return false
}

// releases lists every release the inventory rendered an object of.
func (inv *Inventory) releases() map[*helmSource]int {
	out := map[*helmSource]int{}
	for _, p := range inv.objects {
		if p.release != nil && len(p.managers) > 0 {
			out[p.release] = p.managers[0]
		}
	}
	return out
}

// sharedValueFiles maps each of h's values files that another release also lists to that
// release's manager: editing such a file changes that release too.
func (inv *Inventory) sharedValueFiles(h *helmSource) map[string]string {
	out := map[string]string{}
	for r, m := range inv.releases() {
		if r == h {
			continue
		}
		for _, name := range r.valueFiles {
			if slices.Contains(h.valueFiles, name) && out[name] == "" {
				out[name] = inv.managers[m].Target.String()
			}
		}
	}
	return out
}

// chartPaths lists the directories holding a chart among those a manager applies.
func (inv *Inventory) chartPaths(m Manager) []string {
	var out []string
	for _, dir := range m.Paths {
		if _, ok := inv.files[joinDir(dir, "Chart.yaml")]; ok {
			out = append(out, dir)
		}
	}
	return out
}

// argoSourceIndex finds which source of the manager's Application (of its ApplicationSet's
// template) the release h is, as discovery matched it: an index into spec.sources, -1 for
// spec.source.
func (inv *Inventory) argoSourceIndex(m Manager, h *helmSource) (int, error) {
	if h.source != sourceUnknown {
		return h.source, nil
	}
	docs, err := readDocuments(inv.files[m.File])
	if err != nil {
		return 0, err
	}
	var spec *yamlv3.Node
	for _, d := range docs {
		if d.key.kind == m.Target.Kind && d.key.name == m.Target.Name && d.key.namespace == m.Target.Namespace {
			spec = field(d.node, "spec")
			if m.Target.Kind == "ApplicationSet" {
				spec = field(field(spec, "template"), "spec")
			}
			break
		}
	}
	if spec == nil {
		return 0, fmt.Errorf("no spec")
	}
	var s argoAppSpec
	if err := decodeSpec(spec, &s); err != nil {
		return 0, fmt.Errorf("spec: %w", err)
	}
	type numbered struct {
		i   int
		src argoSource
	}
	var all []numbered
	if s.Source != nil {
		all = append(all, numbered{-1, *s.Source})
	}
	for i, src := range s.Sources {
		all = append(all, numbered{i, src})
	}
	var found []int
	for _, c := range all {
		if c.src.Chart != "" || (c.src.Path == "" && c.src.Ref != "") {
			continue
		}
		p := c.src.Path
		if m.Target.Kind == "ApplicationSet" {
			if p = substitutePath(p, h.chartDir); strings.Contains(p, "{{") {
				p = h.chartDir
			}
		}
		if repoDir(p) != h.chartDir || !sameValueSources(c.src.Helm, h) {
			continue
		}
		found = append(found, c.i)
	}
	switch {
	case len(found) == 0:
		return 0, fmt.Errorf("no source renders the chart %s", h.chartDir)
	case len(found) > 1 && m.Target.Kind != "ApplicationSet":
		names := make([]string, len(found))
		for i, n := range found {
			names[i] = sourceField(n)
		}
		return 0, fmt.Errorf("several sources render the chart %s the same way (%s)", h.chartDir, strings.Join(names, ", "))
	}
	return found[0], nil // an ApplicationSet's generated Application renders the first
}

// sameValueSources reports whether an Argo CD source's helm section is the one h was read from.
func sameValueSources(hs argoHelm, h *helmSource) bool {
	if len(hs.ValueFiles) != len(h.valueFiles) || (hs.Values != "") != h.hasValues || (hs.ValuesObject != nil) != h.hasObject {
		return false
	}
	for i, vf := range hs.ValueFiles {
		if path.Join(h.chartDir, vf) != h.valueFiles[i] {
			return false
		}
	}
	return true
}

// literalValue decodes an adopted value for a values tree: a literal, not an expression.
func literalValue(v core.Value) (any, error) {
	var decoded any
	if v.IsExpr() || v.Absent() {
		return nil, fmt.Errorf("only a literal value can be written into values, not %s", v)
	}
	if err := json.Unmarshal([]byte(v.JSON()), &decoded); err != nil {
		return nil, fmt.Errorf("only a literal value can be written into values, not %s: %w", v, err)
	}
	return decoded, nil
}

// AdoptValuesFile writes v at key into a Helm values file (one YAML document holding a map),
// creating the maps on the way and keeping the file's comments. It reports false, and gives the
// content back, when the file already holds v there. A value that replaces a scalar is written
// over that scalar's bytes alone; a new key makes kyaml write the file again, which keeps the
// comments but not blank lines.
func AdoptValuesFile(path string, content []byte, key ValuesKey, v core.Value) ([]byte, bool, error) {
	if len(key) == 0 {
		return nil, false, fmt.Errorf("%s: no values key", path)
	}
	decoded, err := literalValue(v)
	if err != nil {
		return nil, false, fmt.Errorf("%s: %s: %w", path, key, err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(content))
	var doc yaml.Node
	empty := false
	switch err := dec.Decode(&doc); {
	case errors.Is(err, io.EOF):
		empty = true // no document, perhaps comments: the values are appended
		doc = yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{{Kind: yaml.MappingNode, Tag: "!!map"}}}
	case err != nil:
		return nil, false, fmt.Errorf("%s: %w", path, err)
	default:
		var more yaml.Node
		if err := dec.Decode(&more); !errors.Is(err, io.EOF) {
			return nil, false, fmt.Errorf("%s: a values file holds one YAML document", path)
		}
	}
	root := doc.Content[0]
	if root.Kind == yaml.ScalarNode && root.ShortTag() == "!!null" {
		root.Kind, root.Tag, root.Value, root.Style = yaml.MappingNode, "!!map", "", 0
	}
	if root.Kind != yaml.MappingNode {
		return nil, false, fmt.Errorf("%s: not a map of values", path)
	}
	changed, old, err := setValuesKey(root, key, decoded)
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", path, err)
	}
	if !changed {
		return content, false, nil
	}
	if old != nil {
		if out, ok := patchScalar(content, old, &doc); ok {
			return out, true, nil
		}
	}
	out, err := yaml.MarshalWithOptions(&doc, &yaml.EncoderOptions{SeqIndent: yaml.SequenceIndentStyle(yaml.DeriveSeqIndentStyle(string(content)))})
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", path, err)
	}
	switch {
	case empty:
		head := content
		if len(head) > 0 && head[len(head)-1] != '\n' {
			head = append(slices.Clip(head), '\n')
		}
		out = append(slices.Clip(head), out...)
	case bytes.HasPrefix(content, []byte("---\n")) && !bytes.HasPrefix(out, []byte("---")):
		out = append([]byte("---\n"), out...)
	}
	return out, true, nil
}

// replacedScalar is a scalar of a values file as it was before setValuesKey wrote over it, and
// the node that now holds the new value.
type replacedScalar struct {
	line, column int
	style        yaml.Style
	value        string
	node         *yaml.Node
}

// setValuesKey sets key in the values map m to v (decoded JSON), creating the maps on the way (in
// place of a null too). A scalar replaced by a scalar keeps its node, and so its comments; it is
// returned. It is false when m already holds v at key.
func setValuesKey(m *yaml.Node, key ValuesKey, v any) (bool, *replacedScalar, error) {
	newNode, err := valueNode(v)
	if err != nil {
		return false, nil, err
	}
	for i, k := range key {
		at := -1
		for j := 0; j+1 < len(m.Content); j += 2 {
			if m.Content[j].Value == k {
				at = j + 1
			}
		}
		if i == len(key)-1 {
			if at < 0 {
				m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: k}, newNode)
				return true, nil, nil
			}
			cur := m.Content[at]
			if have, err := yamlvalue.NodeValue(cur); err == nil {
				hj, err1 := json.Marshal(have)
				vj, err2 := json.Marshal(v)
				if err1 == nil && err2 == nil && string(hj) == string(vj) {
					return false, nil, nil
				}
			}
			if cur.Kind == yaml.ScalarNode && newNode.Kind == yaml.ScalarNode {
				old := &replacedScalar{line: cur.Line, column: cur.Column, style: cur.Style, value: cur.Value, node: cur}
				cur.Value, cur.Tag, cur.Style = newNode.Value, newNode.Tag, newNode.Style
				return true, old, nil
			}
			newNode.LineComment, newNode.FootComment = cur.LineComment, cur.FootComment
			if newNode.HeadComment == "" {
				newNode.HeadComment = cur.HeadComment
			}
			m.Content[at] = newNode
			return true, nil, nil
		}
		switch {
		case at < 0:
			child := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
			m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: k}, child)
			m = child
		case m.Content[at].Kind == yaml.ScalarNode && m.Content[at].ShortTag() == "!!null":
			n := m.Content[at]
			n.Kind, n.Tag, n.Value, n.Style = yaml.MappingNode, "!!map", "", 0
			m = n
		case m.Content[at].Kind == yaml.MappingNode:
			m = m.Content[at]
			if len(m.Content) == 0 {
				m.Style = 0 // {} becomes a block map
			}
		default:
			return false, nil, fmt.Errorf("%s holds %s, not a map, so %s cannot be set", key[:i+1], nodeKind(m.Content[at]), key)
		}
	}
	return false, nil, nil
}

func nodeKind(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	case yaml.ScalarNode:
		return "the scalar " + strconv.Quote(n.Value)
	}
	return "something else"
}

// patchScalar writes the new value of a replaced scalar over the old one's bytes, leaving every
// other byte of the file as it was, when the old scalar is a one-line plain or quoted scalar and
// the new one fits on a line; and checks that the file then holds what doc does.
func patchScalar(content []byte, old *replacedScalar, doc *yaml.Node) ([]byte, bool) {
	bare := *old.node
	bare.HeadComment, bare.LineComment, bare.FootComment = "", "", ""
	newText, err := yaml.Marshal(&bare)
	if err != nil {
		return nil, false
	}
	text := strings.TrimSuffix(string(newText), "\n")
	if strings.Contains(text, "\n") || strings.Contains(old.value, "\n") || old.line < 1 || old.column < 1 {
		return nil, false
	}
	lines := bytes.SplitAfter(content, []byte("\n"))
	if old.line > len(lines) {
		return nil, false
	}
	start := 0
	for _, l := range lines[:old.line-1] {
		start += len(l)
	}
	line := string(lines[old.line-1])
	col := 0 // the parser counts columns in characters
	for range old.column - 1 {
		if col >= len(line) {
			return nil, false
		}
		_, size := utf8.DecodeRuneInString(line[col:])
		col += size
	}
	rest := line[col:]
	var n int
	switch old.style {
	case 0:
		end := len(strings.TrimRight(rest, "\r\n"))
		if i := strings.Index(rest, " #"); i >= 0 && i < end {
			end = i
		}
		n = len(strings.TrimRight(rest[:end], " \t"))
	case yaml.DoubleQuotedStyle:
		n = -1
		for i := 1; i < len(rest); i++ {
			if rest[i] == '\\' {
				i++
				continue
			}
			if rest[i] == '"' {
				n = i + 1
				break
			}
		}
	case yaml.SingleQuotedStyle:
		n = -1
		for i := 1; i < len(rest); i++ {
			if rest[i] == '\'' {
				if i+1 < len(rest) && rest[i+1] == '\'' {
					i++
					continue
				}
				n = i + 1
				break
			}
		}
	default:
		return nil, false
	}
	if n <= 0 {
		return nil, false
	}
	at := start + col
	out := make([]byte, 0, len(content)+len(text))
	out = append(out, content[:at]...)
	out = append(out, text...)
	out = append(out, content[at+n:]...)
	// The bytes must say what the edited tree says.
	want, errW := yamlvalue.NodeValue(doc)
	got, errG := yamlvalue.Unmarshal(out)
	if errW != nil || errG != nil {
		return nil, false
	}
	wj, err1 := json.Marshal(want)
	gj, err2 := json.Marshal(got)
	if err1 != nil || err2 != nil || string(wj) != string(gj) {
		return nil, false
	}
	return out, true
}

// AdoptArgoHelmValue writes v at key into the helm.valuesObject of an Argo CD Application's (an
// ApplicationSet template's) source — spec.source when source is -1, else spec.sources[source] —
// in the document of the file that is t, creating the maps on the way and keeping the rest of the
// file as kyaml writes it. It refuses to create a valuesObject next to a helm.values string, which
// Argo CD would then ignore.
func AdoptArgoHelmValue(path string, content []byte, t Target, source int, key ValuesKey, v core.Value) ([]byte, bool, error) {
	if t.Kind != "Application" && t.Kind != "ApplicationSet" {
		return nil, false, fmt.Errorf("%s: %s: a helm.valuesObject is written only into an Application or an ApplicationSet", path, t)
	}
	if len(key) == 0 || source < -1 {
		return nil, false, fmt.Errorf("%s: %s: no values key, or no source", path, t)
	}
	decoded, err := literalValue(v)
	if err != nil {
		return nil, false, fmt.Errorf("%s: %s: %s: %w", path, t, key, err)
	}
	return edit(path, content, t, func(n *yaml.RNode, gates []Gate) ([]Gate, bool, error) {
		spec, _ := argoSpec(n, t)
		name := strings.Join(spec, ".") + "." + strings.TrimPrefix(sourceField(source), "spec.")
		var src *yaml.Node
		if source < 0 {
			if s, _ := n.Pipe(yaml.Lookup(append(spec, "source")...)); s != nil {
				src = s.YNode()
			}
		} else if l, _ := n.Pipe(yaml.Lookup(append(spec, "sources")...)); l != nil && l.YNode().Kind == yaml.SequenceNode && source < len(l.YNode().Content) {
			src = l.YNode().Content[source]
		}
		if src == nil || src.Kind != yaml.MappingNode {
			return nil, false, fmt.Errorf("no %s", name)
		}
		if helm := field(src, "helm"); helm != nil {
			vals, obj := field(helm, "values"), field(helm, "valuesObject")
			if vals != nil && vals.Kind == yaml.ScalarNode && vals.Value != "" && vals.ShortTag() != "!!null" && (obj == nil || obj.ShortTag() == "!!null") {
				return nil, false, fmt.Errorf("%s.helm has values, a YAML string, which Parley does not rewrite; a helm.valuesObject next to it would make Argo CD ignore it", name)
			}
		}
		changed, _, err := setValuesKey(src, append(ValuesKey{"helm", "valuesObject"}, key...), decoded)
		if err != nil {
			return nil, false, fmt.Errorf("%s: %w", name, err)
		}
		return gates, changed, nil
	}, nil)
}
