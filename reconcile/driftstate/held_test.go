package driftstate

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/sqldb"
)

const webObject = "apps/Deployment/prod/web"

func heldWrite(uid, baseRV string, body string) Held {
	return Held{Cluster: "prod", Object: webObject, UID: uid, BaseRV: baseRV, At: t0, Body: []byte(body)}
}

// Held writes outlive the process that held them: a state opened again (a restart, or another
// replica) finds them, decides them and counts them against the cluster's bounds.
func TestHeldWritesAreDurableAndBounded(t *testing.T) {
	onEngines(t, func(t *testing.T, state func(string) *DB) {
		ctx := context.Background()
		a := state("acme/infra")
		lim := HeldLimits{Count: 2, Bytes: 10}
		for _, w := range []Held{heldWrite("u1", "41", "1234"), heldWrite("u2", "41", "5678")} {
			if ok, err := a.Hold(ctx, w, lim); err != nil || !ok {
				t.Fatalf("hold %s: %v %v", w.UID, ok, err)
			}
		}
		// The same review again (another replica answered it too): held once.
		if ok, err := a.Hold(ctx, heldWrite("u1", "41", "1234"), HeldLimits{Count: 5, Bytes: 100}); !errors.Is(err, ErrHeldAlready) || ok {
			t.Fatalf("a review held twice: %v %v", ok, err)
		}
		// Past the count, and past the bytes: not held.
		if ok, err := a.Hold(ctx, heldWrite("u3", "41", "9"), lim); err != nil || ok {
			t.Fatalf("a third write held past the count: %v %v", ok, err)
		}
		if ok, err := a.Hold(ctx, heldWrite("u3", "41", "9"), HeldLimits{Count: 5, Bytes: 8}); err != nil || ok {
			t.Fatalf("a write held past the bytes: %v %v", ok, err)
		}
		// Another cluster has bounds of its own.
		other := heldWrite("o1", "7", "abc")
		other.Cluster = "staging"
		if ok, err := a.Hold(ctx, other, lim); err != nil || !ok {
			t.Fatalf("another cluster's write: %v %v", ok, err)
		}

		b := state("acme/infra") // the same state, opened again
		ws, n, size, err := b.HeldWrites(ctx, "prod")
		if err != nil || len(ws) != 2 || n != 2 || size != 8 || ws[0].UID != "u1" || string(ws[1].Body) != "5678" || !ws[0].At.Equal(t0) {
			t.Fatalf("held writes seen again: %+v %d %d %v", ws, n, size, err)
		}
		// A review on the same base decides nothing; one past it takes both, once.
		if has, err := b.HasHeld(ctx, "prod", webObject, "r1", "41"); err != nil || has {
			t.Fatalf("a review on the base finds writes to decide: %v %v", has, err)
		}
		if has, err := b.HasHeld(ctx, "prod", webObject, "r1", "42"); err != nil || !has {
			t.Fatalf("a review past the base finds none: %v %v", has, err)
		}
		var got []string
		if err := b.TakeHeld(ctx, "prod", webObject, "r1", "42", func(ws []Held) error {
			for _, w := range ws {
				got = append(got, w.UID)
			}
			return nil
		}); err != nil || fmt.Sprint(got) != "[u1 u2]" {
			t.Fatalf("taken: %v %v", got, err)
		}
		if err := a.TakeHeld(ctx, "prod", webObject, "r1", "42", func(ws []Held) error {
			t.Errorf("taken twice: %+v", ws)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		// Their bytes and count are released: the cluster holds again.
		if _, n, size, err := a.HeldWrites(ctx, "prod"); err != nil || n != 0 || size != 0 {
			t.Fatalf("totals after taking: %d %d %v", n, size, err)
		}
		if ok, err := a.Hold(ctx, heldWrite("u3", "42", "9"), lim); err != nil || !ok {
			t.Fatalf("held after release: %v %v", ok, err)
		}
	})
}

// What decide refuses (the queue failed) stays held, for the next review to try again.
func TestHeldWritesStayWhenTheirDecisionFails(t *testing.T) {
	onEngines(t, func(t *testing.T, state func(string) *DB) {
		ctx := context.Background()
		db := state("acme/infra")
		if ok, err := db.Hold(ctx, heldWrite("u1", "41", "x"), HeldLimits{Count: 10, Bytes: 100}); err != nil || !ok {
			t.Fatal(ok, err)
		}
		refused := errors.New("queue closed")
		if err := db.TakeHeld(ctx, "prod", webObject, "r1", "42", func([]Held) error { return refused }); !errors.Is(err, refused) {
			t.Fatalf("take: %v", err)
		}
		if ws, n, _, err := db.HeldWrites(ctx, "prod"); err != nil || len(ws) != 1 || n != 1 {
			t.Fatalf("after a refused decision: %+v %d %v", ws, n, err)
		}
	})
}

// Replicas deciding the same review at once: each held write goes to exactly one of them.
func TestHeldWritesAreTakenOnceByConcurrentReplicas(t *testing.T) {
	onEngines(t, func(t *testing.T, state func(string) *DB) {
		ctx := context.Background()
		replicas := []*DB{state("acme/infra"), state("acme/infra"), state("acme/infra"), state("acme/infra")}
		const writes = 20
		for i := range writes {
			if ok, err := replicas[0].Hold(ctx, heldWrite(fmt.Sprint("u", i), "41", "x"), HeldLimits{Count: 100, Bytes: 1000}); err != nil || !ok {
				t.Fatal(ok, err)
			}
		}
		var mu sync.Mutex
		taken := map[string]int{}
		var wg sync.WaitGroup
		for r, db := range replicas {
			wg.Add(1)
			go func() { // the test waits for each below
				defer wg.Done()
				err := db.TakeHeld(ctx, "prod", webObject, fmt.Sprint("review-", r), "42", func(ws []Held) error {
					mu.Lock()
					defer mu.Unlock()
					for _, w := range ws {
						taken[w.UID]++
					}
					return nil
				})
				if err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		if len(taken) != writes {
			t.Fatalf("taken %d of %d: %v", len(taken), writes, taken)
		}
		for uid, n := range taken {
			if n != 1 {
				t.Errorf("%s taken %d times", uid, n)
			}
		}
	})
}

func TestHeldWritesExpire(t *testing.T) {
	onEngines(t, func(t *testing.T, state func(string) *DB) {
		ctx := context.Background()
		db := state("acme/infra")
		old, fresh := heldWrite("u1", "41", "xx"), heldWrite("u2", "41", "y")
		fresh.At = t0.Add(time.Hour)
		for _, w := range []Held{old, fresh} {
			if ok, err := db.Hold(ctx, w, HeldLimits{Count: 10, Bytes: 100}); err != nil || !ok {
				t.Fatal(ok, err)
			}
		}
		gone, err := db.ExpireHeld(ctx, t0.Add(time.Minute))
		if err != nil || gone["prod"] != 1 || len(gone) != 1 {
			t.Fatalf("expired: %v %v", gone, err)
		}
		if gone, err := state("acme/infra").ExpireHeld(ctx, t0.Add(time.Minute)); err != nil || len(gone) != 0 {
			t.Fatalf("expired again: %v %v", gone, err)
		}
		if ws, n, size, err := db.HeldWrites(ctx, "prod"); err != nil || len(ws) != 1 || ws[0].UID != "u2" || n != 1 || size != 1 {
			t.Fatalf("left: %+v %d %d %v", ws, n, size, err)
		}
	})
}

// A state file written before held writes were kept gets their tables when opened.
func TestHeldTablesAreAddedToAnOlderState(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "drift.db")
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	if err := sqldb.MigrateSQLite(ctx, db, "old", sqliteMigrations[:2]); err != nil {
		t.Fatal(err)
	}
	db.Close()
	st := open(t, path)
	if ok, err := st.Hold(ctx, heldWrite("u1", "41", "x"), HeldLimits{Count: 1, Bytes: 10}); err != nil || !ok {
		t.Fatalf("hold on a migrated state: %v %v", ok, err)
	}
}
