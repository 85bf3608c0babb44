package store

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

func openTest(t *testing.T, opts Options) *SQLite {
	t.Helper()
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "parley.db"), opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func delivery(id string, at time.Time) Delivery {
	return Delivery{Source: SourceGitHub, ID: id, Event: "pull_request", Body: []byte(`{"id":"` + id + `"}`), ReceivedAt: at}
}

func mustPut(t *testing.T, s *SQLite, d Delivery) {
	t.Helper()
	ok, err := s.Put(context.Background(), d)
	if err != nil || !ok {
		t.Fatalf("Put(%s) = %v, %v; want inserted", d.Key(), ok, err)
	}
}

func mustClaim(t *testing.T, s *SQLite, worker string, lease time.Duration, now time.Time) Delivery {
	t.Helper()
	d, ok, err := s.Claim(context.Background(), worker, lease, now)
	if err != nil || !ok {
		t.Fatalf("Claim(%s at %v) = %v, %v; want a delivery", worker, now, ok, err)
	}
	return d
}

func mustNotClaim(t *testing.T, s *SQLite, worker string, now time.Time) {
	t.Helper()
	d, ok, err := s.Claim(context.Background(), worker, time.Minute, now)
	if err != nil || ok {
		t.Fatalf("Claim(%s at %v) = %s, %v, %v; want nothing due", worker, now, d.Key(), ok, err)
	}
}

func TestPutDedupe(t *testing.T) {
	s := openTest(t, Options{})
	ctx := context.Background()
	cases := []struct {
		name string
		d    Delivery
		want bool
	}{
		{"first", delivery("a", t0), true},
		{"same key again", delivery("a", t0.Add(time.Second)), false},
		{"same id other source", Delivery{Source: SourceFlux, ID: "a", Event: "kustomization", ReceivedAt: t0}, true},
		{"other id", delivery("b", t0), true},
	}
	for _, tc := range cases {
		got, err := s.Put(ctx, tc.d)
		if err != nil {
			t.Fatalf("%s: Put: %v", tc.name, err)
		}
		if got != tc.want {
			t.Errorf("%s: inserted = %v, want %v", tc.name, got, tc.want)
		}
	}
	// The duplicate changed nothing: the first ReceivedAt stands.
	d, err := s.Get(ctx, Key{SourceGitHub, "a"})
	if err != nil {
		t.Fatal(err)
	}
	if !d.ReceivedAt.Equal(t0) || string(d.Body) != `{"id":"a"}` || d.State != StatePending {
		t.Errorf("Get a = %+v, want the first put unchanged", d)
	}
	// An empty body is stored as empty, not refused.
	if _, err := s.Put(ctx, Delivery{Source: SourceGitHub, ID: "empty", Event: "ping", ReceivedAt: t0}); err != nil {
		t.Errorf("Put with nil body: %v", err)
	}
}

func TestPutRefusesIncompleteDelivery(t *testing.T) {
	s := openTest(t, Options{})
	cases := []struct {
		name string
		d    Delivery
		want string
	}{
		{"no source", Delivery{ID: "x", Event: "e", ReceivedAt: t0}, "source"},
		{"no id", Delivery{Source: "github", Event: "e", ReceivedAt: t0}, "id"},
		{"no event", Delivery{Source: "github", ID: "x", ReceivedAt: t0}, "event"},
		{"no time", Delivery{Source: "github", ID: "x", Event: "e"}, "received-at"},
	}
	for _, tc := range cases {
		_, err := s.Put(context.Background(), tc.d)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Put err = %v, want one naming %q", tc.name, err, tc.want)
		}
	}
	if st, err := s.Stats(context.Background(), t0); err != nil || st.Pending != 0 {
		t.Errorf("Stats after refused puts = %+v, %v; want nothing stored", st, err)
	}
}

