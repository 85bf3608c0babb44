package store

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
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
