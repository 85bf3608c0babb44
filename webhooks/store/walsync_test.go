package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// TestPutIsNotAcknowledgedUntilTheWALIsSynced: under SyncFull the write connection commits at
// NORMAL and the writer syncs the WAL itself, so a Put must report the failure of that sync
// instead of inserted=true: the receiver would otherwise answer 202 for a delivery a power loss
// can take back.
func TestPutIsNotAcknowledgedUntilTheWALIsSynced(t *testing.T) {
	s := openTest(t, Options{})
	mustPut(t, s, delivery("before", t0))
	// The store's handle on the WAL stops working: every sync through it fails (EBADF). The
	// writer is idle between Puts, and the channel hand-off orders this write before its read.
	closed, err := os.Open(s.Path() + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	_ = closed.Close()
	live := s.wal.f
	s.wal.f = closed
	ok, err := s.Put(context.Background(), delivery("after", t0))
	s.wal.f = live
	if ok || err == nil || !strings.Contains(err.Error(), "not made durable") {
		t.Fatalf("Put with a failing WAL sync = %v, %v; want an error saying it was not made durable", ok, err)
	}
}

// TestPutRefusesAnUnlinkedWAL: syncing a WAL file that is no longer the database's WAL makes
// nothing durable, so the store must not count it as a sync.
func TestPutRefusesAnUnlinkedWAL(t *testing.T) {
	s := openTest(t, Options{})
	mustPut(t, s, delivery("before", t0))
	if err := os.Remove(s.Path() + "-wal"); err != nil {
		t.Fatal(err)
	}
	ok, err := s.Put(context.Background(), delivery("after", t0))
	if ok || !errors.Is(err, errWALReplaced) {
		t.Fatalf("Put after the WAL was unlinked = %v, %v; want %v", ok, err, errWALReplaced)
	}
}

// TestCheckpointerFlushesTheDatabaseFile: after checkpoints that copied frames, the store syncs
// the database file itself, so the checkpoint a rewind runs while holding the writer does not
// have to flush everything earlier checkpoints copied.
func TestCheckpointerFlushesTheDatabaseFile(t *testing.T) {
	s := openTest(t, Options{})
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; s.CheckpointStats().DatabaseFlushes == 0; i++ {
		if time.Now().After(deadline) {
			t.Fatalf("no flush of the database file after %d puts: %+v", i, s.CheckpointStats())
		}
		mustPut(t, s, delivery(fmt.Sprint(i), t0))
		time.Sleep(10 * time.Millisecond)
	}
	if st := s.CheckpointStats(); st.DatabaseFlushes > st.Checkpoints {
		t.Errorf("%d flushes for %d checkpoints: one per checkpoint that copied frames", st.DatabaseFlushes, st.Checkpoints)
	}
}
