package sqldb

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestRebind(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"SELECT 1", "SELECT 1"},
		{"SELECT * FROM t WHERE a = ? AND b = ?", "SELECT * FROM t WHERE a = $1 AND b = $2"},
		{"UPDATE t SET a = ?1 WHERE b <= ?1 AND c >= ?2", "UPDATE t SET a = $1 WHERE b <= $1 AND c >= $2"},
		{"SELECT '?' || ? FROM \"we?ird\"", "SELECT '?' || $1 FROM \"we?ird\""},
		{"SELECT 'it''s' , ?", "SELECT 'it''s' , $1"},
	} {
		if got := Rebind(Postgres, c.in); got != c.want {
			t.Errorf("Rebind(%q) = %q, want %q", c.in, got, c.want)
		}
		if got := Rebind(SQLite, c.in); got != c.in {
			t.Errorf("SQLite: Rebind(%q) = %q, want it unchanged", c.in, got)
		}
	}
}

func TestIsPostgresAndRedact(t *testing.T) {
	if !IsPostgres("postgres://u:p@h/db") || !IsPostgres("postgresql://h/db") || IsPostgres("/var/lib/parley/parley.db") {
		t.Fatal("IsPostgres")
	}
	if r := Redact("postgres://parley:s3cret@db.internal:5433/parley?sslmode=require"); strings.Contains(r, "s3cret") || r != "postgres://parley@db.internal:5433/parley" {
		t.Fatalf("Redact: %s", r)
	}
	if _, _, err := OpenPostgres(context.Background(), "postgres://u:s3cret@[bad", 1); err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("a bad URL: %v", err)
	}
}

// Replicas starting together migrate once: eight concurrent migrations of two components leave
// each migration applied once, and a binary that knows fewer migrations is refused.
func TestMigratePostgresOnceUnderConcurrency(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	migs := []string{
		`CREATE TABLE things (id BIGSERIAL PRIMARY KEY, name TEXT NOT NULL)`,
		`ALTER TABLE things ADD COLUMN note TEXT NOT NULL DEFAULT ''`,
	}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pool, db, err := OpenPostgres(ctx, dsn, 2)
			if err != nil {
				errs <- err
				return
			}
			defer pool.Close()
			defer db.Close()
			if err := MigratePostgres(ctx, db, "things", migs); err != nil {
				errs <- err
			}
			if err := MigratePostgres(ctx, db, "others", []string{`CREATE TABLE others (id BIGINT)`}); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	pool, db, err := OpenPostgres(ctx, dsn, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	defer db.Close()
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM parley_schema WHERE component = 'things'`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("things migrations recorded: %d %v", n, err)
	}
	if err := MigratePostgres(ctx, db, "things", migs[:1]); err == nil || !strings.Contains(err.Error(), "newer than this binary knows") {
		t.Fatalf("an older binary: %v", err)
	}
}

// A lock is held by one holder at a time across pools (replicas), and a holder whose connection
// ends frees it.
func TestLocksExcludeAcrossPools(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	poolA, dbA, err := OpenPostgres(ctx, dsn, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer dbA.Close()
	poolB, dbB, err := OpenPostgres(ctx, dsn, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer poolB.Close()
	defer dbB.Close()
	a, b := Locks{Pool: poolA}, Locks{Pool: poolB}
	unlock, err := a.Lock(ctx, "repo:acme/infra")
	if err != nil {
		t.Fatal(err)
	}
	// Another name is free; the same name waits.
	other, err := b.Lock(ctx, "repo:acme/apps")
	if err != nil {
		t.Fatal(err)
	}
	other()
	wait, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	if _, err := b.Lock(wait, "repo:acme/infra"); err == nil {
		t.Fatal("two holders of one lock")
	}
	cancel()
	unlock()
	again, err := b.Lock(ctx, "repo:acme/infra")
	if err != nil {
		t.Fatalf("after unlock: %v", err)
	}
	again()
	// A holder whose session ends (its replica died) frees the lock; its unlock then only cleans up.
	dying, err := a.Lock(ctx, "repo:acme/infra")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := poolB.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND granted AND pid != pg_backend_pid()`); err != nil {
		t.Fatal(err)
	}
	wait, cancel = context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if u, err := b.Lock(wait, "repo:acme/infra"); err != nil {
		t.Fatalf("the lock of an ended session: %v", err)
	} else {
		u()
	}
	dying()
	poolA.Close()
}
