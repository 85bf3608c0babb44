package depgraph

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/parleyhq/parley/core/fielddiff"
)

// TestLargeManifestsAreNotDecodedWhole: the dependency graph decodes manifests with yaml.v3 into
// maps, which for an 8 MiB ConfigMap of 560,000 small keys (a file any pull request may add)
// allocated well over a gigabyte. Past fielddiff's YAML budgets the file is named in the errors
// and not decoded; the rest of the tree still makes the graph.
func TestLargeManifestsAreNotDecodedWhole(t *testing.T) {
	var big strings.Builder
	big.WriteString("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big\ndata:\n")
	for i := range 560_000 {
		fmt.Fprintf(&big, "  k%d: v\n", i)
	}
	files := map[string][]byte{
		"apps/big.yaml": []byte(big.String()),
		"apps/web.yaml": []byte("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {template: {spec: {containers: [{name: c, envFrom: [{configMapRef: {name: settings}}]}]}}}\n"),
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	g, errs := Build(files)
	runtime.ReadMemStats(&after)
	var budget *fielddiff.YAMLBudgetError
	if len(errs) != 1 || !errors.As(errs[0], &budget) || !strings.HasPrefix(errs[0].Error(), "apps/big.yaml: more than 400000 YAML nodes") {
		t.Fatalf("errors %v, want the budget refusal of apps/big.yaml alone", errs)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 160<<20 {
		t.Errorf("building the graph allocated %d MB, want under 160 MB", got>>20)
	}
	if g == nil {
		t.Fatal("no graph of the files that read")
	}
}
