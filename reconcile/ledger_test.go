package reconcile_test

import (
	"context"
	"testing"
	"time"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/internal/gittest"
	"github.com/parleyhq/parley/reconcile"
	"github.com/parleyhq/parley/trailers/ledger"
)

// TestOpenLedgerReadsThePolicysPaths: the ledger block on the indexed branch decides the files
// read; changing it rebuilds the branch's ledger with the new paths.
func TestOpenLedgerReadsThePolicysPaths(t *testing.T) {
	r := gittest.Init(t, time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC), time.Minute).As("Dana Okafor", "dana@parley.example")
	cm := func(name string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: " + name + ", namespace: n}\ndata: {x: '1'}\n"
	}
	r.Write("clusters/prod/a.yaml", cm("a"))
	r.Write("apps/b.yaml", cm("b"))
	r.Write(".parley/policy.hcl", "ledger {\n  include = [\"clusters/**\"]\n}\n")
	r.Commit("Initial\n")
	fieldA, fieldB := "k8s:core/ConfigMap/n/a#/data/x", "k8s:core/ConfigMap/n/b#/data/x"
	read := func() (a, b int, stats ledger.UpdateStats) {
		t.Helper()
		l, err := reconcile.OpenLedger(r.Dir, "main", "", ledger.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		if stats, err = l.Update(context.Background(), "main"); err != nil {
			t.Fatal(err)
		}
		for i, addr := range []string{fieldA, fieldB} {
			f, err := core.ParseField(addr)
			if err != nil {
				t.Fatal(err)
			}
			h, err := l.History(f)
			if err != nil {
				t.Fatal(err)
			}
			if i == 0 {
				a = len(h)
			} else {
				b = len(h)
			}
		}
		return a, b, stats
	}
	if a, b, _ := read(); a != 1 || b != 0 {
		t.Errorf("include clusters/**: %d claims on a, %d on b; want 1 and 0", a, b)
	}
	r.Write(".parley/policy.hcl", "ledger {\n  include = [\"**\"]\n}\n")
	r.Commit("Read every path\n")
	if a, b, stats := read(); a != 1 || b != 1 || !stats.PathsChanged {
		t.Errorf("include **: %d claims on a, %d on b (paths changed: %v); want 1, 1 and a rebuild", a, b, stats.PathsChanged)
	}
}
