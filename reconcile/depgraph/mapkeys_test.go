package depgraph

import (
	"fmt"
	"strings"
	"testing"

	"github.com/parleyhq/parley/core"
)

// configMap is one ConfigMap whose data holds n one-line keys: "k0", "k1", ... or, with same,
// n times the key "k".
func configMap(n int, same bool) map[string][]byte {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: big, namespace: prod}\ndata:\n")
	for i := range n {
		if same {
			b.WriteString("  k: v\n")
		} else {
			fmt.Fprintf(&b, "  k%d: v\n", i)
		}
	}
	b.WriteString("---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: prod}\nspec: {template: {spec: {containers: [{name: c, envFrom: [{configMapRef: {name: big}}]}]}}}\n")
	return map[string][]byte{"apps/big.yaml": []byte(b.String())}
}

// TestMappingKeysReadInLinearWork (issue 34): yaml.v3's Decode into an any compared every key of a
// mapping with every other, n²/2 comparisons, and for each equal pair appended an error line. The
// comparisons allocate nothing, the error lines do: a mapping of n equal keys cost yaml.v3 n²/2
// allocations (2,000 keys: two million) where reading it should cost a constant number, the
// first repeat being enough to refuse it. So the allocations of 4 times the keys stay within 4
// times, and the refusal names the repeated key's line.
func TestMappingKeysReadInLinearWork(t *testing.T) {
	small, large := configMap(500, true), configMap(2_000, true)
	var errs []error
	a := testing.AllocsPerRun(1, func() { _, errs = Build(small) })
	if len(errs) != 1 || !strings.HasPrefix(errs[0].Error(), "apps/big.yaml: document 1: ") ||
		!strings.Contains(errs[0].Error(), `line 6: mapping key "k" already defined at line 5`) {
		t.Fatalf("errors %v, want the repeated key refused", errs)
	}
	b := testing.AllocsPerRun(1, func() { _, errs = Build(large) })
	if b > 4*a+1_000 {
		t.Fatalf("500 equal keys: %.0f allocations; 2,000: %.0f, more than 4 times (quadratic)", a, b)
	}
}

// TestManyKeysBuild: a ConfigMap of 90,000 keys (47 s before issue 34) is read and its consumer
// found.
func TestManyKeysBuild(t *testing.T) {
	g, errs := Build(configMap(90_000, false))
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	if got := g.Dependents(core.K8sField("", "ConfigMap", "prod", "big", "/data/k89999")); len(got) != 1 {
		t.Fatalf("dependents of the last key: %v, want the Deployment", got)
	}
}

// BenchmarkBuildMappingKeys: Build on one ConfigMap of n distinct keys (issue 34; before: 0.5 s at
// 10,000, 10.6 s at 40,000, 47 s at 90,000).
func BenchmarkBuildMappingKeys(b *testing.B) {
	for _, n := range []int{10_000, 40_000, 90_000} {
		files := configMap(n, false)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for b.Loop() {
				if _, errs := Build(files); len(errs) != 0 {
					b.Fatal(errs)
				}
			}
		})
	}
}
