package driftstate

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"time"
)

// Held writes: the admission webhook's observation mode (app/admission_observe.go) holds each
// admitted write until a later review of the same object shows it stored. They live here, beside
// the claims, rather than in one replica's memory, so that whichever replica answers the
// confirming review decides them, and a restart loses none. held_totals keeps each cluster's count
// and bytes, so that the bounds are checked with one row rather than a scan of the held writes.

// Held is an admitted write not yet seen stored.
type Held struct {
	Cluster string
	Object  string // the object (core.Field of the object, no path) the write is to
	UID     string // the review's uid
	BaseRV  string // the resourceVersion the write replaced ("" for a create)
	At      time.Time
	Body    []byte // the review as received
}

// HeldLimits bound a cluster's held writes: how many, and their reviews' bytes.
type HeldLimits struct {
	Count int
	Bytes int64
}

// ErrHeldAlready is Hold's error for a write whose review (cluster and uid) is held already: the
// same review answered by two replicas is held once.
var ErrHeldAlready = errors.New("drift state: the admitted write is held already")

// Hold stores w unless the cluster's held writes would pass lim; held is false then and
// nothing is stored. The bound is one conditional UPDATE of the cluster's totals row: on
// PostgreSQL its row lock orders two replicas holding at once, so the bound holds across them.
func (d *DB) Hold(ctx context.Context, w Held, lim HeldLimits) (held bool, err error) {
	size := int64(len(w.Body))
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("drift state: begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	res, err := d.exec(ctx, tx, `INSERT INTO {held} (cluster, object, uid, base_rv, at, bytes, body) VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (cluster, uid) DO NOTHING`, w.Cluster, w.Object, w.UID, w.BaseRV, w.At.UnixNano(), size, w.Body)
	if err != nil {
		return false, fmt.Errorf("drift state: hold %s of %s: %w", w.UID, w.Cluster, err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		if err == nil {
			err = ErrHeldAlready
		}
		return false, fmt.Errorf("drift state: hold %s of %s: %w", w.UID, w.Cluster, err)
	}
	// The totals row last, as every transaction takes it: on PostgreSQL its lock is then held only
	// for the commit.
	reserve := func() (bool, error) {
		res, err := d.exec(ctx, tx, `UPDATE {held_totals} SET n = n + 1, bytes = bytes + ? WHERE cluster = ? AND n < ? AND bytes + ? <= ?`,
			size, w.Cluster, lim.Count, size, lim.Bytes)
		if err != nil {
			return false, err
		}
		n, err := res.RowsAffected()
		return n == 1, err
	}
	ok, err := reserve()
	if err == nil && !ok {
		// No totals row yet (the cluster's first held write), or the bound is reached.
		var res sql.Result
		if res, err = d.exec(ctx, tx, `INSERT INTO {held_totals} (cluster, n, bytes) VALUES (?, 0, 0) ON CONFLICT (cluster) DO NOTHING`, w.Cluster); err == nil {
			if n, _ := res.RowsAffected(); n == 1 {
				ok, err = reserve()
			}
		}
	}
	if err != nil {
		return false, fmt.Errorf("drift state: hold %s of %s: %w", w.UID, w.Cluster, err)
	}
	if !ok {
		return false, nil // the rollback takes the write out again
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("drift state: hold %s of %s: commit: %w", w.UID, w.Cluster, err)
	}
	d.prepareWrites(ctx)
	return true, nil
}

// HasHeld reports whether a review of object (its uid, the resourceVersion its oldObject is
// stored at) finds writes to decide: held on the object, neither its own nor written on the same
// base. A read on the read connections, so that most reviews (of objects nothing is held for)
// cost no write transaction.
func (d *DB) HasHeld(ctx context.Context, cluster, object, uid, rv string) (bool, error) {
	var one int
	err := d.queryRow(ctx, `SELECT 1 FROM {held} WHERE cluster = ? AND object = ? AND uid <> ? AND base_rv <> ? LIMIT 1`,
		cluster, object, uid, rv).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("drift state: held writes on %s: %w", object, err)
	}
	return true, nil
}

// TakeHeld removes the writes a review of object decides (as HasHeld finds them) and gives them
// to decide, oldest first, in the transaction that removes them: when decide returns an error
// nothing is removed (they stay held for the next review). One DELETE ... RETURNING takes them,
// so of two replicas deciding the same writes at once only one gets each (PostgreSQL's row locks
// make the second wait and then find them gone; SQLite has one writer): a confirmed write is
// queued once.
func (d *DB) TakeHeld(ctx context.Context, cluster, object, uid, rv string, decide func([]Held) error) error {
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("drift state: begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	rows, err := tx.QueryContext(ctx, d.q(`DELETE FROM {held} WHERE cluster = ? AND object = ? AND uid <> ? AND base_rv <> ?
		RETURNING seq, uid, base_rv, at, bytes, body`), cluster, object, uid, rv)
	if err != nil {
		return fmt.Errorf("drift state: take held writes on %s: %w", object, err)
	}
	type taken struct {
		seq int64
		Held
	}
	var ws []taken
	var size int64
	for rows.Next() {
		w := taken{Held: Held{Cluster: cluster, Object: object}}
		var at, n int64
		if err := rows.Scan(&w.seq, &w.UID, &w.BaseRV, &at, &n, &w.Body); err != nil {
			rows.Close()
			return fmt.Errorf("drift state: take held writes on %s: %w", object, err)
		}
		w.At = time.Unix(0, at).UTC()
		size += n
		ws = append(ws, w)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("drift state: take held writes on %s: %w", object, err)
	}
	if len(ws) == 0 {
		return nil
	}
	// RETURNING's order is not defined: the oldest first, as they were held.
	out := make([]Held, len(ws))
	sort.Slice(ws, func(i, j int) bool { return ws[i].seq < ws[j].seq })
	for i, w := range ws {
		out[i] = w.Held
	}
	if err := decide(out); err != nil {
		return err
	}
	// The totals row last: on PostgreSQL its lock is then held only for the commit.
	if err := d.release(ctx, tx, cluster, len(ws), size); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("drift state: take held writes on %s: commit: %w", object, err)
	}
	d.prepareWrites(ctx)
	return nil
}

// ExpireHeld removes the writes held since before cutoff and returns how many each cluster lost.
// Replicas may sweep at once: each counts only what its DELETE removed.
func (d *DB) ExpireHeld(ctx context.Context, cutoff time.Time) (map[string]int, error) {
	// A read first: most sweeps find nothing, and cost no write transaction.
	var one int
	err := d.queryRow(ctx, `SELECT 1 FROM {held} WHERE at < ? LIMIT 1`, cutoff.UnixNano()).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("drift state: expired held writes: %w", err)
	}
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("drift state: begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	rows, err := tx.QueryContext(ctx, d.q(`DELETE FROM {held} WHERE at < ? RETURNING cluster, bytes`), cutoff.UnixNano())
	if err != nil {
		return nil, fmt.Errorf("drift state: expire held writes: %w", err)
	}
	count, size := map[string]int{}, map[string]int64{}
	for rows.Next() {
		var cluster string
		var n int64
		if err := rows.Scan(&cluster, &n); err != nil {
			rows.Close()
			return nil, fmt.Errorf("drift state: expire held writes: %w", err)
		}
		count[cluster]++
		size[cluster] += n
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("drift state: expire held writes: %w", err)
	}
	clusters := make([]string, 0, len(count))
	for c := range count {
		clusters = append(clusters, c)
	}
	sort.Strings(clusters) // the totals rows in one order, as every transaction takes them
	for _, c := range clusters {
		if err := d.release(ctx, tx, c, count[c], size[c]); err != nil {
			return nil, err
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("drift state: expire held writes: commit: %w", err)
	}
	d.prepareWrites(ctx)
	return count, nil
}

// HeldWrites returns a cluster's held writes, oldest first, with their count and bytes as the
// totals row keeps them (what the bounds are checked against).
func (d *DB) HeldWrites(ctx context.Context, cluster string) (ws []Held, n int, size int64, err error) {
	rows, err := d.queryRows(ctx, `SELECT object, uid, base_rv, at, body FROM {held} WHERE cluster = ? ORDER BY seq`, cluster)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("drift state: held writes of %s: %w", cluster, err)
	}
	defer rows.Close()
	for rows.Next() {
		w := Held{Cluster: cluster}
		var at int64
		if err := rows.Scan(&w.Object, &w.UID, &w.BaseRV, &at, &w.Body); err != nil {
			return nil, 0, 0, err
		}
		w.At = time.Unix(0, at).UTC()
		ws = append(ws, w)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, 0, err
	}
	err = d.queryRow(ctx, `SELECT n, bytes FROM {held_totals} WHERE cluster = ?`, cluster).Scan(&n, &size)
	if errors.Is(err, sql.ErrNoRows) {
		err = nil
	}
	return ws, n, size, err
}

// release takes n writes of size bytes off a cluster's totals.
func (d *DB) release(ctx context.Context, tx *sql.Tx, cluster string, n int, size int64) error {
	if _, err := d.exec(ctx, tx, `UPDATE {held_totals} SET n = n - ?, bytes = bytes - ? WHERE cluster = ?`, n, size, cluster); err != nil {
		return fmt.Errorf("drift state: held totals of %s: %w", cluster, err)
	}
	return nil
}
