package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// migrations are applied in order, in one transaction together with the rows that record them
// in schema_version. Never edit a released migration: append a new one.
var migrations = []string{
	// 1: the delivery queue.
	`CREATE TABLE deliveries (
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
	CREATE INDEX deliveries_dead    ON deliveries (seq) WHERE state = 2;`,
	// 2: the cluster a drift event came from (Delivery.Scope); '' for every earlier delivery.
	`ALTER TABLE deliveries ADD COLUMN scope TEXT NOT NULL DEFAULT ''`,
	// 3: the SHA-256 of a non-empty body, unique per source: a body replayed under another
	// delivery ID is a duplicate (DuplicateBodyError). NULL for earlier deliveries.
	`ALTER TABLE deliveries ADD COLUMN body_sha256 BLOB;
	CREATE UNIQUE INDEX deliveries_body ON deliveries (source, body_sha256) WHERE body_sha256 IS NOT NULL;`,
}

// migrate brings the schema up to date. It refuses a database written by a newer Parley, whose
// schema this binary does not know.
func migrate(ctx context.Context, db *sql.DB, path string) error {
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_version (
		version    INTEGER PRIMARY KEY,
		applied_at INTEGER NOT NULL
	)`); err != nil {
		return fmt.Errorf("store %s: create schema_version: %w", path, err)
	}
	// One IMMEDIATE transaction for reading the version and applying what is missing: two
	// processes opening the same new file cannot both apply a migration.
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store %s: begin migration: %w", path, err)
	}
	defer func() { _ = tx.Rollback() }()
	var current int
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_version`).Scan(&current); err != nil {
		return fmt.Errorf("store %s: read schema version: %w", path, err)
	}
	if current > len(migrations) {
		return fmt.Errorf("store %s: schema version %d is newer than this binary knows (%d)", path, current, len(migrations))
	}
	for v := current + 1; v <= len(migrations); v++ {
		if _, err := tx.ExecContext(ctx, migrations[v-1]); err != nil {
			return fmt.Errorf("store %s: migration %d: %w", path, v, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_version (version, applied_at) VALUES (?, ?)`, v, time.Now().UnixNano()); err != nil {
			return fmt.Errorf("store %s: record migration %d: %w", path, v, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store %s: commit migrations: %w", path, err)
	}
	return nil
}
