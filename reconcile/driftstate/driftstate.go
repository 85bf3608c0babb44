// Package driftstate is the durable memory of Parley's drift loop: which source events were
// already taken in (so an event delivered twice, in two different batches, becomes one claim),
// the claims those events made, the verdicts reached with their evidence, the expiry timers
// that bring a yielded field back to Git's value, and the admitted writes the admission webhook's
// observation mode holds until a later review confirms them (held.go). It is one SQLite file (the server keeps it beside
// its delivery store) or an in-memory database (`parley ingest` without --state); with several
// replicas of parley serve, one schema per repository in their shared PostgreSQL database.
//
// Everything a batch records is written in one transaction: a crash leaves either the whole
// batch or none of it, so a redelivered batch is taken in again rather than half-remembered.
package driftstate

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // the pure-Go SQLite driver, registered as "sqlite"

	"github.com/jackc/pgx/v5"
	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/internal/sqldb"
)

// DB is the drift state. Safe for concurrent use; writes are serialised by SQLite, and on
// PostgreSQL by the caller's lock on the repository.
type DB struct {
	db *sql.DB
	// read is what reads go through: for a SQLite file a few read-only connections of their own
	// (WAL lets them read while the one writer commits), so that the judgement of a proposal or
	// an admission review does not queue behind a transaction's fsync; otherwise db.
	read *sql.DB
	// readStmts and writeStmts keep the statements prepared, by query text, on read and db: at
	// admission rates parsing the same SQL again was most of a judgement's CPU.
	readStmts, writeStmts sync.Map
	// last keeps each field's newest verdict record as written, for the next record on the field
	// to update without reading it (lastverdict.go).
	last lastVerdicts

	path   string // for errors: the SQLite file, or the PostgreSQL schema and database
	engine sqldb.Engine
	tables *strings.Replacer // {events}, {claims}, {verdicts}, {timers}, {meta}, {versions}, {held}, {held_totals} to the engine's table names
	owned  bool              // Close closes db (a SQLite file it opened, not a shared PostgreSQL pool)
	// queries keeps q's answers by the query as written: the queries are this package's own
	// texts, a few dozen, and rewriting one on every statement was an allocation per statement,
	// about ten per recorded admission review.
	queriesMu sync.RWMutex
	queries   map[string]string
}

// q is a query for the state's engine: its tables named in braces, its parameters as ?.
func (d *DB) q(query string) string {
	d.queriesMu.RLock()
	out, ok := d.queries[query]
	d.queriesMu.RUnlock()
	if ok {
		return out
	}
	out = sqldb.Rebind(d.engine, d.tables.Replace(query))
	d.queriesMu.Lock()
	if d.queries == nil {
		d.queries = map[string]string{}
	}
	d.queries[query] = out
	d.queriesMu.Unlock()
	return out
}

var sqliteTables = strings.NewReplacer("{events}", "events", "{claims}", "claims", "{verdicts}", "verdicts", "{timers}", "timers", "{meta}", "meta",
	"{versions}", "field_versions", "{held}", "held", "{held_totals}", "held_totals")

// postgresMigrations are the schema of one repository's state on PostgreSQL, in the schema named
// schema (sqldb.MigratePostgres applies them in order). Never edit a released one: append.
func postgresMigrations(schema string) []string {
	t := func(name string) string { return pgx.Identifier{schema, name}.Sanitize() }
	return []string{
		`CREATE SCHEMA IF NOT EXISTS ` + pgx.Identifier{schema}.Sanitize() + `;
CREATE TABLE ` + t("events") + ` (id TEXT PRIMARY KEY, seen_at BIGINT NOT NULL);
CREATE TABLE ` + t("claims") + ` (
	seq BIGSERIAL PRIMARY KEY,
	field TEXT NOT NULL, actor TEXT NOT NULL, at BIGINT NOT NULL,
	claim TEXT NOT NULL,
	closed_at BIGINT, closed_why TEXT);
CREATE INDEX ON ` + t("claims") + ` (field, at);
CREATE TABLE ` + t("verdicts") + ` (
	seq BIGSERIAL PRIMARY KEY,
	field TEXT NOT NULL, signature TEXT NOT NULL, at BIGINT NOT NULL,
	verdict TEXT NOT NULL, evidence TEXT NOT NULL,
	action TEXT NOT NULL DEFAULT '', commit_hash TEXT NOT NULL DEFAULT '', branch TEXT NOT NULL DEFAULT '',
	pull_request BIGINT NOT NULL DEFAULT 0, note TEXT NOT NULL DEFAULT '');
CREATE INDEX ON ` + t("verdicts") + ` (field, seq);
CREATE TABLE ` + t("timers") + ` (field TEXT PRIMARY KEY, due BIGINT NOT NULL, why TEXT NOT NULL);
CREATE INDEX ON ` + t("timers") + ` (due);
CREATE TABLE ` + t("meta") + ` (key TEXT PRIMARY KEY, value TEXT NOT NULL);`,
		fieldVersionsTable(t("field_versions"), "BIGINT"),
		heldTables(t("held"), t("held_totals"), "BIGSERIAL PRIMARY KEY", "BIGINT", "BYTEA", "", "", ""), // PostgreSQL names the indexes,
		claimsOpenIndex("", t("claims")),
	}
}

