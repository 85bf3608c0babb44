// Package yamlvalue turns YAML into the Go values go.yaml.in/yaml/v3 gives for `any`
// (map[string]any, map[any]any, []any, string, int, int64, uint64, float64, bool, nil) in time
// linear in the input.
//
// It exists because yaml.v3's decoder into Go values (Decode or Unmarshal into any, a map or a
// struct) checks a mapping for duplicate keys by comparing every key with every other: a mapping
// of n keys costs n²/2 comparisons, and the library has no option to skip that check (issue 34:
// a ConfigMap of 90,000 one-line keys took 47 s to read). Decoding into a yaml.Node does no such
// check, so this package parses into nodes and converts them by hand: duplicate keys are found
// with a Go map, each anchor is converted once, and the work aliases can cause is counted against
// a budget proportional to the file.
//
// The values it returns share the value of an anchor between its aliases where yaml.v3 would make
// copies: treat them as read-only.
package yamlvalue

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"

	"go.yaml.in/yaml/v3"
)

// MaxMergeDocumentKeys is the most keys a mapping may have in a document that uses merge keys
// (<<). Such a document is decoded by yaml.v3 itself, whose merge rules this package does not
// copy, and yaml.v3's cost is quadratic in a mapping's keys: 1,000 keys is half a million
// comparisons, a few milliseconds.
const MaxMergeDocumentKeys = 1_000

// MaxStructKeys is the most keys a mapping may have before it is decoded by yaml.v3 into a Go
// struct (Node.Decode(&s)): 5,000 keys is 12.5 million comparisons, about a tenth of a second.
// Callers that decode repository YAML into structs call CheckKeys first.
const MaxStructKeys = 5_000

// ExpansionBudget is the most nodes the values of a file of n bytes may hold once aliases are
// expanded. It is fielddiff's node budget (core/fielddiff/yaml.go nodeBudget): a fixed allowance
// for small files plus eight nodes a byte, so that ordinary use of anchors passes and a few lines
// of nested aliases (which would expand to billions of nodes) do not.
func ExpansionBudget(n int) int { return 1<<16 + 8*n }

// Decoder reads the documents of one YAML stream as Go values.
type Decoder struct {
	dec *yaml.Decoder
	c   converter
}

// NewDecoder reads content; its expansion budget is ExpansionBudget(len(content)), shared by
// all its documents.
func NewDecoder(content []byte) *Decoder {
	return &Decoder{dec: yaml.NewDecoder(bytes.NewReader(content)), c: converter{budget: ExpansionBudget(len(content))}}
}

// Decode returns the next document's value, as yaml.v3's Decoder.Decode into an any would set
// it, or io.EOF after the last document.
func (d *Decoder) Decode() (any, error) {
	var n yaml.Node
	if err := d.dec.Decode(&n); err != nil {
		return nil, err
	}
	return d.c.document(&n)
}

// Unmarshal returns the value of content's first document, as yaml.Unmarshal into an any would.
func Unmarshal(content []byte) (any, error) {
	v, err := NewDecoder(content).Decode()
	if errors.Is(err, io.EOF) {
		return nil, nil
	}
	return v, err
}

// NodeValue returns n's value as n.Decode(&v) with v an any would set it. The text n was read
// from is not at hand, so its expansion budget counts n's nodes instead of bytes: a node takes at
// least two bytes of text (a one-character scalar and a separator), hence 16 nodes a node.
func NodeValue(n *yaml.Node) (any, error) {
	c := converter{budget: 1<<16 + 16*countNodes(n)}
	return c.document(n)
}

// countNodes counts n and the nodes under it, not following aliases.
func countNodes(n *yaml.Node) int {
	if n == nil {
		return 0
	}
	total := 1
	for _, c := range n.Content {
		total += countNodes(c)
	}
	return total
}

// KeysError is a mapping with more keys than a decode that compares every key with every other
// is allowed to read.
type KeysError struct {
	Line, Keys, Max int
}

