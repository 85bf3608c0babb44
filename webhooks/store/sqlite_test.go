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
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/pgtest"
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

// crashEnv names the database a crash-helper subprocess writes to; crashWALEnv, if set, its
// MaxWALBytes.
const (
	crashEnv    = "PARLEY_STORE_CRASH_DB"
	crashWALEnv = "PARLEY_STORE_CRASH_MAX_WAL"
)

// TestMain turns the test binary into the crash helper when crashEnv is set: see
// TestCrashKeepsAcknowledgedPuts.
func TestMain(m *testing.M) {
	if path := os.Getenv(crashEnv); path != "" {
		crashHelper(path)
		os.Exit(3) // unreachable: the helper runs until it is killed
	}
	pgtest.Main(m)
}

// crashHelper puts deliveries from several goroutines for ever and prints "ack <id>" after
// each Put returned inserted, the moment a receiver would answer 202, and "rewinds <n>" as the
// checkpointer rewinds the WAL. It never closes the store: it is killed with SIGKILL.
func crashHelper(path string) {
	var opts Options
	if v := os.Getenv(crashWALEnv); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			fmt.Println("bad", crashWALEnv, err)
			os.Exit(2)
		}
		opts.MaxWALBytes = n
	}
	s, err := Open(context.Background(), path, opts)
	if err != nil {
		fmt.Println("open failed:", err)
		os.Exit(2)
	}
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	go func() { // ends with the process
		for last := int64(0); ; time.Sleep(time.Millisecond) {
			if n := s.CheckpointStats().Rewinds; n != last {
				last = n
				mu.Lock()
				fmt.Fprintf(out, "rewinds %d\n", n)
				_ = out.Flush()
				mu.Unlock()
			}
		}
	}()
	body := []byte(strings.Repeat("x", 25<<10))
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				id := fmt.Sprintf("g%d-%d", g, i)
				d := Delivery{Source: SourceGitHub, ID: id, Event: "push", Body: unique(body, id), ReceivedAt: time.Now()}
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
	crashAndCheck(t, 0, 0)
}

// TestCrashAmidCheckpointsKeepsAcknowledgedPuts kills the writer while the checkpointer is busy:
// with a 256 KiB WAL it checkpoints after nearly every batch and rewinds the WAL every few
// deliveries (each rewind resets the WAL that the writer then overwrites from its start), so
// the SIGKILL lands amid copies into the database file, its fsyncs and WAL restarts.
func TestCrashAmidCheckpointsKeepsAcknowledgedPuts(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a subprocess")
	}
	for range 3 {
		crashAndCheck(t, 256<<10, 5)
	}
}

// crashAndCheck runs crashHelper with MaxWALBytes maxWAL (0: the default), SIGKILLs it once 300
// Puts were acknowledged and the WAL was rewound at least minRewinds times, and checks that
// every acknowledged delivery is in the reopened store and the database is sound.
func crashAndCheck(t *testing.T, maxWAL int64, minRewinds int) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "crash.db")
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), crashEnv+"="+path)
	if maxWAL > 0 {
		cmd.Env = append(cmd.Env, fmt.Sprintf("%s=%d", crashWALEnv, maxWAL))
	}
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
	rewinds := 0
	for sc.Scan() {
		line := sc.Text()
		if id, ok := strings.CutPrefix(line, "ack "); ok {
			acked[id] = true
		} else if n, ok := strings.CutPrefix(line, "rewinds "); ok {
			rewinds, _ = strconv.Atoi(n)
		} else {
			other = append(other, line)
		}
		if len(acked) >= 300 && rewinds >= minRewinds && !killed {
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
	var check string
	if err := s.read.QueryRowContext(context.Background(), `PRAGMA integrity_check`).Scan(&check); err != nil || check != "ok" {
		t.Errorf("after SIGKILL: integrity_check = %q, %v", check, err)
	}
	t.Logf("%d acknowledged before SIGKILL (WAL rewound %d times), %d found after reopen", len(acked), rewinds, st.Pending)
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
				id := fmt.Sprintf("%d-%d", g, i)
				d := Delivery{Source: SourceGitHub, ID: id, Event: "push", Body: unique(body, id), ReceivedAt: t0}
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
				id := fmt.Sprintf("%d-%d", g, i)
				d := Delivery{Source: SourceGitHub, ID: id, Event: "push", Body: unique(body, id), ReceivedAt: t0}
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

// unique makes body the body of delivery id alone: the store refuses a body stored under another
// ID.
func unique(body []byte, id string) []byte {
	return append([]byte(id+" "), body...)
}
