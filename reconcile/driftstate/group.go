package driftstate

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// Group is the state with group commit: the batches that callers hand to Apply while a
// transaction is being written wait, and then go in the next transaction together (at most Max of
// them), so that proposals and admission reviews arriving at hundreds a second pay one fsync
// (SQLite's synchronous=FULL, PostgreSQL's WAL flush) between them instead of one each. Every
// caller is answered only once its batch is durable (the transaction committed) or refused; one
// batch's failure (an ErrConflict, a bad claim) does not fail the others, each being written under
// its own savepoint (a batch alone in its transaction needs none). Reads go straight to the DB.
//
// Group owns one writer goroutine, started by NewGroup and stopped by Close; Close does not
// close the DB, which stays its opener's.
type Group struct {
	*DB
	max  int
	reqs chan groupReq // unbuffered: a batch joins a transaction only while its caller waits
	stop chan struct{}
	done chan struct{}
	once sync.Once
	txs  atomic.Int64
}

type groupReq struct {
	ctx   context.Context
	batch Batch
	reply chan error // buffered (1): the writer never waits for a caller
}

// ErrClosed is Apply's error once the Group is closed.
var ErrClosed = errors.New("drift state: closed")

// NewGroup starts group commit over db with at most max batches per transaction (max < 1: 64).
func NewGroup(db *DB, max int) *Group {
	if max < 1 {
		max = 64
	}
	g := &Group{DB: db, max: max, reqs: make(chan groupReq), stop: make(chan struct{}), done: make(chan struct{})}
	go g.write()
	return g
}

// Apply records b durably with whatever other batches are waiting, and returns once it is
// committed (nil) or refused (its own error, or the transaction's).
func (g *Group) Apply(ctx context.Context, b Batch) error {
	r := groupReq{ctx: ctx, batch: b, reply: make(chan error, 1)}
	select {
	case g.reqs <- r:
	case <-g.stop:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	// Once handed over the batch may be committed: wait for the answer whatever ctx does, so that
	// an error never hides a batch that was in fact recorded.
	return <-r.reply
}

// Transactions is how many transactions the writer committed or tried: with N batches applied,
// fewer than N when some shared one.
func (g *Group) Transactions() int64 { return g.txs.Load() }

// Close stops the writer once the transaction under way is answered. Batches not yet handed over
// get ErrClosed.
func (g *Group) Close() error {
	g.once.Do(func() { close(g.stop) })
	<-g.done
	return nil
}

func (g *Group) write() {
	defer close(g.done)
	for {
		var first groupReq
		select {
		case first = <-g.reqs:
		case <-g.stop:
			return
		}
		group := []groupReq{first}
		// Everyone waiting at this moment joins; nobody is waited for. (Waiting a millisecond for
		// more after a shared transaction was tried: at 250 recorded reviews a second the batches
		// rarely overlap, and serve's CPU per review did not move while the median rose; see
		// docs/benchmarks.md, issue 37.)
	gather:
		for len(group) < g.max {
			select {
			case r := <-g.reqs:
				group = append(group, r)
			default:
				break gather
			}
		}
		g.commit(group)
	}
}

// commit writes a group in one transaction, each batch under a savepoint (a lone batch needs
// none), and answers each caller.
func (g *Group) commit(group []groupReq) {
	g.txs.Add(1)
	errs := make([]error, len(group))
	answer := func(commitErr error) {
		for i, r := range group {
			if errs[i] == nil {
				errs[i] = commitErr
			}
			r.reply <- errs[i]
		}
	}
	// The transaction is the writer's own: a caller whose context ends is still answered (above),
	// and must not take the others' batches down with it.
	ctx := context.Background()
	tx, err := g.db.BeginTx(ctx, nil)
	if err != nil {
		answer(fmt.Errorf("drift state: begin: %w", err))
		return
	}
	defer func() { _ = tx.Rollback() }()
	tvs := make([]txVerdicts, len(group))
	if len(group) == 1 {
		// A batch alone is its transaction: its failure rolls the transaction back, so it needs no
		// savepoint (two statements fewer for the commonest group).
		r := group[0]
		if errs[0] = r.ctx.Err(); errs[0] == nil {
			errs[0] = g.applyTx(ctx, tx, r.batch, &tvs[0])
		}
		if errs[0] != nil {
			_ = tx.Rollback()
			answer(nil) // the batch's own error
			return
		}
	} else if err := g.applyEach(ctx, tx, group, errs, tvs); err != nil {
		answer(err)
		return
	}
	if err := tx.Commit(); err != nil {
		answer(fmt.Errorf("drift state: commit: %w", err))
		return
	}
	for i := range group {
		if errs[i] == nil { // a batch undone under its savepoint wrote nothing to keep
			g.last.keep(tvs[i].written)
		}
	}
	answer(nil)
	g.prepareWrites(ctx)
}

// applyEach writes each batch of a group under its own savepoint, so that one batch's failure
// (its error in errs) undoes it alone; an error returned is the transaction's. tvs receive what
// each batch wrote (applyTx).
func (g *Group) applyEach(ctx context.Context, tx *sql.Tx, group []groupReq, errs []error, tvs []txVerdicts) error {
	for i, r := range group {
		if err := r.ctx.Err(); err != nil {
			errs[i] = err
			continue
		}
		if _, err := tx.ExecContext(ctx, `SAVEPOINT batch`); err != nil {
			return fmt.Errorf("drift state: savepoint: %w", err)
		}
		errs[i] = g.applyTx(ctx, tx, r.batch, &tvs[i])
		steps := []string{`RELEASE SAVEPOINT batch`}
		if errs[i] != nil {
			// Undo this batch alone; ROLLBACK TO keeps the savepoint, so release it after.
			steps = []string{`ROLLBACK TO SAVEPOINT batch`, `RELEASE SAVEPOINT batch`}
		}
		for _, step := range steps {
			if _, err := tx.ExecContext(ctx, step); err != nil {
				return fmt.Errorf("drift state: %s: %w", step, err)
			}
		}
	}
	return nil
}
