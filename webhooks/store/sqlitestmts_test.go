package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sqlite "modernc.org/sqlite"
)

// parseCounter counts the SQL texts a driver connection was asked to parse, by connection: every
// Prepare, and every Exec or Query given a query string (modernc.org/sqlite parses those anew).
type parseCounter struct {
	conns atomic.Int64
	mu    sync.Mutex
	n     map[connQuery]int
}

type connQuery struct {
	conn  int64
	query string
}

func (p *parseCounter) add(conn int64, query string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n[connQuery{conn, query}]++
}

func (p *parseCounter) snapshot() map[connQuery]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[connQuery]int, len(p.n))
	for k, v := range p.n {
		out[k] = v
	}
	return out
}

// open opens a sql.DB on dsn whose connections count what they parse. No driver is registered:
// the connector wraps a driver value of its own.
func (p *parseCounter) open(dsn string) (*sql.DB, error) {
	return sql.OpenDB(countingConnector{dsn: dsn, drv: &sqlite.Driver{}, p: p}), nil
}

type countingConnector struct {
	dsn string
	drv *sqlite.Driver
	p   *parseCounter
}

func (c countingConnector) Connect(context.Context) (driver.Conn, error) {
	conn, err := c.drv.Open(c.dsn)
	if err != nil {
		return nil, err
	}
	full, ok := conn.(sqliteConn)
	if !ok {
		_ = conn.Close()
		return nil, fmt.Errorf("modernc.org/sqlite's connection %T lacks a method countingConn forwards", conn)
	}
	return &countingConn{sqliteConn: full, id: c.p.conns.Add(1), p: c.p}, nil
}

func (c countingConnector) Driver() driver.Driver { return c.drv }

// sqliteConn is the set of database/sql's optional interfaces modernc.org/sqlite's connection
// implements; countingConn forwards them all, so database/sql drives it exactly as it drives
// the driver's own connection.
type sqliteConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
	driver.Pinger
	driver.SessionResetter
	driver.Validator
}

type countingConn struct {
	sqliteConn
	id int64
	p  *parseCounter
}

func (c *countingConn) Prepare(query string) (driver.Stmt, error) {
	c.p.add(c.id, query)
	return c.sqliteConn.Prepare(query)
}

func (c *countingConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	c.p.add(c.id, query)
	return c.sqliteConn.PrepareContext(ctx, query)
}

func (c *countingConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	c.p.add(c.id, query)
	return c.sqliteConn.ExecContext(ctx, query, args)
}

func (c *countingConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	c.p.add(c.id, query)
	return c.sqliteConn.QueryContext(ctx, query, args)
}

// TestDeliveryPathParsesEachStatementOncePerConnection runs deliveries through every call of the
// delivery path (Put, a duplicate Put, Claim, an empty Claim, Complete, Fail, Release,
// DeadLetter, Get, Stats, Prune) and checks that, once the store is open, no connection is asked
// to parse the same SQL twice: the work SQLite's parser does stays bounded however many
// deliveries pass. (modernc.org/sqlite's own BEGIN, COMMIT and ROLLBACK are parsed inside the
// driver, below what database/sql sees, and are not counted.)
func TestDeliveryPathParsesEachStatementOncePerConnection(t *testing.T) {
	ctx := context.Background()
	p := &parseCounter{n: map[connQuery]int{}}
	s, err := open(ctx, filepath.Join(t.TempDir(), "parley.db"), Options{Sync: SyncNormal, MaxAttempts: 2}, p.open)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}()
	atOpen := p.snapshot()
	if len(atOpen) == 0 {
		t.Fatal("the counting connector saw nothing at Open: the store did not open its pools through it")
	}

	const cycles = 40
	now := t0
	for i := range cycles {
		now = now.Add(time.Minute)
		d := delivery(fmt.Sprintf("d%d", i), now)
		mustPut(t, s, d)
		// The same body under another ID: a duplicate body, which asks which ID has it.
		dup := d
		dup.ID += "-again"
		if _, err := s.Put(ctx, dup); !errors.As(err, new(*DuplicateBodyError)) {
			t.Fatalf("Put %s: err = %v, want a duplicate body", dup.Key(), err)
		}
		c := mustClaim(t, s, "w", time.Minute, now)
		// Every outcome in turn, the lease taken again where the outcome leaves it pending.
		switch i % 4 {
		case 0:
			if err := s.Complete(ctx, c.Key(), "w"); err != nil {
				t.Fatal(err)
			}
		case 1:
			if _, err := s.Fail(ctx, c.Key(), "w", errors.New("boom"), now); err != nil {
				t.Fatal(err)
			}
			c = mustClaim(t, s, "w", time.Minute, now)
			if err := s.Complete(ctx, c.Key(), "w"); err != nil {
				t.Fatal(err)
			}
		case 2:
			if err := s.Release(ctx, c.Key(), "w"); err != nil {
				t.Fatal(err)
			}
			c = mustClaim(t, s, "w", time.Minute, now)
			if err := s.DeadLetter(ctx, c.Key(), "w", errors.New("permanent")); err != nil {
				t.Fatal(err)
			}
		case 3:
			// Lost lease: the outcome is refused (whyNot reads the delivery).
			if err := s.Complete(ctx, c.Key(), "other"); !errors.Is(err, ErrLeaseLost) {
				t.Fatalf("Complete by another worker: err = %v, want ErrLeaseLost", err)
			}
			if err := s.Complete(ctx, c.Key(), "w"); err != nil {
				t.Fatal(err)
			}
		}
		mustNotClaim(t, s, "w", now) // a worker's idle poll
		if _, err := s.Get(ctx, d.Key()); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Stats(ctx, now); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Prune(ctx, now.Add(-time.Hour), time.Time{}); err != nil {
			t.Fatal(err)
		}
	}

	var again []string
	for k, n := range p.snapshot() {
		if n -= atOpen[k]; n > 1 {
			again = append(again, fmt.Sprintf("%d× on connection %d: %s", n, k.conn, strings.Join(strings.Fields(k.query), " ")))
		}
	}
	if len(again) > 0 {
		slices.Sort(again)
		t.Errorf("after %d deliveries, SQL parsed again on the same connection (want each at most once):\n%s", cycles, strings.Join(again, "\n"))
	}
}
