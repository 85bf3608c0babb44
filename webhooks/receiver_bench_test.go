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
			pad := append(bytes.Repeat([]byte("x"), 25<<10), '"', '}')
			var n atomic.Int64
			b.SetBytes(int64(len(pad)))
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					id := fmt.Sprint(n.Add(1))
					// Each delivery its own body: the store refuses a body it holds under
					// another ID (answered 200 "duplicate", not stored).
					body := append([]byte(`{"id":"`+id+`","pad":"`), pad...)
					sig := Sign(sec, body)
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
