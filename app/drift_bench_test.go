package app

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/app/config"
	"github.com/parleyhq/parley/demo"
	"github.com/parleyhq/parley/internal/gittest"
)

// BenchmarkEventToCommit measures the drift loop end to end on loopback: an audit EventList
// POSTed to a running parley serve (HTTP, bearer token, durable store, a worker) until the gate
// commit is pushed over smart HTTP to the real git http-backend serving the GitOps repository.
// Each event is an HPA scaling a different Deployment, so each one gates a new field (one commit
// per event). It reports the median and 99th percentile; run it with a fixed count:
//
//	go test ./app -run '^$' -bench EventToCommit -benchtime 200x
func BenchmarkEventToCommit(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := b.N
	work := filepath.Join(b.TempDir(), "work")
	if _, err := demo.Build(work); err != nil {
		b.Fatal(err)
	}
	g := gittest.New(b, work)
	// n more Deployments, each with its HPA, applied by the demo's Flux Kustomization.
	var manifests strings.Builder
	for i := range n {
		fmt.Fprintf(&manifests, "---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: svc-%d\n  namespace: prod\nspec:\n  replicas: 2\n"+
			"---\napiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata:\n  name: svc-%d\n  namespace: prod\nspec:\n  scaleTargetRef:\n    apiVersion: apps/v1\n    kind: Deployment\n    name: svc-%d\n  maxReplicas: 20\n", i, i, i)
	}
	if err := os.WriteFile(filepath.Join(work, "k8s/prod/services.yaml"), []byte(manifests.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	g.Run("add", ".")
	g.Run("commit", "-q", "-m", "Add the services")
	bare := filepath.Join(b.TempDir(), "infra.git")
	g.Run("clone", "-q", "--bare", work, bare)
	cloneURL := gittest.ServeHTTP(b, bare, true)

	gh, _, pemKey := fakeApp(b)
	gh.SetInstallation("acme/infra", 5)
	gh.SetRepository("acme/infra", map[string]any{"clone_url": cloneURL, "default_branch": "main"})
	dir := b.TempDir()
	cfg, err := config.Load("", func(k string) string {
		return map[string]string{"PARLEY_APP_ID": "99", "PARLEY_PRIVATE_KEY": string(pemKey), "PARLEY_WEBHOOK_SECRETS": "hook",
			"PARLEY_GITHUB_URL": gh.URL + "/api/v3/", "PARLEY_STORE": filepath.Join(dir, "parley.db"), "PARLEY_LISTEN": "127.0.0.1:0",
			"PARLEY_KUBE_AUDIT_TOKEN": "audit-token", "PARLEY_GITOPS_REPOSITORY": "acme/infra", "PARLEY_WRITE_MODE": "direct"}[k]
	})
	if err != nil {
		b.Fatal(err)
	}
	srv, err := NewServer(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	addr := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, func(a string) { addr <- a }) }()
	url := "http://" + <-addr + "/events/k8s-audit"

	tip := func() string {
		ref, err := os.ReadFile(filepath.Join(bare, "refs", "heads", "main"))
		if err != nil {
			return "" // packed: the clone packs refs; the first push writes the loose ref
		}
		return string(bytes.TrimSpace(ref))
	}
	latencies := make([]time.Duration, 0, n)
	b.ResetTimer()
	for i := range n {
		before := tip()
		at := time.Now().UTC().Format("2006-01-02T15:04:05.000000Z07:00")
		body := fmt.Sprintf(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[{"level":"Request","auditID":"bench-%d","stage":"ResponseComplete",`+
			`"requestURI":"/apis/apps/v1/namespaces/prod/deployments/svc-%d/scale","verb":"update","user":{"username":"system:serviceaccount:kube-system:horizontal-pod-autoscaler"},`+
			`"userAgent":"kube-controller-manager/v1.36.3","objectRef":{"resource":"deployments","namespace":"prod","name":"svc-%d","apiGroup":"apps","apiVersion":"v1","subresource":"scale"},`+
			`"responseStatus":{"metadata":{},"code":200},"requestObject":{"kind":"Scale","apiVersion":"autoscaling/v1","metadata":{"name":"svc-%d","namespace":"prod"},"spec":{"replicas":5}},`+
			`"requestReceivedTimestamp":%q,"stageTimestamp":%q}]}`, i, i, i, i, at, at)
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer audit-token")
		req.Header.Set("Content-Type", "application/json")
		start := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			b.Fatalf("event %d: %s", i, resp.Status)
		}
		deadline := start.Add(30 * time.Second)
		for tip() == before {
			if time.Now().After(deadline) {
				b.Fatalf("event %d: no commit within 30s", i)
			}
			time.Sleep(200 * time.Microsecond)
		}
		latencies = append(latencies, time.Since(start))
	}
	b.StopTimer()
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	// The peer: the git CLI doing the least any writer must do for the same change, in the same
	// run against the same server: fetch the branch, edit one file, commit, push.
	peer := filepath.Join(b.TempDir(), "peer")
	g.RunIn(filepath.Dir(peer), "clone", "-q", cloneURL, peer)
	pg := gittest.New(b, peer)
	peerLat := make([]time.Duration, 0, n)
	for i := range n {
		start := time.Now()
		pg.Run("pull", "-q", "--ff-only")
		f := filepath.Join(peer, "clusters/prod/apps.yaml")
		data, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(f, append(data, fmt.Sprintf("# peer %d\n", i)...), 0o644); err != nil {
			b.Fatal(err)
		}
		pg.Run("commit", "-q", "-am", fmt.Sprintf("peer %d", i))
		pg.Run("push", "-q", "origin", "HEAD:main")
		peerLat = append(peerLat, time.Since(start))
	}
	p50, p99 := percentiles(latencies)
	g50, g99 := percentiles(peerLat)
	b.ReportMetric(p50, "p50-ms")
	b.ReportMetric(p99, "p99-ms")
	b.ReportMetric(g50, "git-p50-ms")
	b.ReportMetric(g99, "git-p99-ms")
	b.ReportMetric(p50/g50, "p50-ratio")
}

// percentiles returns the median and the 99th percentile in milliseconds.
func percentiles(d []time.Duration) (p50, p99 float64) {
	slices.Sort(d)
	ms := func(x time.Duration) float64 { return float64(x.Microseconds()) / 1000 }
	return ms(d[len(d)/2]), ms(d[len(d)*99/100])
}
