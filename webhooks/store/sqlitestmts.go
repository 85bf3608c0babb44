package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// sqliteStmts are the SQLite store's statements that run for every delivery (Put's batch, every
// worker's Claim and its outcome), for every metrics scrape and health check (Stats), and on the
// retention timer (Prune), prepared once at Open. modernc.org/sqlite parses and compiles the SQL
// again on every call given a query string (sqlite3_prepare_v2 was about 5% of parley serve's CPU
// under bench/attack); a prepared statement keeps its compiled program and is only reset between
// runs. Statements run once per process or at an operator's request (ReclaimLeases, DeadLetters,
// Replay) stay query strings.
//
// Each is prepared on its pool, on the connection that pool then had. database/sql prepares it
// again, once, on any other connection of the pool it first runs on, and keeps that too, so every
// connection parses each statement at most once while it lives. The write pool has one
// connection, and a transaction holds it: inside one, a statement is used as the transaction's
// (Tx.StmtContext), which takes the copy already prepared on that connection.
type sqliteStmts struct {
	// On the write connection.
	insert, findDuplicate               *sql.Stmt // commitBatch
	expireLeases, claim                 *sql.Stmt // Claim, in its transaction
	complete, fail, deadLetter, release *sql.Stmt // the leased delivery's outcome
	prune                               *sql.Stmt
	// On the read-only pool.
	get, statsPending, statsDead *sql.Stmt
	// On the checkpointer's connection.
	checkpoint *sql.Stmt
}

// prepareSQLiteStmts prepares every statement of sqliteStmts on its pool. No transaction may be
// open on write: its one connection must be free to prepare on.
func prepareSQLiteStmts(ctx context.Context, write, read, ckpt *sql.DB) (sqliteStmts, error) {
	var st sqliteStmts
	for _, p := range []struct {
		dst   **sql.Stmt
		db    *sql.DB
		name  string
		query string
	}{
		// No conflict target: a repeated (source, id) and a repeated (source, body_sha256) are
		// both duplicates.
		{&st.insert, write, "insert", `INSERT INTO deliveries
		(source, id, event, body, received_at, next_attempt_at, scope, body_sha256)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT DO NOTHING`},
		// Which delivery a duplicate body was stored under: was it the ID, or the body under
		// another ID?
		{&st.findDuplicate, write, "find duplicate", `SELECT id FROM deliveries WHERE source = ? AND body_sha256 = ? AND id <> ?`},
		// Claim's crash-loop guard: a delivery whose last allowed attempt ended in an expired
		// lease (the worker died holding it) is dead, not handed out again. ?1 now, ?2
		// MaxAttempts.
		{&st.expireLeases, write, "dead-letter expired leases", `UPDATE deliveries
		SET state = 2, finished_at = ?1,
		    last_error = 'lease of ' || lease_owner || ' expired on attempt ' || attempts || ' of ' || ?2 || ' (worker died or stalled)',
		    lease_owner = NULL, lease_until = NULL
		WHERE state = 0 AND lease_until IS NOT NULL AND lease_until <= ?1 AND attempts >= ?2`},
		// ?1 worker, ?2 lease end, ?3 now.
		{&st.claim, write, "claim", `UPDATE deliveries
		SET lease_owner = ?1, lease_until = ?2, attempts = attempts + 1
		WHERE seq = (
			SELECT seq FROM deliveries
			WHERE state = 0 AND next_attempt_at <= ?3 AND (lease_until IS NULL OR lease_until <= ?3)
			ORDER BY seq LIMIT 1)
		RETURNING ` + deliveryColumns},
		{&st.complete, write, "complete", `UPDATE deliveries
		SET state = 1, lease_owner = NULL, lease_until = NULL, finished_at = ?
		WHERE source = ? AND id = ? AND state = 0 AND lease_owner = ?`},
		// ?1 cause, ?2 next attempt, ?3 MaxAttempts, ?4 now, ?5 source, ?6 id, ?7 worker.
		{&st.fail, write, "fail", `UPDATE deliveries
		SET last_error = ?1, lease_owner = NULL, lease_until = NULL, next_attempt_at = ?2,
		    state = CASE WHEN attempts >= ?3 THEN 2 ELSE 0 END,
		    finished_at = CASE WHEN attempts >= ?3 THEN ?4 ELSE NULL END
		WHERE source = ?5 AND id = ?6 AND state = 0 AND lease_owner = ?7
		RETURNING state`},
		{&st.deadLetter, write, "dead-letter", `UPDATE deliveries
		SET state = 2, last_error = ?, lease_owner = NULL, lease_until = NULL, finished_at = ?
		WHERE source = ? AND id = ? AND state = 0 AND lease_owner = ?`},
		// Gives back the lease and the attempt.
		{&st.release, write, "release", `UPDATE deliveries
		SET lease_owner = NULL, lease_until = NULL, attempts = MAX(attempts - 1, 0)
		WHERE source = ? AND id = ? AND state = 0 AND lease_owner = ?`},
		{&st.prune, write, "prune", `DELETE FROM deliveries WHERE (state = 1 AND finished_at < ?) OR (state = 2 AND finished_at < ?)`},
		{&st.get, read, "get", `SELECT ` + deliveryColumns + ` FROM deliveries WHERE source = ? AND id = ?`},
		{&st.statsPending, read, "stats", `SELECT COUNT(*), MIN(received_at),
		COALESCE(SUM(CASE WHEN lease_until > ? THEN 1 ELSE 0 END), 0)
		FROM deliveries WHERE state = 0`},
		{&st.statsDead, read, "stats", `SELECT COUNT(*) FROM deliveries WHERE state = 2`},
		// The checkpointer only ever runs PASSIVE checkpoints (see SQLite.checkpointer).
		{&st.checkpoint, ckpt, "checkpoint", `PRAGMA wal_checkpoint(PASSIVE)`},
	} {
		stmt, err := p.db.PrepareContext(ctx, p.query)
		if err != nil {
			return sqliteStmts{}, errors.Join(fmt.Errorf("prepare %s: %w", p.name, err), st.close())
		}
		*p.dst = stmt
	}
	return st, nil
}

// close closes the statements prepared so far.
func (st *sqliteStmts) close() error {
	var errs []error
	for _, stmt := range []*sql.Stmt{
		st.insert, st.findDuplicate, st.expireLeases, st.claim, st.complete, st.fail,
		st.deadLetter, st.release, st.prune, st.get, st.statsPending, st.statsDead, st.checkpoint,
	} {
		if stmt != nil {
			errs = append(errs, stmt.Close())
		}
	}
	return errors.Join(errs...)
}
