package keymutex

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestOneHolderPerKey(t *testing.T) {
	var m Map
	var inside, most atomic.Int32
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			unlock, err := m.Lock(context.Background(), "acme/web#1")
			if err != nil {
				t.Error(err)
				return
			}
			n := inside.Add(1)
			for {
				old := most.Load()
				if n <= old || most.CompareAndSwap(old, n) {
					break
				}
			}
			time.Sleep(100 * time.Microsecond)
			inside.Add(-1)
			unlock()
		}()
	}
	wg.Wait()
	if most.Load() != 1 {
		t.Fatalf("%d goroutines held one key at once; want 1", most.Load())
	}
	if m.Len() != 0 {
		t.Fatalf("%d keys left after every holder unlocked", m.Len())
	}
}

func TestKeysAreIndependent(t *testing.T) {
	var m Map
	unlockA, err := m.Lock(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	defer unlockA()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	unlockB, err := m.Lock(ctx, "b")
	if err != nil {
		t.Fatalf("key b waited for key a: %v", err)
	}
	unlockB()
}

func TestWaitEndsWithItsContext(t *testing.T) {
	var m Map
	unlock, err := m.Lock(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := m.Lock(ctx, "a"); err != context.DeadlineExceeded {
		t.Fatalf("waiting on a held key past its deadline: %v, want DeadlineExceeded", err)
	}
	unlock()
	if m.Len() != 0 {
		t.Fatalf("a cancelled waiter left its key behind (%d keys)", m.Len())
	}
	again, err := m.Lock(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	again()
}
