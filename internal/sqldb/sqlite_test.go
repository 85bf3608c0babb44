package sqldb

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	_ "modernc.org/sqlite"
)

func openSQLite(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestMigrateSQLiteAppliesEachOnce: a new file gets every migration, a file opened again none
// (the ALTER would fail a second time), a file written before versioning is brought in by an IF
// NOT EXISTS first migration, a newer file is refused, and a failing migration leaves nothing.
func TestMigrateSQLiteAppliesEachOnce(t *testing.T) {
	ctx := context.Background()
	migrations := []string{
		`CREATE TABLE IF NOT EXISTS things (id INTEGER PRIMARY KEY, name TEXT NOT NULL)`,
		`ALTER TABLE things ADD COLUMN colour TEXT NOT NULL DEFAULT ''`,
	}
	path := filepath.Join(t.TempDir(), "a.db")
	db := openSQLite(t, path)
	for range 2 {
		if err := MigrateSQLite(ctx, db, path, migrations); err != nil {
			t.Fatal(err)
		}
	}
	var v int
	if err := db.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&v); err != nil || v != 2 {
		t.Fatalf("user_version %d, %v", v, err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO things (name, colour) VALUES ('a', 'red')`); err != nil {
		t.Fatal(err)
	}

	// Written before its migrations were versioned: the table is there, user_version 0.
	old := filepath.Join(t.TempDir(), "old.db")
	odb := openSQLite(t, old)
	if _, err := odb.ExecContext(ctx, migrations[0]); err != nil {
		t.Fatal(err)
	}
	if err := MigrateSQLite(ctx, odb, old, migrations); err != nil {
		t.Fatalf("a file from before versioning: %v", err)
	}

	// A newer Parley's file.
	if _, err := db.ExecContext(ctx, `PRAGMA user_version = 3`); err != nil {
		t.Fatal(err)
	}
	if err := MigrateSQLite(ctx, db, path, migrations); err == nil || !strings.Contains(err.Error(), "newer than this binary knows") {
		t.Fatalf("a newer file: %v", err)
	}

	// A failing migration: nothing of the run stays.
	bad := filepath.Join(t.TempDir(), "bad.db")
	bdb := openSQLite(t, bad)
	err := MigrateSQLite(ctx, bdb, bad, []string{migrations[0], `ALTER TABLE nothing ADD COLUMN x TEXT`})
	if err == nil || !strings.Contains(err.Error(), "migration 2") || !strings.Contains(err.Error(), bad) {
		t.Fatalf("a failing migration: %v", err)
	}
	var tables int
	if err := bdb.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE name = 'things'`).Scan(&tables); err != nil || tables != 0 {
		t.Fatalf("the failed run left %d tables (%v)", tables, err)
	}
	if err := bdb.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&v); err != nil || v != 0 {
		t.Fatalf("the failed run left user_version %d (%v)", v, err)
	}
}
