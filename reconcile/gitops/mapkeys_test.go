package gitops

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/parleyhq/parley/reconcile/internal/yamlvalue"
)

// valuesFile is a Helm values file whose one mapping holds n one-line keys: "k0", "k1", ... or,
// with same, n times the key "k".
func valuesFile(n int, same bool) []byte {
	var b strings.Builder
	b.WriteString("config:\n")
	for i := range n {
		if same {
			b.WriteString("  k: v\n")
		} else {
			fmt.Fprintf(&b, "  k%d: v\n", i)
		}
	}
	return []byte(b.String())
}

// TestValuesReadInLinearWork (issue 34): values files and kustomizations read as maps went through
// yaml.v3's Unmarshal, which compares every key of a mapping with every other and, for each equal
// pair, allocates an error line: n equal keys cost n²/2 allocations (2,000 keys: two million).
// Read through yamlvalue, 4 times the keys cost at most 4 times the allocations, the first repeat
// refusing the file with its line.
func TestValuesReadInLinearWork(t *testing.T) {
	small, large := valuesFile(500, true), valuesFile(2_000, true)
	var err error
	a := testing.AllocsPerRun(1, func() { _, err = unmarshalStringMap(small) })
	if err == nil || !strings.Contains(err.Error(), `line 3: mapping key "k" already defined at line 2`) {
		t.Fatalf("err = %v, want the repeated key refused", err)
	}
	b := testing.AllocsPerRun(1, func() { _, err = unmarshalStringMap(large) })
	if b > 4*a+1_000 {
		t.Fatalf("500 equal keys: %.0f allocations; 2,000: %.0f, more than 4 times (quadratic)", a, b)
	}
	m, err := unmarshalStringMap(valuesFile(90_000, false))
	if err != nil || len(m["config"].(map[string]any)) != 90_000 {
		t.Fatalf("90,000 keys: %v", err)
	}
}

// TestStructDecodesBounded: an object's header and spec are decoded by yaml.v3 into structs, after
// their mappings are counted; one with more keys than yamlvalue.MaxStructKeys is a discovery
// problem naming the file, the line and the count. A ConfigMap's data, which the header decode
// never reads, may be of any size.
func TestStructDecodesBounded(t *testing.T) {
	var labels, data strings.Builder
	for i := range yamlvalue.MaxStructKeys + 1 {
		fmt.Fprintf(&labels, "    l%d: v\n", i)
		fmt.Fprintf(&data, "  d%d: v\n", i)
	}
	files := map[string][]byte{
		"apps/labels.yaml": []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  labels:\n" + labels.String()),
		"apps/data.yaml":   []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\ndata:\n" + data.String()),
		"clusters/prod/app.yaml": []byte("apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: app, namespace: flux-system}\nspec:\n  path: ./apps\n  postBuild:\n    substitute:\n" +
			strings.ReplaceAll(labels.String(), "    l", "      s")),
	}
	_, problems := Discover(files)
	var got []string
	for _, p := range problems {
		var ke *yamlvalue.KeysError
		if errors.As(p, &ke) {
			got = append(got, p.Error())
		}
	}
	want := []string{
		"apps/labels.yaml: document 1: line 6: a mapping of 5001 keys",
		"clusters/prod/app.yaml",
	}
	if len(got) != 2 || !strings.HasPrefix(got[0], want[0]) || !strings.HasPrefix(got[1], want[1]) || !strings.Contains(got[1], "a mapping of 5001 keys") {
		t.Fatalf("problems %q, want %q", got, want)
	}
}

// BenchmarkValuesKeys: a values file of one mapping of n keys read as a map (issue 34; yaml.v3's
// Unmarshal took about as long as depgraph's Build: 0.5 s at 10,000 keys, 47 s at 90,000).
func BenchmarkValuesKeys(b *testing.B) {
	for _, n := range []int{10_000, 40_000, 90_000} {
		content := valuesFile(n, false)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for b.Loop() {
				if _, err := unmarshalStringMap(content); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
