package review

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/busycluster"
	"github.com/parleyhq/parley/internal/demo"
	"github.com/parleyhq/parley/policy"
	"github.com/parleyhq/parley/trailers/ledger"
)

// BenchmarkDiffPolicy is the what-if of removing the HPA's ownership of replicas on the busy
// cluster (the demo repository and 1,000 Deployments in prod: about 10,000 fields, 1,001 of them
// replicas whose owner_when lists prod's HorizontalPodAutoscalers). "one pass" is what the App and
// parley policy diff run (the ledger's Branch, read in one EachField pass); "field by field" is a
// GitState without EachField (two index reads per field, as the diff did before). Both answer
// git_values() from the diff's memo.
func BenchmarkDiffPolicy(b *testing.B) {
	ctx := context.Background()
	dir := filepath.Join(b.TempDir(), "busy")
	if _, err := busycluster.Build(dir); err != nil {
		b.Fatal(err)
	}
	led, err := ledger.Open(dir, ledger.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { led.Close() })
	if _, err := led.Update(ctx, "main"); err != nil {
		b.Fatal(err)
	}
	branch, err := led.Branch("main")
	if err != nil {
		b.Fatal(err)
	}
	old, err := policy.Parse([]byte(demo.Policy()), "base.hcl")
	if err != nil {
		b.Fatal(err)
	}
	owner := `  owner      = "hpa"
  owner_when = contains(git_values("k8s:autoscaling/HorizontalPodAutoscaler/${field.namespace}/*#/spec/scaleTargetRef/name"), field.name)
`
	next, err := policy.Parse([]byte(strings.Replace(demo.Policy(), owner, "", 1)), "next.hcl")
	if err != nil {
		b.Fatal(err)
	}
	at := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
	for _, bc := range []struct {
		name string
		git  GitState
	}{{"one pass", branch}, {"field by field", struct{ GitState }{branch}}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				d, err := DiffPolicy(ctx, old, next, bc.git, at)
				if err != nil {
					b.Fatal(err)
				}
				if d.Fields < busycluster.Deployments || len(d.Now) == 0 {
					b.Fatalf("%d fields, %d differ now", d.Fields, len(d.Now))
				}
			}
		})
	}
}
