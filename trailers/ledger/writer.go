package ledger

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// writer inserts records inside the update's transaction. It holds the rows back and writes them
// in multi-row statements when the transaction commits (flush), or sooner when many are pending:
// row by row, the statements' own overhead (binding, database/sql, the RETURNING of each new
// field) was most of the 4.2 s the writes of home-ops' first index took (27,559 commits, 315,446
// claims, 93,130 fields).
//
// Claims, the bulk of the rows, are sorted into the table's key order (field, seq, kind) before
// they are written: inserts in key order fill each B-tree page once instead of touching pages
// across the whole table for every commit.
//
// New fields get their ids from the writer (the largest id in the index plus one, as SQLite would
// assign them) so that a claim needs no round trip to learn its field's id. That is safe because
// the update's transaction holds SQLite's write lock (BEGIN IMMEDIATE): nobody else adds a field
// while it runs. Between two of the update's transactions (a checkpoint) another process may add
// fields (an update of another branch); newWriter then reads them before assigning more.
type writer struct {
	tx         *sql.Tx
	branch     int64
	fields     *fieldIDs
	maxPending int // claims held back at most: more are written before the checkpoint

	commits   []any          // commit rows not yet inserted, commitValues values each
	claims    []pendingClaim // claim rows not yet inserted
	newFields []any          // field rows not yet inserted, fieldColumns values each

	full   map[string]*sql.Stmt // prepared full-batch inserts, by table
	lookup *sql.Stmt            // a field's id by its address, when fields is not complete
}

// fieldIDs is the address -> id map of the index's fields, kept across the transactions of one
// update. Fields are never deleted or renumbered (a rebuild keeps them), so a known id stays right.
type fieldIDs struct {
	ids map[string]int64
	// complete is true when ids holds every field of the index: an address not in it is new. An
	// incremental update of a few commits does not load the whole table (93,130 fields on
	// home-ops): it looks up the addresses it meets.
	complete bool
	last     int64 // the largest id in the index: the writer's next new field is last+1
}

// pendingClaim is a claim row held back until the flush; the branch is the writer's.
type pendingClaim struct {
	field, seq int64
	kind       claimKind
	pos        int32 // its place among the pending rows, set by flush
	hasValue   bool
	vjson      string
	vexpr      string
}

const (
	commitValues = 16 // besides the branch, which the statement holds as a literal
	claimColumns = 6  // likewise
	fieldColumns = 3
	// Rows per full-batch statement: enough that the statement's fixed cost is small next to its
	// rows, few enough that its text stays short to prepare. (SQLite's limit on bound values,
	// 32,766, is far.)
	commitBatch = 128
	claimBatch  = 512
	fieldBatch  = 512
)

// newWriter starts writing the rows of branch in tx. fields is the map of an earlier transaction of
// the same update, or nil for the update's first; loadAll says to load every field of the index
// (an update of many commits) rather than look addresses up one by one.
func newWriter(ctx context.Context, tx *sql.Tx, branch int64, fields *fieldIDs, loadAll bool, maxPending int) (*writer, error) {
	w := &writer{tx: tx, branch: branch, fields: fields, maxPending: maxPending, full: map[string]*sql.Stmt{}}
	var last int64
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(id), 0) FROM fields`).Scan(&last); err != nil {
		return nil, fmt.Errorf("read fields: %w", err)
	}
	switch {
	case w.fields == nil:
		w.fields = &fieldIDs{ids: map[string]int64{}}
		// An empty index (a first index) is complete already.
		if loadAll || last == 0 {
			if err := w.fields.load(ctx, tx, 0); err != nil {
				return nil, err
			}
			w.fields.complete = true
		}
	case last != w.fields.last && w.fields.complete:
		// Another process added fields between two of this update's transactions.
		if err := w.fields.load(ctx, tx, w.fields.last); err != nil {
			return nil, err
		}
	}
	w.fields.last = last
	return w, nil
}

// load reads the fields whose id is above after.
func (f *fieldIDs) load(ctx context.Context, tx *sql.Tx, after int64) error {
	rows, err := tx.QueryContext(ctx, `SELECT id, addr FROM fields WHERE id > ?`, after)
	if err != nil {
		return fmt.Errorf("load fields: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var addr string
		if err := rows.Scan(&id, &addr); err != nil {
			return fmt.Errorf("load fields: %w", err)
		}
		f.ids[addr] = id
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("load fields: %w", err)
	}
	return nil
}

func (w *writer) close() {
	if w == nil {
		return // newWriter failed at a checkpoint
	}
	for _, s := range w.full {
		_ = s.Close()
	}
	if w.lookup != nil {
		_ = w.lookup.Close()
	}
	w.full, w.lookup = map[string]*sql.Stmt{}, nil
	w.commits, w.claims, w.newFields = nil, nil, nil
}

func boolInt(b bool) int64 {
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

// fieldID returns the id of the field at addr, giving a new field the next id.
func (w *writer) fieldID(ctx context.Context, addr string, pattern bool) (int64, error) {
	if id, ok := w.fields.ids[addr]; ok {
		return id, nil
	}
	if !w.fields.complete {
		if w.lookup == nil {
			s, err := w.tx.PrepareContext(ctx, `SELECT id FROM fields WHERE addr = ?`)
			if err != nil {
				return 0, fmt.Errorf("look up field %s: %w", addr, err)
			}
			w.lookup = s
		}
		var id int64
		err := w.lookup.QueryRowContext(ctx, addr).Scan(&id)
		if err == nil {
			w.fields.ids[addr] = id
			return id, nil
		}
		if err != sql.ErrNoRows {
			return 0, fmt.Errorf("look up field %s: %w", addr, err)
		}
	}
	// The first claim on an address decides whether it is a pattern, as the row it makes says.
	w.fields.last++
	id := w.fields.last
	w.fields.ids[addr] = id
	w.newFields = append(w.newFields, id, addr, boolInt(pattern))
	return id, nil
}

func (w *writer) write(ctx context.Context, seq int, r *record) error {
	w.commits = append(w.commits, int64(seq), r.hash, r.authorName, r.authorEmail, r.at.Unix(), r.subject,
		string(r.intent), boolInt(r.intentDeclared), r.motivation.Kind, r.motivation.Ref, string(r.motivation.Severity),
		unixOrZero(r.expires), int64(r.pr), int64(r.parents), r.proof.Key, r.proof.Problem)
	for _, c := range r.claims {
		id, err := w.fieldID(ctx, c.addr, c.pattern)
		if err != nil {
			return err
		}
		w.claims = append(w.claims, pendingClaim{field: id, seq: int64(seq), kind: c.kind, hasValue: c.hasValue,
			vjson: c.value.JSON(), vexpr: c.value.Expr()})
	}
	for _, p := range r.problems {
		if _, err := w.tx.ExecContext(ctx, `INSERT INTO problems (branch, seq, path, line, key, value, message) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			w.branch, seq, p.Path, p.Line, p.Key, p.Value, p.Message); err != nil {
			return fmt.Errorf("insert problem: %w", err)
		}
	}
	if len(w.claims) >= w.maxPending {
		return w.flush(ctx)
	}
	return nil
}

