package webhooks

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/parleyhq/parley/webhooks/store"
)

// BenchmarkReceiver measures the receiver's cost per 25 KB delivery, store write included
// (group commit, synchronous=FULL), with parallel callers as a loaded server would have.
func BenchmarkReceiver(b *testing.B) {
	for _, mode := range []struct {
		name string
		sync store.SyncMode
	}{{"sync=full", store.SyncFull}, {"sync=normal", store.SyncNormal}} {
		b.Run(mode.name, func(b *testing.B) {
			s, err := store.Open(b.Context(), filepath.Join(b.TempDir(), "bench.db"), store.Options{Sync: mode.sync})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			sec := mustSecret(b, "bench")
			rcv, err := NewReceiver(ReceiverConfig{Store: s, Secrets: []Secret{sec}})
			if err != nil {
				b.Fatal(err)
			}
			body := append([]byte(`{"pad":"`), append(bytes.Repeat([]byte("x"), 25<<10), '"', '}')...)
			sig := Sign(sec, body)
			var n atomic.Int64
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					id := fmt.Sprint(n.Add(1))
					req := httptest.NewRequest(http.MethodPost, GitHubPath, bytes.NewReader(body))
					req.Header.Set(HeaderEvent, "pull_request")
					req.Header.Set(HeaderDelivery, id)
					req.Header.Set(HeaderSignature, sig)
					req.Header.Set("Content-Type", "application/json")
					w := httptest.NewRecorder()
					rcv.ServeHTTP(w, req)
					if w.Code != http.StatusAccepted {
						b.Fatalf("status %d: %s", w.Code, w.Body)
					}
				}
			})
		})
	}
}
