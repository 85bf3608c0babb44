package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // registers the pure-Go "sqlite" database/sql driver
)

// SyncMode is the SQLite synchronous setting used in WAL mode. See the package doc for why
// SyncFull is the default.
type SyncMode int

const (
	// SyncFull fsyncs the WAL on every commit: an acknowledged Put survives power loss.
	SyncFull SyncMode = iota
	// SyncNormal fsyncs only at checkpoints: an acknowledged Put survives a process crash
	// (SIGKILL, panic, OOM kill) but not power loss or a kernel crash.
	SyncNormal
)

func (m SyncMode) pragma() string {
	if m == SyncNormal {
		return "NORMAL"
	}
	return "FULL"
}

// Options tune a SQLite store. The zero value is the production setting.
type Options struct {
	// MaxAttempts is how many claims a delivery gets before Fail dead-letters it. Default 8.
	MaxAttempts int
	// Sync is the durability mode. Default SyncFull.
	Sync SyncMode
	// BusyTimeout is how long a connection waits for another process's lock. Default 5s.
	BusyTimeout time.Duration
	// MaxBatch caps how many Put calls share one transaction. Default 256.
	MaxBatch int
	// MaxBatchBytes caps the bodies in one transaction, so a burst of 25 MB payloads does not
	// build one enormous transaction. Default 32 MiB.
	MaxBatchBytes int
	// MaxWALBytes bounds the WAL file: past three quarters of it the checkpointer rewinds the
	// WAL, and the rewind trims the file back to this size (journal_size_limit). Default 64 MiB.
	MaxWALBytes int64
}

func (o Options) withDefaults() Options {
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 8
	}
	if o.BusyTimeout <= 0 {
		o.BusyTimeout = 5 * time.Second
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = 256
	}
	if o.MaxBatchBytes <= 0 {
		o.MaxBatchBytes = 32 << 20
	}
	if o.MaxWALBytes <= 0 {
		o.MaxWALBytes = 64 << 20
	}
	return o
}

// maxErrorLen bounds the stored last_error: a handler error can quote a whole payload.
const maxErrorLen = 4096

// SQLite is the single-replica Deliveries implementation: one database file in WAL mode.
//
// Writes go through one connection (SQLite has one writer anyway; a single connection means no
// SQLITE_BUSY between our own goroutines). Put calls are batched by a writer goroutine owned by
// the store: it takes every Put waiting at the moment, commits them in one transaction (one
// fsync), and answers each caller after the commit. Reads (Get, Stats, DeadLetters) use a
// separate read-only pool so that metrics scrapes never queue behind writes.
//
// The write connection commits at synchronous=NORMAL. Under SyncFull the writer then makes each
// Put batch durable itself, with one fdatasync of the WAL before it answers anyone (see walFile
// for why not SQLite's own fsync, and why this is as durable). Claim, Complete, Fail and the rest
// cost no sync of their own: the next Put batch's fdatasync makes every earlier frame durable
// too; in between, a power loss can only undo a lease or an outcome, which means the delivery is
// processed again (at-least-once), never lost. A process crash undoes nothing.
//
// Checkpoints (copying the WAL back into the database file) are kept off the commit path: the
// write connection's automatic checkpoint is off, and a checkpointer goroutine, also owned by
// the store, runs PASSIVE checkpoints on its own connection after commits, at most every
// 100 ms. A PASSIVE checkpoint never blocks the writer. Once the WAL passes three quarters of
// MaxWALBytes the checkpointer rewinds it (see rewindWAL), so the file stays bounded under
// sustained load and commits keep overwriting blocks the WAL file already has.
type SQLite struct {
	path  string
	opts  Options
	write *sql.DB
	read  *sql.DB
	ckpt  *sql.DB
	// wal is the store's handle on the WAL file under SyncFull (nil under SyncNormal): the
	// writer fdatasyncs it after each Put batch (see walFile).
	wal *walFile
	// stmt holds the statements run for every delivery and every scrape, prepared at Open.
	stmt sqliteStmts

	puts      chan putRequest
	closing   chan struct{}
	writerEnd chan struct{}
	ckptEnd   chan struct{}
	// committed wakes the checkpointer after a batch commit (capacity 1: one pending wake-up
	// covers any number of commits).
	committed chan struct{}
	pageSize  int64
	// Counted by the checkpointer, read by CheckpointStats.
	checkpoints, rewinds, longestRewind atomic.Int64
	closeOnce                           sync.Once
	closeErr                            error
}

