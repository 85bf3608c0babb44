package driftstate

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/parleyhq/parley/core"
)

// svcField is the replicas of Deployment svc-i: one field per batch, so that batches touch
// different rows.
func svcField(i int) core.Field {
	return core.K8sField("apps", "Deployment", "prod", fmt.Sprintf("svc-%d", i), "/spec/replicas")
}

// Batches applied while a transaction is being written share the next one, and every caller is
// answered only once its batch is durable: N concurrent Applies take fewer than N transactions,
// and every claim is there after the state is opened again. A batch judged on a version that
// moved on is refused alone (ErrConflict) while the others in its transaction go in.
//
// So that the batches pile up however fast the disk is, the first one waits on a row another
// session holds uncommitted (its version row), and is let go once every caller has started.
func TestGroupCommitSharesTransactions(t *testing.T) {
	onEngines(t, func(t *testing.T, state func(string) *DB) {
		ctx := context.Background()
		const n = 32
		db := state("acme/infra")
		stale := svcField(n + 1)
		if err := db.Apply(ctx, Batch{Verdicts: []Record{{Verdict: core.Verdict{Field: stale, Decision: core.DecisionVeto}, At: t0, Evidence: []string{"timer/x"}}}, At: t0}); err != nil {
			t.Fatal(err)
		}
		g := NewGroup(db, 8)
		blocker := svcField(n)
		other := state("acme/infra") // another session: another replica, or another process on the file
		hold, err := other.db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := hold.ExecContext(ctx, other.q(`INSERT INTO {versions} (field, version) VALUES (?, 1)`), blocker.String()); err != nil {
			t.Fatal(err)
		}
		first := make(chan error, 1)
		go func() { first <- g.Apply(ctx, Batch{Expect: map[core.Field]int64{blocker: 0}, At: t0}) }()

		errs := make([]error, n+1)
		var started, done sync.WaitGroup
		for i := range n + 1 {
			started.Add(1)
			done.Add(1)
			go func() {
				defer done.Done()
				b := Batch{Events: []string{fmt.Sprintf("k8s-audit/g%d", i)}, At: t0}
				c := claim("hpa", i+1, t0, fmt.Sprintf("g%d", i))
				c.Field = svcField(i)
				b.Claims = []core.Claim{c}
				if i == n {
					c.Field = stale
					b.Claims = []core.Claim{c}
					b.Expect = map[core.Field]int64{stale: 0} // it is at 1: judged on what no longer stands
				}
				started.Done()
				errs[i] = g.Apply(ctx, b)
			}()
		}
		started.Wait()
		if err := hold.Rollback(); err != nil {
			t.Fatal(err)
		}
		if err := <-first; err != nil {
			t.Fatalf("the first batch: %v", err)
		}
		done.Wait()
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("batch %d: %v", i, errs[i])
			}
		}
		if !errors.Is(errs[n], ErrConflict) {
			t.Fatalf("the batch judged on a stale version: %v", errs[n])
		}
		if got := g.Transactions(); got >= n+2 {
			t.Fatalf("%d batches took %d transactions: no group commit", n+2, got)
		} else {
			t.Logf("%d batches in %d transactions", n+2, got)
		}
		if err := g.Close(); err != nil {
			t.Fatal(err)
		}
		if err := g.Apply(ctx, Batch{At: t0}); !errors.Is(err, ErrClosed) {
			t.Fatalf("Apply after Close: %v", err)
		}
		db.Close()
		other.Close()

		again := state("acme/infra")
		for i := range n {
			st, err := again.Standing(ctx, svcField(i))
			if err != nil {
				t.Fatal(err)
			}
			if len(st) != 1 || st[0].Value.String() != fmt.Sprint(i+1) {
				t.Fatalf("svc-%d after reopening: %+v", i, st)
			}
			if v, err := again.Version(ctx, svcField(i)); err != nil || v != 1 {
				t.Fatalf("svc-%d's version: %d %v", i, v, err)
			}
		}
		if st, err := again.Standing(ctx, stale); err != nil || len(st) != 0 {
			t.Fatalf("the refused batch's claim stands: %+v %v", st, err)
		}
	})
}

