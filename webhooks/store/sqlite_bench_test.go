package store

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// BenchmarkSQLiteDeliveryPath measures the SQLite store's calls on the delivery path, one
// sub-benchmark per call: a Put alone (a batch of one), 32 concurrent Puts (the group commit's
// batches), a worker's Claim and Complete of a due delivery, and a worker's Claim that finds
// nothing (an idle poll). At
// synchronous=NORMAL, so the WAL's fdatasync (one per batch under SyncFull) does not drown the
// statements' own cost, which is what is measured. It uses only the store's exported API, so the
// same file measures an older commit's store (docs/benchmarks.md, issue 34).
func BenchmarkSQLiteDeliveryPath(b *testing.B) {
	// A 2 KiB body, made unique per delivery: the store refuses a body it holds under another ID.
	pad := strings.Repeat("x", 2<<10)
	body := func(id string) []byte { return []byte(`{"id":"` + id + `","pad":"` + pad + `"}`) }
	deliveryN := func(i int) Delivery {
		id := fmt.Sprintf("d%d", i)
		return Delivery{Source: SourceGitHub, ID: id, Event: "pull_request", Body: body(id), ReceivedAt: t0}
	}
	openBench := func(b *testing.B) *SQLite {
		s, err := Open(context.Background(), filepath.Join(b.TempDir(), "bench.db"), Options{Sync: SyncNormal})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close() })
		return s
	}
	// put reports with Errorf: it also runs on goroutines of its own, where Fatal may not be
	// called; the loops stop at the first failure.
	put := func(b *testing.B, s *SQLite, d Delivery) {
		if ok, err := s.Put(context.Background(), d); err != nil || !ok {
			b.Errorf("Put %s = %v, %v", d.Key(), ok, err)
		}
	}
	// fill puts n deliveries, 64 at a time, before the measured loop.
	fill := func(b *testing.B, s *SQLite, n int) {
		var wg sync.WaitGroup
		for i := 0; i < n; i += 64 {
			for j := i; j < min(i+64, n); j++ {
				wg.Go(func() { put(b, s, deliveryN(j)) })
			}
			wg.Wait()
			if b.Failed() {
				b.FailNow()
			}
		}
	}
	now := t0.Add(time.Minute)

	b.Run("Put", func(b *testing.B) {
		s := openBench(b)
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N && !b.Failed(); i++ {
			put(b, s, deliveryN(i))
		}
	})
	b.Run("PutBatch32", func(b *testing.B) {
		s := openBench(b)
		b.ReportAllocs()
		b.ResetTimer()
		var wg sync.WaitGroup
		for i := 0; i < b.N; i++ {
			for j := range 32 {
				wg.Go(func() { put(b, s, deliveryN(i*32+j)) })
			}
			wg.Wait()
			if b.Failed() {
				b.FailNow()
			}
		}
	})
	// A worker's cycle: Claim the oldest due delivery, Complete it. Claims are measured with
	// their Complete because the claim query walks the pending deliveries in order past the
	// leased ones, so claims left leased would make each next Claim slower (a store in use holds
	// at most one lease per worker).
	b.Run("ClaimComplete", func(b *testing.B) {
		s := openBench(b)
		fill(b, s, b.N)
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			d, ok, err := s.Claim(context.Background(), "w", time.Minute, now)
			if err != nil || !ok {
				b.Fatalf("Claim = %v, %v", ok, err)
			}
			if err := s.Complete(context.Background(), d.Key(), "w"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ClaimEmpty", func(b *testing.B) {
		s := openBench(b)
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, ok, err := s.Claim(context.Background(), "w", time.Minute, now); err != nil || ok {
				b.Fatalf("Claim of an empty queue = %v, %v", ok, err)
			}
		}
	})
}