var _ Deliveries = (*SQLite)(nil)

type putRequest struct {
	d    Delivery
	done chan putResult // buffered(1): the writer never blocks on a caller that gave up
}

type putResult struct {
	inserted bool
	err      error
}

// Open opens the store at path, creating the file and schema on first use, and starts the
// group-commit writer. The caller must Close it.
func Open(ctx context.Context, path string, opts Options) (*SQLite, error) {
	return open(ctx, path, opts, func(dsn string) (*sql.DB, error) { return sql.Open("sqlite", dsn) })
}

// open is Open with the function that opens each of the store's three pools from its DSN: the
// tests pass one that counts what the driver is asked to parse.
func open(ctx context.Context, path string, opts Options, openDB func(dsn string) (*sql.DB, error)) (*SQLite, error) {
	opts = opts.withDefaults()
	if path == "" {
		return nil, errors.New("store: path is empty")
	}
	dsn := func(sync SyncMode, extra ...string) string {
		q := url.Values{}
		q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", opts.BusyTimeout.Milliseconds()))
		q.Add("_pragma", "journal_mode(WAL)")
		q.Add("_pragma", "synchronous("+sync.pragma()+")")
		q.Add("_pragma", "foreign_keys(1)")
		for i := 0; i+1 < len(extra); i += 2 {
			q.Add(extra[i], extra[i+1])
		}
		return "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + q.Encode()
	}
	// The write connection never checkpoints on its own (see the checkpointer); when the WAL
	// is reset after a full checkpoint, journal_size_limit trims a WAL a burst had grown.
	write, err := openDB(dsn(SyncNormal, "_txlock", "immediate",
		"_pragma", "wal_autocheckpoint(0)",
		"_pragma", fmt.Sprintf("journal_size_limit(%d)", opts.MaxWALBytes)))
	if err != nil {
		return nil, fmt.Errorf("store %s: open: %w", path, err)
	}
	write.SetMaxOpenConns(1)
	write.SetMaxIdleConns(1)
	write.SetConnMaxLifetime(0)
	write.SetConnMaxIdleTime(0)

	if err := migrate(ctx, write, path); err != nil {
		_ = write.Close()
		return nil, err
	}
	var mode string
	if err := write.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		_ = write.Close()
		return nil, fmt.Errorf("store %s: journal mode is %q, want wal: %v", path, mode, err)
	}
	var pageSize int64
	if err := write.QueryRowContext(ctx, `PRAGMA page_size`).Scan(&pageSize); err != nil {
		_ = write.Close()
		return nil, fmt.Errorf("store %s: page size: %w", path, err)
	}

	// Under SyncFull the writer makes each Put batch durable itself (see walFile). migrate has
	// written through the write connection, so the WAL file exists and is the one it uses.
	var wal *walFile
	if opts.Sync == SyncFull {
		if wal, err = openWALFile(path + "-wal"); err != nil {
			_ = write.Close()
			return nil, fmt.Errorf("store %s: %w", path, err)
		}
	}
	closeWAL := func() {
		if wal != nil {
			_ = wal.Close()
		}
	}

	read, err := openDB(dsn(opts.Sync, "_pragma", "query_only(1)"))
	if err != nil {
		_ = write.Close()
		closeWAL()
		return nil, fmt.Errorf("store %s: open reader: %w", path, err)
	}
	read.SetMaxOpenConns(4)
	read.SetMaxIdleConns(4)
	if err := read.PingContext(ctx); err != nil {
		_ = write.Close()
		_ = read.Close()
		closeWAL()
		return nil, fmt.Errorf("store %s: open reader: %w", path, err)
	}

	ckpt, err := openDB(dsn(opts.Sync, "_pragma", "wal_autocheckpoint(0)"))
	if err != nil {
		_ = write.Close()
		_ = read.Close()
		closeWAL()
		return nil, fmt.Errorf("store %s: open checkpointer: %w", path, err)
	}
	ckpt.SetMaxOpenConns(1)
	ckpt.SetMaxIdleConns(1)
	ckpt.SetConnMaxLifetime(0)
	ckpt.SetConnMaxIdleTime(0)

	// Prepared now, while no transaction holds the write pool's only connection (a statement
	// prepared on the pool needs a free connection to be prepared on).
	stmts, err := prepareSQLiteStmts(ctx, write, read, ckpt)
	if err != nil {
		_ = write.Close()
		_ = read.Close()
		_ = ckpt.Close()
		closeWAL()
		return nil, fmt.Errorf("store %s: %w", path, err)
	}

	s := &SQLite{
		path:      path,
		opts:      opts,
		write:     write,
		read:      read,
		ckpt:      ckpt,
		wal:       wal,
		stmt:      stmts,
		puts:      make(chan putRequest),
		closing:   make(chan struct{}),
		writerEnd: make(chan struct{}),
		ckptEnd:   make(chan struct{}),
		committed: make(chan struct{}, 1),
		pageSize:  pageSize,
	}
	go s.writer()
	go s.checkpointer()
	return s, nil
}

