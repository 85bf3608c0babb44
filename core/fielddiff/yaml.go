package fielddiff

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"path"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/parleyhq/parley/core"
)

// YAML is read the way Kubernetes reads it: kubectl, Argo CD and Flux turn YAML into JSON with
// sigs.k8s.io/yaml, which parses YAML 1.1 (go.yaml.in/yaml/v2). We decode with go.yaml.in/yaml/v3 to
// a yaml.Node tree (line numbers for errors, no map allocations, keys in source order) and apply the
// YAML 1.1 rules where they differ from v3's YAML 1.2:
//   - plain yes/no/on/off/y/n (any case variant v2 knows) are booleans, as values and as keys;
//   - mapping keys become JSON strings as sigs.k8s.io/yaml writes them: true/false, decimal integers
//     (0x1F is "31"), floats in %g form; a null key is an error;
//   - integers are decimal JSON numbers, timestamps stay strings, !!binary is decoded; .inf and .nan
//     are an error (JSON has no such numbers; kubectl refuses the file too);
//   - anchors, aliases and merge keys (<<) are resolved as v2 does: a merge applies where it is
//     written, later keys win, and in a merge list earlier mappings win.
//
// A differential check against sigs.k8s.io/yaml v1.6.0 (YAMLToJSON, then the same flattening) agreed
// on every fixture here and on the fuzz corpus, except where fielddiff deliberately differs: documents
// that are not objects are skipped, and an object without a name is an error.
//
// Decoding to interface{} instead was measured about 20% slower on a 40-line Deployment (maps for
// every mapping), loses line numbers, and still applies v3's YAML 1.2 rules.
//
// Values are canonical JSON (core.Value), so `replicas: 3` and `replicas: "3"` differ, as they do to
// the API server, while `3` and `3.0` do not.

// objectKey identifies a Kubernetes object; the API version is not part of it.
type objectKey struct{ group, kind, namespace, name string }

// ignoredPaths are never Git's claim: the server owns them, or they are the object's identity.
var ignoredPaths = map[string]bool{
	"/apiVersion": true, "/kind": true, "/metadata/name": true, "/metadata/namespace": true, "/status": true,
	"/metadata/managedFields": true, "/metadata/resourceVersion": true, "/metadata/uid": true,
	"/metadata/generation": true, "/metadata/creationTimestamp": true, "/metadata/selfLink": true,
}

const maxDepth = 100

// nodeBudget bounds the work aliases can cause: a few short lines of nested aliases expand to
// billions of nodes ("billion laughs"). Without aliases every node takes at least a byte of source
// and is visited at most three times (value, key, merged list), so 8 visits a byte never refuses a
// real file, however large.
func nodeBudget(content []byte) int { return 1<<16 + 8*len(content) }

// The YAML budgets: what one file may make the readers build before they refuse it. Without them
// an 8 MiB file (the largest read) held 500 to 850 MB live and allocated 1 to 2 GB: 650,000
// one-line keys of a ConfigMap, or a sequence of small mappings, in any pull request; and 8 MiB of
// aliases, each expanding a thousand values, 17 s of CPU and 1.4 GB before the alias budget
// refused them. Real manifests stay far below: a 1.3 MB install.yaml with its CRDs has about
// 35,000 fields, and 99.8% of the bytes of the repositories measured read through the fast reader.
const (
	// MaxYAMLFields is the most fields (leaves) one YAML file is flattened into.
	MaxYAMLFields = 100_000
	// MaxYAMLNodes is the most nodes the fast reader builds for one file (a field takes two or
	// three: its key, its value, its share of a mapping).
	MaxYAMLNodes = 4 * MaxYAMLFields
	// MaxYAMLv3Document is the largest document read by go.yaml.in/yaml/v3, for what the fast
	// reader declines (tabs, tags, complex keys, directives, ...): yaml.v3 builds its whole tree,
	// about 150 bytes of memory per byte of text, before anything can count it.
	MaxYAMLv3Document = 1 << 20
)

// YAMLBudgetError is the refusal of a YAML file past one of the budgets above.
type YAMLBudgetError struct {
	Filename string
	Reason   string // what is past which budget
}

func (e *YAMLBudgetError) Error() string {
	if e.Filename == "" { // found while flattening: the error that wraps it names the file
		return e.Reason + "; not parsed"
	}
	return e.Filename + ": " + e.Reason + "; not parsed"
}

