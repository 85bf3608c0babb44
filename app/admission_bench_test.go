package app

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/parleyhq/parley/app/config"
	"github.com/parleyhq/parley/internal/busycluster"
)

// BenchmarkAdmissionAt500PerSecond measures what the API server waits for on every write: an
// AdmissionReview over HTTP on loopback, authenticated by token, decoded, judged under the demo
// policy against the repository's Git claims and the standing live claims, an accepted change
// durably recorded (SQLite, synchronous=FULL), answered. The repository is the demo plus 1,000
// Deployments of 10 fields each (10,000 fields under the policy's Deployment blocks). Reviews are
// sent at 500 per second, open loop, in a busy cluster's mix: 5 in 10 are the HPA scaling a
// Deployment (accepted and recorded: standing claims pile up), 3 in 10 the cost optimizer scaling
// one down (refused: denied), 2 in 10 a ConfigMap no field block covers. In the same run each
// review also goes to an allow-all webhook (decode, answer allowed), for the floor that HTTP and
// JSON set. The repository and the reviews are internal/busycluster's, as bench/admission sends
// them to the parley binary end to end. b.N reviews to each:
//
//	go test ./app -run '^$' -bench AdmissionAt500PerSecond -benchtime 5000x
func BenchmarkAdmissionAt500PerSecond(b *testing.B) {
	d := busyDrift(b)
	m, err := NewAdmissionMetrics(prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	h := &Admission{Drift: d, MaxAge: 2 * time.Second, Metrics: m,
		Clusters: map[string]config.Admission{"prod": {Mode: "deny", Token: config.NewSecret(admissionToken), GitOpsUsers: config.DefaultGitOpsUsers}},
		Routes:   map[string]config.RepoRef{"prod": {Repository: "acme/infra"}}}
	mux := http.NewServeMux()
	mux.Handle(AdmissionPrefix, h)
	parley := httptest.NewServer(mux)
	defer parley.Close()
	allowAll := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var rev admissionv1.AdmissionReview
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &rev); err != nil || rev.Request == nil {
			http.Error(w, "bad review", http.StatusBadRequest)
			return
		}
		writeJSON(w, http.StatusOK, admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{Kind: "AdmissionReview", APIVersion: "admission.k8s.io/v1"},
			Response: &admissionv1.AdmissionResponse{UID: rev.Request.UID, Allowed: true}})
	}))
	defer allowAll.Close()

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 128}}
	send := func(url string, body []byte) (time.Duration, error) {
		req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+admissionToken)
		req.Header.Set("Content-Type", "application/json")
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return 0, fmt.Errorf("%s: %s", url, resp.Status)
		}
		return time.Since(start), nil
	}
	// Warm up: the first review clones the repository and builds the ledger.
	if _, err := send(parley.URL+AdmissionPrefix+"prod", busycluster.Review(0)); err != nil {
		b.Fatal(err)
	}
	lat, floor := make([]time.Duration, b.N), make([]time.Duration, b.N)
	errs := make(chan error, 2*b.N)
	var wg sync.WaitGroup
	tick := time.NewTicker(2 * time.Millisecond) // 500 per second
	defer tick.Stop()
	b.ResetTimer()
	for i := range b.N {
		<-tick.C
		body := busycluster.Review(i + 1)
		wg.Add(2)
		go func() { // owned by this loop; wg.Wait below collects every one
			defer wg.Done()
			l, err := send(parley.URL+AdmissionPrefix+"prod", body)
			if err != nil {
				errs <- err
			}
			lat[i] = l
		}()
		go func() { // the allow-all webhook, side by side
			defer wg.Done()
			l, err := send(allowAll.URL, body)
			if err != nil {
				errs <- err
			}
			floor[i] = l
		}()
	}
	wg.Wait()
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	p50, p99 := percentiles(lat)
	f50, f99 := percentiles(floor)
	b.ReportMetric(p50, "p50-ms")
	b.ReportMetric(p99, "p99-ms")
	b.ReportMetric(f50, "allowall-p50-ms")
	b.ReportMetric(f99, "allowall-p99-ms")
	for _, dec := range []string{admAllowed, admDenied, admUncovered, admFailOpen} {
		b.ReportMetric(testutil.ToFloat64(h.Metrics.decisions.WithLabelValues("prod", dec, "false")), dec)
	}
}
