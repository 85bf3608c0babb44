package app

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/parleyhq/parley/app/internal/repocache"
	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/internal/agentstore"
	"github.com/parleyhq/parley/internal/busycluster"
	"github.com/parleyhq/parley/internal/gittest"
	"github.com/parleyhq/parley/reconcile"
	"github.com/parleyhq/parley/reconcile/driftstate"
	"github.com/parleyhq/parley/webhooks"
	"github.com/parleyhq/parley/webhooks/store"
)

// BenchmarkProposalsAt200PerSecond measures what an agent waits for: POST /v1/proposals over HTTP
// on loopback, with the token checked, the verdict judged under the policy and the repository's
// claims, the accepted claim durably recorded (SQLite, synchronous=FULL) and the proposal logged,
// before the answer. The repository is the demo plus 1,000 Deployments of 10 fields each (10,000
// fields in manifests). Proposals are sent at 200 per second, open loop (a proposal is not held
// back by a slow answer), each on a different Deployment's image by the on-call engineer; b.N
// proposals in all. It reports the median and 99th percentile latency:
//
//	go test ./app -run '^$' -bench ProposalsAt200PerSecond -benchtime 2000x
func BenchmarkProposalsAt200PerSecond(b *testing.B) {
	send := proposalSender(b, busyDrift(b))
	b.ResetTimer()
	latencies := openLoop(b, b.N, 5*time.Millisecond, 1, send) // 200 per second
	p50, p99 := percentiles(latencies)
	b.ReportMetric(p50, "p50-ms")
	b.ReportMetric(p99, "p99-ms")
}

// BenchmarkProposalsWithDriftPushes (issue 27) measures whether proposals wait behind Git: the
// proposals of BenchmarkProposalsAt200PerSecond, half of them alone and half while drift events
// push gate commits to the repository's remote, a real git http-backend on loopback, one event
// after another as the delivery queue hands them over (the HPA scaling a Deployment the
// proposals do not touch: every event is a fetch, a commit and a push). The two halves are
// interleaved in four rounds so that the machine's noise falls on both alike. It reports the
// median and 99th percentile of each, and the pushes made:
//
//	nice go test ./app -run '^$' -bench ProposalsWithDriftPushes -benchtime 4000x
func BenchmarkProposalsWithDriftPushes(b *testing.B) {
	ctx := context.Background()
	d, bare := busyDriftOverHTTP(b)
	send := proposalSender(b, d)
	const rounds = 4
	per := max(b.N/(2*rounds), 1)
	var alone, mixed []time.Duration
	pushes := 0
	event := 0
	b.ResetTimer()
	for r := range rounds {
		alone = append(alone, openLoop(b, per, 5*time.Millisecond, 1+2*r*per, send)...)

		stop := make(chan struct{})
		done := make(chan error, 1)
		before := tipOf(b, bare)
		go func() { // drift events until stop; owned by this round, which waits for it below
			for {
				select {
				case <-stop:
					done <- nil
					return
				default:
				}
				i := event % busycluster.Deployments
				event++
				if err := d.Handle(ctx, hpaScale(event, busycluster.Deployments-1-i)); err != nil {
					done <- err
					return
				}
			}
		}()
		mixed = append(mixed, openLoop(b, per, 5*time.Millisecond, 1+(2*r+1)*per, send)...)
		close(stop)
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		pushes += commitsBetween(b, bare, before)
	}
	b.StopTimer()
	if pushes == 0 {
		b.Fatal("no drift event pushed: the mix measured nothing")
	}
	p50, p99 := percentiles(alone)
	b.ReportMetric(p50, "alone-p50-ms")
	b.ReportMetric(p99, "alone-p99-ms")
	p50, p99 = percentiles(mixed)
	b.ReportMetric(p50, "mixed-p50-ms")
	b.ReportMetric(p99, "mixed-p99-ms")
	b.ReportMetric(float64(pushes), "commits-pushed")
}