// A batch's expected versions are checked inside its transaction: one judged on a version that
// moved on records nothing (its events stay fresh, to be taken in again); one judged on the
// current version records and moves it on.
func TestApplyComparesAndSwapsVersions(t *testing.T) {
	onEngines(t, func(t *testing.T, state func(string) *DB) {
		ctx := context.Background()
		db := state("acme/infra")
		if v, err := db.Version(ctx, replicas); err != nil || v != 0 {
			t.Fatalf("a field never written: %d %v", v, err)
		}
		if err := db.Apply(ctx, Batch{Events: []string{"k8s-audit/e1"}, Claims: []core.Claim{claim("hpa", 3, t0, "e1")}, At: t0,
			Expect: map[core.Field]int64{replicas: 0}}); err != nil {
			t.Fatal(err)
		}
		err := db.Apply(ctx, Batch{Events: []string{"k8s-audit/e2"}, Claims: []core.Claim{claim("cost", 2, t0, "e2")}, At: t0,
			Expect: map[core.Field]int64{replicas: 0}})
		if !errors.Is(err, ErrConflict) {
			t.Fatalf("a batch judged on version 0 after version 1: %v", err)
		}
		if fresh, _ := db.Fresh(ctx, []string{"k8s-audit/e2"}); len(fresh) != 1 {
			t.Fatal("the refused batch's event was taken in")
		}
		if err := db.Apply(ctx, Batch{Events: []string{"k8s-audit/e2"}, Claims: []core.Claim{claim("cost", 2, t0, "e2")}, At: t0,
			Expect: map[core.Field]int64{replicas: 1}}); err != nil {
			t.Fatal(err)
		}
		// A write without expectations (a revert closing the claims) moves it on too.
		if err := db.Apply(ctx, Batch{Closes: []Close{{Object: replicas, Before: t0.Add(1), Why: "reverted"}}, At: t0}); err != nil {
			t.Fatal(err)
		}
		if v, err := db.Version(ctx, replicas); err != nil || v != 3 {
			t.Fatalf("after three writes: %d %v", v, err)
		}
	})
}

// Replicas racing to record on one field, each judged on the same version through its own
// connection to the state: exactly one records, the others are told to judge again.
func TestComparedAndSwappedAcrossReplicas(t *testing.T) {
	onEngines(t, func(t *testing.T, state func(string) *DB) {
		ctx := context.Background()
		const sessions = 6
		dbs := make([]*DB, sessions)
		for i := range dbs {
			dbs[i] = state("acme/infra")
		}
		errs := make([]error, sessions)
		var wg sync.WaitGroup
		for i := range dbs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := claim(fmt.Sprintf("replica-%d", i), i+1, t0, fmt.Sprintf("r%d", i))
				errs[i] = dbs[i].Apply(ctx, Batch{Events: []string{fmt.Sprintf("k8s-audit/r%d", i)}, Claims: []core.Claim{c}, At: t0,
					Expect: map[core.Field]int64{c.Field: 0}})
			}()
		}
		wg.Wait()
		won := 0
		for i, err := range errs {
			switch {
			case err == nil:
				won++
			case !errors.Is(err, ErrConflict):
				t.Fatalf("replica %d: %v", i, err)
			}
		}
		if won != 1 {
			t.Fatalf("%d replicas recorded on a field judged at the same version", won)
		}
		if st, err := dbs[0].Standing(ctx, replicas); err != nil || len(st) != 1 {
			t.Fatalf("standing: %+v %v", st, err)
		}
	})
}

// Every caller is answered only once its batch is committed, however the writer groups them
// (alone in a transaction, or sharing one): the moment Apply
// returns nil, another session (another replica, or the state opened again) reads the claim. A
// batch alone in its transaction that is refused (ErrConflict) records nothing, its event stays
// fresh, and the writer goes on.
func TestGroupAnswersOnlyWhatIsCommitted(t *testing.T) {
	onEngines(t, func(t *testing.T, state func(string) *DB) {
		ctx := context.Background()
		db := state("acme/infra")
		reader := state("acme/infra")
		g := NewGroup(db, 4)
		defer g.Close()

		lone := claim("hpa", 2, t0, "lone")
		lone.Field = svcField(100)
		err := g.Apply(ctx, Batch{Events: []string{"k8s-audit/lone"}, Claims: []core.Claim{lone}, At: t0,
			Expect: map[core.Field]int64{lone.Field: 1}}) // never written: at 0
		if !errors.Is(err, ErrConflict) {
			t.Fatalf("a lone batch judged on a version the field never had: %v", err)
		}
		if fresh, err := reader.Fresh(ctx, []string{"k8s-audit/lone"}); err != nil || len(fresh) != 1 {
			t.Fatalf("the refused lone batch's event was taken in: %v %v", fresh, err)
		}
		if v, err := reader.Version(ctx, lone.Field); err != nil || v != 0 {
			t.Fatalf("the refused lone batch moved its field: %d %v", v, err)
		}

		const n = 24
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := claim("hpa", i+1, t0, fmt.Sprintf("c%d", i))
				c.Field = svcField(i)
				if err := g.Apply(ctx, Batch{Events: []string{fmt.Sprintf("k8s-audit/c%d", i)}, Claims: []core.Claim{c}, At: t0,
					Expect: map[core.Field]int64{c.Field: 0}}); err != nil {
					errs[i] = err
					return
				}
				st, err := reader.Standing(ctx, c.Field)
				switch {
				case err != nil:
					errs[i] = err
				case len(st) != 1 || st[0].Value.String() != fmt.Sprint(i+1):
					errs[i] = fmt.Errorf("answered before its claim was committed: another session reads %+v", st)
				}
			}()
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("batch %d: %v", i, err)
			}
		}
		if got := g.Transactions(); got > n+1 {
			t.Fatalf("%d batches took %d transactions", n+1, got)
		} else {
			t.Logf("%d batches in %d transactions", n+1, got)
		}
	})
}
