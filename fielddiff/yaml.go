package fielddiff

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/parleyhq/parley/core"
)

// YAML is read the way Kubernetes reads it (sigs.k8s.io/yaml: YAML converted to JSON): mapping keys
// are strings, timestamps stay strings, integers in any YAML notation become decimal JSON numbers.
// Values are canonical JSON, so `replicas: 3` and `replicas: "3"` differ, as they do to the API server.

// objectKey identifies a Kubernetes object; the API version is not part of it.
type objectKey struct{ group, kind, namespace, name string }

// ignoredPaths are never Git's claim: the server owns them, or they are the object's identity.
var ignoredPaths = map[string]bool{
	"/apiVersion": true, "/kind": true, "/metadata/name": true, "/metadata/namespace": true, "/status": true,
	"/metadata/managedFields": true, "/metadata/resourceVersion": true, "/metadata/uid": true,
	"/metadata/generation": true, "/metadata/creationTimestamp": true, "/metadata/selfLink": true,
}

func parseYAML(p string, content []byte) ([]leaf, error) {
	if bytes.Contains(content, []byte("{{")) {
		return nil, fmt.Errorf("%s: a template ({{ ... }}), not a manifest", p)
	}
	dec := yaml.NewDecoder(bytes.NewReader(content))
	var leaves []leaf
	seen := map[objectKey]int{}
	for doc := 1; ; doc++ {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", p, doc, err)
		}
		if len(n.Content) == 0 {
			continue
		}
		root := resolve(n.Content[0])
		objs := []*yaml.Node{root}
		if isList(root) {
			objs = nil
			if items := mapGet(root, "items"); items != nil && items.Kind == yaml.SequenceNode {
				for _, it := range items.Content {
					objs = append(objs, resolve(it))
				}
			}
		}
		for _, obj := range objs {
			key, ok, err := identify(obj)
			if err != nil {
				return nil, fmt.Errorf("%s: document %d, line %d: %w", p, doc, obj.Line, err)
			}
			if !ok {
				continue // not a Kubernetes object (no apiVersion and kind)
			}
			if first, dup := seen[key]; dup {
				return nil, fmt.Errorf("%s: document %d, line %d: %s/%s %s is already defined in document %d", p, doc, obj.Line, key.kind, key.namespace, key.name, first)
			}
			seen[key] = doc
			f := core.K8sField(key.group, key.kind, key.namespace, key.name, "")
			if err := flattenYAML(obj, f, "", &leaves, 0); err != nil {
				return nil, fmt.Errorf("%s: document %d: %w", p, doc, err)
			}
		}
	}
	return leaves, nil
}

func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 100; i++ {
		n = n.Alias
	}
	return n
}

func isList(n *yaml.Node) bool {
	k := mapGet(n, "kind")
	return k != nil && k.Kind == yaml.ScalarNode && k.Value == "List" && mapGet(n, "items") != nil
}

// mapGet returns the value of key in a mapping node.
func mapGet(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return resolve(n.Content[i+1])
		}
	}
	return nil
}

func scalarAt(n *yaml.Node, keys ...string) string {
	for _, k := range keys {
		n = mapGet(n, k)
	}
	if n == nil || n.Kind != yaml.ScalarNode {
		return ""
	}
	return n.Value
}

// identify returns an object's key; ok is false for documents that are not Kubernetes objects.
func identify(obj *yaml.Node) (objectKey, bool, error) {
	if obj == nil || obj.Kind != yaml.MappingNode {
		return objectKey{}, false, nil
	}
	apiVersion, kind := scalarAt(obj, "apiVersion"), scalarAt(obj, "kind")
	if apiVersion == "" || kind == "" {
		return objectKey{}, false, nil
	}
	name := scalarAt(obj, "metadata", "name")
	if name == "" {
		if scalarAt(obj, "metadata", "generateName") != "" {
			return objectKey{}, false, nil // named by the server: Git cannot claim its fields by name
		}
		return objectKey{}, false, fmt.Errorf("%s %s has no metadata.name", apiVersion, kind)
	}
	group := ""
	if i := strings.LastIndexByte(apiVersion, '/'); i >= 0 {
		group = apiVersion[:i]
	}
	return objectKey{group: group, kind: kind, namespace: scalarAt(obj, "metadata", "namespace"), name: name}, true, nil
}

const maxDepth = 100

// flattenYAML appends the leaves of n, found at pointer ptr of object f.
func flattenYAML(n *yaml.Node, f core.Field, ptr string, out *[]leaf, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("line %d: nested deeper than %d levels", n.Line, maxDepth)
	}
	if ignoredPaths[ptr] {
		return nil
	}
	n = resolve(n)
	switch n.Kind {
	case yaml.MappingNode:
		pairs, err := mappingPairs(n, 0)
		if err != nil {
			return err
		}
		if len(pairs) == 0 {
			if ptr != "" {
				addLeaf(out, f, ptr, core.CanonicalJSONValue("{}"))
			}
			return nil
		}
		for _, kv := range pairs {
			if err := flattenYAML(kv.value, f, ptr+"/"+core.EscapePointerToken(kv.key), out, depth+1); err != nil {
				return err
			}
		}
		return nil
	case yaml.SequenceNode:
		if allScalars(n) {
			var b strings.Builder
			if err := writeJSON(&b, n, depth); err != nil {
				return err
			}
			addLeaf(out, f, ptr, core.CanonicalJSONValue(b.String()))
			return nil
		}
		for i, c := range n.Content {
			if err := flattenYAML(c, f, ptr+"/"+strconv.Itoa(i), out, depth+1); err != nil {
				return err
			}
		}
		return nil
	case yaml.ScalarNode:
		var b strings.Builder
		if err := writeScalar(&b, n); err != nil {
			return err
		}
		addLeaf(out, f, ptr, core.CanonicalJSONValue(b.String()))
		return nil
	}
	return fmt.Errorf("line %d: unexpected YAML node", n.Line)
}

