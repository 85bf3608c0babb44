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
	ctx := context.Background()
	const deployments = busycluster.Deployments
	d := busyDrift(b)
	agents, err := agentstore.Open(ctx, filepath.Join(b.TempDir(), "agents.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer agents.Close()
	token, _, err := agents.Create(ctx, "oncall-bot", core.Identity{Source: core.SourceKubeUser, ID: "alice@parley.example"}, []string{"acme/infra"}, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	metrics, err := NewProposalMetrics(prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(&Proposals{Drift: d, Agents: agents, MaxAge: 2 * time.Second, Metrics: metrics})
	defer srv.Close()
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
	// Warm up: the first proposal clones the repository and builds the ledger.
	if _, err := send(0); err != nil {
		b.Fatal(err)
	}
	latencies := make([]time.Duration, b.N)
	errs := make(chan error, b.N)
	var wg sync.WaitGroup
	tick := time.NewTicker(5 * time.Millisecond) // 200 per second
	defer tick.Stop()
	b.ResetTimer()
	for i := range b.N {
		<-tick.C
		wg.Add(1)
		go func() { // owned by this loop; wg.Wait below collects every one
			defer wg.Done()
			lat, err := send(i + 1)
			if err != nil {
				errs <- err
				return
			}
			latencies[i] = lat
		}()
	}
	wg.Wait()
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	p50, p99 := percentiles(latencies)
	b.ReportMetric(p50, "p50-ms")
	b.ReportMetric(p99, "p99-ms")
}

// busyDrift is the drift loop over the benchmarks' busy repository (busycluster.Build: the demo
// plus 1,000 Deployments, 10,000 fields in manifests), served from a bare clone behind the fake
// GitHub, with its drift state in SQLite. Closed with b.
func busyDrift(b *testing.B) *Drift {
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
	gh.SetRepository("acme/infra", map[string]any{"clone_url": bare, "default_branch": "main"})
	st, err := driftstate.Open(ctx, filepath.Join(b.TempDir(), "drift.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	d := &Drift{GitHub: InstallationAuth{App: app, Base: gh.Client().Transport}, Repos: &repocache.Cache{Dir: b.TempDir()},
		Repository: "acme/infra", PolicyPath: ".parley/policy.hcl", Mode: reconcile.ModeDirect, State: st,
		Author: object.Signature{Name: "Parley", Email: "parley@users.noreply.github.com"}}
	b.Cleanup(func() { d.Close() })
	return d
}
