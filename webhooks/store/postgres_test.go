package store

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/parleyhq/parley/internal/pgtest"
)

// The tests here are PostgreSQL's own; the contract's tests, which both engines pass, are in
// conformance_test.go.

// TestPostgresReplicasNeverShareADelivery: two stores on one database, as two replicas of parley
// serve, each with four workers claiming in a loop while deliveries keep arriving through both,
// never hand one delivery to two workers, and complete every delivery exactly once.
func TestPostgresReplicasNeverShareADelivery(t *testing.T) {
	dsn := pgtest.DSN(t)
	replicas := []*Postgres{
		openPostgresTest(t, dsn, PostgresOptions{}),
		openPostgresTest(t, dsn, PostgresOptions{}),
	}
	const n = 300
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		claimedBy = map[string]string{}
		completed = map[string]int{}
		done      atomic.Int64
		problems  []string
	)
	problem := func(format string, args ...any) {
		mu.Lock()
		problems = append(problems, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	// Three producers, putting through both replicas in turn.
	for p := range 3 {
		wg.Go(func() {
			for i := p; i < n; i += 3 {
				d := delivery(fmt.Sprint(i), time.Now())
				if ok, err := replicas[i%2].Put(ctx, d); err != nil || !ok {
					problem("Put %s = %v, %v", d.Key(), ok, err)
				}
			}
		})
	}
	for r, s := range replicas {
		for w := range 4 {
			worker := fmt.Sprintf("replica%d-w%d", r, w)
			wg.Go(func() {
				for done.Load() < n && ctx.Err() == nil {
					d, ok, err := s.Claim(ctx, worker, time.Minute, time.Now())
					if err != nil {
						problem("Claim by %s: %v", worker, err)
						return
					}
					if !ok {
						time.Sleep(time.Millisecond)
						continue
					}
					mu.Lock()
					if prev, dup := claimedBy[d.ID]; dup {
						problems = append(problems, fmt.Sprintf("%s claimed by %s and by %s", d.ID, prev, worker))
					}
					claimedBy[d.ID] = worker
					mu.Unlock()
					if err := s.Complete(ctx, d.Key(), worker); err != nil {
						problem("Complete %s by %s: %v", d.Key(), worker, err)
						continue
					}
					mu.Lock()
					completed[d.ID]++
					mu.Unlock()
					done.Add(1)
				}
			})
		}
	}
	wg.Wait()
	if len(problems) > 0 {
		t.Fatalf("%d problems, first: %s", len(problems), problems[0])
	}
	if ctx.Err() != nil {
		t.Fatalf("gave up after completing %d of %d deliveries", done.Load(), n)
	}
	if len(completed) != n {
		t.Errorf("completed %d distinct deliveries, want %d", len(completed), n)
	}
	for id, c := range completed {
		if c != 1 {
			t.Errorf("%s completed %d times", id, c)
		}
	}
	perReplica := map[string]int{}
	for _, w := range claimedBy {
		perReplica[w[:len("replica0")]]++
	}
	t.Logf("claims per replica: %v", perReplica)
	st, err := replicas[0].Stats(context.Background(), time.Now())
	if err != nil || st.Pending != 0 || st.Dead != 0 {
		t.Errorf("Stats = %+v, %v; want nothing pending or dead", st, err)
	}
	for i, s := range replicas {
		if n := s.Takeovers(); n != 0 {
			t.Errorf("replica %d counted %d takeovers, want 0: no lease expired", i, n)
		}
	}
}

// TestPostgresTakeoversCountExpiredLeases: a Claim that takes a delivery whose lease expired
// while a worker held it counts in Takeovers of the store that claimed it; a first claim, or a
// claim after Release, does not.
func TestPostgresTakeoversCountExpiredLeases(t *testing.T) {
	dsn := pgtest.DSN(t)
	s1 := openPostgresTest(t, dsn, PostgresOptions{})
	s2 := openPostgresTest(t, dsn, PostgresOptions{})
	ctx := context.Background()
	mustPut(t, s1, delivery("a", t0))
	mustPut(t, s1, delivery("b", t0.Add(time.Millisecond)))
	check := func(step string, want1, want2 int64) {
		t.Helper()
		if got1, got2 := s1.Takeovers(), s2.Takeovers(); got1 != want1 || got2 != want2 {
			t.Fatalf("%s: Takeovers = %d and %d, want %d and %d", step, got1, got2, want1, want2)
		}
	}

	if d := mustClaim(t, s1, "w1", time.Second, t0); d.ID != "a" {
		t.Fatalf("first claim = %s", d.Key())
	}
	check("first claim", 0, 0)
	if d := mustClaim(t, s2, "w2", time.Second, t0.Add(time.Second)); d.ID != "a" || d.Attempts != 2 {
		t.Fatalf("takeover claim = %+v", d)
	}
	check("takeover of w1's expired lease by the other replica", 0, 1)
	d := mustClaim(t, s1, "w1", time.Second, t0.Add(time.Second))
	if d.ID != "b" {
		t.Fatalf("claim = %s, want b", d.Key())
	}
	if err := s1.Release(ctx, d.Key(), "w1"); err != nil {
		t.Fatal(err)
	}
	mustClaim(t, s1, "w3", time.Second, t0.Add(time.Second))
	check("claim after a release", 0, 1)
	if _, err := s1.Fail(ctx, Key{SourceGitHub, "b"}, "w3", errors.New("x"), t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	// a's lease (w2's) has expired too, and a is older than the failed b.
	if d := mustClaim(t, s1, "w1", time.Second, t0.Add(time.Hour)); d.ID != "a" {
		t.Fatalf("claim = %s, want a", d.Key())
	}
	check("takeover of w2's expired lease", 1, 1)
	if d := mustClaim(t, s1, "w1", time.Second, t0.Add(time.Hour)); d.ID != "b" {
		t.Fatalf("claim = %s, want b", d.Key())
	}
	check("claim after a failure", 1, 1)
}

// countMigrations returns how many deliveries migrations parley_schema records in dsn's database.
func countMigrations(t *testing.T, dsn string) int {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM parley_schema WHERE component = $1`, postgresComponent).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestPostgresReopenMigratesOnce: opening a database again, or opening a new database from
// several replicas at once, applies each migration once and keeps the deliveries; a database a
// newer Parley migrated further is refused.
func TestPostgresReopenMigratesOnce(t *testing.T) {
	ctx := context.Background()
	t.Run("reopen", func(t *testing.T) {
		dsn := pgtest.DSN(t)
		s, err := OpenPostgres(ctx, dsn, PostgresOptions{})
		if err != nil {
			t.Fatal(err)
		}
		mustPut(t, s, delivery("a", t0))
		mustPut(t, s, delivery("b", t0.Add(time.Second)))
		mustClaim(t, s, "w", time.Minute, t0.Add(time.Minute)) // a leased when the process "stops"
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s = openPostgresTest(t, dsn, PostgresOptions{})
		if ok, err := s.Put(ctx, delivery("a", t0)); err != nil || ok {
			t.Errorf("Put a after reopen = %v, %v; want a duplicate", ok, err)
		}
		// a's lease outlives the restart; once it expires, the unfinished work resumes.
		if d := mustClaim(t, s, "w2", time.Minute, t0.Add(time.Minute)); d.ID != "b" {
			t.Errorf("claim = %s, want b", d.Key())
		}
		if d := mustClaim(t, s, "w2", time.Minute, t0.Add(2*time.Minute)); d.ID != "a" || d.Attempts != 2 {
			t.Errorf("resumed = %+v", d)
		}
		if n := countMigrations(t, dsn); n != len(postgresMigrations) {
			t.Errorf("%d migrations recorded, want %d", n, len(postgresMigrations))
		}
	})
	t.Run("racing", func(t *testing.T) {
		dsn := pgtest.DSN(t)
		const replicas = 6
		var (
			wg       sync.WaitGroup
			inserted atomic.Int64
			errs     = make(chan error, replicas)
		)
		for range replicas {
			wg.Go(func() {
				s, err := OpenPostgres(ctx, dsn, PostgresOptions{MaxConns: 2})
				if err != nil {
					errs <- err
					return
				}
				defer s.Close()
				ok, err := s.Put(ctx, delivery("same", t0))
				if err != nil {
					errs <- err
				} else if ok {
					inserted.Add(1)
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if n := inserted.Load(); n != 1 {
			t.Errorf("the same delivery was inserted %d times by %d replicas, want once", n, replicas)
		}
		if n := countMigrations(t, dsn); n != len(postgresMigrations) {
			t.Errorf("%d migrations recorded, want %d", n, len(postgresMigrations))
		}
	})
	t.Run("newer schema", func(t *testing.T) {
		dsn := pgtest.DSN(t)
		s, err := OpenPostgres(ctx, dsn, PostgresOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		_, err = conn.Exec(ctx, `INSERT INTO parley_schema (component, version, applied_at) VALUES ($1, 99, 0)`, postgresComponent)
		_ = conn.Close(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if s, err := OpenPostgres(ctx, dsn, PostgresOptions{}); err == nil || !strings.Contains(err.Error(), "schema version 99") {
			if s != nil {
				_ = s.Close()
			}
			t.Fatalf("OpenPostgres on a newer schema: err = %v, want a refusal naming version 99", err)
		}
	})
}

// withPassword returns dsn with user:password as its user info, and port if not 0.
func withPassword(t *testing.T, dsn, password string, port int) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), password)
	if port != 0 {
		u.Host = fmt.Sprintf("127.0.0.1:%d", port)
	}
	return u.String()
}

// TestPostgresErrorsHideThePassword: neither a failed open nor the errors of an open store
// quote the DSN's password.
func TestPostgresErrorsHideThePassword(t *testing.T) {
	const password = "s3cret-pa55word"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dsn := pgtest.DSN(t)

	// A port nothing listens on.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedPort := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()

	noDB, err := url.Parse(withPassword(t, dsn, password, 0))
	if err != nil {
		t.Fatal(err)
	}
	noDB.Path = "/no_such_database"
	for name, bad := range map[string]string{
		"unreachable":     withPassword(t, dsn, password, closedPort),
		"no database":     noDB.String(),
		"unparseable URL": "postgres://parley:" + password + "@[::1/db",
	} {
		s, err := OpenPostgres(ctx, bad, PostgresOptions{})
		if err == nil {
			_ = s.Close()
			t.Errorf("%s: OpenPostgres succeeded", name)
			continue
		}
		if strings.Contains(err.Error(), password) {
			t.Errorf("%s: the error quotes the password: %v", name, err)
		}
	}

	// The test server trusts every connection, so the password is accepted, and must not
	// show in the errors of the store's operations either.
	s := openPostgresTest(t, withPassword(t, dsn, password, 0), PostgresOptions{})
	errs := []error{s.Complete(ctx, Key{SourceGitHub, "nope"}, "w"), s.Replay(ctx, Key{SourceGitHub, "nope"}, t0)}
	mustPut(t, s, delivery("a", t0))
	_, err = s.Fail(ctx, Key{SourceGitHub, "a"}, "w", errors.New("x"), t0)
	errs = append(errs, err)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = s.Put(ctx, delivery("b", t0))
	errs = append(errs, err, s.Release(ctx, Key{SourceGitHub, "a"}, "w"))
	for _, err := range errs {
		if err == nil {
			t.Errorf("an operation that should fail succeeded")
		} else if strings.Contains(err.Error(), password) {
			t.Errorf("the error quotes the password: %v", err)
		} else if !strings.Contains(err.Error(), "postgres://parley@127.0.0.1:") && !errors.Is(err, ErrNotFound) {
			t.Errorf("the error does not name the database: %v", err)
		}
	}
}

// TestPostgresBadRowDoesNotFailItsBatch: PostgreSQL refuses what SQLite stores in TEXT columns
// (a NUL byte, invalid UTF-8); a Put carrying such a value gets the error, and the Puts batched
// with it are stored all the same.
func TestPostgresBadRowDoesNotFailItsBatch(t *testing.T) {
	s := openPostgresTest(t, pgtest.DSN(t), PostgresOptions{})
	ctx := context.Background()
	mustPut(t, s, delivery("dup", t0))
	ids := []string{"ok-1", "nul\x00byte", "ok-2", "dup", "bad-\xff-utf8", "ok-2"}
	batch := make([]putRequest, len(ids))
	for i, id := range ids {
		batch[i] = putRequest{d: delivery(id, t0), done: make(chan putResult, 1)}
	}
	s.commit(batch)
	want := []struct {
		inserted bool
		err      bool
	}{{true, false}, {false, true}, {true, false}, {false, false}, {false, true}, {false, false}}
	for i, req := range batch {
		res := <-req.done
		if res.inserted != want[i].inserted || (res.err != nil) != want[i].err {
			t.Errorf("Put %q = %v, %v; want inserted %v, error %v", ids[i], res.inserted, res.err, want[i].inserted, want[i].err)
		}
	}
	for _, id := range []string{"ok-1", "ok-2", "dup"} {
		if _, err := s.Get(ctx, Key{SourceGitHub, id}); err != nil {
			t.Errorf("Get %s: %v", id, err)
		}
	}
	// A batch without a bad row reports duplicates within it as such.
	batch = []putRequest{
		{d: delivery("x", t0), done: make(chan putResult, 1)},
		{d: delivery("x", t0), done: make(chan putResult, 1)},
	}
	s.commit(batch)
	if a, b := <-batch[0].done, <-batch[1].done; !a.inserted || a.err != nil || b.inserted || b.err != nil {
		t.Errorf("two Puts of x in one batch = %+v, %+v; want the first inserted, the second a duplicate", a, b)
	}
}
