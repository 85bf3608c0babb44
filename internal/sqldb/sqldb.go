// Package sqldb holds what Parley's stores share to run on two engines: SQLite, the embedded
// default (one file per store beside one process), and PostgreSQL, for several replicas of parley
// serve (one database for every store). It opens a PostgreSQL database as a database/sql pool on
// pgx (github.com/jackc/pgx/v5/stdlib), rewrites the ? placeholders the stores' queries are written
// with into PostgreSQL's $n, and runs versioned migrations under a lock so that replicas starting
// together migrate once.
//
// The stores write portable SQL where the engines agree (INSERT ... ON CONFLICT, RETURNING,
// CASE) and keep per-engine text only for DDL and the few statements that differ.
package sqldb

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
)

// Engine is a database engine.
type Engine int

// Engines.
const (
	SQLite Engine = iota
	Postgres
)

func (e Engine) String() string {
	if e == Postgres {
		return "postgres"
	}
	return "sqlite"
}

// IsPostgres reports whether a store setting names a PostgreSQL database (a postgres:// or
// postgresql:// URL) rather than a SQLite file.
func IsPostgres(target string) bool {
	return strings.HasPrefix(target, "postgres://") || strings.HasPrefix(target, "postgresql://")
}

// CheckTarget refuses a store setting that is neither a postgres:// (or postgresql://) URL nor a
// plain file path: a key=value connection string (pgx's keyword form, "host=db password=..."), a
// URL of another scheme, or a file: URI with parameters. Taken as a SQLite file name, such a value
// would put its password in the logs and on disk as a file name, and every replica would run
// alone on its own file. The error shows the value with anything that looks like a password
// redacted (RedactAny).
func CheckTarget(target string) error {
	if IsPostgres(target) {
		return nil
	}
	var why string
	switch {
	case target == "":
		why = "it is empty"
	case strings.Contains(target, "://"):
		why = "it is a URL, and only postgres:// and postgresql:// URLs name a database"
	case strings.ContainsAny(target, "=?"):
		why = "it holds '=' or '?', as a key=value connection string or URI parameters do"
	case strings.HasPrefix(target, "file:"):
		why = "it is a file: URI"
	case strings.ContainsFunc(target, func(r rune) bool { return r < ' ' || r == 0x7f }):
		why = "it holds control characters"
	default:
		return nil
	}
	return fmt.Errorf("store %q is neither a postgres:// URL nor a plain file path (%s): write PostgreSQL as postgres://user@host:5432/db with the password in PGPASSWORD or the URL, a SQLite store as a file path",
		RedactAny(target), why)
}

// passwordish matches the values of keys that look like they hold a secret, in key=value
// connection strings and URL queries.
var passwordish = regexp.MustCompile(`(?i)((?:pass|pwd|secret|token|key|auth)[a-z_]*\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s&]*)`)

// userinfoPassword matches the password of a URL's user information.
var userinfoPassword = regexp.MustCompile(`(://[^/@:\s]*:)[^@/\s]*@`)

// RedactAny returns a store setting of any form fit for a log or an error: a PostgreSQL URL as
// Redact gives it, anything else with the values of password-like keys and a URL's password
// replaced by "[redacted]".
func RedactAny(target string) string {
	if IsPostgres(target) {
		return Redact(target)
	}
	out := userinfoPassword.ReplaceAllString(target, "${1}[redacted]@")
	return passwordish.ReplaceAllString(out, "${1}[redacted]")
}

// Redact returns a PostgreSQL URL without its password, for logs and errors.
func Redact(dsn string) string {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return "postgres://(unparseable URL)"
	}
	c := cfg.ConnConfig
	return fmt.Sprintf("postgres://%s@%s:%d/%s", c.User, c.Host, c.Port, c.Database)
}

// OpenPostgres opens a pool of at most maxConns connections to the database dsn names and checks
// that it answers. The pool is pgx's; the *sql.DB is a database/sql view of it, for stores
// written against database/sql. Closing the *sql.DB does not close the pool: close both.
func OpenPostgres(ctx context.Context, dsn string, maxConns int32) (*pgxpool.Pool, *sql.DB, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// pgx's parse errors can quote the URL, password and all.
		return nil, nil, fmt.Errorf("PostgreSQL URL %s: cannot be parsed", Redact(dsn))
	}
	if maxConns > 0 {
		cfg.MaxConns = maxConns
	}
	cfg.MaxConnIdleTime = 5 * time.Minute
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("PostgreSQL %s: %w", Redact(dsn), err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, nil, fmt.Errorf("PostgreSQL %s: %w", Redact(dsn), err)
	}
	return pool, stdlib.OpenDBFromPool(pool), nil
}