func TestClaimOldestFirstAndOnlyWhenDue(t *testing.T) {
	s := openTest(t, Options{})
	ctx := context.Background()
	for i, id := range []string{"first", "second", "third"} {
		mustPut(t, s, delivery(id, t0.Add(time.Duration(i)*time.Second)))
	}
	// Deliveries become due at their ReceivedAt: nothing is due before the first arrived.
	mustNotClaim(t, s, "w", t0.Add(-time.Second))

	now := t0.Add(time.Minute)
	d := mustClaim(t, s, "w1", time.Minute, now)
	if d.ID != "first" || d.Attempts != 1 || d.LeaseOwner != "w1" || !d.LeaseUntil.Equal(now.Add(time.Minute)) {
		t.Fatalf("first claim = %+v", d)
	}
	// "first" fails and is scheduled ten minutes out: "second" and "third" go before it.
	if out, err := s.Fail(ctx, d.Key(), "w1", errors.New("boom"), now.Add(10*time.Minute)); err != nil || out != Retrying {
		t.Fatalf("Fail = %v, %v", out, err)
	}
	want := []string{"second", "third"}
	for _, id := range want {
		got := mustClaim(t, s, "w1", time.Minute, now)
		if got.ID != id {
			t.Fatalf("claim = %s, want %s", got.ID, id)
		}
		if err := s.Complete(ctx, got.Key(), "w1"); err != nil {
			t.Fatal(err)
		}
	}
	mustNotClaim(t, s, "w1", now.Add(10*time.Minute-time.Nanosecond))
	d = mustClaim(t, s, "w1", time.Minute, now.Add(10*time.Minute))
	if d.ID != "first" || d.Attempts != 2 || d.LastError != "boom" {
		t.Fatalf("retry claim = %+v, want first on attempt 2 with its last error", d)
	}
}

func TestLeaseExclusiveUntilExpiry(t *testing.T) {
	s := openTest(t, Options{})
	ctx := context.Background()
	mustPut(t, s, delivery("a", t0))

	a := mustClaim(t, s, "A", 30*time.Second, t0)
	mustNotClaim(t, s, "B", t0.Add(29*time.Second))

	// A stalls past its lease; B takes over (crash recovery works the same way).
	b := mustClaim(t, s, "B", 30*time.Second, t0.Add(30*time.Second))
	if b.ID != "a" || b.Attempts != 2 || b.LeaseOwner != "B" {
		t.Fatalf("reclaim = %+v", b)
	}
	for name, op := range map[string]func() error{
		"complete":    func() error { return s.Complete(ctx, a.Key(), "A") },
		"release":     func() error { return s.Release(ctx, a.Key(), "A") },
		"dead-letter": func() error { return s.DeadLetter(ctx, a.Key(), "A", errors.New("x")) },
		"fail": func() error {
			_, err := s.Fail(ctx, a.Key(), "A", errors.New("x"), t0)
			return err
		},
	} {
		if err := op(); !errors.Is(err, ErrLeaseLost) {
			t.Errorf("%s by stale owner: err = %v, want ErrLeaseLost", name, err)
		}
	}
	if err := s.Complete(ctx, b.Key(), "B"); err != nil {
		t.Fatalf("Complete by owner: %v", err)
	}
	if err := s.Complete(ctx, b.Key(), "B"); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("second Complete: err = %v, want ErrLeaseLost", err)
	}
	if err := s.Complete(ctx, Key{SourceGitHub, "nope"}, "B"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Complete unknown: err = %v, want ErrNotFound", err)
	}
	got, err := s.Get(ctx, a.Key())
	if err != nil || got.State != StateDone || got.LeaseOwner != "" {
		t.Errorf("after complete: %+v, %v", got, err)
	}
	mustNotClaim(t, s, "C", t0.Add(time.Hour))
}

func TestRetriesThenDeadLetterAndReplay(t *testing.T) {
	s := openTest(t, Options{MaxAttempts: 3})
	ctx := context.Background()
	mustPut(t, s, delivery("a", t0))
	now := t0
	want := []FailOutcome{Retrying, Retrying, DeadLettered}
	for i, w := range want {
		d := mustClaim(t, s, "w", time.Minute, now)
		if d.Attempts != i+1 {
			t.Fatalf("attempt %d: Attempts = %d", i+1, d.Attempts)
		}
		now = now.Add(time.Duration(1<<i) * time.Second)
		out, err := s.Fail(ctx, d.Key(), "w", fmt.Errorf("failure %d", i+1), now)
		if err != nil || out != w {
			t.Fatalf("attempt %d: Fail = %v, %v; want %v", i+1, out, err, w)
		}
	}
	mustNotClaim(t, s, "w", now.Add(time.Hour))
	dead, err := s.DeadLetters(ctx)
	if err != nil || len(dead) != 1 || dead[0].ID != "a" || dead[0].LastError != "failure 3" || dead[0].State != StateDead {
		t.Fatalf("DeadLetters = %+v, %v", dead, err)
	}
	if st, err := s.Stats(ctx, now); err != nil || st.Dead != 1 || st.Pending != 0 {
		t.Fatalf("Stats = %+v, %v", st, err)
	}

	if err := s.Replay(ctx, Key{SourceGitHub, "a"}, now); err != nil {
		t.Fatalf("Replay: %v", err)
	}
	d := mustClaim(t, s, "w", time.Minute, now)
	if d.Attempts != 1 {
		t.Errorf("after replay Attempts = %d, want 1", d.Attempts)
	}
	if err := s.Replay(ctx, d.Key(), now); !errors.Is(err, ErrNotDead) {
		t.Errorf("Replay pending: err = %v, want ErrNotDead", err)
	}
	if err := s.Replay(ctx, Key{SourceGitHub, "nope"}, now); !errors.Is(err, ErrNotFound) {
		t.Errorf("Replay unknown: err = %v, want ErrNotFound", err)
	}
}

