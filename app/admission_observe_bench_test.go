package app

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/parleyhq/parley/app/config"
	"github.com/parleyhq/parley/reconcile/driftstate"
	"github.com/parleyhq/parley/webhooks/store"
)

// BenchmarkAdmissionObserve measures what observation mode (observe = true) adds to a review:
// each review, answered in process (no HTTP), is the HPA scaling prod/web again on the demo
// repository with the drift state in a SQLite file (synchronous=FULL), so that its oldObject
// confirms the write held from the review before (queued to a real delivery store) and the write
// it carries is held in turn. observe=off is the same reviews without observation: the difference
// is the cost of one held write and one confirmation per review.
//
//	go test ./app -run '^$' -bench AdmissionObserve -benchtime 200x -benchmem
func BenchmarkAdmissionObserve(b *testing.B) {
	for _, observe := range []bool{false, true} {
		b.Run(fmt.Sprintf("observe=%v", map[bool]string{false: "off", true: "on"}[observe]), func(b *testing.B) {
			d, _, _, clk := driftSetupB(b)
			st, err := driftstate.Open(context.Background(), filepath.Join(b.TempDir(), "drift.db"))
			if err != nil {
				b.Fatal(err)
			}
			d.State = st
			b.Cleanup(func() { d.Close() })
			m, err := NewAdmissionMetrics(prometheus.NewRegistry())
			if err != nil {
				b.Fatal(err)
			}
			q, err := store.Open(context.Background(), filepath.Join(b.TempDir(), "deliveries.db"), store.Options{})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { q.Close() })
			h := &Admission{Drift: d, Now: clk.now, Metrics: m, Budget: time.Minute, MaxAge: time.Minute, Queue: q,
				Clusters: map[string]config.Admission{"prod": {Mode: "warn", Observe: observe, Token: config.NewSecret(admissionToken),
					GitOpsUsers: config.DefaultGitOpsUsers}},
				Routes: map[string]config.RepoRef{"prod": {Repository: "acme/infra"}}}
			d.Clusters = map[string]config.RepoRef{"prod": {Repository: "acme/infra"}}
			review := func(i int) {
				// Review i replaces what review i-1 wrote, at resourceVersion 100+i.
				body := scaleReviewAt(fmt.Sprintf("hpa-%d", i), hpaSA, 2+(i+1)%4, 2+(i+2)%4, fmt.Sprint(100+i))
				req := httptest.NewRequest(http.MethodPost, AdmissionPrefix+"prod", strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+admissionToken)
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"allowed":true`) {
					b.Fatalf("review %d: %d %s", i, rec.Code, rec.Body.String())
				}
			}
			review(0) // clones the repository
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				review(i + 1)
			}
			b.StopTimer()
			if observe {
				b.ReportMetric(testutil.ToFloat64(m.observations.WithLabelValues("prod", obsConfirmed))/float64(b.N), "confirmed/op")
			}
		})
	}
}