// listJSONBudget is how many bytes of JSON the lists of a file of size bytes may be written as
// (a list of scalars is one field, its value the list's JSON). Without aliases a list's JSON is at
// most a few times its text (quotes and escapes); aliases of long lists multiply it, and the alias
// budget alone let 2 MB of them write 250 MB of values.
func listJSONBudget(size int) int { return 4*size + 1<<20 }

func tooMuchListJSON() *YAMLBudgetError {
	return &YAMLBudgetError{Reason: "lists (aliases of lists, most likely) written as more than 4 bytes of JSON per byte of the file"}
}

func tooManyFields() *YAMLBudgetError {
	return &YAMLBudgetError{Reason: fmt.Sprintf("more than %d fields in one YAML file, the most Parley reads from one", MaxYAMLFields)}
}

// kustomizeGroup's Kustomization and Component are usually written without metadata.name; kustomize
// identifies them by their directory, and so does fielddiff.
const kustomizeGroup = "kustomize.config.k8s.io"

type yamlParser struct {
	path    string
	leaves  []leaf
	objects []objectKey // the objects read, in order
	budget  int         // nodes still allowed to be visited
	json    int         // bytes of JSON the lists may still be written as (listJSONBudget)

	object  *core.Field // the object being flattened (its Path empty), shared by its leaves
	prefix  string      // object.String() + "#": a leaf's key is prefix + its encoded pointer
	ptr     []byte      // the pointer being walked
	scratch []byte      // where keys are built
	pairs   []pair      // the entries of the mappings being walked (see mappingPairs)
}

func parseYAML(p string, content []byte) ([]leaf, error) {
	if !mayHoldObjects(content) {
		return nil, nil
	}
	y, err := parseYAMLObjects(p, content)
	if err != nil {
		return nil, err
	}
	return y.leaves, nil
}

// mayHoldObjects reports whether a YAML file can define a Kubernetes object at all: every object
// says "kind". Lock files, OpenAPI documents of other APIs and CI workflows do not, and are not
// parsed: a 400 KB pnpm-lock.yaml that a bot rewrites every week costs nothing. A template is
// still read, to be reported as one. (A "kind" spelt with escapes in a quoted key would be missed;
// no manifest writes one.)
func mayHoldObjects(content []byte) bool {
	if bytes.HasPrefix(content, []byte{0xFF, 0xFE}) || bytes.HasPrefix(content, []byte{0xFE, 0xFF}) {
		return true // UTF-16, which the decoder reads after its byte order mark: the text is not searchable
	}
	return bytes.Contains(content, []byte("kind")) || bytes.Contains(content, []byte("{{"))
}

func newYAMLParser(p string, content []byte) *yamlParser {
	// Leaves: roughly one per 30 bytes of a typical manifest.
	return &yamlParser{path: p, budget: nodeBudget(content), json: listJSONBudget(len(content)),
		leaves: make([]leaf, 0, min(len(content)/30, MaxYAMLFields)+1)}
}

// readDocument reads the objects of one document (its root node) into the parser; seen maps each
// object read so far to its document's number.
func (y *yamlParser) readDocument(doc int, root *yaml.Node, seen map[objectKey]int) error {
	p := y.path
	root = resolve(root)
	objs := []*yaml.Node{root}
	if isList(root) {
		objs = resolve(mapGet(root, "items")).Content
	}
	for _, obj := range objs {
		obj = resolve(obj)
		key, ok, err := y.identify(obj)
		if err != nil {
			return fmt.Errorf("%s: document %d, line %d: %w", p, doc, obj.Line, err)
		}
		if !ok {
			continue // not a Kubernetes object (no apiVersion and kind)
		}
		if first, dup := seen[key]; dup {
			return fmt.Errorf("%s: document %d, line %d: %s %s is already defined in document %d", p, doc, obj.Line, key.kind, qualifiedName(key), first)
		}
		seen[key] = doc
		y.objects = append(y.objects, key)
		field := core.K8sField(key.group, key.kind, key.namespace, key.name, "")
		y.object = &field
		y.prefix = field.String() + "#"
		y.ptr = y.ptr[:0]
		if err := y.flatten(obj, 0); err != nil {
			return fmt.Errorf("%s: document %d, %s %s: %w", p, doc, key.kind, qualifiedName(key), err)
		}
	}
	return nil
}

