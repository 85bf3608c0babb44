package app

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/parleyhq/parley/app/config"
	"github.com/parleyhq/parley/app/internal/repocache"
	"github.com/parleyhq/parley/internal/demo"
	"github.com/parleyhq/parley/internal/fakegithub"
	"github.com/parleyhq/parley/internal/gittest"
	"github.com/parleyhq/parley/reconcile"
	"github.com/parleyhq/parley/reconcile/events"
	"github.com/parleyhq/parley/webhooks"
	"github.com/parleyhq/parley/webhooks/store"
)

func TestRepoFromURL(t *testing.T) {
	for _, c := range []struct {
		url   string
		hosts []string
		want  string
	}{
		{"https://github.com/acme/prod-eu.git", nil, "acme/prod-eu"},
		{"https://github.com/acme/prod-eu", nil, "acme/prod-eu"},
		{"https://GitHub.com/acme/prod-eu/", nil, "acme/prod-eu"},
		{"git@github.com:acme/prod-eu.git", nil, "acme/prod-eu"},
		{"ssh://git@github.com/acme/prod-eu.git", nil, "acme/prod-eu"},
		{"ssh://git@ghe.example.com:2222/acme/app", []string{"ghe.example.com"}, "acme/app"},
		{"https://ghe.example.com/acme/app.git", []string{"ghe.example.com"}, "acme/app"},
		{"https://gitlab.com/acme/prod-eu.git", nil, ""},
		{"https://github.com/acme", nil, ""},
		{"https://github.com/acme/prod/extra", nil, ""},
		{"oci://ghcr.io/acme/charts", nil, ""},
		{"ftp://github.com/acme/x", nil, ""},
		{"acme/prod-eu", nil, ""},
		{"", nil, ""},
	} {
		got, ok := repoFromURL(c.url, c.hosts)
		if got != c.want || ok != (c.want != "") {
			t.Errorf("repoFromURL(%q, %v) = %q, %v; want %q", c.url, c.hosts, got, ok, c.want)
		}
	}
}

// hostDemo hosts a copy of the demo repository as name on the fake GitHub, installed under inst.
func hostDemo(t *testing.T, gh *fakegithub.Server, name string, inst int64) *gittest.Runner {
	t.Helper()
	work := filepath.Join(t.TempDir(), "work")
	if _, err := demo.Build(work); err != nil {
		t.Fatal(err)
	}
	bare := filepath.Join(t.TempDir(), strings.ReplaceAll(name, "/", "-")+".git")
	gittest.New(t, work).Run("clone", "-q", "--bare", work, bare)
	gh.SetInstallation(name, inst)
	gh.SetRepository(name, map[string]any{"clone_url": bare, "default_branch": "main"})
	return gittest.New(t, bare)
}