// Path returns the database file's path.
func (s *SQLite) Path() string { return s.path }

// MaxAttempts returns the number of claims a delivery gets before it is dead-lettered.
func (s *SQLite) MaxAttempts() int { return s.opts.MaxAttempts }

// Close stops the writer (Put calls already handed to it are committed and answered first),
// then closes the database, checkpointing the WAL. Later calls return ErrClosed.
func (s *SQLite) Close() error {
	s.closeOnce.Do(func() {
		close(s.closing)
		<-s.writerEnd
		<-s.ckptEnd
		// The pools first: a call that passed its closed check before Close keeps getting
		// database/sql's "database is closed", as it did before statements were kept, and
		// closing a connection finalizes the statements prepared on it.
		s.closeErr = errors.Join(s.ckpt.Close(), s.read.Close(), s.write.Close(), s.stmt.close())
		if s.wal != nil {
			s.closeErr = errors.Join(s.closeErr, s.wal.Close())
		}
		if s.closeErr != nil {
			s.closeErr = fmt.Errorf("store %s: close: %w", s.path, s.closeErr)
		}
	})
	return s.closeErr
}

func (s *SQLite) closed() bool {
	select {
	case <-s.closing:
		return true
	default:
		return false
	}
}

// Put stores d unless a delivery with the same Key is already stored. It returns after the
// transaction holding d has committed. If ctx ends first Put returns ctx's error, and d may
// or may not have been stored: a caller that did not get inserted=true must not acknowledge.
func (s *SQLite) Put(ctx context.Context, d Delivery) (bool, error) {
	if err := d.Validate(); err != nil {
		return false, err
	}
	if s.closed() {
		return false, fmt.Errorf("store %s: put %s: %w", s.path, d.Key(), ErrClosed)
	}
	req := putRequest{d: d, done: make(chan putResult, 1)}
	select {
	case s.puts <- req:
	case <-s.closing:
		return false, fmt.Errorf("store %s: put %s: %w", s.path, d.Key(), ErrClosed)
	case <-ctx.Done():
		return false, fmt.Errorf("store %s: put %s: %w", s.path, d.Key(), ctx.Err())
	}
	select {
	case res := <-req.done:
		return res.inserted, res.err
	case <-ctx.Done():
		return false, fmt.Errorf("store %s: put %s: %w", s.path, d.Key(), ctx.Err())
	}
}