// parseYAMLObjects reads a YAML stream into the parser's leaves and objects: through the fast
// reader when it reads the stream (fastyaml.go), else through go.yaml.in/yaml/v3.
func parseYAMLObjects(p string, content []byte) (*yamlParser, error) {
	if y, ok, err := fastParseObjects(p, content); ok || err != nil {
		return y, err
	}
	return parseYAMLv3(p, content)
}

// parseYAMLv3 reads a YAML stream with go.yaml.in/yaml/v3: every stream the fast reader declines.
func parseYAMLv3(p string, content []byte) (*yamlParser, error) {
	if err := v3Budget(p, content); err != nil {
		return nil, err
	}
	y := newYAMLParser(p, content)
	template := bytes.Contains(content, []byte("{{"))
	dec := yaml.NewDecoder(bytes.NewReader(content))
	seen := map[objectKey]int{}
	for doc := 1; ; doc++ {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if template {
				return nil, fmt.Errorf("%s: document %d: a Helm or Go template ({{ ... }}), not a manifest: %w", p, doc, err)
			}
			return nil, fmt.Errorf("%s: document %d: %w", p, doc, err)
		}
		if len(n.Content) == 0 {
			continue
		}
		if template {
			// {{ ... }} inside a string (a PrometheusRule annotation, an ApplicationSet template) is
			// just text; written bare where a value belongs it reads as a mapping used as a key.
			if at := templateAction(n.Content[0], 0); at != nil {
				return nil, fmt.Errorf("%s: document %d, line %d: a Helm or Go template ({{ ... }}), not a manifest", p, doc, at.Line)
			}
		}
		if err := y.readDocument(doc, n.Content[0], seen); err != nil {
			return nil, err
		}
	}
	return y, nil
}

// v3Budget refuses a stream with a document past MaxYAMLv3Document before yaml.v3 reads it. yaml.v3
// holds one document's tree at a time: the stream is cut where it would cut it, and refused unread
// when a document is past the budget or the stream cannot be cut.
func v3Budget(p string, content []byte) error {
	if len(content) <= MaxYAMLv3Document {
		return nil
	}
	docs := splitDocuments(content)
	if docs == nil {
		return &YAMLBudgetError{Filename: p, Reason: fmt.Sprintf("%s of YAML with directives or in UTF-16, above the %s Parley reads in that form",
			core.Size(int64(len(content))), core.Size(MaxYAMLv3Document))}
	}
	for i, d := range docs {
		if len(d) > MaxYAMLv3Document {
			return &YAMLBudgetError{Filename: p, Reason: fmt.Sprintf("document %d: %s of YAML in a form only the full YAML parser reads (tabs, tags, complex keys, ...), above the %s it reads (about 150 bytes of memory per byte)",
				i+1, core.Size(int64(len(d))), core.Size(MaxYAMLv3Document))}
		}
	}
	return nil
}

// CheckYAMLBudgets refuses a YAML stream past the budgets above (a *YAMLBudgetError) before a
// reader that builds whole trees, yaml.v3 or kyaml, reads it: more than MaxYAMLNodes nodes, or a
// document past MaxYAMLv3Document that the fast reader declines. It costs a read by the fast
// reader, bounded by MaxYAMLNodes. The fields and list budgets are the flattening's, not checked here.
func CheckYAMLBudgets(p string, content []byte) error {
	_, ok, over := fastDocuments(content)
	switch {
	case over:
		return tooManyNodes(p)
	case !ok:
		return v3Budget(p, content)
	}
	return nil
}

func tooManyNodes(p string) *YAMLBudgetError {
	return &YAMLBudgetError{Filename: p, Reason: fmt.Sprintf("more than %d YAML nodes in one file (%d fields or more), the most Parley reads from one", MaxYAMLNodes, MaxYAMLFields)}
}

func qualifiedName(k objectKey) string {
	if k.namespace == "" {
		return k.name
	}
	return k.namespace + "/" + k.name
}

