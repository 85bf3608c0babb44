package ledger

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"
)

// writer inserts records with prepared statements inside the update's transaction. Claims, the
// bulk of the rows (315,446 on home-ops), go in claimBatch rows to a statement: one at a time,
// their inserts were 10% of home-ops' first index, most of it the statement's own overhead. flush
// writes what is pending before the transaction commits.
type writer struct {
	tx                            *sql.Tx
	commit, claim, problem, field *sql.Stmt
	claims                        *sql.Stmt // claimBatch rows at once
	pending                       []any     // claim rows not yet inserted, claimColumns values each
	fields                        map[string]int64
}

const (
	claimBatch   = 64
	claimColumns = 7
	claimUpsert  = ` ON CONFLICT DO UPDATE SET has_value = excluded.has_value, vjson = excluded.vjson, vexpr = excluded.vexpr`
)

// newWriter prepares the inserts in tx. fields is the address -> id map of an earlier transaction
// of the same update, or nil to load it.
func newWriter(ctx context.Context, tx *sql.Tx, fields map[string]int64) (*writer, error) {
	w := &writer{tx: tx, fields: fields}
	var err error
	prep := func(q string) *sql.Stmt {
		if err != nil {
			return nil
		}
		var s *sql.Stmt
		s, err = tx.PrepareContext(ctx, q)
		return s
	}
	w.commit = prep(`INSERT INTO commits (branch, seq, hash, author_name, author_email, at, subject, intent, intent_declared,
		mot_kind, mot_ref, mot_severity, expires, pr, parents, sig_key, sig_problem) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	w.claim = prep(`INSERT INTO claims (branch, field, seq, kind, has_value, vjson, vexpr) VALUES (?, ?, ?, ?, ?, ?, ?)` + claimUpsert)
	// Rows of one statement are inserted in order, each seeing the ones before it: the upsert
	// works as it does one row at a time.
	w.claims = prep(`INSERT INTO claims (branch, field, seq, kind, has_value, vjson, vexpr) VALUES (?, ?, ?, ?, ?, ?, ?)` +
		strings.Repeat(`, (?, ?, ?, ?, ?, ?, ?)`, claimBatch-1) + claimUpsert)
	w.problem = prep(`INSERT INTO problems (branch, seq, path, line, key, value, message) VALUES (?, ?, ?, ?, ?, ?, ?)`)
	// Another process may add a field between two of this update's transactions (an update of
	// another branch): the insert then returns the existing row.
	w.field = prep(`INSERT INTO fields (addr, pattern) VALUES (?, ?)
		ON CONFLICT (addr) DO UPDATE SET pattern = fields.pattern RETURNING id`)
	if err != nil {
		w.close()
		return nil, fmt.Errorf("prepare statements: %w", err)
	}
	if fields != nil {
		return w, nil
	}
	w.fields = map[string]int64{}
	// The field table is small next to the claims (one row per field ever seen): load it once.
	rows, err := tx.QueryContext(ctx, `SELECT id, addr FROM fields`)
	if err != nil {
		w.close()
		return nil, fmt.Errorf("load fields: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var addr string
		if err := rows.Scan(&id, &addr); err != nil {
			w.close()
			return nil, fmt.Errorf("load fields: %w", err)
		}
		w.fields[addr] = id
	}
	if err := rows.Err(); err != nil {
		w.close()
		return nil, fmt.Errorf("load fields: %w", err)
	}
	return w, nil
}

func (w *writer) close() {
	for _, s := range []*sql.Stmt{w.commit, w.claim, w.claims, w.problem, w.field} {
		if s != nil {
			_ = s.Close()
		}
	}
	w.commit, w.claim, w.claims, w.problem, w.field = nil, nil, nil, nil, nil
	w.pending = nil
}

// insertBatches inserts the pending claims in whole batches, keeping the rest pending.
func (w *writer) insertBatches(ctx context.Context) error {
	const n = claimBatch * claimColumns
	i := 0
	for ; len(w.pending)-i >= n; i += n {
		if _, err := w.claims.ExecContext(ctx, w.pending[i:i+n]...); err != nil {
			return fmt.Errorf("insert claims: %w", err)
		}
	}
	w.pending = w.pending[:copy(w.pending, w.pending[i:])]
	return nil
}

// flush inserts every pending claim: whole batches, then the rest one by one.
func (w *writer) flush(ctx context.Context) error {
	if err := w.insertBatches(ctx); err != nil {
		return err
	}
	for i := 0; i < len(w.pending); i += claimColumns {
		if _, err := w.claim.ExecContext(ctx, w.pending[i:i+claimColumns]...); err != nil {
			return fmt.Errorf("insert claims: %w", err)
		}
	}
	w.pending = w.pending[:0]
	return nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func unixOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.Unix()
}

func (w *writer) write(ctx context.Context, branch int64, seq int, r *record) error {
	if _, err := w.commit.ExecContext(ctx, branch, seq, r.hash, r.authorName, r.authorEmail, r.at.Unix(), r.subject,
		string(r.intent), boolInt(r.intentDeclared), r.motivation.Kind, r.motivation.Ref, string(r.motivation.Severity),
		unixOrZero(r.expires), r.pr, r.parents, r.proof.Key, r.proof.Problem); err != nil {
		return fmt.Errorf("insert commit: %w", err)
	}
	for _, c := range r.claims {
		id, ok := w.fields[c.addr]
		if !ok {
			if err := w.field.QueryRowContext(ctx, c.addr, boolInt(c.pattern)).Scan(&id); err != nil {
				return fmt.Errorf("insert field %s: %w", c.addr, err)
			}
			w.fields[c.addr] = id
		}
		w.pending = append(w.pending, branch, id, seq, int(c.kind), boolInt(c.hasValue), c.value.JSON(), c.value.Expr())
	}
	if len(w.pending) >= claimBatch*claimColumns {
		// Whole batches only: the rest waits for the next record or the commit.
		if err := w.insertBatches(ctx); err != nil {
			return err
		}
	}
	for _, p := range r.problems {
		if _, err := w.problem.ExecContext(ctx, branch, seq, p.Path, p.Line, p.Key, p.Value, p.Message); err != nil {
			return fmt.Errorf("insert problem: %w", err)
		}
	}
	return nil
}
