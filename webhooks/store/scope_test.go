package store

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestValidScope(t *testing.T) {
	for _, ok := range []string{"a", "0", "prod", "prod-eu-1", "Prod_EU.1", "a-", strings.Repeat("x", 63)} {
		if err := ValidScope(ok); err != nil {
			t.Errorf("ValidScope(%q) = %v, want nil", ok, err)
		}
	}
	for _, bad := range []string{"", "-x", ".x", "_x", "a b", "a/b", "a:b", "ünï", "a\nb", strings.Repeat("x", 64), strings.Repeat("y", 70)} {
		err := ValidScope(bad)
		if err == nil {
			t.Errorf("ValidScope(%q) = nil, want an error", bad)
			continue
		}
		if want := `"` + strings.ReplaceAll(bad, "\n", `\n`) + `"`; !strings.Contains(err.Error(), want) {
			t.Errorf("ValidScope(%q) = %q, want an error naming %s", bad, err, want)
		}
	}
	// A huge value is named, but cut short.
	if err := ValidScope(strings.Repeat("z", 1<<20)); err == nil || len(err.Error()) > 512 || !strings.Contains(err.Error(), `zzz"...`) {
		t.Errorf("ValidScope(1 MiB) = %.600v, want a short error", err)
	}
}

// schemaV1 is migration 1 as released, copied here so that this test keeps describing the
// databases written before migration 2 whatever becomes of the migrations list.
const schemaV1 = `CREATE TABLE deliveries (
		seq             INTEGER PRIMARY KEY AUTOINCREMENT, -- arrival order; "oldest first"
		source          TEXT    NOT NULL,
		id              TEXT    NOT NULL,
		event           TEXT    NOT NULL,
		body            BLOB    NOT NULL,
		received_at     INTEGER NOT NULL,                  -- unix nanoseconds, as every time here
		state           INTEGER NOT NULL DEFAULT 0,        -- 0 pending, 1 done, 2 dead
		attempts        INTEGER NOT NULL DEFAULT 0,
		next_attempt_at INTEGER NOT NULL,
		lease_owner     TEXT,
		lease_until     INTEGER,
		last_error      TEXT    NOT NULL DEFAULT '',
		finished_at     INTEGER,
		UNIQUE (source, id)
	);
	CREATE INDEX deliveries_pending ON deliveries (seq) WHERE state = 0;
	CREATE INDEX deliveries_leases  ON deliveries (lease_until) WHERE state = 0 AND lease_until IS NOT NULL;
	CREATE INDEX deliveries_dead    ON deliveries (seq) WHERE state = 2;`

// TestOpenMigratesSchema1: a database written by a Parley that knew only migration 1 opens,
// gains the scope column, and its deliveries read back unscoped.
func TestOpenMigratesSchema1(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "parley.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)`,
		schemaV1,
		`INSERT INTO schema_version (version, applied_at) VALUES (1, 0)`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("create the version 1 database: %v", err)
		}
	}
	if _, err := db.Exec(`INSERT INTO deliveries (source, id, event, body, received_at, next_attempt_at)
		VALUES (?, ?, ?, ?, ?, ?)`, SourceFlux, "old", "event", []byte(`{"old":true}`), t0.UnixNano(), t0.UnixNano()); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatalf("Open a version 1 database: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	old, err := s.Get(ctx, Key{SourceFlux, "old"})
	if err != nil {
		t.Fatal(err)
	}
	if old.Scope != "" || string(old.Body) != `{"old":true}` || !old.ReceivedAt.Equal(t0) || old.State != StatePending {
		t.Errorf("old delivery after migration = %+v, want it unchanged with Scope \"\"", old)
	}
	mustPut(t, s, Delivery{Source: SourceFlux, ID: "new", Event: "event", ReceivedAt: t0.Add(time.Second), Scope: "prod"})
	if d := mustClaim(t, s, "w", time.Minute, t0.Add(time.Minute)); d.ID != "old" || d.Scope != "" {
		t.Errorf("first claim = %s scope %q, want the old delivery, unscoped", d.Key(), d.Scope)
	}
	if d := mustClaim(t, s, "w", time.Minute, t0.Add(time.Minute)); d.ID != "new" || d.Scope != "prod" {
		t.Errorf("second claim = %s scope %q, want new, scope prod", d.Key(), d.Scope)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// The migration was recorded: the file now is at the newest version and reopens as is.
	db, err = sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	var version int
	err = db.QueryRow(`SELECT MAX(version) FROM schema_version`).Scan(&version)
	_ = db.Close()
	if err != nil || version != len(migrations) {
		t.Fatalf("schema version after Open = %d, %v; want %d", version, err, len(migrations))
	}
	s2, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer s2.Close()
	if d, err := s2.Get(ctx, Key{SourceFlux, "new"}); err != nil || d.Scope != "prod" {
		t.Errorf("after reopen: Get new = %+v, %v; want scope prod", d, err)
	}
}