// templateAction returns a node that only a bare template action produces: a mapping used as a key.
func templateAction(n *yaml.Node, depth int) *yaml.Node {
	if n == nil || depth > maxDepth {
		return nil
	}
	for i, c := range n.Content {
		if n.Kind == yaml.MappingNode && i%2 == 0 && c.Kind != yaml.ScalarNode && c.Kind != yaml.AliasNode {
			return c
		}
		if at := templateAction(c, depth+1); at != nil {
			return at
		}
	}
	return nil
}

func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 100; i++ {
		n = n.Alias
	}
	return n
}

// isList reports whether n is a List (or FooList) whose items are objects, as kubectl reads it.
func isList(n *yaml.Node) bool {
	k := mapGet(n, "kind")
	if k == nil || k.Kind != yaml.ScalarNode || !strings.HasSuffix(k.Value, "List") || scalarAt(n, "apiVersion") == "" {
		return false
	}
	items := mapGet(n, "items")
	return items != nil && items.Kind == yaml.SequenceNode
}

// mapGet returns the value of key in a mapping node; like the flattening, the last of repeated keys
// wins. (Identity written through a merge key is not looked up: no manifest does that.)
func mapGet(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	var v *yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			v = n.Content[i+1]
		}
	}
	return resolve(v)
}

func scalarAt(n *yaml.Node, keys ...string) string {
	for _, k := range keys {
		n = mapGet(n, k)
	}
	if n == nil || n.Kind != yaml.ScalarNode || n.ShortTag() == "!!null" {
		return ""
	}
	return n.Value
}

// identify returns an object's key; ok is false for documents that are not Kubernetes objects.
func (y *yamlParser) identify(obj *yaml.Node) (objectKey, bool, error) {
	if obj == nil || obj.Kind != yaml.MappingNode {
		return objectKey{}, false, nil
	}
	apiVersion, kind := scalarAt(obj, "apiVersion"), scalarAt(obj, "kind")
	if apiVersion == "" || kind == "" {
		return objectKey{}, false, nil
	}
	group := ""
	if i := strings.LastIndexByte(apiVersion, '/'); i >= 0 {
		group = apiVersion[:i]
	}
	if group == core.CoreGroup {
		group = "" // "core" is how addresses spell the legacy group; apiVersion core/v1 means the same
	}
	name := scalarAt(obj, "metadata", "name")
	if name == "" {
		switch {
		case group == kustomizeGroup:
			name = moduleDir(y.path)
		case scalarAt(obj, "metadata", "generateName") != "":
			return objectKey{}, false, nil // named by the server: Git cannot claim its fields by name
		default:
			return objectKey{}, false, fmt.Errorf("%s %s has no metadata.name", apiVersion, kind)
		}
	}
	// Copies: the fast reader's scalars share the whole file's text, which every leaf of the object
	// would otherwise keep alive (documents are cached long after their text is gone).
	namespace := scalarAt(obj, "metadata", "namespace")
	return objectKey{group: strings.Clone(group), kind: strings.Clone(kind), namespace: strings.Clone(namespace), name: strings.Clone(name)}, true, nil
}

// moduleDir is the directory of a repository-relative file, "." at the root.
func moduleDir(p string) string {
	return path.Dir(strings.TrimLeft(p, "/"))
}

// flatten appends the leaves of n, found at the pointer held in y.ptr, to the current object. The
// pointer is built in one buffer, grown and cut back as the walk goes, so only leaves allocate.
func (y *yamlParser) flatten(n *yaml.Node, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("line %d: nested deeper than %d levels", n.Line, maxDepth)
	}
	if y.budget--; y.budget < 0 {
		return errAliasBudget(n)
	}
	if len(y.leaves) > MaxYAMLFields {
		return tooManyFields()
	}
	if depth <= 2 && ignoredPaths[string(y.ptr)] { // every ignored path is one or two tokens long
		return nil
	}
	n = resolve(n)
	switch n.Kind {
	case yaml.MappingNode:
		stack := len(y.pairs) // a failed parse leaves the stack as it is: the parser is dropped
		pairs, err := y.mappingPairs(n, 0)
		if err != nil {
			return err
		}
		if len(pairs) == 0 {
			if len(y.ptr) > 0 {
				y.add(core.CanonicalJSONValue("{}"))
			}
			y.pairs = y.pairs[:stack]
			return nil
		}
		mark := len(y.ptr)
		for _, kv := range pairs {
			y.ptr = appendToken(append(y.ptr, '/'), kv.key)
			if err := y.flatten(kv.value, depth+1); err != nil {
				return err
			}
			y.ptr = y.ptr[:mark]
		}
		y.pairs = y.pairs[:stack]
		return nil
	case yaml.SequenceNode:
		if allScalars(n) {
			var b strings.Builder
			if err := y.writeJSON(&b, n, depth); err != nil {
				return err
			}
			y.json -= b.Len()
			y.add(core.CanonicalJSONValue(b.String()))
			return nil
		}
		mark := len(y.ptr)
		for i, c := range n.Content {
			y.ptr = strconv.AppendInt(append(y.ptr, '/'), int64(i), 10)
			if err := y.flatten(c, depth+1); err != nil {
				return err
			}
			y.ptr = y.ptr[:mark]
		}
		return nil
	case yaml.ScalarNode:
		v, err := scalarValue(n)
		if err != nil {
			return err
		}
		y.add(v)
		return nil
	}
	return fmt.Errorf("line %d: unexpected YAML node", n.Line)
}