func TestPermanentDeadLetterAndRelease(t *testing.T) {
	s := openTest(t, Options{MaxAttempts: 5})
	ctx := context.Background()
	mustPut(t, s, delivery("perm", t0))
	mustPut(t, s, delivery("drained", t0.Add(time.Second)))

	d := mustClaim(t, s, "w", time.Minute, t0.Add(time.Minute))
	if err := s.DeadLetter(ctx, d.Key(), "w", errors.New("malformed payload")); err != nil {
		t.Fatal(err)
	}
	got, _ := s.Get(ctx, d.Key())
	if got.State != StateDead || got.Attempts != 1 || got.LastError != "malformed payload" {
		t.Errorf("after DeadLetter: %+v", got)
	}

	d = mustClaim(t, s, "w", time.Minute, t0.Add(time.Minute))
	if err := s.Release(ctx, d.Key(), "w"); err != nil {
		t.Fatal(err)
	}
	// Released: claimable at once by anyone, and the attempt was given back.
	d = mustClaim(t, s, "other", time.Minute, t0.Add(time.Minute))
	if d.ID != "drained" || d.Attempts != 1 {
		t.Errorf("after Release: %+v, want drained on attempt 1", d)
	}
}

func TestExpiredLeaseOnLastAttemptDeadLetters(t *testing.T) {
	s := openTest(t, Options{MaxAttempts: 2})
	mustPut(t, s, delivery("poison", t0))
	// The worker "dies" twice while holding the lease.
	mustClaim(t, s, "w1", time.Second, t0)
	d := mustClaim(t, s, "w2", time.Second, t0.Add(time.Second))
	if d.Attempts != 2 {
		t.Fatalf("Attempts = %d", d.Attempts)
	}
	mustNotClaim(t, s, "w3", t0.Add(time.Hour))
	got, err := s.Get(context.Background(), d.Key())
	if err != nil || got.State != StateDead || !strings.Contains(got.LastError, "lease of w2 expired on attempt 2 of 2") {
		t.Errorf("poison after lease expiry = %+v, %v", got, err)
	}
}

func TestStats(t *testing.T) {
	s := openTest(t, Options{MaxAttempts: 1})
	ctx := context.Background()
	st, err := s.Stats(ctx, t0)
	if err != nil || st != (Stats{}) {
		t.Fatalf("empty Stats = %+v, %v", st, err)
	}
	for i := range 4 {
		mustPut(t, s, delivery(fmt.Sprint(i), t0.Add(time.Duration(i)*time.Second)))
	}
	now := t0.Add(time.Minute)
	d := mustClaim(t, s, "w", time.Minute, now) // 0: will be dead
	if _, err := s.Fail(ctx, d.Key(), "w", errors.New("x"), now); err != nil {
		t.Fatal(err)
	}
	d = mustClaim(t, s, "w", time.Minute, now) // 1: done
	if err := s.Complete(ctx, d.Key(), "w"); err != nil {
		t.Fatal(err)
	}
	mustClaim(t, s, "w", time.Minute, now) // 2: leased
	st, err = s.Stats(ctx, now)
	if err != nil {
		t.Fatal(err)
	}
	want := Stats{Pending: 2, Leased: 1, Dead: 1, OldestPending: t0.Add(2 * time.Second)}
	if st != want {
		t.Errorf("Stats = %+v, want %+v", st, want)
	}
	// Once the lease expires the delivery is still pending but no longer leased.
	if st, _ := s.Stats(ctx, now.Add(time.Hour)); st.Leased != 0 || st.Pending != 2 {
		t.Errorf("Stats after lease expiry = %+v", st)
	}
}