// writer is the group-commit loop. puts is unbuffered, so every Put blocked in its send is
// "waiting at the moment" and is picked up by the non-blocking drain below.
func (s *SQLite) writer() {
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
		for len(batch) < s.opts.MaxBatch && size < s.opts.MaxBatchBytes {
			select {
			case req := <-s.puts:
				batch = append(batch, req)
				size += len(req.d.Body)
			default:
				break drain
			}
		}
		results, err := s.commitBatch(batch)
		if err == nil {
			select {
			case s.committed <- struct{}{}:
			default:
			}
		}
		for i, req := range batch {
			if err != nil {
				req.done <- putResult{err: err}
				continue
			}
			req.done <- results[i]
		}
	}
}

// checkpointer runs PASSIVE checkpoints after Put commits, at most one per ckptInterval, and
// every ckptIdle regardless (Claim, Complete and Fail write too, without waking it), until the
// store closes.
func (s *SQLite) checkpointer() {
	defer close(s.ckptEnd)
	const (
		ckptInterval = 100 * time.Millisecond
		ckptIdle     = 5 * time.Second
	)
	pace := time.NewTimer(0)
	defer pace.Stop()
	idle := time.NewTimer(ckptIdle)
	defer idle.Stop()
	for {
		select {
		case <-s.committed:
		case <-idle.C:
		case <-s.closing:
			return
		}
		idle.Reset(ckptIdle)
		walFrames, copied := s.checkpoint()
		if copied {
			s.checkpoints.Add(1)
		}
		// Rewind at three quarters of the limit, leaving room for the frames written until
		// the next round: after the first rewind the file keeps the size it reached
		// (journal_size_limit trims only past MaxWALBytes), so commits overwrite blocks the
		// file already has instead of growing it, which costs every fdatasync a metadata
		// write (and on a journaled filesystem a journal commit).
		if walFrames*s.pageSize > s.opts.MaxWALBytes/4*3 {
			s.rewindWAL()
		}
		pace.Reset(ckptInterval)
		select {
		case <-pace.C:
		case <-s.closing:
			return
		}
	}
}

// rewindWAL makes the next write transaction start the WAL over from its beginning. SQLite
// rewinds the WAL only when a writer begins while every frame is already in the database file,
// which sustained writes never allow by chance: a passive checkpoint finishes, but frames
// committed while it ran are not yet copied. So rewindWAL holds the only write connection
// (every write of this store waits in database/sql's pool meanwhile) while a second passive
// checkpoint copies just those frames. The stall is that short checkpoint, not the bulk copy.
// journal_size_limit then trims the rewound file.
func (s *SQLite) rewindWAL() {
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.BusyTimeout)
	defer cancel()
	conn, err := s.write.Conn(ctx)
	if err != nil {
		return // closing, or the writer is stuck; the next round tries again
	}
	defer conn.Close() // back to the pool, not closed
	t0 := time.Now()
	s.checkpoint()
	held := time.Since(t0)
	s.rewinds.Add(1)
	for {
		longest := s.longestRewind.Load()
		if int64(held) <= longest || s.longestRewind.CompareAndSwap(longest, int64(held)) {
			break
		}
	}
}

// checkpoint runs PRAGMA wal_checkpoint(PASSIVE) on the checkpointer's connection and returns
// the WAL's size in frames and whether it copied any frame into the database file. A failed
// checkpoint is not an error for anyone: the WAL keeps the data, and the next one tries again.
func (s *SQLite) checkpoint() (walFrames int64, copied bool) {
	var busy, checkpointed int64
	if err := s.stmt.checkpoint.QueryRowContext(context.Background()).Scan(&busy, &walFrames, &checkpointed); err != nil {
		return 0, false
	}
	return walFrames, checkpointed > 0
}

