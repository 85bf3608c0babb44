package fielddiff

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"testing"

	"go.yaml.in/yaml/v3"
)

// checkFastMatchesV3 checks the fast reader's contract on one stream: when it reads the stream,
// yaml.v3 reads it without error into the same documents (the node fields the flattening reads),
// and the parser's leaves, objects and alias budget equal yaml.v3's path. It reports whether the
// fast reader read the stream.
func checkFastMatchesV3(t testing.TB, p string, content []byte) bool {
	t.Helper()
	roots, ok, _ := fastDocuments(content)
	if !ok {
		return false
	}
	want, err := decodeV3(content)
	if err != nil {
		t.Fatalf("the fast reader reads a stream yaml.v3 refuses (%v):\n%s", err, content)
	}
	if len(roots) != len(want) {
		t.Fatalf("fast reader: %d documents, yaml.v3: %d:\n%s", len(roots), len(want), content)
	}
	same := map[*yaml.Node]*yaml.Node{}
	for i := range roots {
		if d := nodeDifference(roots[i], want[i], "/", same); d != "" {
			t.Fatalf("document %d: %s:\n%s", i+1, d, content)
		}
	}
	fast, ok, _ := fastParseObjects(p, content)
	slow, err := parseYAMLv3(p, content)
	if !ok {
		if err == nil {
			t.Fatalf("the fast reader read the documents but declined objects yaml.v3's path reads:\n%s", content)
		}
		return true
	}
	if err != nil {
		t.Fatalf("the fast path reads what yaml.v3's path refuses (%v):\n%s", err, content)
	}
	if !reflect.DeepEqual(fast.leaves, slow.leaves) || !reflect.DeepEqual(fast.objects, slow.objects) || fast.budget != slow.budget {
		t.Fatalf("fast path: %d leaves %v budget %d; yaml.v3: %d leaves %v budget %d:\n%s",
			len(fast.leaves), fast.objects, fast.budget, len(slow.leaves), slow.objects, slow.budget, content)
	}
	return true
}

// decodeV3 returns each document's root as yaml.v3's Decoder reads it.
func decodeV3(content []byte) ([]*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(content))
	var roots []*yaml.Node
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return roots, nil
		}
		if err != nil {
			return nil, err
		}
		if len(n.Content) != 1 {
			return nil, fmt.Errorf("a document of %d nodes", len(n.Content))
		}
		roots = append(roots, n.Content[0])
	}
}

// nodeDifference describes the first difference between two trees in what the flattening reads.
// same maps each node of the fast reader's trees visited so far to yaml.v3's: an alias must point
// to the node yaml.v3's alias points to (anchors come before their aliases, in this pre-order walk).
func nodeDifference(got, want *yaml.Node, at string, same map[*yaml.Node]*yaml.Node) string {
	if got.Kind != want.Kind || got.Style != want.Style || got.Tag != want.Tag || got.Value != want.Value ||
		len(got.Content) != len(want.Content) || got.Anchor != want.Anchor || (got.Alias == nil) != (want.Alias == nil) {
		return fmt.Sprintf("at %s: fast kind %d style %d tag %q value %q anchor %q (%d children); yaml.v3 kind %d style %d tag %q value %q anchor %q (%d children)",
			at, got.Kind, got.Style, got.Tag, got.Value, got.Anchor, len(got.Content), want.Kind, want.Style, want.Tag, want.Value, want.Anchor, len(want.Content))
	}
	if got.Alias != nil && same[got.Alias] != want.Alias {
		return fmt.Sprintf("at %s: alias *%s points to another node than yaml.v3's", at, got.Value)
	}
	same[got] = want
	for i := range got.Content {
		if d := nodeDifference(got.Content[i], want.Content[i], fmt.Sprintf("%s%d/", at, i), same); d != "" {
			return d
		}
	}
	return ""
}

func FuzzFastReaderMatchesYAMLv3(f *testing.F) {
	for _, src := range []string{deployment, configMap, fluxKustomization, argoApplication, kustomization, prometheusRule, checkoutDeployment} {
		f.Add([]byte(src))
	}
	for _, src := range fastShapes {
		f.Add([]byte(src))
	}
	f.Fuzz(func(t *testing.T, content []byte) {
		checkFastMatchesV3(t, "apps/x/manifest.yaml", content)
	})
}