// TestDriftRoutesEventsToTheRepositoryThatAppliesThem: one server, three GitOps repositories (two
// clusters' and one AWS account's), each judged under its own policy, with its own drift state and
// timers. Audit events go by the cluster they were posted for, an Argo CD notification by its
// Application's repoURL, CloudTrail records by their account.
func TestDriftRoutesEventsToTheRepositoryThatAppliesThem(t *testing.T) {
	ctx := context.Background()
	gh, app, _ := fakeApp(t)
	eu := hostDemo(t, gh, "acme/prod-eu", 5)
	us := hostDemo(t, gh, "acme/prod-us", 6)
	aws := hostDemo(t, gh, "acme/aws", 7)
	gh.SetRepository("acme/upstream", map[string]any{"clone_url": "/nonexistent", "default_branch": "main"}) // not installed

	// prod-us takes the replicas away from the HPA in its own policy.
	work := filepath.Join(t.TempDir(), "us")
	us.Run("clone", "-q", us.Dir, work)
	pol := filepath.Join(work, ".parley/policy.hcl")
	src, _ := os.ReadFile(pol)
	edited := strings.Replace(string(src), "  owner      = \"hpa\"\n", "", 1)
	edited = strings.Replace(edited, "  owner_when = contains(", "  # owner_when = contains(", 1)
	if edited == string(src) {
		t.Fatal("the demo policy no longer has the replicas owner this test removes")
	}
	os.WriteFile(pol, []byte(edited), 0o644)
	w := gittest.New(t, work)
	w.Run("commit", "-q", "-am", "Replicas are Git's in prod-us\n\nIntent: consistency\nMotivation: maintenance\n")
	w.Run("push", "-q", "origin", "HEAD:main")

	dir := t.TempDir()
	clk := &clockT{t: time.Date(2026, 11, 20, 10, 6, 0, 0, time.UTC)}
	d := &Drift{GitHub: InstallationAuth{App: app, Base: gh.Client().Transport}, Repos: &repocache.Cache{Dir: t.TempDir()},
		Clusters:  map[string]config.RepoRef{"eu-1": {Repository: "acme/prod-eu"}, "us-1": {Repository: "acme/prod-us"}},
		Accounts:  map[string]config.RepoRef{"123456789012": {Repository: "acme/aws"}},
		StatePath: func(repo string) string { return repoStatePath(dir, repo) }, PolicyPath: ".parley/policy.hcl",
		Mode: reconcile.ModeDirect, Now: clk.now, Author: object.Signature{Name: "Parley", Email: "parley@users.noreply.github.com"}}
	defer d.Close()
	tips := func() [3]string {
		return [3]string{eu.Run("rev-parse", "main"), us.Run("rev-parse", "main"), aws.Run("rev-parse", "main")}
	}
	start := tips()

	// The HPA and the on-call engineer in cluster eu-1: both yield in prod-eu, nothing elsewhere.
	del := auditDelivery(t, "eu-batch")
	del.Scope = "eu-1"
	if err := d.Handle(ctx, del); err != nil {
		t.Fatal(err)
	}
	if got := eu.Run("log", "--format=%s", start[0]+"..main"); got != "parley: yield /spec/template/spec/containers/0/image of Deployment prod/web to oncall\n"+
		"parley: yield /spec/replicas of Deployment prod/web to hpa" {
		t.Fatalf("prod-eu:\n%s", got)
	}
	if now := tips(); now[1] != start[1] || now[2] != start[2] {
		t.Fatal("an eu-1 event wrote to another repository")
	}

	// The same changes in cluster us-1, judged under prod-us's policy: the replicas are Git's
	// there, so only the on-call image yields.
	del = auditDelivery(t, "us-batch")
	del.Scope = "us-1"
	usBefore := us.Run("rev-parse", "main")
	if err := d.Handle(ctx, del); err != nil {
		t.Fatal(err)
	}
	if got := us.Run("log", "--format=%s", usBefore+"..main"); got != "parley: yield /spec/template/spec/containers/0/image of Deployment prod/web to oncall" {
		t.Fatalf("prod-us:\n%s", got)
	}

	// Argo CD: the Application reads a repository Parley does not serve for its values and
	// prod-us for its manifests; no cluster in the path.
	argo := readTestdataFile(t, "../reconcile/events/testdata/argocd/out-of-sync.json")
	argo = bytes.Replace(argo, []byte(`"project": "default"}`), []byte(`"project": "default",
	  "sources": [{"repoURL": "https://github.com/acme/upstream.git", "path": "deploy"}, {"repoURL": "git@github.com:acme/prod-us.git", "path": "apps"}]}`), 1)
	if err := d.Handle(ctx, store.Delivery{Source: store.SourceArgoCD, ID: "argo-1", Event: webhooks.EventName, Body: argo, ReceivedAt: clk.now()}); err != nil {
		t.Fatal(err)
	}
	// CloudTrail: the scaling agent's call in account 123456789012 is judged in acme/aws.
	ct := readTestdataFile(t, "../reconcile/events/testdata/cloudtrail/eventbridge-set-desired-capacity.json")
	if err := d.Handle(ctx, store.Delivery{Source: store.SourceCloudTrail, ID: "ct-1", Event: webhooks.EventName, Body: ct, ReceivedAt: clk.now()}); err != nil {
		t.Fatal(err)
	}
	taken := func(repo, source string, body []byte) bool {
		t.Helper()
		ids, _, err := events.EventIDs(source, body)
		if err != nil || len(ids) == 0 {
			t.Fatalf("%s: %v", source, err)
		}
		rd, err := d.repo(ctx, repo, "")
		if err != nil {
			t.Fatal(err)
		}
		fresh, err := rd.state.Fresh(ctx, []string{source + "/" + ids[0]})
		if err != nil {
			t.Fatal(err)
		}
		return len(fresh) == 0
	}
	for _, c := range []struct {
		source string
		body   []byte
		in     string
	}{{store.SourceArgoCD, argo, "acme/prod-us"}, {store.SourceCloudTrail, ct, "acme/aws"}} {
		for _, repo := range []string{"acme/prod-eu", "acme/prod-us", "acme/aws"} {
			if got := taken(repo, c.source, c.body); got != (repo == c.in) {
				t.Errorf("%s event taken in by %s: %v (want only %s)", c.source, repo, got, c.in)
			}
		}
	}

	// Each repository has its own state file, bound to it; a restart finds them all.
	found, err := repoStates(dir)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(found)
	if want := []string{"acme/aws", "acme/prod-eu", "acme/prod-us"}; !slices.Equal(found, want) {
		t.Fatalf("state files for %v, want %v", found, want)
	}

	// The on-call yields end at 12:05: the timers resume Git's image in both clusters' repositories.
	clk.set(time.Date(2026, 11, 20, 12, 6, 0, 0, time.UTC))
	if err := d.fireDue(ctx); err != nil {
		t.Fatal(err)
	}
	for name, r := range map[string]*gittest.Runner{"prod-eu": eu, "prod-us": us} {
		if got := r.Run("log", "-1", "--format=%s", "main"); got != "parley: resume Git's /spec/template/spec/containers/0/image of Deployment prod/web" {
			t.Errorf("%s after the yield's end: %q", name, got)
		}
	}

	// What cannot be routed is a permanent error that says what to configure.
	for _, c := range []struct {
		del  store.Delivery
		want string
	}{
		{store.Delivery{Source: store.SourceK8sAudit, ID: "gone", Scope: "ap-1", Body: del.Body}, `cluster "ap-1", which the configuration no longer names`},
		{store.Delivery{Source: store.SourceK8sAudit, ID: "nowhere", Body: del.Body}, "no repository to judge it in (nothing routes it): set gitops_repository"},
		{store.Delivery{Source: store.SourceArgoCD, ID: "upstream", Body: bytes.Replace(argo, []byte("git@github.com:acme/prod-us.git"), []byte("https://gitlab.com/acme/x"), 1)},
			"acme/upstream: the App is not installed on it"},
	} {
		err := d.Handle(ctx, c.del)
		if !errors.Is(err, webhooks.ErrPermanent) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: want a permanent error containing %q, got %v", c.del.ID, c.want, err)
		}
	}
}

func readTestdataFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestServeRoutesClusterEventsToTheirRepositories: parley serve with two clusters and no default
// repository. Audit events posted to /events/k8s-audit/<cluster> gate in that cluster's
// repository; an unknown cluster is refused at the door; an event posted without a cluster has
// nowhere to go and is dead-lettered with the reason.
func TestServeRoutesClusterEventsToTheirRepositories(t *testing.T) {
	ctx := context.Background()
	gh, _, pemKey := fakeApp(t)
	eu := hostDemo(t, gh, "acme/prod-eu", 5)
	us := hostDemo(t, gh, "acme/prod-us", 6)
	dir := t.TempDir()
	env := map[string]string{"PARLEY_APP_ID": "99", "PARLEY_PRIVATE_KEY": string(pemKey), "PARLEY_WEBHOOK_SECRETS": "hook",
		"PARLEY_GITHUB_URL": gh.URL + "/api/v3/", "PARLEY_STORE": filepath.Join(dir, "parley.db"), "PARLEY_LISTEN": "127.0.0.1:0",
		"PARLEY_KUBE_AUDIT_TOKEN": "audit-token", "PARLEY_WRITE_MODE": "direct", "PARLEY_MAX_ATTEMPTS": "1",
		"PARLEY_CLUSTERS": "eu-1=acme/prod-eu, us-1=acme/prod-us@main"}
	srv, base, _ := runServe(t, env)

	// The example's changes, made a minute ago: the server judges on its own clock.
	at := time.Now().UTC().Add(-time.Minute).Format("2006-01-02T15:04:05")
	body := regexp.MustCompile(`2026-11-20T\d\d:\d\d:\d\d`).ReplaceAll(readTestdataFile(t, "../examples/drift/k8s-audit.json"), []byte(at))
	post := func(path string, body []byte) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, base+path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer audit-token")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	euStart, usStart := eu.Run("rev-parse", "main"), us.Run("rev-parse", "main")
	if code := post("/events/k8s-audit/eu-1", body); code != http.StatusAccepted {
		t.Fatalf("eu-1: %d", code)
	}
	// The same audit IDs from the other cluster would be one delivery (the store dedupes by body):
	// the us-1 cluster's own events have their own IDs.
	usBody := bytes.ReplaceAll(body, []byte(`"auditID": "`), []byte(`"auditID": "us-`))
	if code := post("/events/k8s-audit/us-1", usBody); code != http.StatusAccepted {
		t.Fatalf("us-1: %d", code)
	}
	if code := post("/events/k8s-audit/ap-9", body); code != http.StatusNotFound {
		t.Fatalf("an unknown cluster: %d, want 404", code)
	}
	apBody := bytes.ReplaceAll(body, []byte(`"auditID": "`), []byte(`"auditID": "ap-`))
	if code := post("/events/k8s-audit", apBody); code != http.StatusAccepted {
		t.Fatalf("unscoped: %d", code)
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		dead, _ := srv.Store().DeadLetters(ctx)
		if eu.Run("rev-list", "--count", euStart+"..main") == "2" && us.Run("rev-list", "--count", usStart+"..main") == "2" && len(dead) == 1 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	for name, c := range map[string]struct {
		r     *gittest.Runner
		start string
	}{"prod-eu": {eu, euStart}, "prod-us": {us, usStart}} {
		if got := c.r.Run("log", "--format=%s", c.start+"..main"); got != "parley: yield /spec/template/spec/containers/0/image of Deployment prod/web to oncall\n"+
			"parley: yield /spec/replicas of Deployment prod/web to hpa" {
			t.Errorf("%s:\n%s", name, got)
		}
	}
	dead, err := srv.Store().DeadLetters(ctx)
	if err != nil || len(dead) != 1 || dead[0].Scope != "" || !strings.Contains(dead[0].LastError, "no repository to judge it in") {
		t.Fatalf("dead letters %v: %+v", err, dead)
	}
	for _, repo := range []string{"acme/prod-eu", "acme/prod-us"} {
		if _, err := os.Stat(repoStatePath(dir, repo)); err != nil {
			t.Errorf("%s has no drift state of its own: %v", repo, err)
		}
	}
}

// TestServeClusterEventSecrets: each cluster's own event secret posts only for that cluster
// (403 for another, even one it could name), and a secret two clusters share is accepted with a
// warning at start that does not print it.
func TestServeClusterEventSecrets(t *testing.T) {
	_, _, pemKey := fakeApp(t)
	dir := t.TempDir()
	secretFile := func(name, v string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(v+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	eu, us := secretFile("eu", "eu-audit-token"), secretFile("us", "us-audit-token")
	start := func(files string) (string, string) {
		t.Helper()
		env := map[string]string{"PARLEY_APP_ID": "99", "PARLEY_PRIVATE_KEY": string(pemKey), "PARLEY_WEBHOOK_SECRETS": "hook",
			"PARLEY_STORE": filepath.Join(t.TempDir(), "parley.db"), "PARLEY_LISTEN": "127.0.0.1:0", "PARLEY_MAX_ATTEMPTS": "1",
			"PARLEY_CLUSTERS": "eu-1=acme/prod-eu, us-1=acme/prod-us", "PARLEY_CLUSTER_EVENT_SECRET_FILES": files,
			// The example audit body is years old: this test is about scopes, not freshness.
			"PARLEY_EVENT_MAX_AGE": "0"}
		cfg, err := config.Load("", func(k string) string { return env[k] })
		if err != nil {
			t.Fatal(err)
		}
		var logs lockedLog
		ctx, cancel := context.WithCancel(context.Background())
		srv, err := NewServer(ctx, cfg, slog.New(slog.NewJSONHandler(&logs, nil)))
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		addr, done := make(chan string, 1), make(chan error, 1)
		go func() { done <- srv.Run(ctx, func(a string) { addr <- a }) }()
		t.Cleanup(func() { cancel(); <-done })
		return "http://" + <-addr, logs.String()
	}
	base, logs := start("eu-1=" + eu + ",us-1=" + us)
	if strings.Contains(logs, "shared event secret") {
		t.Errorf("a warning for distinct secrets:\n%s", logs)
	}
	body := readTestdataFile(t, "../examples/drift/k8s-audit.json")
	post := func(path, token string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, base+path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post("/events/k8s-audit/us-1", "eu-audit-token"); code != http.StatusForbidden {
		t.Errorf("eu-1's token for us-1: %d, want 403", code)
	}
	if code := post("/events/k8s-audit", "eu-audit-token"); code != http.StatusForbidden {
		t.Errorf("eu-1's token without a cluster: %d, want 403", code)
	}
	// us-1 may post any body to its own path, eu-1's events included; that must not make
	// eu-1's own post of them a duplicate judged under us-1 only.
	if code := post("/events/k8s-audit/us-1", "us-audit-token"); code != http.StatusAccepted {
		t.Errorf("us-1's token for us-1: %d, want 202", code)
	}
	if code := post("/events/k8s-audit/eu-1", "eu-audit-token"); code != http.StatusAccepted {
		t.Errorf("eu-1's token for eu-1, after us-1 posted the same body: %d, want 202", code)
	}
	if code := post("/events/k8s-audit/eu-1", "eu-audit-token"); code != http.StatusOK {
		t.Errorf("eu-1's redelivery: %d, want 200 (duplicate)", code)
	}
	_, logs = start("eu-1=" + eu + ",us-1=" + eu)
	if !strings.Contains(logs, `shared event secret`) || !strings.Contains(logs, `cluster \"eu-1\" and cluster \"us-1\" share one event secret`) || strings.Contains(logs, "eu-audit-token") {
		t.Errorf("the start log does not warn of the shared secret (or prints it):\n%s", logs)
	}
}

// lockedLog is a log sink the server's goroutines may write while the test reads it.
type lockedLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