// add appends a leaf at the current pointer. Its key is the field's canonical text; the field's
// Path shares the key's bytes unless the pointer needed percent-encoding in the text form.
func (y *yamlParser) add(v core.Value) {
	y.scratch = appendAddress(append(y.scratch[:0], y.prefix...), y.ptr)
	key := string(y.scratch)
	var path string
	if len(key) == len(y.prefix)+len(y.ptr) { // nothing was encoded
		path = key[len(y.prefix):]
	} else {
		path = string(y.ptr)
	}
	y.leaves = append(y.leaves, leaf{key: key, obj: y.object, path: path, value: v})
}

// appendToken appends t as an RFC 6901 reference token (~ as ~0, / as ~1), as
// core.EscapePointerToken writes it.
func appendToken(b []byte, t string) []byte {
	for i := 0; i < len(t); i++ {
		switch t[i] {
		case '~':
			b = append(b, '~', '0')
		case '/':
			b = append(b, '~', '1')
		default:
			b = append(b, t[i])
		}
	}
	return b
}

// appendAddress appends a pointer percent-encoded as core.Field.String writes it, so that the
// object's prefix followed by it is the field's canonical text (the tests check this on every field).
func appendAddress(b, p []byte) []byte {
	const hex = "0123456789ABCDEF"
	for _, c := range p {
		if c <= ' ' || c == 0x7f || c == '%' || c == '#' || c == '*' || c == '=' {
			b = append(b, '%', hex[c>>4], hex[c&15])
			continue
		}
		b = append(b, c)
	}
	return b
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

// mappingPairs returns a mapping's entries with merge keys (<<) applied and later keys winning,
// sorted by key.
func (y *yamlParser) mappingPairs(n *yaml.Node, depth int) ([]pair, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("line %d: merge keys nested too deep", n.Line)
	}
	// Without merge keys the pairs go on y.pairs, a stack the callers cut back when they are done
	// with them, so a mapping allocates nothing; a mapping with merges (rare) builds its own.
	start := len(y.pairs)
	merging := hasMergeKey(n)
	var all []pair
	if merging {
		all = make([]pair, 0, len(n.Content)/2)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if y.budget--; y.budget < 0 {
			return nil, errAliasBudget(n)
		}
		k, v := resolve(n.Content[i]), n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return nil, fmt.Errorf("line %d: mapping key is not a scalar", k.Line)
		}
		if k.Tag == "!!merge" {
			// As go.yaml.in/yaml/v2 does: a merge applies where it is written (a key before it is
			// overwritten, one after it wins), and in a list of mappings the earlier ones win.
			srcs := []*yaml.Node{resolve(v)}
			if srcs[0].Kind == yaml.SequenceNode {
				srcs = srcs[0].Content
			}
			for i := len(srcs) - 1; i >= 0; i-- {
				s := resolve(srcs[i])
				if s.Kind != yaml.MappingNode {
					return nil, fmt.Errorf("line %d: merge key value is not a mapping", s.Line)
				}
				ps, err := y.mappingPairs(s, depth+1)
				if err != nil {
					return nil, err
				}
				all = append(all, ps...)
			}
			continue
		}
		key, err := keyString(k)
		if err != nil {
			return nil, err
		}
		if merging {
			all = append(all, pair{key, v})
		} else {
			y.pairs = append(y.pairs, pair{key, v})
		}
	}
	if !merging {
		all = y.pairs[start:]
	}
	// Keys often come sorted and distinct (apiVersion, kind, metadata, spec; generated JSON): then
	// there is nothing to sort or drop.
	sorted := true
	for i := 1; i < len(all); i++ {
		if all[i-1].key >= all[i].key {
			sorted = false
			break
		}
	}
	if sorted {
		return all, nil
	}
	// A stable sort keeps equal keys in source order, so the last of them is the one that counts.
	slices.SortStableFunc(all, func(a, b pair) int { return strings.Compare(a.key, b.key) })
	out := all[:0]
	for i, p := range all {
		if i+1 < len(all) && all[i+1].key == p.key {
			continue // a later entry (stable sort keeps source order) wins
		}
		out = append(out, p)
	}
	return out, nil
}

