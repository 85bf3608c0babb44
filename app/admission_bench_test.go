package app

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/parleyhq/parley/app/config"
	"github.com/parleyhq/parley/internal/busycluster"
	"github.com/parleyhq/parley/reconcile/events"
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

// BenchmarkAdmissionJudging measures the CPU a review costs Parley beyond HTTP (issue 37): the
// busy mix's reviews decoded and judged one after another, without the network or the open loop
// of BenchmarkAdmissionAt500PerSecond, so that cpu-µs/op and allocs/op are a review's own. "memo" is
// serve's configuration (reconcile.FieldMemo); "no-memo" reads each field's drift state for each
// review, as before issue 37. The first pass over the 1,000 Deployments (a miss each) is warm-up:
//
//	go test ./app -run '^$' -bench AdmissionJudging -benchtime 4000x -benchmem
func BenchmarkAdmissionJudging(b *testing.B) {
	for _, memo := range []bool{true, false} {
		name := map[bool]string{true: "memo", false: "no-memo"}[memo]
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			d := busyDrift(b)
			cfg := config.Admission{Mode: "deny", GitOpsUsers: config.DefaultGitOpsUsers}
			route := config.RepoRef{Repository: "acme/infra"}
			h := &Admission{Drift: d, MaxAge: time.Hour, Clusters: map[string]config.Admission{"prod": cfg}, Routes: map[string]config.RepoRef{"prod": route}}
			judge := func(i int) {
				// UTC without a monotonic reading, as serve's Admission.now gives it: the memo's
				// write-through takes a claim in that form as it is (reconcile.asStored).
				adm, err := events.DecodeAdmissionReview(busycluster.Review(i), time.Now().UTC())
				if err != nil {
					b.Fatal(err)
				}
				if _, dec := h.review(ctx, "prod", cfg, route, adm); dec == admFailOpen {
					b.Fatalf("review %d failed open", i)
				}
			}
			judge(0) // clones the repository, opens the drift state
			rd, err := d.repo(ctx, "acme/infra", "")
			if err != nil {
				b.Fatal(err)
			}
			if !memo {
				rd.rec.Memo = nil
			}
			for i := 1; i <= busycluster.Deployments; i++ {
				judge(i)
			}
			b.ReportAllocs()
			cpu0 := processCPU(b)
			b.ResetTimer()
			for i := range b.N {
				judge(busycluster.Deployments + 1 + i)
			}
			b.StopTimer()
			// A recorded review waits for its fsync (synchronous=FULL), one at a time here: ns/op
			// is mostly that wait. The CPU the process spent, the group writer's included, is what
			// a review costs the machine.
			b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N)/1e3, "cpu-µs/op")
			if memo {
				hits, misses := rd.rec.Memo.Stats()
				b.ReportMetric(float64(hits), "memo-hits")
				b.ReportMetric(float64(misses), "memo-misses")
			}
		})
	}
}

// processCPU is the user and system CPU time this process has spent.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkAdmissionHTTP2 is BenchmarkAdmissionAt500PerSecond as the API server calls the
// webhook: over one HTTP/2 connection with TLS, where Go's server runs every request on a new
// goroutine whose stack starts small. (Over HTTP/1.1 a keep-alive connection's goroutine serves
// request after request on the stack it already grew, so the benchmark above does not see the
// growth.) "inline" judges each review on its request's goroutine, as before issue 37's warm
// stacks; "warm-N" on N warm-stack workers (warmstack.go) when one is idle. cpu-µs/op is the
// process's CPU per review, the client's and TLS's included; the share of runtime.newstack is read
// from a CPU profile of one sub-benchmark at a time:
//
//	go test ./app -run '^$' -bench 'AdmissionHTTP2/inline' -benchtime 2000x -cpuprofile inline.prof
//	go tool pprof -top -cum inline.prof | grep -E 'newstack|copystack'
func BenchmarkAdmissionHTTP2(b *testing.B) {
	procs := runtime.GOMAXPROCS(0)
	for _, workers := range []int{0, procs, 4 * procs} {
		name := "inline"
		if workers > 0 {
			name = fmt.Sprintf("warm-%d", workers)
		}
		b.Run(name, func(b *testing.B) {
			d := busyDrift(b)
			h := &Admission{Drift: d, MaxAge: 2 * time.Second,
				Clusters: map[string]config.Admission{"prod": {Mode: "deny", Token: config.NewSecret(admissionToken), GitOpsUsers: config.DefaultGitOpsUsers}},
				Routes:   map[string]config.RepoRef{"prod": {Repository: "acme/infra"}}}
			if workers > 0 {
				h.warm = newWarmStacks(workers)
				h.warm.Start()
				defer h.warm.Close()
			}
			mux := http.NewServeMux()
			mux.Handle(AdmissionPrefix, h)
			srv := httptest.NewUnstartedServer(mux)
			srv.EnableHTTP2 = true
			srv.StartTLS()
			defer srv.Close()
			client := srv.Client()
			url := srv.URL + AdmissionPrefix + "prod"
			send := func(body []byte) (time.Duration, error) {
				req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+admissionToken)
				req.Header.Set("Content-Type", "application/json")
				start := time.Now()
				resp, err := client.Do(req)
				if err != nil {
					return 0, err
				}
				var rev admissionv1.AdmissionReview
				err = json.NewDecoder(resp.Body).Decode(&rev)
				resp.Body.Close()
				switch {
				case err != nil:
					return 0, err
				case resp.ProtoMajor != 2:
					return 0, fmt.Errorf("answered over %s, not HTTP/2", resp.Proto)
				case resp.StatusCode != http.StatusOK || rev.Response == nil:
					return 0, fmt.Errorf("%s: %s", url, resp.Status)
				}
				return time.Since(start), nil
			}
			// Warm up: the first review clones the repository and builds the ledger; the next
			// ones open the connection's streams.
			for i := range 20 {
				if _, err := send(busycluster.Review(i)); err != nil {
					b.Fatal(err)
				}
			}
			lat := make([]time.Duration, b.N)
			errs := make(chan error, b.N)
			var wg sync.WaitGroup
			tick := time.NewTicker(2 * time.Millisecond) // 500 per second
			defer tick.Stop()
			cpu0 := processCPU(b)
			b.ResetTimer()
			for i := range b.N {
				<-tick.C
				body := busycluster.Review(i + 20)
				wg.Add(1)
				go func() { // owned by this loop; wg.Wait below collects every one
					defer wg.Done()
					l, err := send(body)
					if err != nil {
						errs <- err
					}
					lat[i] = l
				}()
			}
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N)/1e3, "cpu-µs/op")
			close(errs)
			for err := range errs {
				b.Fatal(err)
			}
			p50, p99 := percentiles(lat)
			b.ReportMetric(p50, "p50-ms")
			b.ReportMetric(p99, "p99-ms")
		})
	}
}
