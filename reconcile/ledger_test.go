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

// TestLedgerSettingsMemoFollowsThePolicyBlob: a ledger opened again on a branch whose policy has
// not changed takes the policy's paths from the memo (no parse); when the branch moves to another
// policy, the new blob's paths are read, not the remembered ones, and moving back finds the first
// blob again. A memo that is bypassed fails on its hits; one keyed by branch, or answering what it
// kept for a moved branch, fails on the claims indexed.
func TestLedgerSettingsMemoFollowsThePolicyBlob(t *testing.T) {
	r := gittest.Init(t, time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC), time.Minute).As("Dana Okafor", "dana@parley.example")
	cm := func(name string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: " + name + ", namespace: n}\ndata: {x: '1'}\n"
	}
	r.Write("clusters/prod/a.yaml", cm("a"))
	r.Write("apps/b.yaml", cm("b"))
	narrow, wide := "ledger {\n  include = [\"clusters/**\"]\n}\n", "ledger {\n  include = [\"**\"]\n}\n"
	r.Write(".parley/policy.hcl", narrow)
	r.Commit("Initial\n")
	var memo reconcile.LedgerSettingsMemo
	read := func() (b int) {
		t.Helper()
		l, err := memo.OpenLedger(r.Dir, "main", "", ledger.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		if _, err = l.Update(context.Background(), "main"); err != nil {
			t.Fatal(err)
		}
		f, err := core.ParseField("k8s:core/ConfigMap/n/b#/data/x")
		if err != nil {
			t.Fatal(err)
		}
		h, err := l.History(f)
		if err != nil {
			t.Fatal(err)
		}
		return len(h)
	}
	steps := []struct {
		policy    string // committed first, unless empty
		b, hits   int
		situation string
	}{
		{"", 0, 0, "first open: parsed"},
		{"", 0, 1, "opened again, same tip: from the memo"},
		{wide, 1, 1, "the branch moved to a wider policy: parsed afresh"},
		{"", 1, 2, "opened again: the wide policy from the memo"},
		{narrow, 0, 3, "moved back to the first policy's blob: found again"},
	}
	for _, s := range steps {
		if s.policy != "" {
			r.Write(".parley/policy.hcl", s.policy)
			r.Commit("Change the ledger paths\n")
		}
		if b := read(); b != s.b || memo.Hits() != s.hits {
			t.Errorf("%s: %d claims on apps/b.yaml, %d memo hits; want %d and %d", s.situation, b, memo.Hits(), s.b, s.hits)
		}
	}
}