func TestReopenKeepsDeliveries(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "parley.db")
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	mustPut(t, s, delivery("a", t0))
	mustPut(t, s, delivery("b", t0.Add(time.Second)))
	d := mustClaim(t, s, "w", time.Minute, t0.Add(time.Minute))
	if err := s.Complete(ctx, d.Key(), "w"); err != nil {
		t.Fatal(err)
	}
	mustClaim(t, s, "w", time.Minute, t0.Add(time.Minute)) // b leased when the process "stops"
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, delivery("c", t0)); !errors.Is(err, ErrClosed) {
		t.Errorf("Put after Close: err = %v, want ErrClosed", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}

	s, err = Open(ctx, path, Options{})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer s.Close()
	if ok, err := s.Put(ctx, delivery("a", t0)); err != nil || ok {
		t.Errorf("Put a after reopen = %v, %v; want duplicate", ok, err)
	}
	// b's lease outlives the restart; once it expires, the unfinished work resumes.
	mustNotClaim(t, s, "w2", t0.Add(time.Minute))
	d = mustClaim(t, s, "w2", time.Minute, t0.Add(2*time.Minute))
	if d.ID != "b" || d.Attempts != 2 {
		t.Errorf("resumed = %+v", d)
	}
}

func TestOpenRefusesNewerSchema(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "parley.db")
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO schema_version (version, applied_at) VALUES (99, 0)`); err != nil {
		t.Fatal(err)
	}
	_ = db.Close()
	if s, err := Open(ctx, path, Options{}); err == nil || !strings.Contains(err.Error(), "schema version 99") {
		if s != nil {
			_ = s.Close()
		}
		t.Fatalf("Open newer schema: err = %v, want refusal naming version 99", err)
	}
}

func TestConcurrentPutLosesNothing(t *testing.T) {
	s := openTest(t, Options{Sync: SyncNormal})
	ctx := context.Background()
	const goroutines, each = 32, 40
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		inserted = map[string]int{}
		errs     []error
	)
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				// Pairs of goroutines share IDs, so duplicates race each other.
				id := fmt.Sprintf("d-%d-%d", g/2, i)
				ok, err := s.Put(ctx, delivery(id, t0))
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				} else if ok {
					inserted[id]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d Put errors, first: %v", len(errs), errs[0])
	}
	unique := goroutines / 2 * each
	if len(inserted) != unique {
		t.Errorf("inserted %d distinct ids, want %d", len(inserted), unique)
	}
	for id, n := range inserted {
		if n != 1 {
			t.Errorf("%s inserted %d times", id, n)
		}
	}
	st, err := s.Stats(ctx, t0)
	if err != nil || st.Pending != unique {
		t.Errorf("Stats = %+v, %v; want %d pending", st, err, unique)
	}
}

func TestConcurrentClaimsNeverShareADelivery(t *testing.T) {
	s := openTest(t, Options{Sync: SyncNormal})
	ctx := context.Background()
	const n = 200
	for i := range n {
		mustPut(t, s, delivery(fmt.Sprint(i), t0))
	}
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		seen   = map[string]string{}
		failed []string
	)
	for w := range 8 {
		worker := fmt.Sprintf("w%d", w)
		wg.Go(func() {
			for {
				d, ok, err := s.Claim(ctx, worker, time.Minute, t0.Add(time.Second))
				if err != nil {
					mu.Lock()
					failed = append(failed, err.Error())
					mu.Unlock()
					return
				}
				if !ok {
					return
				}
				mu.Lock()
				if prev, dup := seen[d.ID]; dup {
					failed = append(failed, fmt.Sprintf("%s claimed by %s and %s", d.ID, prev, worker))
				}
				seen[d.ID] = worker
				mu.Unlock()
				if err := s.Complete(ctx, d.Key(), worker); err != nil {
					mu.Lock()
					failed = append(failed, err.Error())
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if len(failed) > 0 {
		t.Fatalf("%d problems, first: %s", len(failed), failed[0])
	}
	if len(seen) != n {
		t.Errorf("claimed %d deliveries, want %d", len(seen), n)
	}
}

// crashEnv names the database a crash-helper subprocess writes to.
const crashEnv = "PARLEY_STORE_CRASH_DB"

// TestMain turns the test binary into the crash helper when crashEnv is set: see
// TestCrashKeepsAcknowledgedPuts.
func TestMain(m *testing.M) {
	if path := os.Getenv(crashEnv); path != "" {
		crashHelper(path)
		os.Exit(3) // unreachable: the helper runs until it is killed
	}
	os.Exit(m.Run())
}

// crashHelper puts deliveries from several goroutines for ever and prints "ack <id>" after
// each Put returned inserted, the moment a receiver would answer 202. It never closes the
// store: it is killed with SIGKILL.
func crashHelper(path string) {
	s, err := Open(context.Background(), path, Options{})
	if err != nil {
		fmt.Println("open failed:", err)
		os.Exit(2)
	}
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	body := []byte(strings.Repeat("x", 25<<10))
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				d := Delivery{Source: SourceGitHub, ID: fmt.Sprintf("g%d-%d", g, i), Event: "push", Body: body, ReceivedAt: time.Now()}
				ok, err := s.Put(context.Background(), d)
				if err != nil || !ok {
					fmt.Println("put failed:", ok, err)
					os.Exit(2)
				}
				mu.Lock()
				fmt.Fprintf(out, "ack %s\n", d.ID)
				_ = out.Flush() // the ack leaves the process only after the commit
				mu.Unlock()
			}
		})
	}
	wg.Wait()
}

func TestCrashKeepsAcknowledgedPuts(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a subprocess")
	}
	path := filepath.Join(t.TempDir(), "crash.db")
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), crashEnv+"="+path)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	acked := map[string]bool{}
	var other []string
	sc := bufio.NewScanner(stdout)
	killed := false
	for sc.Scan() {
		line := sc.Text()
		if id, ok := strings.CutPrefix(line, "ack "); ok {
			acked[id] = true
		} else {
			other = append(other, line)
		}
		if len(acked) == 300 && !killed {
			// Kill mid-stream: more Puts are in flight, some batches half-written.
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			killed = true
		}
	}
	err = cmd.Wait()
	if !killed {
		t.Fatalf("helper ended before it was killed (%v); output: %q", err, other)
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("helper did not die of SIGKILL: %v; output: %q", err, other)
	}

	s, err := Open(context.Background(), path, Options{})
	if err != nil {
		t.Fatalf("reopen after crash: %v", err)
	}
	defer s.Close()
	var missing []string
	for id := range acked {
		if _, err := s.Get(context.Background(), Key{SourceGitHub, id}); err != nil {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		t.Fatalf("%d of %d acknowledged deliveries lost after SIGKILL, e.g. %v", len(missing), len(acked), missing[0])
	}
	st, err := s.Stats(context.Background(), time.Now())
	if err != nil || st.Pending < len(acked) {
		t.Errorf("Stats = %+v, %v; want at least %d pending", st, err, len(acked))
	}
	t.Logf("%d acknowledged before SIGKILL, %d found after reopen", len(acked), st.Pending)
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// TestCheckpointsRunOffTheCommitPath: the write connection never checkpoints by itself, yet
// the database file fills while the store is open (the checkpointer copies the WAL back), and
// the WAL file comes back under MaxWALBytes once the checkpointer has caught up.
func TestCheckpointsRunOffTheCommitPath(t *testing.T) {
	const maxWAL = 512 << 10
	s := openTest(t, Options{Sync: SyncNormal, MaxWALBytes: maxWAL})
	body := []byte(strings.Repeat("p", 25<<10))
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 40 {
				d := Delivery{Source: SourceGitHub, ID: fmt.Sprintf("%d-%d", g, i), Event: "push", Body: body, ReceivedAt: t0}
				if _, err := s.Put(context.Background(), d); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for fileSize(t, s.Path()) < 320*25<<10 {
		if time.Now().After(deadline) {
			t.Fatalf("database file is %d bytes after 8 MB of puts: no checkpoint ran", fileSize(t, s.Path()))
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Each small put lets the writer reset a fully checkpointed WAL, trimming the file.
	for i := 0; fileSize(t, s.Path()+"-wal") > maxWAL+64<<10; i++ {
		if time.Now().After(deadline) {
			t.Fatalf("WAL still %d bytes, limit %d", fileSize(t, s.Path()+"-wal"), maxWAL)
		}
		mustPut(t, s, delivery(fmt.Sprintf("small-%d", i), t0))
		time.Sleep(20 * time.Millisecond)
	}
	if st, err := s.Stats(context.Background(), t0); err != nil || st.Pending < 320 {
		t.Errorf("Stats = %+v, %v; want at least 320 pending", st, err)
	}
}

func TestPruneForgetsOnlyOldDoneDeliveries(t *testing.T) {
	s := openTest(t, Options{MaxAttempts: 1})
	ctx := context.Background()
	for _, id := range []string{"done", "dead", "pending"} {
		mustPut(t, s, delivery(id, t0))
	}
	d := mustClaim(t, s, "w", time.Minute, t0)
	if err := s.Complete(ctx, d.Key(), "w"); err != nil {
		t.Fatal(err)
	}
	d = mustClaim(t, s, "w", time.Minute, t0)
	if _, err := s.Fail(ctx, d.Key(), "w", errors.New("x"), t0); err != nil {
		t.Fatal(err)
	}
	// Completed "now" (wall clock): a cut-off in the past keeps it.
	if n, err := s.Prune(ctx, time.Now().Add(-time.Hour)); err != nil || n != 0 {
		t.Fatalf("Prune(an hour ago) = %d, %v; want 0", n, err)
	}
	if n, err := s.Prune(ctx, time.Now().Add(time.Second)); err != nil || n != 1 {
		t.Fatalf("Prune(now) = %d, %v; want 1", n, err)
	}
	cases := []struct {
		id   string
		want error
	}{{"done", ErrNotFound}, {"dead", nil}, {"pending", nil}}
	for _, tc := range cases {
		if _, err := s.Get(ctx, Key{SourceGitHub, tc.id}); !errors.Is(err, tc.want) {
			t.Errorf("Get %s after prune: err = %v, want %v", tc.id, err, tc.want)
		}
	}
	// Forgotten: a redelivery of the pruned ID is stored again.
	if ok, err := s.Put(ctx, delivery("done", t0)); err != nil || !ok {
		t.Errorf("Put pruned id = %v, %v; want inserted", ok, err)
	}
}

// TestWALStaysBoundedUnderSustainedWrites keeps writers busy without pause, so SQLite never
// gets a quiet moment to rewind the WAL by itself; the checkpointer must rewind it.
func TestWALStaysBoundedUnderSustainedWrites(t *testing.T) {
	if testing.Short() {
		t.Skip("writes tens of megabytes")
	}
	const maxWAL = 1 << 20
	s := openTest(t, Options{Sync: SyncNormal, MaxWALBytes: maxWAL})
	ctx, stop := context.WithCancel(context.Background())
	body := []byte(strings.Repeat("w", 8<<10))
	var wg sync.WaitGroup
	var written atomic.Int64
	for g := range 4 {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				d := Delivery{Source: SourceGitHub, ID: fmt.Sprintf("%d-%d", g, i), Event: "push", Body: body, ReceivedAt: t0}
				if _, err := s.Put(ctx, d); err != nil && ctx.Err() == nil {
					t.Error(err)
					return
				}
				written.Add(int64(len(body)))
			}
		})
	}
	// Wait until several times the limit has gone through the WAL, then until the WAL file is
	// back near the limit while the writers are still going.
	deadline := time.Now().Add(20 * time.Second)
	for written.Load() < 16*maxWAL && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	for fileSize(t, s.Path()+"-wal") > 2*maxWAL {
		if time.Now().After(deadline) {
			stop()
			wg.Wait()
			t.Fatalf("WAL is %d bytes under sustained writes after %d bytes written; limit %d", fileSize(t, s.Path()+"-wal"), written.Load(), maxWAL)
		}
		time.Sleep(5 * time.Millisecond)
	}
	stop()
	wg.Wait()
}

func TestReclaimLeasesResumesAtOnce(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{})
	t0 := time.Now()
	if _, err := s.Put(ctx, Delivery{Source: SourceGitHub, ID: "a", Event: "push", Body: []byte(`{}`), ReceivedAt: t0}); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.Claim(ctx, "dead-process", time.Hour, t0); !ok || err != nil {
		t.Fatalf("claim: %v %v", ok, err)
	}
	if _, ok, _ := s.Claim(ctx, "new-process", time.Hour, t0); ok {
		t.Fatal("a leased delivery was claimed twice")
	}
	if n, err := s.ReclaimLeases(ctx); n != 1 || err != nil {
		t.Fatalf("reclaimed %d, %v", n, err)
	}
	d, ok, err := s.Claim(ctx, "new-process", time.Hour, t0)
	if !ok || err != nil || d.Attempts != 2 {
		t.Fatalf("after reclaiming: ok %v err %v attempts %d (the dead process's attempt counts)", ok, err, d.Attempts)
	}
}