// SchemaFor is the PostgreSQL schema holding a repository's state: "drift_" and the name made
// safe, cut short, with a hash so that names differing only in what was cut stay apart.
func SchemaFor(repository string) string {
	repo := strings.ToLower(repository)
	var b strings.Builder
	for _, r := range repo {
		if 'a' <= r && r <= 'z' || '0' <= r && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	name := b.String()
	if len(name) > 40 {
		name = name[:40]
	}
	sum := sha256.Sum256([]byte(repo))
	return "drift_" + name + "_" + hex.EncodeToString(sum[:4])
}

// OpenPostgres opens the state of repository in the shared PostgreSQL database db (its own
// schema, SchemaFor), migrating it and binding it to the repository. dbName names the database in
// errors (sqldb.Redact of its URL). Close leaves db open for its owner.
func OpenPostgres(ctx context.Context, db *sql.DB, dbName, repository string) (*DB, error) {
	if repository == "" {
		return nil, errors.New("drift state: a PostgreSQL state belongs to a repository; none given")
	}
	schema := SchemaFor(repository)
	if err := sqldb.MigratePostgres(ctx, db, "driftstate:"+schema, postgresMigrations(schema)); err != nil {
		return nil, fmt.Errorf("drift state of %s: %w", repository, err)
	}
	t := func(name string) string { return pgx.Identifier{schema, name}.Sanitize() }
	d := &DB{db: db, read: db, path: schema + " in " + dbName, engine: sqldb.Postgres,
		tables: strings.NewReplacer("{events}", t("events"), "{claims}", t("claims"), "{verdicts}", t("verdicts"), "{timers}", t("timers"), "{meta}", t("meta"),
			"{versions}", t("field_versions"), "{held}", t("held"), "{held_totals}", t("held_totals"))}
	if err := d.Bind(ctx, repository); err != nil {
		return nil, err
	}
	return d, nil
}

// sqliteMigrations are the schema of a drift state file, applied in order (sqldb.MigrateSQLite;
// the first is written IF NOT EXISTS for files made before migrations were versioned). Never edit
// a released one: append.
var sqliteMigrations = []string{`
CREATE TABLE IF NOT EXISTS events (
	id TEXT PRIMARY KEY,            -- source "/" the source's own event ID
	seen_at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS claims (
	seq INTEGER PRIMARY KEY AUTOINCREMENT,
	field TEXT NOT NULL, actor TEXT NOT NULL, at INTEGER NOT NULL,
	claim TEXT NOT NULL,            -- core.Claim as JSON
	closed_at INTEGER, closed_why TEXT);
CREATE INDEX IF NOT EXISTS claims_field ON claims (field, at);
CREATE TABLE IF NOT EXISTS verdicts (
	seq INTEGER PRIMARY KEY AUTOINCREMENT,
	field TEXT NOT NULL, signature TEXT NOT NULL, at INTEGER NOT NULL,
	verdict TEXT NOT NULL,          -- core.Verdict as JSON
	evidence TEXT NOT NULL,         -- event IDs that led here, JSON array
	action TEXT NOT NULL DEFAULT '', commit_hash TEXT NOT NULL DEFAULT '', branch TEXT NOT NULL DEFAULT '',
	pull_request INTEGER NOT NULL DEFAULT 0, note TEXT NOT NULL DEFAULT '');
CREATE INDEX IF NOT EXISTS verdicts_field ON verdicts (field, seq);
CREATE TABLE IF NOT EXISTS timers (
	field TEXT PRIMARY KEY, due INTEGER NOT NULL, why TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS timers_due ON timers (due);
CREATE TABLE IF NOT EXISTS meta (
	key TEXT PRIMARY KEY, value TEXT NOT NULL); -- "repository": the repository this state is about`,
	fieldVersionsTable("field_versions", "INTEGER"),
	heldTables("held", "held_totals", "INTEGER PRIMARY KEY AUTOINCREMENT", "INTEGER", "BLOB", "held_object ", "held_uid ", "held_at "),
	claimsOpenIndex("claims_open ", "claims"),
}

// claimsOpenIndex indexes the claims that stand (name and a space: "" on PostgreSQL, which names
// it itself). Without it, finding an actor's open claim on a field to supersede it, and a field's
// open claims, read the field's whole history through claims_field: a field the HPA restates every
// 15 s gathers 5,760 claims a day, and recording its next one cost 15 ms of CPU at 20,000 of them
// (BenchmarkRecordOnLongHistory). A GitOps revert's close finds the open claims through it too.
func claimsOpenIndex(name, table string) string {
	return `CREATE INDEX ` + name + `ON ` + table + ` (field, at) WHERE closed_at IS NULL;`
}

// heldTables are the admission writes held for confirmation (held.go) and each cluster's count
// and bytes of them. Indexes: a review looks up its object's, the sweep the oldest, and a review
// answered by two replicas is held once (its uid). seq is the engine's key column; objectIndex,
// uidIndex and atIndex the indexes' names and a space ("" on PostgreSQL,
// which names them itself in the table's schema).
func heldTables(held, totals, seq, integer, blob, objectIndex, uidIndex, atIndex string) string {
	return `CREATE TABLE ` + held + ` (
	seq ` + seq + `,
	cluster TEXT NOT NULL, object TEXT NOT NULL, uid TEXT NOT NULL, base_rv TEXT NOT NULL,
	at ` + integer + ` NOT NULL, bytes ` + integer + ` NOT NULL, body ` + blob + ` NOT NULL);
CREATE INDEX ` + objectIndex + `ON ` + held + ` (cluster, object);
CREATE UNIQUE INDEX ` + uidIndex + `ON ` + held + ` (cluster, uid);
CREATE INDEX ` + atIndex + `ON ` + held + ` (at);
CREATE TABLE ` + totals + ` (cluster TEXT PRIMARY KEY, n ` + integer + ` NOT NULL, bytes ` + integer + ` NOT NULL);`
}

// fieldVersionsTable counts, per field, the writes that changed what a judgement of the field reads
// from the state (its claims, standing or closed, and its verdicts). A proposal or drift event
// judged on version n records only while the field is still at n (Batch.Expect): that is how a
// judgement made outside any lock stays as good as one made under it. A field never written has no
// row: version 0.
func fieldVersionsTable(name, integer string) string {
	return `CREATE TABLE ` + name + ` (field TEXT PRIMARY KEY, version ` + integer + ` NOT NULL);`
}

// memCounter names in-memory databases apart: each Open(":memory:") is its own database.
var memCounter atomic.Int64

// Open opens (creating on first use) the state at path; ":memory:" opens a private in-memory one.
func Open(ctx context.Context, path string) (*DB, error) {
	dsn := "file:" + path + "?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)"
	if path == ":memory:" {
		dsn = fmt.Sprintf("file:driftstate-%d?mode=memory&cache=shared", memCounter.Add(1))
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open drift state %s: %w", path, err)
	}
	db.SetMaxOpenConns(1) // one writer
	if err := sqldb.MigrateSQLite(ctx, db, "drift state "+path, sqliteMigrations); err != nil {
		db.Close()
		return nil, err
	}
	read := db
	if path != ":memory:" { // an in-memory database is one connection's: it reads where it writes
		if read, err = sql.Open("sqlite", dsn+"&_pragma=query_only(1)"); err != nil {
			db.Close()
			return nil, fmt.Errorf("open drift state %s for reading: %w", path, err)
		}
		read.SetMaxOpenConns(4)
		// Kept open, all four: database/sql keeps two idle by default, so at admission rates the
		// others were closed and opened again (each open setting the file's pragmas and preparing
		// the reads anew).
		read.SetMaxIdleConns(4)
	}
	return &DB{db: db, read: read, path: path, engine: sqldb.SQLite, tables: sqliteTables, owned: true}, nil
}

// prepared returns the statement for query (in the engine's form) on conn, prepared once; nil if
// it cannot be prepared, and the caller runs the query unprepared (which reports the error).
func (d *DB) prepared(ctx context.Context, conn *sql.DB, cache *sync.Map, query string) *sql.Stmt {
	if st, ok := cache.Load(query); ok {
		return st.(*sql.Stmt)
	}
	st, err := conn.PrepareContext(ctx, query)
	if err != nil {
		return nil
	}
	if had, loaded := cache.LoadOrStore(query, st); loaded {
		st.Close()
		return had.(*sql.Stmt)
	}
	return st
}

// queryRows runs a read (in the state's query form, see q) on the read connections.
func (d *DB) queryRows(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	query = d.q(query)
	if st := d.prepared(ctx, d.read, &d.readStmts, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return d.read.QueryContext(ctx, query, args...)
}

// queryRow is queryRows for one row.
func (d *DB) queryRow(ctx context.Context, query string, args ...any) *sql.Row {
	query = d.q(query)
	if st := d.prepared(ctx, d.read, &d.readStmts, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return d.read.QueryRowContext(ctx, query, args...)
}

// txQueryRow is queryRow inside a write transaction.
func (d *DB) txQueryRow(ctx context.Context, tx *sql.Tx, query string, args ...any) *sql.Row {
	query = d.q(query)
	if st := d.writeStmt(query); st != nil {
		return tx.StmtContext(ctx, st).QueryRowContext(ctx, args...)
	}
	return tx.QueryRowContext(ctx, query, args...)
}

// exec runs a write (in the state's query form) in tx, on a statement prepared on the writer.
func (d *DB) exec(ctx context.Context, tx *sql.Tx, query string, args ...any) (sql.Result, error) {
	query = d.q(query)
	if st := d.writeStmt(query); st != nil {
		return tx.StmtContext(ctx, st).ExecContext(ctx, args...)
	}
	return tx.ExecContext(ctx, query, args...)
}

// writeStmt is query's statement prepared on the writer, or nil the first time: a SQLite state's
// writer has one connection, which the transaction asking holds, so a statement is prepared only
// once the transaction is over (prepareWrites).
func (d *DB) writeStmt(query string) *sql.Stmt {
	if st, ok := d.writeStmts.Load(query); ok {
		if st, ok := st.(*sql.Stmt); ok {
			return st
		}
		return nil
	}
	d.writeStmts.LoadOrStore(query, false) // to prepare
	return nil
}

// prepareWrites prepares the write statements first used by the transaction just ended.
func (d *DB) prepareWrites(ctx context.Context) {
	d.writeStmts.Range(func(k, v any) bool {
		if _, ok := v.(*sql.Stmt); ok {
			return true
		}
		if st, err := d.db.PrepareContext(ctx, k.(string)); err == nil && !d.writeStmts.CompareAndSwap(k, false, st) {
			st.Close() // prepared meanwhile by another caller
		}
		return true
	})
}

// Bind ties the state to a repository ("owner/name"): the first call records it, and later
// calls with another repository fail, so that a server whose configuration moved to another
// repository does not judge it with the claims and timers of the old one. A state written before
// states were bound takes the first repository it is bound to. Names compare case-insensitively,
// as GitHub's do.
func (d *DB) Bind(ctx context.Context, repository string) error {
	if repository == "" {
		return errors.New("drift state: bind to an empty repository name")
	}
	if _, err := d.db.ExecContext(ctx, d.q(`INSERT INTO {meta} (key, value) VALUES ('repository', ?) ON CONFLICT (key) DO NOTHING`), repository); err != nil {
		return fmt.Errorf("drift state %s: bind to %s: %w", d.path, repository, err)
	}
	bound, err := d.Repository(ctx)
	if err != nil {
		return err
	}
	if !strings.EqualFold(bound, repository) {
		return fmt.Errorf("drift state %s holds the claims, verdicts and timers of %s, not %s: move it aside (or point drift_state elsewhere) to start %s afresh", d.path, bound, repository, repository)
	}
	return nil
}

// Repository returns the repository the state is bound to, or "" when it is not bound.
func (d *DB) Repository(ctx context.Context) (string, error) {
	var repo string
	err := d.db.QueryRowContext(ctx, d.q(`SELECT value FROM {meta} WHERE key = 'repository'`)).Scan(&repo)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("drift state %s: read its repository: %w", d.path, err)
	}
	return repo, nil
}

// Close closes the database (a shared PostgreSQL pool stays open for its owner).
func (d *DB) Close() error {
	for _, cache := range []*sync.Map{&d.readStmts, &d.writeStmts} {
		cache.Range(func(k, st any) bool {
			if st, ok := st.(*sql.Stmt); ok {
				st.Close()
			}
			cache.Delete(k)
			return true
		})
	}
	if !d.owned {
		return nil
	}
	var err error
	if d.read != d.db {
		err = d.read.Close()
	}
	return errors.Join(d.db.Close(), err)
}

// Claim is a stored claim and whether it still stands.
type Claim struct {
	core.Claim
	Closed    time.Time // zero while it stands
	ClosedWhy string
}

// Record is one verdict as stored: what was decided, on what evidence, and what it did to Git.
type Record struct {
	Verdict  core.Verdict `json:"verdict"`
	At       time.Time    `json:"at"`
	Evidence []string     `json:"evidence,omitempty"` // source/event-ID pairs that led to this verdict (newest last, at most 64)
	Action   string       `json:"action,omitempty"`   // what the verdict did: "gate", "resume", "adopt", "ask", "propose" or "" (nothing to write)
	Commit   string       `json:"commit,omitempty"`   // the commit that carried it, if one was written
	Branch   string       `json:"branch,omitempty"`
	PR       int          `json:"pull_request,omitempty"`
	Note     string       `json:"note,omitempty"` // why nothing was written, or what happened
}

// Signature is what makes two verdicts on a field "the same": decision, rule and winning actor.
// A verdict repeated with the same signature (the HPA scaling again under its standing ownership,
// an oscillation hold restated) extends the stored record's evidence instead of adding a record.
func Signature(v core.Verdict) string {
	w := ""
	if v.Winner != nil {
		w = v.Winner.Actor.String()
	}
	s := string(v.Decision) + "|" + v.Rule + "|" + w
	if p := v.Proposed; p != nil {
		// A veto put to people is asked once per proposed value: another value asks again.
		s += "|proposed " + p.Actor.String() + "=" + p.Value.String()
	}
	return s
}

// Batch is everything one reconciliation records, written in one transaction.
type Batch struct {
	Events   []string     // "source/id" of the events taken in
	Claims   []core.Claim // new claims from those events
	Closes   []Close      // claims a GitOps revert ended
	Verdicts []Record
	Timers   []Timer // set (or, with a zero Due, cleared)
	At       time.Time
	// Expect holds the versions (Version) of the fields the batch was judged on: Apply records
	// nothing, and returns an error wrapping ErrConflict, if any of them moved on meanwhile (another
	// proposal or event recorded a claim or verdict on it), so that the caller judges again on what
	// stands now. Fields written and not listed move on without a check.
	Expect map[core.Field]int64
	// Taken, when not nil, is set to the events of Events this batch took in first (so recorded
	// the claims of): a caller that keeps what it wrote in memory (reconcile.FieldMemo) learns
	// whether its claims went in, an event taken in before recording none. Read it only when
	// Apply returned nil.
	Taken *[]string
}

// ErrConflict is Apply's error when a field the batch was judged on was written since
// (Batch.Expect): judge it again and retry.
var ErrConflict = errors.New("drift state: the field changed since it was judged")

// Version returns f's version: how many writes changed its claims or verdicts (0: none). Read it
// before the claims a judgement reads, so that a write between the two reads fails the
// compare-and-swap rather than slipping by.
func (d *DB) Version(ctx context.Context, f core.Field) (int64, error) {
	var v int64
	err := d.queryRow(ctx, `SELECT version FROM {versions} WHERE field = ?`, f.String()).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("drift state: version of %s: %w", f, err)
	}
	return v, nil
}

// Close ends the standing claims on an object's fields made before a time (Flux or Argo CD put
// Git's version back over them).
type Close struct {
	Object core.Field // the object; Path is ignored
	Before time.Time
	Why    string
	// Except lists fields whose claims stay open (a yield gate protects them: the revert did not
	// touch them, or will not once the gate is synced).
	Except map[core.Field]bool
}

// Timer re-judges a field at Due. A field has one: Apply moves a pending timer earlier, never
// later (one already due is replaced).
type Timer struct {
	Field core.Field `json:"field"`
	Due   time.Time  `json:"due"` // zero: clear the field's timer
	Why   string     `json:"why"`
}

// Fresh returns the event IDs ("source/id") among ids that were never taken in, in order.
func (d *DB) Fresh(ctx context.Context, ids []string) ([]string, error) {
	var out []string
	for _, id := range ids {
		var one int
		err := d.queryRow(ctx, `SELECT 1 FROM {events} WHERE id = ?`, id).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			out = append(out, id)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("drift state: look up event %s: %w", id, err)
		}
	}
	return out, nil
}