func (e *KeysError) Error() string {
	return fmt.Sprintf("line %d: a mapping of %d keys, more than the %d Parley decodes into Go values (yaml.v3 compares every key of a mapping with every other)", e.Line, e.Keys, e.Max)
}

// CheckKeys returns a *KeysError for the first mapping under n (n included, aliases not
// followed: the nodes they name are checked where they are defined) with more than max keys.
func CheckKeys(n *yaml.Node, max int) error {
	if n == nil {
		return nil
	}
	if n.Kind == yaml.MappingNode && len(n.Content)/2 > max {
		return &KeysError{Line: n.Line, Keys: len(n.Content) / 2, Max: max}
	}
	if n.Kind == yaml.AliasNode {
		return nil
	}
	for _, c := range n.Content {
		if err := CheckKeys(c, max); err != nil {
			return err
		}
	}
	return nil
}

// errMerge stops a conversion at a merge key; the document is then decoded by yaml.v3.
var errMerge = errors.New("merge key")

type converter struct {
	budget, spent int
	anchors       map[*yaml.Node]anchored
	active        map[*yaml.Node]bool
}

type anchored struct {
	v    any
	size int // nodes in the value once its aliases are expanded
}

type keyID struct {
	kind  yaml.Kind
	value string
}

func (c *converter) document(n *yaml.Node) (v any, err error) {
	c.anchors, c.active = nil, nil
	v, _, err = c.value(n)
	if errors.Is(err, errMerge) {
		if err := CheckKeys(n, MaxMergeDocumentKeys); err != nil {
			return nil, fmt.Errorf("a document with a merge key (<<) and %w", err)
		}
		// yaml.v3 expands every alias again, bounded only by its own ratio (millions of nodes):
		// what it would build is counted first, against this decoder's budget.
		size, err := expandedSize(n, map[*yaml.Node]int{}, map[*yaml.Node]bool{})
		if err != nil {
			return nil, err
		}
		if err := c.spend(size); err != nil {
			return nil, err
		}
		var w any
		if err := n.Decode(&w); err != nil {
			return nil, err
		}
		return w, nil
	}
	return v, err
}

// expandedSize is the number of nodes n holds once its aliases are expanded, each anchor's size
// counted once (memo); active holds the anchors being counted, so that one containing itself is an
// error rather than a loop.
func expandedSize(n *yaml.Node, memo map[*yaml.Node]int, active map[*yaml.Node]bool) (int, error) {
	if n.Kind == yaml.AliasNode {
		t := n.Alias
		if t == nil {
			return 0, fmt.Errorf("line %d: unknown anchor '%s' referenced", n.Line, n.Value)
		}
		if size, ok := memo[t]; ok {
			return size, nil
		}
		if active[t] {
			return 0, fmt.Errorf("line %d: anchor '%s' value contains itself", n.Line, n.Value)
		}
		active[t] = true
		defer delete(active, t)
		size, err := expandedSize(t, memo, active)
		memo[t] = size
		return size, err
	}
	size := 1
	for _, c := range n.Content {
		sz, err := expandedSize(c, memo, active)
		if err != nil {
			return 0, err
		}
		size += sz
		if size > 1<<40 { // far past any budget; stops the sum from overflowing
			return size, nil
		}
	}
	return size, nil
}