func addLeaf(out *[]leaf, f core.Field, ptr string, v core.Value) {
	f.Path = ptr
	*out = append(*out, leaf{key: f.String(), field: f, value: v})
}

func allScalars(n *yaml.Node) bool {
	for _, c := range n.Content {
		if resolve(c).Kind != yaml.ScalarNode {
			return false
		}
	}
	return true
}

type pair struct {
	key   string
	value *yaml.Node
}

// mappingPairs returns a mapping's entries with merge keys (<<) applied and later keys winning.
func mappingPairs(n *yaml.Node, depth int) ([]pair, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("line %d: merge keys nested too deep", n.Line)
	}
	var merged []pair
	var own []pair
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return nil, fmt.Errorf("line %d: mapping key is not a scalar", k.Line)
		}
		if k.Tag == "!!merge" {
			srcs := []*yaml.Node{resolve(v)}
			if srcs[0].Kind == yaml.SequenceNode {
				srcs = srcs[0].Content
			}
			for _, s := range srcs {
				s = resolve(s)
				if s.Kind != yaml.MappingNode {
					return nil, fmt.Errorf("line %d: merge key value is not a mapping", s.Line)
				}
				ps, err := mappingPairs(s, depth+1)
				if err != nil {
					return nil, err
				}
				merged = append(merged, ps...)
			}
			continue
		}
		own = append(own, pair{k.Value, v})
	}
	all := append(merged, own...)
	// Later entries win; keep one per key, then sort for canonical order.
	idx := map[string]int{}
	var out []pair
	for _, p := range all {
		if i, ok := idx[p.key]; ok {
			out[i] = p
			continue
		}
		idx[p.key] = len(out)
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key < out[j].key })
	return out, nil
}

// writeJSON writes n as canonical JSON.
func writeJSON(b *strings.Builder, n *yaml.Node, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("line %d: nested deeper than %d levels", n.Line, maxDepth)
	}
	n = resolve(n)
	switch n.Kind {
	case yaml.ScalarNode:
		return writeScalar(b, n)
	case yaml.SequenceNode:
		b.WriteByte('[')
		for i, c := range n.Content {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeJSON(b, c, depth+1); err != nil {
				return err
			}
		}
		b.WriteByte(']')
		return nil
	case yaml.MappingNode:
		pairs, err := mappingPairs(n, 0)
		if err != nil {
			return err
		}
		b.WriteByte('{')
		for i, p := range pairs {
			if i > 0 {
				b.WriteByte(',')
			}
			writeString(b, p.key)
			b.WriteByte(':')
			if err := writeJSON(b, p.value, depth+1); err != nil {
				return err
			}
		}
		b.WriteByte('}')
		return nil
	}
	return fmt.Errorf("line %d: unexpected YAML node", n.Line)
}

// writeScalar writes a scalar as canonical JSON, resolving its YAML type.
func writeScalar(b *strings.Builder, n *yaml.Node) error {
	switch n.ShortTag() {
	case "!!null":
		b.WriteString("null")
	case "!!bool":
		var v bool
		if err := n.Decode(&v); err != nil {
			return fmt.Errorf("line %d: %w", n.Line, err)
		}
		b.WriteString(strconv.FormatBool(v))
	case "!!int":
		var v int64
		if err := n.Decode(&v); err != nil {
			var u uint64
			if err2 := n.Decode(&u); err2 != nil {
				return fmt.Errorf("line %d: %w", n.Line, err)
			}
			b.WriteString(strconv.FormatUint(u, 10))
			return nil
		}
		b.WriteString(strconv.FormatInt(v, 10))
	case "!!float":
		var v float64
		if err := n.Decode(&v); err != nil {
			return fmt.Errorf("line %d: %w", n.Line, err)
		}
		if math.IsNaN(v) || math.IsInf(v, 0) {
			writeString(b, n.Value) // JSON has no NaN or infinity; Kubernetes would refuse them anyway
			return nil
		}
		enc, _ := json.Marshal(v) // a finite float64 always encodes
		b.Write(enc)
	default: // !!str, !!timestamp, !!binary and custom tags stay strings, as in sigs.k8s.io/yaml
		writeString(b, n.Value)
	}
	return nil
}

// writeString writes s as a JSON string exactly as encoding/json does, the canonical form of core.Value.
func writeString(b *strings.Builder, s string) {
	safe := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c == '"' || c == '\\' || c >= 0x80 || c == '<' || c == '>' || c == '&' {
			safe = false
			break
		}
	}
	if safe {
		b.WriteByte('"')
		b.WriteString(s)
		b.WriteByte('"')
		return
	}
	enc, _ := json.Marshal(s) // strings always encode; HTML-escaped like every canonical value
	b.Write(enc)
}
