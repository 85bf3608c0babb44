package gitops

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"
	"helm.sh/helm/v3/pkg/chartutil"
	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/parleyhq/parley/core"
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
	d := &discovery{files: inv.files}
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
		if err := yamlv3.Unmarshal(b, &chartVals); err != nil {
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
	var b, a any
	if before.Decode(&b) != nil || after.Decode(&a) != nil {
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
			var have any
			if s, err := cur.String(); err == nil && yamlv3.Unmarshal([]byte(s), &have) == nil {
				if hj, _ := json.Marshal(have); string(hj) == v.JSON() {
					return gates, false, nil
				}
			}
		}
		newNode, err := valueNode(decoded)
		if err != nil {
			return nil, false, err
		}
		parent, err := n.Pipe(yaml.LookupCreate(yaml.MappingNode, fieldPath[:len(fieldPath)-1]...))
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
