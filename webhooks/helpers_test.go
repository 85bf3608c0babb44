package webhooks

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/parleyhq/parley/webhooks/store"
)

// lockedBuffer collects log output written from server goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func testLogger(t *testing.T) (*slog.Logger, *lockedBuffer) {
	t.Helper()
	var buf lockedBuffer
	return slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})), &buf
}

func openStore(t testing.TB, opts store.Options) *store.SQLite {
	t.Helper()
	if opts.Sync == store.SyncFull {
		// Tests do not test power loss; NORMAL keeps them fast. Process-crash durability,
		// which NORMAL keeps, is tested in the store package.
		opts.Sync = store.SyncNormal
	}
	s, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "parley.db"), opts)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func mustSecret(t testing.TB, v string) Secret {
	t.Helper()
	s, err := NewSecret(v)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func testMetrics(t testing.TB, stats StatsReader) (*Metrics, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg, stats)
	if err != nil {
		t.Fatal(err)
	}
	return m, reg
}
