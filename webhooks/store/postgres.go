package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/parleyhq/parley/internal/sqldb"
)

// postgresComponent names the deliveries' migrations in sqldb's parley_schema table.
const postgresComponent = "deliveries"

// postgresMigrations are the PostgreSQL schema's migrations, applied by sqldb.MigratePostgres.
// Never edit a released migration: append a new one. Migration 1 is SQLite's migrations 1 and 2
// together; times are unix nanoseconds in BIGINT, as in SQLite, so both engines agree.
var postgresMigrations = []string{
	// 1: the delivery queue, with the cluster a drift event came from (Delivery.Scope).
	`CREATE TABLE deliveries (
		seq             BIGSERIAL PRIMARY KEY,            -- arrival order; "oldest first"
		source          TEXT     NOT NULL,
		id              TEXT     NOT NULL,
		event           TEXT     NOT NULL,
		body            BYTEA    NOT NULL,
		received_at     BIGINT   NOT NULL,                -- unix nanoseconds, as every time here
		state           SMALLINT NOT NULL DEFAULT 0,      -- 0 pending, 1 done, 2 dead
		attempts        INTEGER  NOT NULL DEFAULT 0,
		next_attempt_at BIGINT   NOT NULL,
		lease_owner     TEXT,
		lease_until     BIGINT,
		last_error      TEXT     NOT NULL DEFAULT '',
		finished_at     BIGINT,
		scope           TEXT     NOT NULL DEFAULT '',
		UNIQUE (source, id)
	);
	CREATE INDEX deliveries_pending ON deliveries (seq) WHERE state = 0;
	CREATE INDEX deliveries_leases  ON deliveries (lease_until) WHERE state = 0 AND lease_until IS NOT NULL;
	CREATE INDEX deliveries_dead    ON deliveries (seq) WHERE state = 2;`,
	// 2: SQLite's migration 3, the SHA-256 of a non-empty body, unique per source.
	`ALTER TABLE deliveries ADD COLUMN body_sha256 BYTEA;
	CREATE UNIQUE INDEX deliveries_body ON deliveries (source, body_sha256) WHERE body_sha256 IS NOT NULL;`,
}

// PostgresOptions tune a PostgreSQL store. The zero value is the production setting.
type PostgresOptions struct {
	// MaxAttempts is how many claims a delivery gets before Fail dead-letters it. Default 8.
	// Replicas sharing a database should agree on it.
	MaxAttempts int
	// MaxConns caps this process's connections to the database. Default 16.
	MaxConns int32
	// MaxBatch caps how many Put calls share one transaction. Default 256.
	MaxBatch int
}

func (o PostgresOptions) withDefaults() PostgresOptions {
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 8
	}
	if o.MaxConns <= 0 {
		o.MaxConns = 16
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = 256
	}
	return o
}

const (
	// pgMaxBatchBytes caps the bodies in one Put transaction, so a burst of 25 MB payloads does
	// not build one enormous transaction.
	pgMaxBatchBytes = 32 << 20
	// pgBatchTimeout bounds one Put transaction: a database that stops answering fails the
	// Puts waiting on it (they are not acknowledged, so the sender retries) instead of
	// blocking them, and Close, for ever.
	pgBatchTimeout = time.Minute
)

// Postgres is the Deliveries implementation for several replicas sharing one PostgreSQL
// database. Leases make Claim exclusive across processes: the claiming transaction locks the
// row it takes with FOR UPDATE SKIP LOCKED, so concurrent Claims, here or on other replicas,
// pass over each other's rows instead of waiting or taking the same one.
//
// Put calls are batched like SQLite's: a writer goroutine owned by the store takes every Put
// waiting at the moment and inserts them in one transaction (one commit, one WAL flush at the
// server's default synchronous_commit), then answers each caller. The other operations run
// their statements directly on the connection pool.
type Postgres struct {
	where string // "store postgres://user@host:port/db", the DSN without its password
	opts  PostgresOptions
	pool  *pgxpool.Pool
	db    *sql.DB // database/sql view of pool, for sqldb.MigratePostgres only

	puts      chan putRequest
	closing   chan struct{}
	writerEnd chan struct{}

	// gate admits operations until Close: Close marks the store closed under it, then waits
	// for the admitted operations (inflight) before it closes the pool.
	gate      sync.RWMutex
	isClosed  bool
	inflight  sync.WaitGroup
	closeOnce sync.Once
	closeErr  error

	takeovers atomic.Int64
}

