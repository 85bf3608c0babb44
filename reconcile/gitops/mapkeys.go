package gitops

import (
	yamlv3 "go.yaml.in/yaml/v3"

	"github.com/parleyhq/parley/reconcile/internal/yamlvalue"
)

// yaml.v3 decodes a mapping into a Go struct after comparing each of its keys with every other
// (issue 34: n²/2 comparisons, 47 s for 90,000 keys), and has no option to skip that. The structs
// read here are small, so rather than convert by hand a node whose mappings hold more keys than
// yamlvalue.MaxStructKeys is refused before it is decoded. Documents decoded into an any go
// through yamlvalue, which is linear.

// decodeSpec decodes an object's spec into a struct, refusing first a spec with an oversized
// mapping anywhere under it (a struct field of type any, such as a values object, is decoded
// whole).
func decodeSpec(spec *yamlv3.Node, out any) error {
	if err := yamlvalue.CheckKeys(spec, yamlvalue.MaxStructKeys); err != nil {
		return err
	}
	return spec.Decode(out)
}

// checkHeaderKeys bounds the mappings a header decode reads: the document's top level and its
// metadata. yaml.v3 never decodes the other values of a struct's unknown keys (a ConfigMap's data
// of any size is fine), so they are not counted.
func checkHeaderKeys(top *yamlv3.Node) error {
	if err := checkTopKeys(top); err != nil {
		return err
	}
	if meta := field(top, "metadata"); meta != nil {
		return yamlvalue.CheckKeys(meta, yamlvalue.MaxStructKeys)
	}
	return nil
}

// checkTopKeys bounds the keys of an object's top-level mapping alone.
func checkTopKeys(top *yamlv3.Node) error {
	if top != nil && top.Kind == yamlv3.MappingNode && len(top.Content)/2 > yamlvalue.MaxStructKeys {
		return &yamlvalue.KeysError{Line: top.Line, Keys: len(top.Content) / 2, Max: yamlvalue.MaxStructKeys}
	}
	return nil
}

// unmarshalStringMap is yamlv3.Unmarshal(content, &m) with m a map[string]any (a values file, a
// kustomization read as a map), in time linear in its keys. A document whose top level is not a
// mapping of string keys (yaml.v3 would turn a key of 1 into "1", or refuse a list) is left to
// yaml.v3 under the struct bound.
func unmarshalStringMap(content []byte) (map[string]any, error) {
	v, err := yamlvalue.Unmarshal(content)
	if err != nil {
		return nil, err
	}
	switch m := v.(type) {
	case nil:
		return nil, nil
	case map[string]any:
		return m, nil
	}
	var m map[string]any
	if err := unmarshalChecked(content, &m); err != nil {
		return nil, err
	}
	return m, nil
}

// unmarshalChecked is yamlv3.Unmarshal(content, out) for a typed out (a struct, a list of maps),
// refusing first a document with a mapping of more than yamlvalue.MaxStructKeys keys.
func unmarshalChecked(content []byte, out any) error {
	var n yamlv3.Node
	if err := yamlv3.Unmarshal(content, &n); err != nil {
		return err
	}
	if n.Kind == 0 {
		return nil // no document: yaml.v3 leaves out as it is
	}
	if err := yamlvalue.CheckKeys(&n, yamlvalue.MaxStructKeys); err != nil {
		return err
	}
	return n.Decode(out)
}