// Rebind rewrites a query's ? and ?N placeholders as PostgreSQL's $N for the Postgres engine;
// for SQLite it returns the query as it is. Placeholders inside quoted strings and identifiers
// are left alone.
func Rebind(e Engine, query string) string {
	if e != Postgres || !strings.Contains(query, "?") {
		return query
	}
	var b strings.Builder
	b.Grow(len(query) + 8)
	n := 0
	var quote byte
	for i := 0; i < len(query); i++ {
		c := query[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
			b.WriteByte(c)
		case c == '\'' || c == '"':
			quote = c
			b.WriteByte(c)
		case c == '?':
			j := i + 1
			for j < len(query) && query[j] >= '0' && query[j] <= '9' {
				j++
			}
			if j > i+1 {
				b.WriteString("$" + query[i+1:j]) // ?N: a numbered parameter keeps its number
				i = j - 1
				continue
			}
			n++
			fmt.Fprintf(&b, "$%d", n)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// migrationLock is the advisory lock key every component's migrations take: one migration runs at
// a time in the database, whichever replica and component starts it.
const migrationLock = 7_243_511_020_173

// MigratePostgres applies component's migrations that the database has not applied yet, in order,
// in one transaction holding an advisory lock: replicas starting together migrate once, and the
// others find the work done. Versions are recorded per component in parley_schema. It refuses a
// database a newer Parley migrated further than this binary knows.
func MigratePostgres(ctx context.Context, db *sql.DB, component string, migrations []string) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("%s: begin migration: %w", component, err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(migrationLock)); err != nil {
		return fmt.Errorf("%s: migration lock: %w", component, err)
	}
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS parley_schema (
		component  TEXT    NOT NULL,
		version    INTEGER NOT NULL,
		applied_at BIGINT  NOT NULL,
		PRIMARY KEY (component, version))`); err != nil {
		return fmt.Errorf("%s: create parley_schema: %w", component, err)
	}
	var current int
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM parley_schema WHERE component = $1`, component).Scan(&current); err != nil {
		return fmt.Errorf("%s: read schema version: %w", component, err)
	}
	if current > len(migrations) {
		return fmt.Errorf("%s: schema version %d is newer than this binary knows (%d)", component, current, len(migrations))
	}
	for v := current + 1; v <= len(migrations); v++ {
		if _, err := tx.ExecContext(ctx, migrations[v-1]); err != nil {
			return fmt.Errorf("%s: migration %d: %w", component, v, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO parley_schema (component, version, applied_at) VALUES ($1, $2, $3)`,
			component, v, time.Now().UnixNano()); err != nil {
			return fmt.Errorf("%s: record migration %d: %w", component, v, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("%s: commit migrations: %w", component, err)
	}
	return nil
}

// MigrateSQLite applies the migrations a SQLite database file has not applied yet, in order, in
// one transaction; the file's user_version records how many it has. A file with version 0 that
// already holds the tables (written before its migrations were versioned) is brought in by a
// first migration written with IF NOT EXISTS. It refuses a file a newer Parley migrated further
// than this binary knows. name is how errors name the file.
func MigrateSQLite(ctx context.Context, db *sql.DB, name string, migrations []string) error {
	conn, err := db.Conn(ctx) // PRAGMA and the transaction on one connection
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	defer conn.Close()
	// BEGIN IMMEDIATE takes the write lock before reading the version: two processes opening one
	// new file cannot both apply a migration.
	if _, err := conn.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
		return fmt.Errorf("%s: begin migration: %w", name, err)
	}
	committed := false
	defer func() {
		if !committed {
			_, _ = conn.ExecContext(context.Background(), `ROLLBACK`)
		}
	}()
	var current int
	if err := conn.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&current); err != nil {
		return fmt.Errorf("%s: read schema version: %w", name, err)
	}
	if current > len(migrations) {
		return fmt.Errorf("%s: schema version %d is newer than this binary knows (%d)", name, current, len(migrations))
	}
	for v := current + 1; v <= len(migrations); v++ {
		if _, err := conn.ExecContext(ctx, migrations[v-1]); err != nil {
			return fmt.Errorf("%s: migration %d: %w", name, v, err)
		}
	}
	if current < len(migrations) {
		// PRAGMA takes no parameter; the number is ours.
		if _, err := conn.ExecContext(ctx, fmt.Sprintf(`PRAGMA user_version = %d`, len(migrations))); err != nil {
			return fmt.Errorf("%s: record schema version: %w", name, err)
		}
	}
	if _, err := conn.ExecContext(ctx, `COMMIT`); err != nil {
		return fmt.Errorf("%s: commit migrations: %w", name, err)
	}
	committed = true
	return nil
}

// Locks are PostgreSQL advisory locks shared by every replica on one database: a named lock is
// held by one session at a time, and is released when its holder unlocks or its connection ends
// (a replica that dies holding one frees it).
type Locks struct{ Pool *pgxpool.Pool }

// Lock waits for the lock named name and returns the function that releases it; it holds one
// pooled connection meanwhile. ctx bounds the wait.
func (l Locks) Lock(ctx context.Context, name string) (func(), error) {
	conn, err := l.Pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", name, err)
	}
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock(hashtextextended($1, 0))`, name); err != nil {
		// The session may hold nothing, or be mid-wait: a fresh connection is the safe state.
		_ = conn.Conn().Close(context.Background())
		conn.Release()
		return nil, fmt.Errorf("lock %s: %w", name, err)
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := conn.Exec(ctx, `SELECT pg_advisory_unlock(hashtextextended($1, 0))`, name); err != nil {
			// Unlocking failed: closing the session is what releases the lock then.
			_ = conn.Conn().Close(ctx)
		}
		conn.Release()
	}, nil
}
