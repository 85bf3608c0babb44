package app

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/parleyhq/parley/app/internal/repocache"
	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/internal/demo"
	"github.com/parleyhq/parley/internal/fakegithub"
	"github.com/parleyhq/parley/internal/gittest"
	"github.com/parleyhq/parley/reconcile"
	"github.com/parleyhq/parley/reconcile/driftstate"
	"github.com/parleyhq/parley/webhooks"
	"github.com/parleyhq/parley/webhooks/store"
)

type clockT struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clockT) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clockT) set(t time.Time)     { c.mu.Lock(); c.t = t; c.mu.Unlock() }
func (c *clockT) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// driftSetup is the demo repository hosted as "acme/infra" (a bare repository standing in for
// GitHub's), the fake GitHub knowing the App's installation on it, and a Drift judging against it.
func driftSetup(t *testing.T, mode reconcile.Mode) (*Drift, *fakegithub.Server, *gittest.Runner, *clockT) {
	return driftSetupTB(t, mode)
}

// driftSetupB is driftSetup for benchmarks, in direct mode.
func driftSetupB(b *testing.B) (*Drift, *fakegithub.Server, *gittest.Runner, *clockT) {
	return driftSetupTB(b, reconcile.ModeDirect)
}

func driftSetupTB(t testing.TB, mode reconcile.Mode) (*Drift, *fakegithub.Server, *gittest.Runner, *clockT) {
	t.Helper()
	work := filepath.Join(t.TempDir(), "work")
	if _, err := demo.Build(work); err != nil {
		t.Fatal(err)
	}
	bare := filepath.Join(t.TempDir(), "infra.git")
	gittest.New(t, work).Run("clone", "-q", "--bare", work, bare)
	gh, app, _ := fakeApp(t)
	gh.SetInstallation("acme/infra", 5)
	gh.SetRepository("acme/infra", map[string]any{"clone_url": bare, "default_branch": "main"})
	st, err := driftstate.Open(context.Background(), ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	metrics, err := NewDriftMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	clk := &clockT{t: time.Date(2026, 11, 20, 10, 6, 0, 0, time.UTC)}
	d := &Drift{GitHub: InstallationAuth{App: app, Base: gh.Client().Transport}, Repos: &repocache.Cache{Dir: t.TempDir()},
		Repository: "acme/infra", PolicyPath: ".parley/policy.hcl", Mode: mode, State: st, Now: clk.now, Metrics: metrics,
		Author: object.Signature{Name: "Parley", Email: "parley@users.noreply.github.com"}}
	return d, gh, gittest.New(t, bare), clk
}

func auditDelivery(t *testing.T, id string) store.Delivery {
	t.Helper()
	body, err := os.ReadFile("../examples/drift/k8s-audit.json")
	if err != nil {
		t.Fatal(err)
	}
	return store.Delivery{Source: store.SourceK8sAudit, ID: id, Event: webhooks.EventName, Body: body,
		ReceivedAt: time.Date(2026, 11, 20, 10, 5, 30, 0, time.UTC)}
}

func TestDriftEventsGateTheFieldOnTheDefaultBranch(t *testing.T) {
	d, _, remote, clk := driftSetup(t, reconcile.ModeDirect)
	ctx := context.Background()
	before := remote.Run("rev-parse", "main")
	if err := d.Handle(ctx, auditDelivery(t, "batch-1")); err != nil {
		t.Fatal(err)
	}
	subjects := remote.Run("log", "--format=%s", before+"..main")
	if subjects != "parley: yield /spec/template/spec/containers/0/image of Deployment prod/web to oncall\n"+
		"parley: yield /spec/replicas of Deployment prod/web to hpa" {
		t.Fatalf("commits pushed to main:\n%s", subjects)
	}
	kust := remote.Run("show", "main:clusters/prod/apps.yaml")
	if !strings.Contains(kust, "- /spec/replicas") || !strings.Contains(kust, "- /spec/template/spec/containers/0/image") {
		t.Fatalf("gates:\n%s", kust)
	}
	if n := testutil.ToFloat64(d.Metrics.verdicts.WithLabelValues("yield", "gate")); n != 2 {
		t.Fatalf("gate verdicts counted: %v", n)
	}
	// The same batch delivered again (a new delivery ID: the audit backend resent it): nothing new.
	tip := remote.Run("rev-parse", "main")
	if err := d.Handle(ctx, auditDelivery(t, "batch-1-again")); err != nil {
		t.Fatal(err)
	}
	if remote.Run("rev-parse", "main") != tip {
		t.Fatal("a resent batch wrote again")
	}
	// The on-call yield ends after 2 hours (parley.dev/expires: 2h): the timer loop resumes Git's
	// image, and only that gate goes.
	clk.set(time.Date(2026, 11, 20, 12, 6, 0, 0, time.UTC))
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { d.RunTimers(runCtx); close(done) }()
	deadline := time.Now().Add(20 * time.Second)
	for remote.Run("rev-parse", "main") == tip && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	<-done
	if got := remote.Run("log", "-1", "--format=%s", "main"); got != "parley: resume Git's /spec/template/spec/containers/0/image of Deployment prod/web" {
		t.Fatalf("after expiry main's tip is %q", got)
	}
	kust = remote.Run("show", "main:clusters/prod/apps.yaml")
	if !strings.Contains(kust, "- /spec/replicas") || strings.Contains(kust, "containers/0/image") {
		t.Fatalf("after resume:\n%s", kust)
	}
}

func TestDriftInPullRequestModeOpensOnePullRequestPerField(t *testing.T) {
	d, gh, remote, _ := driftSetup(t, reconcile.ModePullRequest)
	ctx := context.Background()
	main := remote.Run("rev-parse", "main")
	if err := d.Handle(ctx, auditDelivery(t, "batch-1")); err != nil {
		t.Fatal(err)
	}
	if remote.Run("rev-parse", "main") != main {
		t.Fatal("pull-request mode pushed to main")
	}
	branches := strings.Fields(remote.Run("for-each-ref", "--format=%(refname:short)", "refs/heads/parley"))
	if len(branches) != 2 {
		t.Fatalf("work branches: %v", branches)
	}
	var opened []string
	for _, w := range gh.Writes() {
		if w.Operation == "pulls/create" {
			opened = append(opened, w.Body["head"].(string))
			if w.Body["base"] != "main" || !strings.HasPrefix(w.Body["title"].(string), "parley: yield") {
				t.Errorf("pull request %+v", w.Body)
			}
		}
	}
	if len(opened) != 2 {
		t.Fatalf("pull requests opened: %v", opened)
	}
}

func TestDriftWithoutRepositoryDeadLetters(t *testing.T) {
	d, _, _, _ := driftSetup(t, reconcile.ModeDirect)
	d.Repository = ""
	err := d.Handle(context.Background(), auditDelivery(t, "x"))
	if err == nil || !errors.Is(err, webhooks.ErrPermanent) || !strings.Contains(err.Error(), "gitops_repository") {
		t.Fatalf("want a permanent error naming gitops_repository, got %v", err)
	}
	d2, gh, _, _ := driftSetup(t, reconcile.ModeDirect)
	d2.Repository = "acme/other"
	gh.SetRepository("acme/other", map[string]any{})
	if err := d2.Handle(context.Background(), auditDelivery(t, "y")); err == nil || !errors.Is(err, webhooks.ErrPermanent) || !strings.Contains(err.Error(), "acme/other: the App is not installed on it") {
		t.Fatalf("a repository without the App: %v", err)
	}
	bad := auditDelivery(t, "z")
	bad.Body = []byte(`{"kind":"EventList","items":[{"auditID":1}]}`)
	d3, _, _, _ := driftSetup(t, reconcile.ModeDirect)
	if err := d3.Handle(context.Background(), bad); err == nil || !errors.Is(err, webhooks.ErrPermanent) {
		t.Fatalf("an undecodable body must be permanent: %v", err)
	}
}

func TestDriftTimersSurviveARestart(t *testing.T) {
	ctx := context.Background()
	d, _, remote, clk := driftSetup(t, reconcile.ModeDirect)
	path := filepath.Join(t.TempDir(), "drift.db")
	st, err := driftstate.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	d.State = st
	if err := d.Handle(ctx, auditDelivery(t, "batch-1")); err != nil {
		t.Fatal(err)
	}
	st.Close() // the process stops with the on-call yield's timer set

	// A new process: new state handle, new clone cache, same files. The yield ended while it was
	// down; its timer fires at start.
	st2, err := driftstate.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	d2 := &Drift{GitHub: d.GitHub, Repos: &repocache.Cache{Dir: t.TempDir()}, Repository: d.Repository, PolicyPath: d.PolicyPath,
		Mode: d.Mode, Author: d.Author, State: st2, Now: clk.now}
	clk.set(time.Date(2026, 11, 20, 13, 0, 0, 0, time.UTC))
	tip := remote.Run("rev-parse", "main")
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { d2.RunTimers(runCtx); close(done) }()
	deadline := time.Now().Add(20 * time.Second)
	for remote.Run("rev-parse", "main") == tip && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	<-done
	if got := remote.Run("log", "-1", "--format=%s", "main"); !strings.HasPrefix(got, "parley: resume Git's /spec/template/spec/containers/0/image") {
		t.Fatalf("after the restart main's tip is %q", got)
	}
}

// TestPushOfAPolicyChangeResumesAGate: the platform team takes the replicas away from the HPA in
// the policy; the push of that change judges the gated fields again and resumes Git's replicas,
// while the on-call engineer's image yield, still running, keeps its gate.
func TestPushOfAPolicyChangeResumesAGate(t *testing.T) {
	ctx := context.Background()
	d, _, remote, clk := driftSetup(t, reconcile.ModeDirect)
	if err := d.Handle(ctx, auditDelivery(t, "batch-1")); err != nil {
		t.Fatal(err)
	}
	bare := remote.Dir
	work := filepath.Join(t.TempDir(), "work")
	remote.Run("clone", "-q", bare, work)
	w := gittest.New(t, work)
	pol := filepath.Join(work, ".parley/policy.hcl")
	src, _ := os.ReadFile(pol)
	edited := strings.Replace(string(src), "  owner      = \"hpa\"\n", "", 1)
	edited = strings.Replace(edited, "  owner_when = contains(", "  # owner_when = contains(", 1)
	if edited == string(src) {
		t.Fatal("the demo policy no longer has the replicas owner this test removes")
	}
	os.WriteFile(pol, []byte(edited), 0o644)
	w.Run("commit", "-q", "-am", "Replicas are Git's again\n\nIntent: consistency\nMotivation: maintenance\n")
	w.Run("push", "-q", "origin", "HEAD:main")
	tip := remote.Run("rev-parse", "main")

	clk.set(time.Date(2026, 11, 20, 11, 30, 0, 0, time.UTC)) // the HPA's claim lapsed at 11:00
	p := &Pushes{PullRequests: &PullRequests{Installations: d.GitHub, Repos: d.Repos}, Drift: d}
	if err := p.Handle(ctx, store.Delivery{ID: "push-1", Event: "push", Body: pushEvent(t, bare, "refs/heads/main")}); err != nil {
		t.Fatal(err)
	}
	if got := remote.Run("log", "--format=%s", tip+"..main"); got != "parley: resume Git's /spec/replicas of Deployment prod/web" {
		t.Fatalf("after the policy push:\n%s", got)
	}
	kust := remote.Run("show", "main:clusters/prod/apps.yaml")
	if strings.Contains(kust, "- /spec/replicas") || !strings.Contains(kust, "containers/0/image") {
		t.Fatalf("gates after the push:\n%s", kust)
	}
	// The push of Parley's own commit judges again and writes nothing.
	tip = remote.Run("rev-parse", "main")
	if err := p.Handle(ctx, store.Delivery{ID: "push-2", Event: "push", Body: pushEvent(t, bare, "refs/heads/main")}); err != nil {
		t.Fatal(err)
	}
	if remote.Run("rev-parse", "main") != tip {
		t.Fatal("judging an unchanged branch again wrote")
	}
}

// TestUnmergedYieldIsWithdrawnFromItsPullRequest: in pull-request mode nobody merged the on-call
// engineer's image gate before the yield ended; Parley removes the gate on the branch and closes
// the pull request, which would otherwise land a stale gate when merged.
func TestUnmergedYieldIsWithdrawnFromItsPullRequest(t *testing.T) {
	ctx := context.Background()
	d, gh, remote, clk := driftSetup(t, reconcile.ModePullRequest)
	if err := d.Handle(ctx, auditDelivery(t, "batch-1")); err != nil {
		t.Fatal(err)
	}
	byHead := map[string]int{}
	for _, w := range gh.Writes() {
		if w.Operation == "pulls/create" {
			byHead[w.Body["head"].(string)] = 0
		}
	}
	if len(byHead) != 2 {
		t.Fatalf("pull requests opened: %v", byHead)
	}
	clk.set(time.Date(2026, 11, 20, 12, 6, 0, 0, time.UTC)) // the image yield ended at 12:05
	if err := d.fireDue(ctx); err != nil {
		t.Fatal(err)
	}
	var closed []string
	for _, w := range gh.Writes() {
		if w.Operation == "pulls/update" && w.Body["state"] == "closed" {
			closed = append(closed, w.Path)
		}
	}
	if len(closed) != 1 {
		t.Fatalf("pull requests closed: %v", closed)
	}
	var imageBranch string
	for head := range byHead {
		if strings.Contains(head, "containers") || strings.Contains(head, "image") {
			imageBranch = head
		}
	}
	if imageBranch == "" {
		t.Fatalf("no image branch among %v", byHead)
	}
	if remote.Run("rev-parse", imageBranch+"^{tree}") != remote.Run("rev-parse", "main^{tree}") {
		t.Fatal("the image branch still differs from main after the withdrawal")
	}
	if got := remote.Run("log", "-1", "--format=%s", imageBranch); got != "parley: resume Git's /spec/template/spec/containers/0/image of Deployment prod/web" {
		t.Fatalf("the image branch's tip: %q", got)
	}
	recs, _ := d.State.Verdicts(ctx, core.K8sField("apps", "Deployment", "prod", "web", "/spec/template/spec/containers/0/image"))
	if n := len(recs); n == 0 || !strings.Contains(recs[n-1].Note, "pull request closed") {
		t.Fatalf("the verdict record does not say the pull request was closed: %+v", recs)
	}
}

// The server gates a Deployment that only a chart in the repository renders in the HelmRelease
// that installs it, as parley ingest does: the rendering comes with the branch's snapshot.
func TestDriftGatesAChartRenderedObjectInItsHelmRelease(t *testing.T) {
	d, _, remote, _ := driftSetup(t, reconcile.ModeDirect)
	work := filepath.Join(t.TempDir(), "work")
	remote.Run("clone", "-q", remote.Dir, work)
	w := gittest.New(t, work)
	for p, c := range map[string]string{
		"charts/shop/Chart.yaml": "apiVersion: v2\nname: shop\nversion: 1.2.0\n",
		"charts/shop/templates/deployment.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Chart.Name }}-api\n" +
			"spec:\n  replicas: {{ .Values.replicaCount }}\n",
		"clusters/prod/shop.yaml": "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: shop\n  namespace: flux-system\n" +
			"spec:\n  targetNamespace: prod\n  chart:\n    spec:\n      chart: ./charts/shop\n      sourceRef:\n        kind: GitRepository\n        name: flux-system\n" +
			"  values:\n    replicaCount: 4\n",
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(work, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(work, p), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	w.Run("add", "-A")
	w.Run("commit", "-q", "-m", "Install the shop chart")
	w.Run("push", "-q", "origin", "HEAD:main")
	body := []byte(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[{"level":"Request","auditID":"shop-hpa-1","stage":"ResponseComplete",
"requestURI":"/apis/apps/v1/namespaces/prod/deployments/shop-api/scale","verb":"update","user":{"username":"system:serviceaccount:kube-system:horizontal-pod-autoscaler"},
"objectRef":{"resource":"deployments","namespace":"prod","name":"shop-api","apiGroup":"apps","apiVersion":"v1","subresource":"scale"},"responseStatus":{"metadata":{},"code":200},
"requestObject":{"kind":"Scale","apiVersion":"autoscaling/v1","metadata":{"name":"shop-api","namespace":"prod"},"spec":{"replicas":9}},
"requestReceivedTimestamp":"2026-11-20T10:05:00.000000Z","stageTimestamp":"2026-11-20T10:05:00.000000Z"}]}`)
	err := d.Handle(context.Background(), store.Delivery{Source: store.SourceK8sAudit, ID: "shop-1", Event: webhooks.EventName, Body: body,
		ReceivedAt: time.Date(2026, 11, 20, 10, 5, 30, 0, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	if got := remote.Run("log", "-1", "--format=%s", "main"); got != "parley: yield /spec/replicas of Deployment prod/shop-api to hpa" {
		t.Fatalf("main's tip: %q", got)
	}
	hr := remote.Run("show", "main:clusters/prod/shop.yaml")
	if !strings.Contains(hr, "driftDetection:") || !strings.Contains(hr, "- /spec/replicas") || !strings.Contains(hr, "name: shop-api") {
		t.Fatalf("the HelmRelease on main:\n%s", hr)
	}
}

// TestDriftFiresDueTimersBeforeJudgingABody: the on-call image yield ends at 12:05 and the timer
// loop has not run; at 13:00 a body of only a lease renewal arrives, which touches no field. The due
// timer fires before the body is judged: Git's image is resumed.
func TestDriftFiresDueTimersBeforeJudgingABody(t *testing.T) {
	d, _, remote, clk := driftSetup(t, reconcile.ModeDirect)
	ctx := context.Background()
	if err := d.Handle(ctx, auditDelivery(t, "batch-1")); err != nil {
		t.Fatal(err)
	}
	tip := remote.Run("rev-parse", "main")
	clk.set(time.Date(2026, 11, 20, 13, 0, 0, 0, time.UTC))
	body := `{"kind":"EventList","apiVersion":"audit.k8s.io/v1","metadata":{},"items":[{"level":"Metadata",
"auditID":"7c1e0a00-0000-4000-8000-0000000000aa","stage":"ResponseComplete",
"requestURI":"/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-scheduler","verb":"update",
"user":{"username":"system:kube-scheduler"},"objectRef":{"resource":"leases","namespace":"kube-system",
"name":"kube-scheduler","apiGroup":"coordination.k8s.io","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":200},
"requestReceivedTimestamp":"2026-11-20T13:00:00.000000Z","stageTimestamp":"2026-11-20T13:00:00.000000Z"}]}`
	del := store.Delivery{Source: store.SourceK8sAudit, ID: "leases", Event: webhooks.EventName, Body: []byte(body),
		ReceivedAt: clk.now()}
	if err := d.Handle(ctx, del); err != nil {
		t.Fatal(err)
	}
	if got := remote.Run("log", "--format=%s", tip+"..main"); got != "parley: resume Git's /spec/template/spec/containers/0/image of Deployment prod/web" {
		t.Fatalf("commits after the 13:00 body:\n%s", got)
	}
}

// TestDriftPutsAVetoToPeopleOnAPullRequest: the security admin tightens the consumer's IAM policy
// in the AWS console for a CVE. IAM is immutable: the change is vetoed and main keeps Git's value.
// The policy puts such a veto to people, so the App opens one pull request proposing the tightened
// policy, with the claim's why as trailers, asking the security leads. The same value again asks
// nobody twice; merged, the value is Git's like any other.
func TestDriftPutsAVetoToPeopleOnAPullRequest(t *testing.T) {
	ctx := context.Background()
	d, gh, remote, clk := driftSetup(t, reconcile.ModeDirect)
	work := filepath.Join(t.TempDir(), "work")
	remote.Run("clone", "-q", remote.Dir, work)
	w := gittest.New(t, work)
	if err := os.WriteFile(filepath.Join(work, ".parley/policy.hcl"), []byte(demo.VetoAskPolicy()), 0o644); err != nil {
		t.Fatal(err)
	}
	w.Run("commit", "-q", "-am", "Put vetoes of trusted CVE fixes to the security leads\n\nIntent: security\n")
	w.Run("push", "-q", "origin", "HEAD:main")
	tip := remote.Run("rev-parse", "main")

	body, err := os.ReadFile("../examples/drift/console-iam-cve.json")
	if err != nil {
		t.Fatal(err)
	}
	clk.set(time.Date(2026, 11, 20, 10, 31, 0, 0, time.UTC))
	deliver := func(id string, b []byte) {
		t.Helper()
		if err := d.Handle(ctx, store.Delivery{Source: store.SourceCloudTrail, ID: id, Event: webhooks.EventName, Body: b, ReceivedAt: clk.now()}); err != nil {
			t.Fatal(err)
		}
	}
	deliver("ct-1", body)
	if remote.Run("rev-parse", "main") != tip {
		t.Fatal("a vetoed value was written to main")
	}
	var opened []fakegithub.Write
	for _, wr := range gh.Writes() {
		if wr.Operation == "pulls/create" {
			opened = append(opened, wr)
		}
	}
	if len(opened) != 1 {
		t.Fatalf("pull requests opened: %d, want one", len(opened))
	}
	head, _ := opened[0].Body["head"].(string)
	prBody, _ := opened[0].Body["body"].(string)
	if !strings.HasPrefix(head, "parley/propose/") {
		t.Fatalf("the proposal's branch is %q", head)
	}
	for _, want := range []string{"@acme/security-leads: you are asked to decide", "security-admin changed this field", "motivation: cve",
		"Merge this pull request to make the value Git's", "Close it to keep the veto"} {
		if !strings.Contains(shown(t, prBody), want) {
			t.Errorf("the pull request's body lacks %q:\n%s", want, prBody)
		}
	}
	trailers := remote.Run("log", "-1", "--format=%(trailers:key=Intent,key=Motivation,key=Parley-Decision)", head)
	if trailers != "Intent: security\nMotivation: cve\nParley-Decision: veto" {
		t.Fatalf("the proposal's trailers:\n%s", trailers)
	}
	iam := core.TFField("infra/kafka", "aws_iam_role_policy.consumer", "/policy")
	last, _, _ := d.State.Last(ctx, iam)
	if last.Action != string(reconcile.ActionPropose) || last.PR == 0 || !strings.Contains(last.Note, "asking @acme/security-leads") {
		t.Fatalf("the recorded verdict does not say who was asked and where: %+v", last)
	}

	// The same value again, in a new event: people were asked already.
	again := []byte(strings.NewReplacer("c0ffee00-4242", "c0ffee00-4343", "10:30:00Z", "10:40:00Z").Replace(string(body)))
	clk.set(time.Date(2026, 11, 20, 10, 41, 0, 0, time.UTC))
	deliver("ct-2", again)
	n := 0
	for _, wr := range gh.Writes() {
		if wr.Operation == "pulls/create" || wr.Operation == "issues/create-comment" {
			n++
		}
	}
	if n != 1 || remote.Run("rev-parse", "main") != tip {
		t.Fatalf("the same veto was put to people again (%d pull requests and comments)", n)
	}

	// The security leads merge it: the value is Git's, with the claim's why as Git's claim.
	w.Run("fetch", "-q", "origin", head)
	w.Run("merge", "-q", "--ff-only", "FETCH_HEAD")
	w.Run("push", "-q", "origin", "HEAD:main")
	third := []byte(strings.NewReplacer("c0ffee00-4242", "c0ffee00-4444", "10:30:00Z", "10:50:00Z").Replace(string(body)))
	clk.set(time.Date(2026, 11, 20, 10, 51, 0, 0, time.UTC))
	deliver("ct-3", third)
	last, _, _ = d.State.Last(ctx, iam)
	if v := last.Verdict; v.Decision != core.DecisionEnforceGit || v.Winner == nil || v.Winner.Motivation.Kind != "cve" || v.Winner.Intent != "security" {
		t.Fatalf("after the merge: %s (%s), winner %+v", v.Decision, v.Rule, v.Winner)
	}
}