// CheckpointStats says what the checkpointer has done since Open.
type CheckpointStats struct {
	// Checkpoints counts the checkpoints that copied frames from the WAL into the database file.
	// Each syncs the WAL first; SQLite syncs the database file only in those that copied up to
	// the WAL's end (a commit landing meanwhile defers it), which is what lets the WAL be reset.
	Checkpoints int64
	// Rewinds counts the times the checkpointer held the writer to let the WAL start over.
	Rewinds int64
	// LongestRewind is the longest the writer was held by a rewind.
	LongestRewind time.Duration
}

// CheckpointStats returns the checkpointer's counters, for benchmarks and diagnostics.
func (s *SQLite) CheckpointStats() CheckpointStats {
	return CheckpointStats{
		Checkpoints:   s.checkpoints.Load(),
		Rewinds:       s.rewinds.Load(),
		LongestRewind: time.Duration(s.longestRewind.Load()),
	}
}

func (s *SQLite) commitBatch(batch []putRequest) ([]putResult, error) {
	// Background context: callers that gave up must not abort a batch others wait on.
	ctx := context.Background()
	conn, err := s.write.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("store %s: batch of %d: %w", s.path, len(batch), err)
	}
	defer conn.Close() // back to the pool
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("store %s: begin batch of %d: %w", s.path, len(batch), err)
	}
	// The statements as the transaction's, on its connection: the one they were prepared on
	// (Tx.StmtContext prepares them anew only on a connection that has never run them).
	// Closed with the transaction, which leaves the store's own statements prepared.
	stmt := tx.StmtContext(ctx, s.stmt.insert)
	var findDuplicate *sql.Stmt // rare, so taken only when a duplicate needs it
	results := make([]putResult, len(batch))
	for i, req := range batch {
		d := req.d
		body := d.Body
		if body == nil {
			body = []byte{} // NOT NULL column; an empty body is still a body
		}
		at := d.ReceivedAt.UnixNano()
		digest := bodyDigest(d.Scope, body)
		res, err := stmt.ExecContext(ctx, d.Source, d.ID, d.Event, body, at, at, d.Scope, digestArg(digest))
		if err != nil {
			_ = tx.Rollback()
			return nil, fmt.Errorf("store %s: insert %s: %w", s.path, d.Key(), err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			_ = tx.Rollback()
			return nil, fmt.Errorf("store %s: insert %s: %w", s.path, d.Key(), err)
		}
		results[i].inserted = n == 1
		if n == 0 && digest != nil {
			// Rare (a duplicate), so asked apart: was it the ID, or the body under another ID?
			if findDuplicate == nil {
				findDuplicate = tx.StmtContext(ctx, s.stmt.findDuplicate)
			}
			var other string
			err := findDuplicate.QueryRowContext(ctx, d.Source, digest, d.ID).Scan(&other)
			switch {
			case err == nil:
				results[i].err = &DuplicateBodyError{Key: d.Key(), Stored: Key{Source: d.Source, ID: other}}
			case !errors.Is(err, sql.ErrNoRows):
				_ = tx.Rollback()
				return nil, fmt.Errorf("store %s: insert %s: find the duplicate: %w", s.path, d.Key(), err)
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("store %s: commit batch of %d: %w", s.path, len(batch), err)
	}
	if s.wal != nil {
		// Still holding the write connection: no Claim sees the batch before it is durable.
		if err := s.wal.sync(); err != nil {
			return nil, fmt.Errorf("store %s: batch of %d committed but not made durable: %w", s.path, len(batch), err)
		}
	}
	return results, nil
}

const deliveryColumns = `source, id, event, body, received_at, state, attempts, next_attempt_at,
	COALESCE(lease_owner, ''), COALESCE(lease_until, 0), last_error, scope`

type scanner interface{ Scan(dest ...any) error }

func scanDelivery(row scanner) (Delivery, error) {
	var (
		d                          Delivery
		received, next, leaseUntil int64
		state                      int
	)
	if err := row.Scan(&d.Source, &d.ID, &d.Event, &d.Body, &received, &state, &d.Attempts, &next,
		&d.LeaseOwner, &leaseUntil, &d.LastError, &d.Scope); err != nil {
		return Delivery{}, err
	}
	d.State = State(state)
	d.ReceivedAt = fromNanos(received)
	d.NextAttemptAt = fromNanos(next)
	if leaseUntil != 0 {
		d.LeaseUntil = fromNanos(leaseUntil)
	}
	return d, nil
}

func fromNanos(n int64) time.Time { return time.Unix(0, n).UTC() }

// Claim leases the oldest due delivery to worker; see Deliveries for the contract.
func (s *SQLite) Claim(ctx context.Context, worker string, lease time.Duration, now time.Time) (Delivery, bool, error) {
	if worker == "" {
		return Delivery{}, false, errors.New("store: claim: worker name is empty")
	}
	if lease <= 0 {
		return Delivery{}, false, fmt.Errorf("store: claim by %s: lease %v is not positive", worker, lease)
	}
	if s.closed() {
		return Delivery{}, false, fmt.Errorf("store %s: claim by %s: %w", s.path, worker, ErrClosed)
	}
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return Delivery{}, false, fmt.Errorf("store %s: claim by %s: %w", s.path, worker, err)
	}
	defer func() { _ = tx.Rollback() }()
	nowN := now.UnixNano()
	// Crash-loop guard: a delivery whose last allowed attempt ended in an expired lease
	// (the worker died holding it) is dead, not handed out again.
	if _, err := tx.StmtContext(ctx, s.stmt.expireLeases).ExecContext(ctx, nowN, s.opts.MaxAttempts); err != nil {
		return Delivery{}, false, fmt.Errorf("store %s: claim by %s: dead-letter expired leases: %w", s.path, worker, err)
	}
	row := tx.StmtContext(ctx, s.stmt.claim).QueryRowContext(ctx, worker, now.Add(lease).UnixNano(), nowN)
	d, err := scanDelivery(row)
	if errors.Is(err, sql.ErrNoRows) {
		if err := tx.Commit(); err != nil {
			return Delivery{}, false, fmt.Errorf("store %s: claim by %s: %w", s.path, worker, err)
		}
		return Delivery{}, false, nil
	}
	if err != nil {
		return Delivery{}, false, fmt.Errorf("store %s: claim by %s: %w", s.path, worker, err)
	}
	if err := tx.Commit(); err != nil {
		return Delivery{}, false, fmt.Errorf("store %s: claim %s by %s: %w", s.path, d.Key(), worker, err)
	}
	return d, true, nil
}

// leased runs an UPDATE that must match the delivery k leased by worker, and turns "no row"
// into ErrNotFound or ErrLeaseLost.
func (s *SQLite) leased(ctx context.Context, op string, k Key, worker string, stmt *sql.Stmt, args ...any) error {
	if s.closed() {
		return fmt.Errorf("store %s: %s %s: %w", s.path, op, k, ErrClosed)
	}
	res, err := stmt.ExecContext(ctx, args...)
	if err != nil {
		return fmt.Errorf("store %s: %s %s: %w", s.path, op, k, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("store %s: %s %s: %w", s.path, op, k, err)
	}
	if n == 1 {
		return nil
	}
	return s.whyNot(ctx, op, k, worker)
}

func (s *SQLite) whyNot(ctx context.Context, op string, k Key, worker string) error {
	if _, err := s.Get(ctx, k); err != nil {
		return fmt.Errorf("store %s: %s by %s: %w", s.path, op, worker, err)
	}
	return fmt.Errorf("store %s: %s %s by %s: %w", s.path, op, k, worker, ErrLeaseLost)
}

// Complete marks a leased delivery done.
func (s *SQLite) Complete(ctx context.Context, k Key, worker string) error {
	return s.leased(ctx, "complete", k, worker, s.stmt.complete, time.Now().UnixNano(), k.Source, k.ID, worker)
}

func truncateError(cause error) string {
	if cause == nil {
		return "unknown error"
	}
	msg := cause.Error()
	if len(msg) > maxErrorLen {
		msg = msg[:maxErrorLen] + "…"
	}
	return msg
}

// Fail records cause and schedules the next attempt at next, or dead-letters the delivery if
// it has used its MaxAttempts attempts.
func (s *SQLite) Fail(ctx context.Context, k Key, worker string, cause error, next time.Time) (FailOutcome, error) {
	if s.closed() {
		return Retrying, fmt.Errorf("store %s: fail %s: %w", s.path, k, ErrClosed)
	}
	row := s.stmt.fail.QueryRowContext(ctx, truncateError(cause), next.UnixNano(), s.opts.MaxAttempts, time.Now().UnixNano(), k.Source, k.ID, worker)
	var state int
	err := row.Scan(&state)
	if errors.Is(err, sql.ErrNoRows) {
		return Retrying, s.whyNot(ctx, "fail", k, worker)
	}
	if err != nil {
		return Retrying, fmt.Errorf("store %s: fail %s: %w", s.path, k, err)
	}
	if State(state) == StateDead {
		return DeadLettered, nil
	}
	return Retrying, nil
}

// DeadLetter moves a leased delivery to the dead-letter state at once (a permanent error).
func (s *SQLite) DeadLetter(ctx context.Context, k Key, worker string, cause error) error {
	return s.leased(ctx, "dead-letter", k, worker, s.stmt.deadLetter, truncateError(cause), time.Now().UnixNano(), k.Source, k.ID, worker)
}

// Release gives back the lease and the attempt, leaving the delivery due at once. A worker
// that stops before its handler finished calls it so another worker (or the next process)
// picks the delivery up without waiting for the lease to expire.
func (s *SQLite) Release(ctx context.Context, k Key, worker string) error {
	return s.leased(ctx, "release", k, worker, s.stmt.release, k.Source, k.ID, worker)
}

// ReclaimLeases frees every lease held on pending deliveries, by any worker. It is for the start
// of a single-writer deployment (one parley serve over one SQLite file): leases then can only be
// left over from a process that died, and waiting for them to expire would delay the unfinished
// work by the whole lease. The attempt the dead process used is kept, so a payload that crashes
// the process still reaches the dead-letter list. A multi-replica store must not call it.
func (s *SQLite) ReclaimLeases(ctx context.Context) (int, error) {
	if s.closed() {
		return 0, fmt.Errorf("store %s: reclaim leases: %w", s.path, ErrClosed)
	}
	res, err := s.write.ExecContext(ctx, `UPDATE deliveries SET lease_owner = NULL, lease_until = NULL
		WHERE state = 0 AND lease_owner IS NOT NULL`)
	if err != nil {
		return 0, fmt.Errorf("store %s: reclaim leases: %w", s.path, err)
	}
	n, err := res.RowsAffected()
	return int(n), err
}

// DeadLetters lists dead deliveries, oldest first, with their bodies and last errors.
func (s *SQLite) DeadLetters(ctx context.Context) ([]Delivery, error) {
	if s.closed() {
		return nil, fmt.Errorf("store %s: list dead letters: %w", s.path, ErrClosed)
	}
	rows, err := s.read.QueryContext(ctx, `SELECT `+deliveryColumns+` FROM deliveries WHERE state = 2 ORDER BY seq`)
	if err != nil {
		return nil, fmt.Errorf("store %s: list dead letters: %w", s.path, err)
	}
	defer rows.Close()
	var out []Delivery
	for rows.Next() {
		d, err := scanDelivery(rows)
		if err != nil {
			return nil, fmt.Errorf("store %s: list dead letters: %w", s.path, err)
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store %s: list dead letters: %w", s.path, err)
	}
	return out, nil
}

// Replay moves a dead delivery back to pending, due at now, with its attempts reset.
func (s *SQLite) Replay(ctx context.Context, k Key, now time.Time) error {
	if s.closed() {
		return fmt.Errorf("store %s: replay %s: %w", s.path, k, ErrClosed)
	}
	res, err := s.write.ExecContext(ctx, `UPDATE deliveries
		SET state = 0, attempts = 0, next_attempt_at = ?, lease_owner = NULL, lease_until = NULL, finished_at = NULL
		WHERE source = ? AND id = ? AND state = 2`,
		now.UnixNano(), k.Source, k.ID)
	if err != nil {
		return fmt.Errorf("store %s: replay %s: %w", s.path, k, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("store %s: replay %s: %w", s.path, k, err)
	} else if n == 1 {
		return nil
	}
	d, err := s.Get(ctx, k)
	if err != nil {
		return fmt.Errorf("store %s: replay: %w", s.path, err)
	}
	return fmt.Errorf("store %s: replay %s (state %s): %w", s.path, k, d.State, ErrNotDead)
}

// Get returns one delivery by key, or an error wrapping ErrNotFound.
func (s *SQLite) Get(ctx context.Context, k Key) (Delivery, error) {
	if s.closed() {
		return Delivery{}, fmt.Errorf("store %s: get %s: %w", s.path, k, ErrClosed)
	}
	row := s.stmt.get.QueryRowContext(ctx, k.Source, k.ID)
	d, err := scanDelivery(row)
	if errors.Is(err, sql.ErrNoRows) {
		return Delivery{}, fmt.Errorf("delivery %s: %w", k, ErrNotFound)
	}
	if err != nil {
		return Delivery{}, fmt.Errorf("store %s: get %s: %w", s.path, k, err)
	}
	return d, nil
}

// Stats counts pending, leased and dead deliveries; leases are judged live against now.
func (s *SQLite) Stats(ctx context.Context, now time.Time) (Stats, error) {
	if s.closed() {
		return Stats{}, fmt.Errorf("store %s: stats: %w", s.path, ErrClosed)
	}
	var (
		st     Stats
		oldest sql.NullInt64
	)
	// One read transaction, so the pending and dead counts come from one snapshot.
	tx, err := s.read.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return Stats{}, fmt.Errorf("store %s: stats: %w", s.path, err)
	}
	defer func() { _ = tx.Rollback() }()
	if err := tx.StmtContext(ctx, s.stmt.statsPending).QueryRowContext(ctx, now.UnixNano()).Scan(&st.Pending, &oldest, &st.Leased); err != nil {
		return Stats{}, fmt.Errorf("store %s: stats: %w", s.path, err)
	}
	if err := tx.StmtContext(ctx, s.stmt.statsDead).QueryRowContext(ctx).Scan(&st.Dead); err != nil {
		return Stats{}, fmt.Errorf("store %s: stats: %w", s.path, err)
	}
	if oldest.Valid {
		st.OldestPending = fromNanos(oldest.Int64)
	}
	return st, nil
}

// Prune deletes done deliveries finished before doneBefore and dead ones dead-lettered before
// deadBefore (zero: none); see Deliveries.
func (s *SQLite) Prune(ctx context.Context, doneBefore, deadBefore time.Time) (int, error) {
	if s.closed() {
		return 0, fmt.Errorf("store %s: prune: %w", s.path, ErrClosed)
	}
	res, err := s.stmt.prune.ExecContext(ctx, pruneCutoff(doneBefore), pruneCutoff(deadBefore))
	if err != nil {
		return 0, fmt.Errorf("store %s: prune done before %s, dead before %s: %w", s.path, doneBefore.Format(time.RFC3339), deadBefore.Format(time.RFC3339), err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("store %s: prune: %w", s.path, err)
	}
	return int(n), nil
}