func hasMergeKey(n *yaml.Node) bool {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := resolve(n.Content[i]); k != nil && k.Tag == "!!merge" {
			return true
		}
	}
	return false
}

func errAliasBudget(n *yaml.Node) error {
	return fmt.Errorf("line %d: aliases expand to too many values", n.Line)
}

// yaml11Bool reports whether a plain scalar is a YAML 1.1 boolean, as go.yaml.in/yaml/v2 reads it.
func yaml11Bool(s string) (value, ok bool) {
	switch s {
	case "y", "Y", "yes", "Yes", "YES", "on", "On", "ON", "true", "True", "TRUE":
		return true, true
	case "n", "N", "no", "No", "NO", "off", "Off", "OFF", "false", "False", "FALSE":
		return false, true
	}
	return false, false
}

// plain reports whether a scalar was written without quotes or an explicit tag, so its type comes
// from its text.
func plain(n *yaml.Node) bool {
	return n.Style&(yaml.TaggedStyle|yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) == 0
}

// keyString is the JSON object key sigs.k8s.io/yaml makes of a YAML mapping key.
func keyString(k *yaml.Node) (string, error) {
	tag := k.ShortTag()
	if tag == "!!str" {
		if len(k.Value) <= 5 && plain(k) {
			if b, ok := yaml11Bool(k.Value); ok {
				return strconv.FormatBool(b), nil
			}
		}
		return k.Value, nil
	}
	switch tag {
	case "!!bool":
		var b bool
		if err := k.Decode(&b); err != nil {
			return "", fmt.Errorf("line %d: key: %w", k.Line, err)
		}
		return strconv.FormatBool(b), nil
	case "!!int":
		var i int64
		if err := k.Decode(&i); err != nil {
			return "", fmt.Errorf("line %d: key %q is not a string and does not fit a 64-bit integer", k.Line, k.Value)
		}
		return strconv.FormatInt(i, 10), nil
	case "!!float":
		var f float64
		if err := k.Decode(&f); err != nil {
			return "", fmt.Errorf("line %d: key: %w", k.Line, err)
		}
		switch {
		case math.IsInf(f, 1):
			return ".inf", nil
		case math.IsInf(f, -1):
			return "-.inf", nil
		case math.IsNaN(f):
			return ".nan", nil
		}
		return strconv.FormatFloat(f, 'g', -1, 32), nil
	case "!!binary":
		var s string
		if err := k.Decode(&s); err != nil {
			return "", fmt.Errorf("line %d: key: %w", k.Line, err)
		}
		return s, nil
	case "!!null":
		return "", fmt.Errorf("line %d: a mapping key is null", k.Line)
	}
	return k.Value, nil // timestamps and custom tags stay text
}

// writeJSON writes n as canonical JSON.
func (y *yamlParser) writeJSON(b *strings.Builder, n *yaml.Node, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("line %d: nested deeper than %d levels", n.Line, maxDepth)
	}
	if y.budget--; y.budget < 0 {
		return errAliasBudget(n)
	}
	if b.Len() > y.json {
		return tooMuchListJSON()
	}
	n = resolve(n)
	switch n.Kind {
	case yaml.ScalarNode:
		v, err := scalarValue(n)
		if err != nil {
			return err
		}
		b.WriteString(v.JSON())
		return nil
	case yaml.SequenceNode:
		b.WriteByte('[')
		for i, c := range n.Content {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := y.writeJSON(b, c, depth+1); err != nil {
				return err
			}
		}
		b.WriteByte(']')
		return nil
	case yaml.MappingNode:
		stack := len(y.pairs)
		pairs, err := y.mappingPairs(n, 0)
		if err != nil {
			return err
		}
		b.WriteByte('{')
		for i, p := range pairs {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(jsonString(p.key))
			b.WriteByte(':')
			if err := y.writeJSON(b, p.value, depth+1); err != nil {
				return err
			}
		}
		b.WriteByte('}')
		y.pairs = y.pairs[:stack]
		return nil
	}
	return fmt.Errorf("line %d: unexpected YAML node", n.Line)
}