var _ Deliveries = (*Postgres)(nil)

// OpenPostgres connects to the PostgreSQL database dsn names (a postgres:// URL), creates or
// migrates the schema (replicas starting together migrate once), and starts the group-commit
// writer. The caller must Close it. Errors never quote the DSN's password.
func OpenPostgres(ctx context.Context, dsn string, opts PostgresOptions) (*Postgres, error) {
	opts = opts.withDefaults()
	where := "store " + sqldb.Redact(dsn)
	pool, db, err := sqldb.OpenPostgres(ctx, dsn, opts.MaxConns)
	if err != nil {
		return nil, fmt.Errorf("store: %w", err) // sqldb redacts the DSN
	}
	if err := sqldb.MigratePostgres(ctx, db, postgresComponent, postgresMigrations); err != nil {
		_ = db.Close()
		pool.Close()
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	s := &Postgres{
		where:     where,
		opts:      opts,
		pool:      pool,
		db:        db,
		puts:      make(chan putRequest),
		closing:   make(chan struct{}),
		writerEnd: make(chan struct{}),
	}
	go s.writer()
	return s, nil
}

// MaxAttempts returns the number of claims a delivery gets before it is dead-lettered.
func (s *Postgres) MaxAttempts() int { return s.opts.MaxAttempts }

// Takeovers returns how many Claims by this store took a delivery whose previous lease had
// expired unfinished (lease_owner was still set, whoever held it): the work of crashed or
// stalled workers, here or on other replicas. Released and failed deliveries have no owner and
// do not count.
func (s *Postgres) Takeovers() int64 { return s.takeovers.Load() }

// Close stops the writer (Put calls already handed to it are committed and answered first),
// waits for the operations under way, and closes the connections. Later calls return errors
// wrapping ErrClosed.
func (s *Postgres) Close() error {
	s.closeOnce.Do(func() {
		s.gate.Lock()
		s.isClosed = true
		close(s.closing)
		s.gate.Unlock()
		<-s.writerEnd
		s.inflight.Wait()
		err := s.db.Close()
		s.pool.Close()
		if err != nil {
			s.closeErr = fmt.Errorf("%s: close: %w", s.where, err)
		}
	})
	return s.closeErr
}

// enter admits an operation, or reports false once the store is closed. An admitted operation
// must call s.inflight.Done when it ends.
func (s *Postgres) enter() bool {
	s.gate.RLock()
	defer s.gate.RUnlock()
	if s.isClosed {
		return false
	}
	s.inflight.Add(1)
	return true
}

// Put stores d unless a delivery with the same Key is already stored. It returns after the
// transaction holding d has committed. If ctx ends first Put returns ctx's error, and d may
// or may not have been stored: a caller that did not get inserted=true must not acknowledge.
func (s *Postgres) Put(ctx context.Context, d Delivery) (bool, error) {
	if err := d.Validate(); err != nil {
		return false, err
	}
	req := putRequest{d: d, done: make(chan putResult, 1)}
	select {
	case <-s.closing:
		return false, fmt.Errorf("%s: put %s: %w", s.where, d.Key(), ErrClosed)
	default:
	}
	select {
	case s.puts <- req:
	case <-s.closing:
		return false, fmt.Errorf("%s: put %s: %w", s.where, d.Key(), ErrClosed)
	case <-ctx.Done():
		return false, fmt.Errorf("%s: put %s: %w", s.where, d.Key(), ctx.Err())
	}
	select {
	case res := <-req.done:
		return res.inserted, res.err
	case <-ctx.Done():
		return false, fmt.Errorf("%s: put %s: %w", s.where, d.Key(), ctx.Err())
	}
}

// writer is the group-commit loop. puts is unbuffered, so every Put blocked in its send is
// "waiting at the moment" and is picked up by the non-blocking drain below.
func (s *Postgres) writer() {
	defer close(s.writerEnd)
	batch := make([]putRequest, 0, s.opts.MaxBatch)
	for {
		select {
		case req := <-s.puts:
			batch = append(batch[:0], req)
		case <-s.closing:
			return
		}
		size := len(batch[0].d.Body)
	drain:
		for len(batch) < s.opts.MaxBatch && size < pgMaxBatchBytes {
			select {
			case req := <-s.puts:
				batch = append(batch, req)
				size += len(req.d.Body)
			default:
				break drain
			}
		}
		s.commit(batch)
	}
}

// commit inserts the batch and answers each of its callers.
func (s *Postgres) commit(batch []putRequest) {
	results, err := s.commitBatch(batch)
	if err != nil && len(batch) > 1 && rowRefused(err) {
		// One bad row (PostgreSQL refuses a NUL byte or invalid UTF-8 in TEXT, where SQLite
		// stores it, and a key too long for its index) must not fail the Puts batched with
		// it: insert each alone, so that only its own caller gets the error.
		for i, req := range batch {
			res, err := s.commitBatch(batch[i : i+1])
			if err != nil {
				req.done <- putResult{err: err}
				continue
			}
			req.done <- res[0]
		}
		return
	}
	for i, req := range batch {
		if err != nil {
			req.done <- putResult{err: err}
			continue
		}
		req.done <- results[i]
	}
}

// rowRefused reports whether err is the server refusing a row's data (SQLSTATE classes 22 data
// exception, 23 integrity constraint violation, 54 program limit exceeded), rather than a
// failure of the connection or the server, which inserting the rows one by one would only
// repeat.
func rowRefused(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || len(pgErr.Code) != 5 {
		return false
	}
	switch pgErr.Code[:2] {
	case "22", "23", "54":
		return true
	}
	return false
}

// pgInsert has no conflict target: a repeated (source, id) and a repeated (source,
// body_sha256) are both duplicates.
const pgInsert = `INSERT INTO deliveries (source, id, event, body, received_at, next_attempt_at, scope, body_sha256)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
	ON CONFLICT DO NOTHING`

// commitBatch inserts the batch's deliveries in one transaction, one statement each, sent
// together as a pgx.Batch. The statements run in order, so the second Put of a Key in one batch
// conflicts with the first and reports inserted=false.
func (s *Postgres) commitBatch(batch []putRequest) ([]putResult, error) {
	// Not any caller's context: callers that gave up must not abort a batch others wait on.
	ctx, cancel := context.WithTimeout(context.Background(), pgBatchTimeout)
	defer cancel()
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: begin batch of %d: %w", s.where, len(batch), err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	b := &pgx.Batch{}
	for _, req := range batch {
		d := req.d
		body := d.Body
		if body == nil {
			body = []byte{} // NOT NULL column; an empty body is still a body
		}
		at := d.ReceivedAt.UnixNano()
		b.Queue(pgInsert, d.Source, d.ID, d.Event, body, at, at, d.Scope, digestArg(bodyDigest(d.Scope, body)))
	}
	results := make([]putResult, len(batch))
	br := tx.SendBatch(ctx, b)
	for i, req := range batch {
		tag, err := br.Exec()
		if err != nil {
			_ = br.Close()
			return nil, fmt.Errorf("%s: insert %s: %w", s.where, req.d.Key(), err)
		}
		results[i].inserted = tag.RowsAffected() == 1
	}
	if err := br.Close(); err != nil {
		return nil, fmt.Errorf("%s: batch of %d: %w", s.where, len(batch), err)
	}
	// Duplicates are rare: for each, ask apart whether it was the ID or the body under
	// another ID.
	for i, req := range batch {
		digest := bodyDigest(req.d.Scope, req.d.Body)
		if results[i].inserted || digest == nil {
			continue
		}
		var other string
		err := tx.QueryRow(ctx, `SELECT id FROM deliveries WHERE source = $1 AND body_sha256 = $2 AND id <> $3`, req.d.Source, digest, req.d.ID).Scan(&other)
		switch {
		case err == nil:
			results[i].err = &DuplicateBodyError{Key: req.d.Key(), Stored: Key{Source: req.d.Source, ID: other}}
		case !errors.Is(err, pgx.ErrNoRows):
			return nil, fmt.Errorf("%s: insert %s: find the duplicate: %w", s.where, req.d.Key(), err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("%s: commit batch of %d: %w", s.where, len(batch), err)
	}
	return results, nil
}

// pgScanDelivery reads deliveryColumns, then extra.
func pgScanDelivery(row pgx.Row, extra ...any) (Delivery, error) {
	var (
		d                          Delivery
		received, next, leaseUntil int64
		state                      int
	)
	dest := append([]any{&d.Source, &d.ID, &d.Event, &d.Body, &received, &state, &d.Attempts, &next,
		&d.LeaseOwner, &leaseUntil, &d.LastError, &d.Scope}, extra...)
	if err := row.Scan(dest...); err != nil {
		return Delivery{}, err
	}
	if d.Body == nil {
		d.Body = []byte{}
	}
	d.State = State(state)
	d.ReceivedAt = fromNanos(received)
	d.NextAttemptAt = fromNanos(next)
	if leaseUntil != 0 {
		d.LeaseUntil = fromNanos(leaseUntil)
	}
	return d, nil
}

// Claim leases the oldest due delivery to worker; see Deliveries for the contract.
func (s *Postgres) Claim(ctx context.Context, worker string, lease time.Duration, now time.Time) (Delivery, bool, error) {
	if worker == "" {
		return Delivery{}, false, errors.New("store: claim: worker name is empty")
	}
	if lease <= 0 {
		return Delivery{}, false, fmt.Errorf("store: claim by %s: lease %v is not positive", worker, lease)
	}
	if !s.enter() {
		return Delivery{}, false, fmt.Errorf("%s: claim by %s: %w", s.where, worker, ErrClosed)
	}
	defer s.inflight.Done()
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return Delivery{}, false, fmt.Errorf("%s: claim by %s: %w", s.where, worker, err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	nowN := now.UnixNano()
	// Crash-loop guard: a delivery whose last allowed attempt ended in an expired lease
	// (the worker died holding it) is dead, not handed out again. It matches no row, and so
	// locks none, unless a worker crashed on a delivery's last attempt.
	if _, err := tx.Exec(ctx, `UPDATE deliveries
		SET state = 2, finished_at = $1,
		    last_error = 'lease of ' || lease_owner || ' expired on attempt ' || attempts || ' of ' || $2::integer || ' (worker died or stalled)',
		    lease_owner = NULL, lease_until = NULL
		WHERE state = 0 AND lease_until IS NOT NULL AND lease_until <= $1 AND attempts >= $2::integer`,
		nowN, s.opts.MaxAttempts); err != nil {
		return Delivery{}, false, fmt.Errorf("%s: claim by %s: dead-letter expired leases: %w", s.where, worker, err)
	}
	// SKIP LOCKED: a row another transaction is claiming (or finishing) right now is passed
	// over, not waited for. A row claimed and committed after this statement's snapshot is
	// re-checked against the WHERE clause once locked, and skipped: its lease is live.
	var prev *string
	d, err := pgScanDelivery(tx.QueryRow(ctx, `WITH c AS (
			SELECT seq, lease_owner AS prev FROM deliveries
			WHERE state = 0 AND next_attempt_at <= $3 AND (lease_until IS NULL OR lease_until <= $3)
			ORDER BY seq LIMIT 1
			FOR UPDATE SKIP LOCKED)
		UPDATE deliveries d SET lease_owner = $1, lease_until = $2, attempts = d.attempts + 1
		FROM c WHERE d.seq = c.seq
		RETURNING `+deliveryColumns+`, c.prev`,
		worker, now.Add(lease).UnixNano(), nowN), &prev)
	if errors.Is(err, pgx.ErrNoRows) {
		if err := tx.Commit(ctx); err != nil {
			return Delivery{}, false, fmt.Errorf("%s: claim by %s: %w", s.where, worker, err)
		}
		return Delivery{}, false, nil
	}
	if err != nil {
		return Delivery{}, false, fmt.Errorf("%s: claim by %s: %w", s.where, worker, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return Delivery{}, false, fmt.Errorf("%s: claim %s by %s: %w", s.where, d.Key(), worker, err)
	}
	if prev != nil {
		s.takeovers.Add(1)
	}
	return d, true, nil
}

// leased runs an UPDATE that must match the delivery k leased by worker, and turns "no row"
// into ErrNotFound or ErrLeaseLost.
func (s *Postgres) leased(ctx context.Context, op string, k Key, worker string, query string, args ...any) error {
	if !s.enter() {
		return fmt.Errorf("%s: %s %s: %w", s.where, op, k, ErrClosed)
	}
	defer s.inflight.Done()
	tag, err := s.pool.Exec(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("%s: %s %s: %w", s.where, op, k, err)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	return s.whyNot(ctx, op, k, worker)
}

func (s *Postgres) whyNot(ctx context.Context, op string, k Key, worker string) error {
	if _, err := s.get(ctx, k); err != nil {
		return fmt.Errorf("%s: %s by %s: %w", s.where, op, worker, err)
	}
	return fmt.Errorf("%s: %s %s by %s: %w", s.where, op, k, worker, ErrLeaseLost)
}

// Complete marks a leased delivery done.
func (s *Postgres) Complete(ctx context.Context, k Key, worker string) error {
	return s.leased(ctx, "complete", k, worker, `UPDATE deliveries
		SET state = 1, lease_owner = NULL, lease_until = NULL, finished_at = $1
		WHERE source = $2 AND id = $3 AND state = 0 AND lease_owner = $4`,
		time.Now().UnixNano(), k.Source, k.ID, worker)
}

// Fail records cause and schedules the next attempt at next, or dead-letters the delivery if
// it has used its MaxAttempts attempts.
func (s *Postgres) Fail(ctx context.Context, k Key, worker string, cause error, next time.Time) (FailOutcome, error) {
	if !s.enter() {
		return Retrying, fmt.Errorf("%s: fail %s: %w", s.where, k, ErrClosed)
	}
	defer s.inflight.Done()
	var state int
	err := s.pool.QueryRow(ctx, `UPDATE deliveries
		SET last_error = $1, lease_owner = NULL, lease_until = NULL, next_attempt_at = $2,
		    state = CASE WHEN attempts >= $3::integer THEN 2 ELSE 0 END,
		    finished_at = CASE WHEN attempts >= $3::integer THEN $4::bigint ELSE NULL END
		WHERE source = $5 AND id = $6 AND state = 0 AND lease_owner = $7
		RETURNING state`,
		truncateError(cause), next.UnixNano(), s.opts.MaxAttempts, time.Now().UnixNano(), k.Source, k.ID, worker).Scan(&state)
	if errors.Is(err, pgx.ErrNoRows) {
		return Retrying, s.whyNot(ctx, "fail", k, worker)
	}
	if err != nil {
		return Retrying, fmt.Errorf("%s: fail %s: %w", s.where, k, err)
	}
	if State(state) == StateDead {
		return DeadLettered, nil
	}
	return Retrying, nil
}

// DeadLetter moves a leased delivery to the dead-letter state at once (a permanent error).
func (s *Postgres) DeadLetter(ctx context.Context, k Key, worker string, cause error) error {
	return s.leased(ctx, "dead-letter", k, worker, `UPDATE deliveries
		SET state = 2, last_error = $1, lease_owner = NULL, lease_until = NULL, finished_at = $2
		WHERE source = $3 AND id = $4 AND state = 0 AND lease_owner = $5`,
		truncateError(cause), time.Now().UnixNano(), k.Source, k.ID, worker)
}

// Release gives back the lease and the attempt, leaving the delivery due at once. A worker
// that stops before its handler finished calls it so another worker (here or on another
// replica) picks the delivery up without waiting for the lease to expire.
func (s *Postgres) Release(ctx context.Context, k Key, worker string) error {
	return s.leased(ctx, "release", k, worker, `UPDATE deliveries
		SET lease_owner = NULL, lease_until = NULL, attempts = GREATEST(attempts - 1, 0)
		WHERE source = $1 AND id = $2 AND state = 0 AND lease_owner = $3`,
		k.Source, k.ID, worker)
}

// DeadLetters lists dead deliveries, oldest first, with their bodies and last errors.
func (s *Postgres) DeadLetters(ctx context.Context) ([]Delivery, error) {
	if !s.enter() {
		return nil, fmt.Errorf("%s: list dead letters: %w", s.where, ErrClosed)
	}
	defer s.inflight.Done()
	rows, err := s.pool.Query(ctx, `SELECT `+deliveryColumns+` FROM deliveries WHERE state = 2 ORDER BY seq`)
	if err != nil {
		return nil, fmt.Errorf("%s: list dead letters: %w", s.where, err)
	}
	defer rows.Close()
	var out []Delivery
	for rows.Next() {
		d, err := pgScanDelivery(rows)
		if err != nil {
			return nil, fmt.Errorf("%s: list dead letters: %w", s.where, err)
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: list dead letters: %w", s.where, err)
	}
	return out, nil
}

// Replay moves a dead delivery back to pending, due at now, with its attempts reset.
func (s *Postgres) Replay(ctx context.Context, k Key, now time.Time) error {
	if !s.enter() {
		return fmt.Errorf("%s: replay %s: %w", s.where, k, ErrClosed)
	}
	defer s.inflight.Done()
	tag, err := s.pool.Exec(ctx, `UPDATE deliveries
		SET state = 0, attempts = 0, next_attempt_at = $1, lease_owner = NULL, lease_until = NULL, finished_at = NULL
		WHERE source = $2 AND id = $3 AND state = 2`,
		now.UnixNano(), k.Source, k.ID)
	if err != nil {
		return fmt.Errorf("%s: replay %s: %w", s.where, k, err)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	d, err := s.get(ctx, k)
	if err != nil {
		return fmt.Errorf("%s: replay: %w", s.where, err)
	}
	return fmt.Errorf("%s: replay %s (state %s): %w", s.where, k, d.State, ErrNotDead)
}

// Get returns one delivery by key, or an error wrapping ErrNotFound.
func (s *Postgres) Get(ctx context.Context, k Key) (Delivery, error) {
	if !s.enter() {
		return Delivery{}, fmt.Errorf("%s: get %s: %w", s.where, k, ErrClosed)
	}
	defer s.inflight.Done()
	return s.get(ctx, k)
}

func (s *Postgres) get(ctx context.Context, k Key) (Delivery, error) {
	d, err := pgScanDelivery(s.pool.QueryRow(ctx, `SELECT `+deliveryColumns+` FROM deliveries WHERE source = $1 AND id = $2`, k.Source, k.ID))
	if errors.Is(err, pgx.ErrNoRows) {
		return Delivery{}, fmt.Errorf("delivery %s: %w", k, ErrNotFound)
	}
	if err != nil {
		return Delivery{}, fmt.Errorf("%s: get %s: %w", s.where, k, err)
	}
	return d, nil
}

// Stats counts pending, leased and dead deliveries; leases are judged live against now.
func (s *Postgres) Stats(ctx context.Context, now time.Time) (Stats, error) {
	if !s.enter() {
		return Stats{}, fmt.Errorf("%s: stats: %w", s.where, ErrClosed)
	}
	defer s.inflight.Done()
	// One REPEATABLE READ transaction: the pending and dead counts come from one snapshot.
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return Stats{}, fmt.Errorf("%s: stats: %w", s.where, err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	var (
		st     Stats
		oldest *int64
	)
	if err := tx.QueryRow(ctx, `SELECT COUNT(*), MIN(received_at),
		COALESCE(SUM(CASE WHEN lease_until > $1 THEN 1 ELSE 0 END), 0)
		FROM deliveries WHERE state = 0`, now.UnixNano()).Scan(&st.Pending, &oldest, &st.Leased); err != nil {
		return Stats{}, fmt.Errorf("%s: stats: %w", s.where, err)
	}
	if err := tx.QueryRow(ctx, `SELECT COUNT(*) FROM deliveries WHERE state = 2`).Scan(&st.Dead); err != nil {
		return Stats{}, fmt.Errorf("%s: stats: %w", s.where, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return Stats{}, fmt.Errorf("%s: stats: %w", s.where, err)
	}
	if oldest != nil {
		st.OldestPending = fromNanos(*oldest)
	}
	return st, nil
}

// Prune deletes done deliveries finished before doneBefore and dead ones dead-lettered before
// deadBefore (zero: none); see Deliveries.
func (s *Postgres) Prune(ctx context.Context, doneBefore, deadBefore time.Time) (int, error) {
	if !s.enter() {
		return 0, fmt.Errorf("%s: prune: %w", s.where, ErrClosed)
	}
	defer s.inflight.Done()
	tag, err := s.pool.Exec(ctx, `DELETE FROM deliveries WHERE (state = 1 AND finished_at < $1) OR (state = 2 AND finished_at < $2)`,
		pruneCutoff(doneBefore), pruneCutoff(deadBefore))
	if err != nil {
		return 0, fmt.Errorf("%s: prune done before %s, dead before %s: %w", s.where, doneBefore.Format(time.RFC3339), deadBefore.Format(time.RFC3339), err)
	}
	return int(tag.RowsAffected()), nil
}
