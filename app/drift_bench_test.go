package app

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/demo"
	"github.com/parleyhq/parley/internal/gittest"
	"github.com/parleyhq/parley/webhooks"
	"github.com/parleyhq/parley/webhooks/store"
)

// servedDrift is a running parley serve judging drift against the demo repository plus n
// Deployments with HPAs (svc-0 ... svc-n-1, applied by the demo's Flux Kustomization), hosted by
// the real git http-backend and a fake GitHub.
type servedDrift struct {
	tb       testing.TB
	url      string // POST /events/k8s-audit
	bare     string
	cloneURL string
	work     *gittest.Runner
	stop     func() error
}

func serveDrift(tb testing.TB, n int) *servedDrift {
	tb.Helper()
	work := filepath.Join(tb.TempDir(), "work")
	if _, err := demo.Build(work); err != nil {
		tb.Fatal(err)
	}
	g := gittest.New(tb, work)
	var manifests strings.Builder
	for i := range n {
		fmt.Fprintf(&manifests, "---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: svc-%d\n  namespace: prod\nspec:\n  replicas: 2\n"+
			"---\napiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata:\n  name: svc-%d\n  namespace: prod\nspec:\n  scaleTargetRef:\n    apiVersion: apps/v1\n    kind: Deployment\n    name: svc-%d\n  maxReplicas: 20\n", i, i, i)
	}
	if err := os.WriteFile(filepath.Join(work, "k8s/prod/services.yaml"), []byte(manifests.String()), 0o644); err != nil {
		tb.Fatal(err)
	}
	g.Run("add", ".")
	g.Run("commit", "-q", "-m", "Add the services")
	bare := filepath.Join(tb.TempDir(), "infra.git")
	g.Run("clone", "-q", "--bare", work, bare)
	cloneURL := gittest.ServeHTTP(tb, bare, true)

	gh, _, pemKey := fakeApp(tb)
	gh.SetInstallation("acme/infra", 5)
	gh.SetRepository("acme/infra", map[string]any{"clone_url": cloneURL, "default_branch": "main"})
	dir := tb.TempDir()
	_, base, stopServe := runServe(tb, map[string]string{"PARLEY_APP_ID": "99", "PARLEY_PRIVATE_KEY": string(pemKey), "PARLEY_WEBHOOK_SECRETS": "hook",
		"PARLEY_GITHUB_URL": gh.URL + "/api/v3/", "PARLEY_STORE": filepath.Join(dir, "parley.db"), "PARLEY_LISTEN": "127.0.0.1:0",
		"PARLEY_KUBE_AUDIT_TOKEN": "audit-token", "PARLEY_GITOPS_REPOSITORY": "acme/infra", "PARLEY_WRITE_MODE": "direct"})
	s := &servedDrift{tb: tb, url: base + "/events/k8s-audit", bare: bare, cloneURL: cloneURL, work: g}
	s.stop = stopServe
	tb.Cleanup(func() { s.stop() })
	return s
}

// tip reads the remote's main from its loose ref (the first push writes it; the clone's refs are
// packed until then).
func (s *servedDrift) tip() string {
	ref, err := os.ReadFile(filepath.Join(s.bare, "refs", "heads", "main"))
	if err != nil {
		return ""
	}
	return string(bytes.TrimSpace(ref))
}