// Canonical forms of the most common scalars, shared instead of rebuilt.
var (
	jsonTrue  = core.CanonicalJSONValue("true")
	jsonFalse = core.CanonicalJSONValue("false")
	jsonNull  = core.CanonicalJSONValue("null")
)

// scalarValue is a scalar's canonical JSON value, its type resolved as sigs.k8s.io/yaml does.
func scalarValue(n *yaml.Node) (core.Value, error) {
	switch n.ShortTag() {
	case "!!str":
		if len(n.Value) <= 5 && plain(n) {
			if b, ok := yaml11Bool(n.Value); ok {
				return boolValue(b), nil
			}
		}
		return core.CanonicalJSONValue(jsonString(n.Value)), nil
	case "!!null":
		return jsonNull, nil
	case "!!bool":
		switch n.Value { // yaml.v3's words for booleans, without Decode's round trip
		case "true", "True", "TRUE":
			return jsonTrue, nil
		case "false", "False", "FALSE":
			return jsonFalse, nil
		}
		var v bool
		if err := n.Decode(&v); err != nil {
			return core.Value{}, fmt.Errorf("line %d: %w", n.Line, err)
		}
		return boolValue(v), nil
	case "!!int":
		if decimalInt(n.Value) {
			// What Decode reads it as, without its round trip. FormatInt, not the text itself: the
			// text may be a piece of the whole file, which the value must not keep alive.
			return core.CanonicalJSONValue(strconv.FormatInt(parseDecimal(n.Value), 10)), nil
		}
		var v int64
		if err := n.Decode(&v); err == nil {
			return core.CanonicalJSONValue(strconv.FormatInt(v, 10)), nil
		}
		var u uint64
		if err := n.Decode(&u); err != nil {
			return core.Value{}, fmt.Errorf("line %d: %q is not a 64-bit integer", n.Line, n.Value)
		}
		// Beyond int64: let core decide the canonical form so values from JSON events compare equal.
		return core.ParseJSONValue([]byte(strconv.FormatUint(u, 10)))
	case "!!float":
		var v float64
		if err := n.Decode(&v); err != nil {
			return core.Value{}, fmt.Errorf("line %d: %w", n.Line, err)
		}
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return core.Value{}, fmt.Errorf("line %d: %s is not a JSON number", n.Line, n.Value)
		}
		enc, _ := json.Marshal(v) // a finite float64 always encodes
		return core.ParseJSONValue(enc)
	case "!!binary":
		var s string // go.yaml.in/yaml/v2 decodes binary into the string of its bytes
		if err := n.Decode(&s); err != nil {
			return core.Value{}, fmt.Errorf("line %d: %w", n.Line, err)
		}
		return core.CanonicalJSONValue(jsonString(s)), nil
	}
	// !!timestamp and custom tags stay strings, as in sigs.k8s.io/yaml.
	return core.CanonicalJSONValue(jsonString(n.Value)), nil
}

// parseDecimal is the value of a decimalInt.
func parseDecimal(v string) int64 {
	var x int64
	for i := 0; i < len(v); i++ {
		x = x*10 + int64(v[i]-'0')
	}
	return x
}

func boolValue(b bool) core.Value {
	if b {
		return jsonTrue
	}
	return jsonFalse
}

// jsonString is s as a JSON string exactly as encoding/json writes it (HTML-escaped), the canonical
// form core.Value uses.
func jsonString(s string) string {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c == '"' || c == '\\' || c >= 0x80 || c == '<' || c == '>' || c == '&' {
			enc, _ := json.Marshal(s) // strings always encode (invalid UTF-8 becomes U+FFFD)
			return string(enc)
		}
	}
	return `"` + s + `"`
}