// Apply records a batch atomically. Events already recorded are not an error (a concurrent
// batch took them in first); their claims are then not added twice.
func (d *DB) Apply(ctx context.Context, b Batch) error {
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("drift state: begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	var tv txVerdicts
	if err := d.applyTx(ctx, tx, b, &tv); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("drift state: commit: %w", err)
	}
	d.last.keep(tv.written)
	d.prepareWrites(ctx)
	return nil
}

// applyTx writes a batch in tx: the versions it expects first (so that, on PostgreSQL, the rows
// they lock are taken before anything else is written, in the fields' order), then the batch, then
// the versions of the other fields it wrote. tv receives the verdict records it wrote, for the
// caller to keep (d.last) once the transaction commits, and only then.
func (d *DB) applyTx(ctx context.Context, tx *sql.Tx, b Batch, tv *txVerdicts) error {
	expected := make([]core.Field, 0, len(b.Expect))
	for f := range b.Expect {
		expected = append(expected, f)
	}
	sort.Slice(expected, func(i, j int) bool { return expected[i].String() < expected[j].String() })
	if b.Taken != nil {
		*b.Taken = (*b.Taken)[:0] // a batch applied again (a retried transaction) reports its last try
	}
	var moved []string
	for _, f := range expected {
		ok, err := d.swapVersion(ctx, tx, f, b.Expect[f])
		if err != nil {
			return err
		}
		if !ok {
			moved = append(moved, f.String())
		}
	}
	if len(moved) > 0 {
		return fmt.Errorf("%w: %s", ErrConflict, strings.Join(moved, ", "))
	}
	*tv = txVerdicts{swapped: make(map[string]int64, len(expected)), written: map[string]lastVerdict{}}
	for _, f := range expected {
		tv.swapped[f.String()] = b.Expect[f]
	}
	written := map[string]bool{}
	at := b.At.UnixNano()
	fresh := map[string]bool{}
	for _, id := range b.Events {
		res, err := d.exec(ctx, tx, `INSERT INTO {events} (id, seen_at) VALUES (?, ?) ON CONFLICT DO NOTHING`, id, at)
		if err != nil {
			return fmt.Errorf("drift state: record event %s: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			fresh[id] = true
			if b.Taken != nil {
				*b.Taken = append(*b.Taken, id)
			}
		}
	}
	for _, c := range b.Claims {
		if !claimIsFresh(c, fresh) {
			continue
		}
		written[c.Field.String()] = true
		js, err := claimText(c)
		if err != nil {
			return fmt.Errorf("drift state: encode claim on %s: %w", c.Field, err)
		}
		if _, err := d.exec(ctx, tx, `INSERT INTO {claims} (field, actor, at, claim) VALUES (?, ?, ?, ?)`,
			c.Field.String(), actorKey(c.Actor), c.At.UnixNano(), js); err != nil {
			return fmt.Errorf("drift state: record claim on %s: %w", c.Field, err)
		}
		// An actor's new claim on a field replaces its earlier ones: they stay in the history (for
		// oscillation) but no longer stand, so the standing claims stay as few as the actors, however
		// often a machine-speed actor restates its wish.
		if _, err := d.exec(ctx, tx, `UPDATE {claims} SET closed_at = ?, closed_why = ? WHERE field = ? AND actor = ? AND closed_at IS NULL AND at < ?`,
			at, "superseded by the same actor's later claim", c.Field.String(), actorKey(c.Actor), c.At.UnixNano()); err != nil {
			return fmt.Errorf("drift state: supersede claims on %s: %w", c.Field, err)
		}
	}
	for _, cl := range b.Closes {
		if err := d.closeClaims(ctx, tx, cl, at, written); err != nil {
			return err
		}
	}
	for _, r := range b.Verdicts {
		if err := d.saveVerdict(ctx, tx, r, tv); err != nil {
			return err
		}
		written[r.Verdict.Field.String()] = true
	}
	for _, t := range b.Timers {
		var err error
		if t.Due.IsZero() {
			_, err = d.exec(ctx, tx, `DELETE FROM {timers} WHERE field = ?`, t.Field.String())
		} else {
			// A timer is moved earlier, or set again once it is due; a pending timer that comes
			// due sooner than the new one is left as it is. Firing early costs a judgement that
			// finds the field as it stands and sets the timer the verdict then names (Recheck
			// runs at or after the due time, so it always writes). Moving it later on each record
			// cost a row and two entries of timers_due per restated wish: at admission rates (the
			// HPA restating its replicas every few seconds, each an hour's recheck) a quarter of
			// the pages a recorded review wrote.
			_, err = d.exec(ctx, tx, `INSERT INTO {timers} AS t (field, due, why) VALUES (?, ?, ?)
				ON CONFLICT (field) DO UPDATE SET due = excluded.due, why = excluded.why WHERE excluded.due < t.due OR t.due <= ?`,
				t.Field.String(), t.Due.UnixNano(), t.Why, at)
		}
		if err != nil {
			return fmt.Errorf("drift state: timer for %s: %w", t.Field, err)
		}
	}
	for _, f := range expected {
		delete(written, f.String()) // moved on by its swap
	}
	fields := make([]string, 0, len(written))
	for f := range written {
		fields = append(fields, f)
	}
	sort.Strings(fields)
	for _, f := range fields {
		if _, err := d.exec(ctx, tx, `INSERT INTO {versions} (field, version) VALUES (?, 1)
			ON CONFLICT (field) DO UPDATE SET version = {versions}.version + 1`, f); err != nil {
			return fmt.Errorf("drift state: version of %s: %w", f, err)
		}
	}
	return nil
}

// swapVersion moves f from version want to the next, reporting false when f is no longer at want.
// One statement each way, so that PostgreSQL's row lock decides between two replicas: the second
// UPDATE waits for the first's commit, then finds the version moved on and changes nothing; two
// INSERTs of a first version meet on the primary key the same way.
func (d *DB) swapVersion(ctx context.Context, tx *sql.Tx, f core.Field, want int64) (bool, error) {
	var res sql.Result
	var err error
	if want == 0 {
		res, err = d.exec(ctx, tx, `INSERT INTO {versions} (field, version) VALUES (?, 1) ON CONFLICT (field) DO NOTHING`, f.String())
	} else {
		res, err = d.exec(ctx, tx, `UPDATE {versions} SET version = version + 1 WHERE field = ? AND version = ?`, f.String(), want)
	}
	if err != nil {
		return false, fmt.Errorf("drift state: version of %s: %w", f, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("drift state: version of %s: %w", f, err)
	}
	return n == 1, nil
}

// claimIsFresh reports whether a claim comes from an event this batch took in first; a claim
// without event evidence (none today) always is.
func claimIsFresh(c core.Claim, fresh map[string]bool) bool {
	if len(c.Evidence.EventIDs) == 0 {
		return true
	}
	for _, id := range c.Evidence.EventIDs {
		if fresh[c.Evidence.Source+"/"+id] {
			return true
		}
	}
	return false
}

func actorKey(a core.Actor) string {
	if a.Name != "" {
		return a.Name
	}
	return a.Identity.String()
}

func (d *DB) closeClaims(ctx context.Context, tx *sql.Tx, cl Close, at int64, written map[string]bool) error {
	obj := cl.Object.Object().String()
	rows, err := tx.QueryContext(ctx, d.q(`SELECT seq, field FROM {claims} WHERE closed_at IS NULL AND at < ? AND (field = ? OR field LIKE ? ESCAPE '\')`),
		cl.Before.UnixNano(), obj, likePrefix(obj+"#"))
	if err != nil {
		return fmt.Errorf("drift state: claims on %s: %w", obj, err)
	}
	var seqs []int64
	for rows.Next() {
		var seq int64
		var field string
		if err := rows.Scan(&seq, &field); err != nil {
			rows.Close()
			return err
		}
		if f, err := core.ParseField(field); err == nil && cl.Except[f] {
			continue
		}
		seqs = append(seqs, seq)
		written[field] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, s := range seqs {
		if _, err := d.exec(ctx, tx, `UPDATE {claims} SET closed_at = ?, closed_why = ? WHERE seq = ?`, at, cl.Why, s); err != nil {
			return fmt.Errorf("drift state: close claim: %w", err)
		}
	}
	return nil
}

func likePrefix(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	return r.Replace(s) + "%"
}

// maxEvidence bounds the evidence kept on one record: a field the HPA rescales every minute under
// the same verdict keeps its newest 64 events, not every one since the verdict began.
const maxEvidence = 64

// saveVerdict records r: a verdict with the signature of the field's newest record (and no commit
// of its own) updates that record, extending its evidence; any other is a record of its own. The
// newest record is read, unless the batch swapped the field's version and the record is kept at
// the version it swapped from (lastverdict.go); what it writes goes into tv.
func (d *DB) saveVerdict(ctx context.Context, tx *sql.Tx, r Record, tv *txVerdicts) error {
	field := r.Verdict.Field.String()
	sig := Signature(r.Verdict)
	vj, err := verdictText(r.Verdict)
	if err != nil {
		return fmt.Errorf("drift state: encode verdict on %s: %w", field, err)
	}
	before, swapped := tv.swapped[field]
	last, found := tv.written[field] // a verdict on the field earlier in this batch
	if !found && swapped {
		last, found = d.last.get(field, before)
	}
	if !found {
		var evJSON, action, commit string
		err = d.txQueryRow(ctx, tx, `SELECT seq, signature, evidence, action, commit_hash FROM {verdicts} WHERE field = ? ORDER BY seq DESC LIMIT 1`, field).
			Scan(&last.seq, &last.sig, &evJSON, &action, &commit)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("drift state: last verdict on %s: %w", field, err)
		}
		if found = err == nil; found {
			_ = json.Unmarshal([]byte(evJSON), &last.evidence)
		}
	}
	// What the field's newest record is once this verdict is written, kept for the next batch when
	// the field's version after this batch is known (it swapped it) and the record's row is.
	wrote := func(seq int64, evidence []string) {
		if swapped && seq > 0 {
			tv.written[field] = lastVerdict{version: before + 1, seq: seq, sig: sig, evidence: evidence}
		} else {
			delete(tv.written, field)
		}
	}
	if found && last.sig == sig && r.Commit == "" {
		// The same verdict again: keep its record (and the commit it carried), refresh the verdict
		// text and add the new evidence.
		ev := appendEvidence(last.evidence, r.Evidence)
		ej, _ := json.Marshal(ev)
		_, err = d.exec(ctx, tx, `UPDATE {verdicts} SET verdict = ?, evidence = ?, at = ?, note = CASE WHEN ? = '' THEN note ELSE ? END WHERE seq = ?`,
			vj, string(ej), r.At.UnixNano(), r.Note, r.Note, last.seq)
		if err != nil {
			return fmt.Errorf("drift state: update verdict on %s: %w", field, err)
		}
		wrote(last.seq, ev)
		return nil
	}
	ev := appendEvidence(nil, r.Evidence)
	ej, _ := json.Marshal(ev)
	res, err := d.exec(ctx, tx, `INSERT INTO {verdicts} (field, signature, at, verdict, evidence, action, commit_hash, branch, pull_request, note)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, field, sig, r.At.UnixNano(), vj, string(ej), r.Action, r.Commit, r.Branch, r.PR, r.Note)
	if err != nil {
		return fmt.Errorf("drift state: record verdict on %s: %w", field, err)
	}
	// SQLite reports the new record's seq; PostgreSQL's driver does not (the next batch reads it).
	seq, err := res.LastInsertId()
	if err != nil {
		seq = 0
	}
	wrote(seq, ev)
	return nil
}

// appendEvidence is have with add's events not in it yet, the newest maxEvidence kept. It never
// writes into have's array (a kept record's evidence is shared).
func appendEvidence(have, add []string) []string {
	out := slices.Clip(have)
	for _, e := range add {
		// A linear scan: at most maxEvidence events, and a review adds one.
		if !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	if len(out) > maxEvidence {
		out = out[len(out)-maxEvidence:]
	}
	if out == nil {
		out = []string{}
	}
	return out
}

// Claims returns the claims recorded on f, oldest first: open ones, and with all=true closed ones
// too (the history oscillation is judged on).
func (d *DB) Claims(ctx context.Context, f core.Field, all bool) ([]Claim, error) {
	q := `SELECT claim, closed_at, closed_why FROM {claims} WHERE field = ?`
	if !all {
		q += ` AND closed_at IS NULL`
	}
	rows, err := d.queryRows(ctx, q+` ORDER BY at, seq`, f.String())
	if err != nil {
		return nil, fmt.Errorf("drift state: claims on %s: %w", f, err)
	}
	defer rows.Close()
	var out []Claim
	for rows.Next() {
		var js string
		var closed sql.NullInt64
		var why sql.NullString
		if err := rows.Scan(&js, &closed, &why); err != nil {
			return nil, err
		}
		var c Claim
		if c.Claim, err = core.DecodeStoredClaim([]byte(js)); err != nil {
			return nil, fmt.Errorf("drift state: decode claim on %s: %w", f, err)
		}
		if closed.Valid {
			c.Closed, c.ClosedWhy = time.Unix(0, closed.Int64).UTC(), why.String
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// History returns the claims recorded on f at or after since, open or closed, oldest first, and
// the latest one before since (the value the first of them changed from): what an oscillation
// check over a window needs, without reading a machine-speed actor's whole past.
func (d *DB) History(ctx context.Context, f core.Field, since time.Time) ([]core.Claim, error) {
	rows, err := d.queryRows(ctx, `SELECT claim FROM (
		SELECT claim, at, seq FROM {claims} WHERE field = ? AND at >= ?
		UNION ALL
		SELECT * FROM (SELECT claim, at, seq FROM {claims} WHERE field = ? AND at < ? ORDER BY at DESC, seq DESC LIMIT 1) AS before_since) AS history
		ORDER BY at, seq`, f.String(), since.UnixNano(), f.String(), since.UnixNano())
	if err != nil {
		return nil, fmt.Errorf("drift state: history of %s: %w", f, err)
	}
	defer rows.Close()
	var out []core.Claim
	for rows.Next() {
		var js string
		if err := rows.Scan(&js); err != nil {
			return nil, err
		}
		c, err := core.DecodeStoredClaim([]byte(js))
		if err != nil {
			return nil, fmt.Errorf("drift state: decode claim on %s: %w", f, err)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// Standing returns the open claims on f, the latest per actor: what still competes with Git.
func (d *DB) Standing(ctx context.Context, f core.Field) ([]core.Claim, error) {
	cs, err := d.Claims(ctx, f, false)
	if err != nil {
		return nil, err
	}
	open := make([]core.Claim, len(cs))
	for i, c := range cs {
		open[i] = c.Claim
	}
	return StandingOf(open), nil
}

// StandingOf reduces a field's open claims, in Claims' order, to what Standing returns: the latest
// per actor. A caller that keeps the open claims in memory (reconcile.FieldMemo) derives the
// standing ones as a read would.
func StandingOf(open []core.Claim) []core.Claim {
	latest := map[string]int{}
	var out []core.Claim
	for _, c := range open {
		k := actorKey(c.Actor)
		if i, ok := latest[k]; ok {
			out[i] = c
			continue
		}
		latest[k] = len(out)
		out = append(out, c)
	}
	return out
}

// Supersedes reports whether a new claim closes an open one when recorded (Apply): the same
// actor's claim on the same field, made earlier.
func Supersedes(c, open core.Claim) bool {
	return c.Field == open.Field && actorKey(c.Actor) == actorKey(open.Actor) && open.At.UnixNano() < c.At.UnixNano()
}

// Verdicts returns the verdicts recorded on f, oldest first; a zero f returns every field's.
func (d *DB) Verdicts(ctx context.Context, f core.Field) ([]Record, error) {
	q, args := `SELECT verdict, at, evidence, action, commit_hash, branch, pull_request, note FROM {verdicts}`, []any{}
	if !f.IsZero() {
		q, args = q+` WHERE field = ?`, append(args, f.String())
	}
	return d.verdicts(ctx, q+` ORDER BY seq`, args...)
}

func (d *DB) verdicts(ctx context.Context, q string, args ...any) ([]Record, error) {
	rows, err := d.queryRows(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("drift state: verdicts: %w", err)
	}
	defer rows.Close()
	var out []Record
	for rows.Next() {
		var r Record
		var vj, ej string
		var at int64
		if err := rows.Scan(&vj, &at, &ej, &r.Action, &r.Commit, &r.Branch, &r.PR, &r.Note); err != nil {
			return nil, err
		}
		if err := json.Unmarshal([]byte(vj), &r.Verdict); err != nil {
			return nil, fmt.Errorf("drift state: decode verdict: %w", err)
		}
		_ = json.Unmarshal([]byte(ej), &r.Evidence)
		r.At = time.Unix(0, at).UTC()
		out = append(out, r)
	}
	return out, rows.Err()
}

// Last returns the latest verdict recorded on f.
func (d *DB) Last(ctx context.Context, f core.Field) (Record, bool, error) {
	rs, err := d.verdicts(ctx, `SELECT verdict, at, evidence, action, commit_hash, branch, pull_request, note FROM {verdicts} WHERE field = ? ORDER BY seq DESC LIMIT 1`, f.String())
	if err != nil || len(rs) == 0 {
		return Record{}, false, err
	}
	return rs[0], true, nil
}

// Due returns the timers due at now, earliest first.
func (d *DB) Due(ctx context.Context, now time.Time) ([]Timer, error) {
	return d.timers(ctx, `SELECT field, due, why FROM {timers} WHERE due <= ? ORDER BY due, field`, now.UnixNano())
}

// Timers returns every timer, earliest first.
func (d *DB) Timers(ctx context.Context) ([]Timer, error) {
	return d.timers(ctx, `SELECT field, due, why FROM {timers} ORDER BY due, field`)
}

func (d *DB) timers(ctx context.Context, q string, args ...any) ([]Timer, error) {
	rows, err := d.queryRows(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("drift state: timers: %w", err)
	}
	defer rows.Close()
	var out []Timer
	for rows.Next() {
		var field, why string
		var due int64
		if err := rows.Scan(&field, &due, &why); err != nil {
			return nil, err
		}
		f, err := core.ParseField(field)
		if err != nil {
			return nil, fmt.Errorf("drift state: timer field %q: %w", field, err)
		}
		out = append(out, Timer{Field: f, Due: time.Unix(0, due).UTC(), Why: why})
	}
	return out, rows.Err()
}

// Next returns the earliest timer's due time; ok is false when no timer is set.
func (d *DB) Next(ctx context.Context) (time.Time, bool, error) {
	var due sql.NullInt64
	if err := d.queryRow(ctx, `SELECT MIN(due) FROM {timers}`).Scan(&due); err != nil {
		return time.Time{}, false, fmt.Errorf("drift state: next timer: %w", err)
	}
	if !due.Valid {
		return time.Time{}, false, nil
	}
	return time.Unix(0, due.Int64).UTC(), true, nil
}

// PostgresRepositories lists the repositories whose states the shared PostgreSQL database db
// holds: a replica opens them all at start, so that their timers fire wherever they were set.
func PostgresRepositories(ctx context.Context, db *sql.DB) ([]string, error) {
	rows, err := db.QueryContext(ctx, `SELECT DISTINCT component FROM parley_schema WHERE component LIKE 'driftstate:%'`)
	if err != nil {
		if strings.Contains(err.Error(), "does not exist") {
			return nil, nil // nothing migrated yet
		}
		return nil, fmt.Errorf("drift states: %w", err)
	}
	var schemas []string
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			rows.Close()
			return nil, err
		}
		schemas = append(schemas, strings.TrimPrefix(c, "driftstate:"))
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var out []string
	for _, schema := range schemas {
		var repo string
		err := db.QueryRowContext(ctx, `SELECT value FROM `+pgx.Identifier{schema, "meta"}.Sanitize()+` WHERE key = 'repository'`).Scan(&repo)
		if errors.Is(err, sql.ErrNoRows) {
			continue // migrated by a replica that died before binding it
		}
		if err != nil {
			return nil, fmt.Errorf("drift state %s: %w", schema, err)
		}
		out = append(out, repo)
	}
	sort.Strings(out)
	return out, nil
}