// flush inserts every row held back: fields, commits, then claims in key order.
func (w *writer) flush(ctx context.Context) error {
	if err := w.insertRows(ctx, "fields", `INSERT INTO fields (id, addr, pattern) VALUES `, "(?, ?, ?)", fieldColumns, fieldBatch, w.newFields); err != nil {
		return err
	}
	w.newFields = w.newFields[:0]
	b := strconv.FormatInt(w.branch, 10)
	if err := w.insertRows(ctx, "commits", `INSERT INTO commits (branch, seq, hash, author_name, author_email, at, subject, intent, intent_declared,
		mot_kind, mot_ref, mot_severity, expires, pr, parents, sig_key, sig_problem) VALUES `,
		"("+b+strings.Repeat(", ?", commitValues)+")", commitValues, commitBatch, w.commits); err != nil {
		return err
	}
	w.commits = w.commits[:0]
	if len(w.claims) == 0 {
		return nil
	}
	// A plain INSERT, no upsert: the update's rows are not in the table (a rebuild deletes the
	// branch's rows first, a resumed update starts after its checkpoint's commit) and a key can
	// repeat only within one commit, merged here. Of two rows with one key (which extract does not
	// make) the one written last wins, as with the upsert of one row at a time: pos orders them.
	// (A stable sort moving the rows themselves took twice as long.)
	for i := range w.claims {
		w.claims[i].pos = int32(i)
	}
	slices.SortFunc(w.claims, func(a, b pendingClaim) int {
		if c := cmp.Compare(a.field, b.field); c != 0 {
			return c
		}
		if c := cmp.Compare(a.seq, b.seq); c != 0 {
			return c
		}
		if c := cmp.Compare(a.kind, b.kind); c != 0 {
			return c
		}
		return cmp.Compare(a.pos, b.pos)
	})
	insert, row := `INSERT INTO claims (branch, field, seq, kind, has_value, vjson, vexpr) VALUES `, "("+b+strings.Repeat(", ?", claimColumns)+")"
	// The values go in a few batches at a time, not all at once: 2^17 pending claims would be
	// 12 MiB of interface values.
	chunk := 8 * claimBatch * claimColumns
	vals := make([]any, 0, min(chunk, len(w.claims)*claimColumns))
	for i, c := range w.claims {
		if i+1 < len(w.claims) {
			if n := w.claims[i+1]; n.field == c.field && n.seq == c.seq && n.kind == c.kind {
				continue
			}
		}
		vals = append(vals, c.field, c.seq, int64(c.kind), boolInt(c.hasValue), c.vjson, c.vexpr)
		if len(vals) == chunk {
			if err := w.insertRows(ctx, "claims", insert, row, claimColumns, claimBatch, vals); err != nil {
				return err
			}
			vals = vals[:0]
		}
	}
	clear(w.claims) // the values' strings go with their records
	w.claims = w.claims[:0]
	return w.insertRows(ctx, "claims", insert, row, claimColumns, claimBatch, vals)
}

// insertRows inserts rows (columns values each) into table: batch rows to a statement, prepared
// once per transaction, and the rest in one statement of their own.
func (w *writer) insertRows(ctx context.Context, table, insert, row string, columns, batch int, vals []any) error {
	n := batch * columns
	if len(vals) >= n {
		s := w.full[table]
		if s == nil {
			var err error
			if s, err = w.tx.PrepareContext(ctx, insert+row+strings.Repeat(", "+row, batch-1)); err != nil {
				return fmt.Errorf("insert %s: %w", table, err)
			}
			w.full[table] = s
		}
		for ; len(vals) >= n; vals = vals[n:] {
			if _, err := s.ExecContext(ctx, vals[:n]...); err != nil {
				return fmt.Errorf("insert %s: %w", table, err)
			}
		}
	}
	if len(vals) == 0 {
		return nil
	}
	if _, err := w.tx.ExecContext(ctx, insert+row+strings.Repeat(", "+row, len(vals)/columns-1), vals...); err != nil {
		return fmt.Errorf("insert %s: %w", table, err)
	}
	return nil
}