// proposalSender returns a function that POSTs proposal i to /v1/proposals of an httptest server
// over d (the on-call engineer's token, MaxAge 2 s) and returns its latency. The first proposal is
// sent here: it clones the repository and builds the ledger.
func proposalSender(b *testing.B, d *Drift) func(i int) (time.Duration, error) {
	b.Helper()
	ctx := context.Background()
	const deployments = busycluster.Deployments
	agents, err := agentstore.Open(ctx, filepath.Join(b.TempDir(), "agents.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { agents.Close() })
	token, _, err := agents.Create(ctx, "oncall-bot", core.Identity{Source: core.SourceKubeUser, ID: "alice@parley.example"}, []string{"acme/infra"}, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	metrics, err := NewProposalMetrics(prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(&Proposals{Drift: d, Agents: agents, MaxAge: 2 * time.Second, Metrics: metrics})
	b.Cleanup(srv.Close)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	send := func(i int) (time.Duration, error) {
		body := fmt.Sprintf(`{"claims":[{"field":"k8s:apps/Deployment/prod/svc-%d#/spec/template/spec/containers/0/image","value":"registry.example.com/svc-%d:1.0.%d","intent":"availability","expires":"2h"}]}`,
			i%deployments, i%deployments, 1+i/deployments)
		req, _ := http.NewRequest(http.MethodPost, srv.URL+ProposalsPath, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return 0, fmt.Errorf("proposal %d: %s", i, resp.Status)
		}
		return time.Since(start), nil
	}
	if _, err := send(0); err != nil {
		b.Fatal(err)
	}
	return send
}

// openLoop sends n requests, one every interval whether or not the earlier ones were answered (a
// proposal is not held back by a slow answer), numbered from first, and returns their latencies.
func openLoop(b *testing.B, n int, interval time.Duration, first int, send func(int) (time.Duration, error)) []time.Duration {
	b.Helper()
	latencies := make([]time.Duration, n)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for i := range n {
		<-tick.C
		wg.Add(1)
		go func() { // owned by this loop; wg.Wait below collects every one
			defer wg.Done()
			lat, err := send(first + i)
			if err != nil {
				errs <- err
				return
			}
			latencies[i] = lat
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	return latencies
}

// hpaScale is an audit event of the HPA scaling svc-i to a new size (n names it apart): on the
// busy repository, where no HPA targets svc-i, the HPA's availability claim wins over Git's and the
// replicas are gated, or resumed, with a commit each time.
func hpaScale(n, i int) store.Delivery {
	at := time.Now().UTC().Format("2006-01-02T15:04:05.000000Z07:00")
	body := fmt.Sprintf(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[{"level":"Request","auditID":"mix-%d","stage":"ResponseComplete",`+
		`"requestURI":"/apis/apps/v1/namespaces/prod/deployments/svc-%d/scale","verb":"update","user":{"username":"system:serviceaccount:kube-system:horizontal-pod-autoscaler"},`+
		`"userAgent":"kube-controller-manager/v1.36.3","objectRef":{"resource":"deployments","namespace":"prod","name":"svc-%d","apiGroup":"apps","apiVersion":"v1","subresource":"scale"},`+
		`"responseStatus":{"metadata":{},"code":200},"requestObject":{"kind":"Scale","apiVersion":"autoscaling/v1","metadata":{"name":"svc-%d","namespace":"prod"},"spec":{"replicas":%d}},`+
		`"requestReceivedTimestamp":%q,"stageTimestamp":%q}]}`, n, i, i, i, 3+n%5, at, at)
	return store.Delivery{Source: store.SourceK8sAudit, ID: fmt.Sprintf("mix-%d", n), Event: webhooks.EventName, Body: []byte(body), ReceivedAt: time.Now().UTC()}
}

// tipOf is main's commit in the bare repository.
func tipOf(b *testing.B, bare string) string {
	b.Helper()
	return strings.TrimSpace(gittest.New(b, bare).Run("rev-parse", "main"))
}

// commitsBetween counts the commits main gained since before.
func commitsBetween(b *testing.B, bare, before string) int {
	b.Helper()
	out := strings.TrimSpace(gittest.New(b, bare).Run("rev-list", "--count", before+"..main"))
	n := 0
	fmt.Sscan(out, &n)
	return n
}

// busyDrift is the drift loop over the benchmarks' busy repository (busycluster.Build: the demo
// plus 1,000 Deployments, 10,000 fields in manifests), served from a bare clone behind the fake
// GitHub, with its drift state in SQLite. Closed with b.
func busyDrift(b *testing.B) *Drift {
	d, _ := busyDriftAt(b, false)
	return d
}

// busyDriftOverHTTP is busyDrift with the bare clone served by git http-backend on loopback, as
// GitHub serves it: fetches and pushes go through the smart HTTP protocol. It returns the bare
// repository's path as well.
func busyDriftOverHTTP(b *testing.B) (*Drift, string) {
	return busyDriftAt(b, true)
}

func busyDriftAt(b *testing.B, overHTTP bool) (*Drift, string) {
	b.Helper()
	ctx := context.Background()
	work := filepath.Join(b.TempDir(), "work")
	if _, err := busycluster.Build(work); err != nil {
		b.Fatal(err)
	}
	bare := filepath.Join(b.TempDir(), "infra.git")
	gittest.New(b, work).Run("clone", "-q", "--bare", work, bare)
	gh, app, _ := fakeApp(b)
	gh.SetInstallation("acme/infra", 5)
	cloneURL := bare
	if overHTTP {
		cloneURL = gittest.ServeHTTP(b, bare, true)
	}
	gh.SetRepository("acme/infra", map[string]any{"clone_url": cloneURL, "default_branch": "main"})
	st, err := driftstate.Open(ctx, filepath.Join(b.TempDir(), "drift.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	d := &Drift{GitHub: InstallationAuth{App: app, Base: gh.Client().Transport}, Repos: &repocache.Cache{Dir: b.TempDir()},
		Repository: "acme/infra", PolicyPath: ".parley/policy.hcl", Mode: reconcile.ModeDirect, State: st,
		Author: object.Signature{Name: "Parley", Email: "parley@users.noreply.github.com"}}
	b.Cleanup(func() { d.Close() })
	return d, bare
}