// TestFastReaderReadsManifests: the shapes real manifests are written in take the fast path (and
// match yaml.v3's), and what yaml.v3 refuses, or the reader does not handle, does not.
func TestFastReaderReadsManifests(t *testing.T) {
	for _, src := range []string{deployment, configMap, fluxKustomization, argoApplication, kustomization, prometheusRule, checkoutDeployment} {
		if !checkFastMatchesV3(t, "apps/x/manifest.yaml", []byte(src)) {
			t.Errorf("the fast reader declines:\n%s", src)
		}
	}
	for _, name := range []string{"helmrelease-anchors", "helmrelease-values-block-scalars", "crd-multiline-descriptions",
		"json-object-and-swagger", "indentation-edges", "multi-document-stream", "scalar-types"} {
		src := fuzzSeed(t, "FuzzFastReaderMatchesYAMLv3", name)
		if _, ok, _ := fastParseObjects("apps/x/manifest.yaml", src); !ok || !checkFastMatchesV3(t, "apps/x/manifest.yaml", src) {
			t.Errorf("the fast reader declines the seed %s", name)
		}
	}
	for _, name := range []string{"declined-shapes", "errors-yaml-refuses"} {
		if _, ok, _ := fastParseObjects("apps/x/manifest.yaml", fuzzSeed(t, "FuzzFastReaderMatchesYAMLv3", name)); ok {
			t.Errorf("the fast reader reads the seed %s", name)
		}
	}
}

// fastShapes are the forms the fast reader handles, each next to a form it declines.
var fastShapes = []string{
	"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  lit: |\n    one\n\n    two\n  keep: |+\n    x\n\n  strip: >-\n    a\n    b\n\n    c\n      d\n    e\n  ind: |2\n      six\n    four\n  fold: >\n\n    x\n     y\n    z\n",
	"{\"apiVersion\": \"v1\", \"kind\": \"Secret\",\n \"metadata\": {\"name\": \"s\", \"labels\": {\"a/b\": \"\\u00e9\\n\\\"\"}},\n \"data\": {\"n\": [1, -2.5e3, true, null, \"x\"], \"e\": [], \"m\": {}}\n}\n",
	"---\n# c\napiVersion: v1 # c\nkind: ConfigMap\nmetadata: {name: a, namespace: 'b''c'}\ndata:\n  \"q\": '1'\n  'r': \"\\x41\\t\"\n  y: yes\n  o: 0o17\n  h: 0x1F\n  u: 1_000\n  f: 1.5\n  t: 2001-12-14\n  n: ~\n  e:\n  v: 1.2.3\n---\n---\n",
	"apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\nspec:\n  template:\n    spec:\n      containers:\n      - name: a\n        args:\n        - --x=1\n        -   \"y\"\n        -\n        - - nested\n",
	"apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: a\n  data: {k: v}\n",
	"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  k: a\n    b\n  l: [a,\n   b]\n  m: \"x\n    y\"\n",
	"a: &x 1\nb: *x\nc: !!str 2\n? d\n: e\n%YAML 1.2\n",
}

// TestPlainTagMatchesYAMLv3 compares plainTag's shortcuts with yaml.v3's own resolution on the
// common shapes of manifest values and on every text of up to three characters from the bytes
// its rules look at.
func TestPlainTagMatchesYAMLv3(t *testing.T) {
	check := func(v string) {
		n := yaml.Node{Kind: yaml.ScalarNode, Value: v}
		if got, want := plainTag(v), n.ShortTag(); got != want {
			t.Errorf("plainTag(%q) = %s, yaml.v3 says %s", v, got, want)
		}
	}
	for _, v := range []string{"", "0", "7", "08", "0755", "0x1F", "0o17", "0b101", "1_000", "123456789012345678",
		"1234567890123456789", "99999999999999999999", "500m", "512Mi", "1Gi", "2.8.1", "1.5", "1e3", "1E+3", "1.",
		"2001-12-14", "2001-12-14t21:59:43.10-05:00", "2024-01-01 10:00:00", "1234-", "12:30", "3d", "10.0.0.1/8",
		"true", "True", "TRUE", "tRUE", "false", "no", "yes", "on", "off", "y", "n", "null", "Null", "~", "<<", "<",
		"name", "nginx", "onedr0p", "-1", "+1", "-", ".5", ".inf", "-.inf", ".nan", "1-2", "1+2", "0xZZ", "1__2"} {
		check(v)
	}
	alphabet := "019abefxoOXEBT.+-_: ~n<"
	var rec func(prefix string, n int)
	rec = func(prefix string, n int) {
		check(prefix)
		if n == 0 {
			return
		}
		for i := 0; i < len(alphabet); i++ {
			rec(prefix+alphabet[i:i+1], n-1)
		}
	}
	rec("", 3)
	for _, p := range []string{"2024-", "1234-5", "12345", "0x12.", "1.2e"} {
		rec(p, 2)
	}
}