// value converts n and returns its expanded size in nodes.
func (c *converter) value(n *yaml.Node) (any, int, error) {
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) != 1 {
			return nil, 1, nil
		}
		v, size, err := c.value(n.Content[0])
		return v, size + 1, err
	case yaml.AliasNode:
		return c.alias(n)
	}
	if err := c.spend(1); err != nil {
		return nil, 0, err
	}
	var v any
	size := 1
	switch n.Kind {
	case yaml.ScalarNode:
		// yaml.v3's own rules for a scalar (tags, timestamps kept as text, !!binary, ints that
		// overflow int): one scalar costs the same whatever the mapping around it.
		if err := n.Decode(&v); err != nil {
			return nil, 0, err
		}
	case yaml.SequenceNode:
		s := make([]any, len(n.Content))
		for i, e := range n.Content {
			x, sz, err := c.value(e)
			if err != nil {
				return nil, 0, err
			}
			s[i], size = x, size+sz
		}
		v = s
	case yaml.MappingNode:
		m, sz, err := c.mapping(n)
		if err != nil {
			return nil, 0, err
		}
		v, size = m, size+sz
	default:
		return nil, 0, fmt.Errorf("line %d: cannot decode node with unknown kind %d", n.Line, n.Kind)
	}
	if n.Anchor != "" {
		if c.anchors == nil {
			c.anchors = map[*yaml.Node]anchored{}
		}
		c.anchors[n] = anchored{v: v, size: size}
	}
	return v, size, nil
}

func (c *converter) alias(n *yaml.Node) (any, int, error) {
	t := n.Alias
	if t == nil {
		return nil, 0, fmt.Errorf("line %d: unknown anchor '%s' referenced", n.Line, n.Value)
	}
	if a, ok := c.anchors[t]; ok {
		if err := c.spend(a.size); err != nil {
			return nil, 0, err
		}
		return a.v, a.size, nil
	}
	// The anchor is not converted yet: the alias is inside the node it names.
	if c.active[t] {
		return nil, 0, fmt.Errorf("line %d: anchor '%s' value contains itself", n.Line, n.Value)
	}
	if c.active == nil {
		c.active = map[*yaml.Node]bool{}
	}
	c.active[t] = true
	defer delete(c.active, t)
	return c.value(t)
}

func (c *converter) spend(n int) error {
	c.spent += n
	if c.spent > c.budget {
		return fmt.Errorf("document contains excessive aliasing: more than %d nodes once aliases are expanded", c.budget)
	}
	return nil
}

// mapping converts a mapping as yaml.v3's decoder.mapping does for an any: map[string]any when
// every key is tagged !!str, map[any]any otherwise; refused if two keys have the same kind and
// text (yaml.v3's test for a duplicate, made here with a Go map).
func (c *converter) mapping(n *yaml.Node) (any, int, error) {
	seen := make(map[keyID]int, len(n.Content)/2)
	stringKeys := true
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		id := keyID{k.Kind, k.Value}
		if line, dup := seen[id]; dup {
			return nil, 0, fmt.Errorf("line %d: mapping key %q already defined at line %d", k.Line, k.Value, line)
		}
		seen[id] = k.Line
		if isMerge(k) {
			return nil, 0, errMerge
		}
		if k.ShortTag() != "!!str" {
			stringKeys = false
		}
	}
	size := 0
	var sm map[string]any
	var gm map[any]any
	if stringKeys {
		sm = make(map[string]any, len(n.Content)/2)
	} else {
		gm = make(map[any]any, len(n.Content)/2)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, ksz, err := c.value(n.Content[i])
		if err != nil {
			return nil, 0, err
		}
		if kind := reflect.ValueOf(k).Kind(); kind == reflect.Map || kind == reflect.Slice {
			return nil, 0, fmt.Errorf("line %d: invalid map key: %#v", n.Content[i].Line, k)
		}
		v, vsz, err := c.value(n.Content[i+1])
		if err != nil {
			return nil, 0, err
		}
		size += ksz + vsz
		if stringKeys {
			s, ok := k.(string)
			if !ok { // a !!str key always decodes to a string; keep yaml.v3's text if not
				s = n.Content[i].Value
			}
			sm[s] = v
		} else {
			gm[k] = v
		}
	}
	if stringKeys {
		return sm, size, nil
	}
	return gm, size, nil
}

// isMerge is yaml.v3's test for a merge key (decode.go isMerge).
func isMerge(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Value == "<<" && (n.Tag == "" || n.Tag == "!" || n.ShortTag() == "!!merge")
}