// scale POSTs an audit EventList in which the HPA scales svc-i, and returns the answer's status.
func (s *servedDrift) scale(i int, token string) int {
	s.tb.Helper()
	at := time.Now().UTC().Format("2006-01-02T15:04:05.000000Z07:00")
	body := fmt.Sprintf(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[{"level":"Request","auditID":"scale-%d","stage":"ResponseComplete",`+
		`"requestURI":"/apis/apps/v1/namespaces/prod/deployments/svc-%d/scale","verb":"update","user":{"username":"system:serviceaccount:kube-system:horizontal-pod-autoscaler"},`+
		`"userAgent":"kube-controller-manager/v1.36.3","objectRef":{"resource":"deployments","namespace":"prod","name":"svc-%d","apiGroup":"apps","apiVersion":"v1","subresource":"scale"},`+
		`"responseStatus":{"metadata":{},"code":200},"requestObject":{"kind":"Scale","apiVersion":"autoscaling/v1","metadata":{"name":"svc-%d","namespace":"prod"},"spec":{"replicas":5}},`+
		`"requestReceivedTimestamp":%q,"stageTimestamp":%q}]}`, i, i, i, i, at, at)
	req, _ := http.NewRequest(http.MethodPost, s.url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.tb.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// awaitMove waits until main moves from before, and fails after 30 s.
func (s *servedDrift) awaitMove(before string) {
	s.tb.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for s.tip() == before {
		if time.Now().After(deadline) {
			s.tb.Fatal("no commit reached main within 30s")
		}
		time.Sleep(200 * time.Microsecond)
	}
}

func TestServeJudgesDriftEventsEndToEnd(t *testing.T) {
	s := serveDrift(t, 2)
	if code := s.scale(0, "wrong-token"); code != http.StatusUnauthorized {
		t.Fatalf("a wrong token: %d", code)
	}
	for i := range 2 {
		before := s.tip()
		if code := s.scale(i, "audit-token"); code != http.StatusAccepted {
			t.Fatalf("event %d: %d", i, code)
		}
		s.awaitMove(before)
	}
	// The same event again: a duplicate by its audit ID, nothing more is written.
	tip := s.tip()
	if code := s.scale(1, "audit-token"); code != http.StatusOK {
		t.Fatalf("a resent event: %d, want 200 (duplicate)", code)
	}
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	if s.tip() != tip {
		t.Fatal("a duplicate event wrote to main")
	}
	log := s.work.RunIn(s.bare, "log", "--format=%s", "-2", "main")
	if log != "parley: yield /spec/replicas of Deployment prod/svc-1 to hpa\nparley: yield /spec/replicas of Deployment prod/svc-0 to hpa" {
		t.Fatalf("main:\n%s", log)
	}
}

// BenchmarkEventToCommit measures the drift loop end to end on loopback: an audit EventList
// POSTed to a running parley serve (HTTP, bearer token, durable store, a worker) until the gate
// commit is pushed over smart HTTP to the real git http-backend serving the GitOps repository.
// Each event is an HPA scaling a different Deployment, so each one gates a new field (one commit
// per event). It reports the median and 99th percentile, and the same for the git CLI's fetch,
// edit, commit and push against the same server; run it with a fixed count:
//
//	go test ./app -run '^$' -bench EventToCommit -benchtime 100x
func BenchmarkEventToCommit(b *testing.B) {
	n := b.N
	s := serveDrift(b, n)
	latencies := make([]time.Duration, 0, n)
	b.ResetTimer()
	for i := range n {
		before := s.tip()
		start := time.Now()
		if code := s.scale(i, "audit-token"); code != http.StatusAccepted {
			b.Fatalf("event %d: %d", i, code)
		}
		s.awaitMove(before)
		latencies = append(latencies, time.Since(start))
	}
	b.StopTimer()
	if err := s.stop(); err != nil {
		b.Fatal(err)
	}
	// The peer: the git CLI doing the least any writer must do for the same change, in the same
	// run against the same server: fetch the branch, edit one file, commit, push.
	peer := filepath.Join(b.TempDir(), "peer")
	s.work.RunIn(filepath.Dir(peer), "clone", "-q", s.cloneURL, peer)
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

// BenchmarkStandingOwnerRescale measures the steady state of a machine-speed actor: the HPA
// rescaling a field it owns and Parley already gated, which writes nothing. Each op is one audit
// event through the drift handler (fetch, snapshot, judgement, record).
//
//	go test ./app -run '^$' -bench StandingOwnerRescale
func BenchmarkStandingOwnerRescale(b *testing.B) {
	d, _, remote, clk := driftSetupB(b)
	ctx := context.Background()
	scale := func(i int) []byte {
		at := clk.now().Format("2006-01-02T15:04:05.000000Z07:00")
		return []byte(fmt.Sprintf(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[{"level":"Request","auditID":"hpa-%d","stage":"ResponseComplete",`+
			`"requestURI":"/apis/apps/v1/namespaces/prod/deployments/web/scale","verb":"update","user":{"username":"system:serviceaccount:kube-system:horizontal-pod-autoscaler"},`+
			`"objectRef":{"resource":"deployments","namespace":"prod","name":"web","apiGroup":"apps","apiVersion":"v1","subresource":"scale"},`+
			`"responseStatus":{"metadata":{},"code":200},"requestObject":{"kind":"Scale","apiVersion":"autoscaling/v1","metadata":{"name":"web","namespace":"prod"},"spec":{"replicas":%d}},`+
			`"requestReceivedTimestamp":%q,"stageTimestamp":%q}]}`, i, 9+i%10, at, at))
	}
	deliver := func(i int) {
		if err := d.Handle(ctx, store.Delivery{Source: store.SourceK8sAudit, ID: fmt.Sprintf("d-%d", i), Event: webhooks.EventName,
			Body: scale(i), ReceivedAt: clk.now()}); err != nil {
			b.Fatal(err)
		}
	}
	deliver(0) // the first scale gates the field
	tip := remote.Run("rev-parse", "main")
	b.ResetTimer()
	for i := 1; i <= b.N; i++ {
		clk.add(time.Second)
		deliver(i)
	}
	b.StopTimer()
	if remote.Run("rev-parse", "main") != tip {
		b.Fatal("a standing owner's rescale wrote to Git")
	}
}
