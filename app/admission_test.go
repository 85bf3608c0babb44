package app

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/parleyhq/parley/app/config"
	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/internal/gittest"
	"github.com/parleyhq/parley/reconcile"
	"github.com/parleyhq/parley/webhooks/guard"
	"github.com/parleyhq/parley/webhooks/store"
)

const (
	admissionToken = "apiserver-admission-token-0123456789"
	hpaSA          = "system:serviceaccount:kube-system:horizontal-pod-autoscaler"
	costSA         = "system:serviceaccount:finops:cost-optimizer"
	fluxSA         = "system:serviceaccount:flux-system:kustomize-controller"
)

var webReplicas = core.K8sField("apps", "Deployment", "prod", "web", "/spec/replicas")

// admissionSetup serves /admission/prod over the demo repository (acme/infra), in mode.
func admissionSetup(t *testing.T, mode string) (*httptest.Server, *Admission, *Drift) {
	t.Helper()
	srv, h, d, _ := admissionSetupRemote(t, mode)
	return srv, h, d
}

// admissionSetupRemote is admissionSetup with the repository's bare remote.
func admissionSetupRemote(t *testing.T, mode string) (*httptest.Server, *Admission, *Drift, *gittest.Runner) {
	t.Helper()
	srv, h, d, remote, _ := admissionSetupAll(t, mode)
	return srv, h, d, remote
}

// admissionSetupClock is admissionSetup with its clock.
func admissionSetupClock(t *testing.T, mode string) (*httptest.Server, *Admission, *Drift, *clockT) {
	t.Helper()
	srv, h, d, _, clk := admissionSetupAll(t, mode)
	return srv, h, d, clk
}

func admissionSetupAll(t *testing.T, mode string) (*httptest.Server, *Admission, *Drift, *gittest.Runner, *clockT) {
	t.Helper()
	d, _, remote, clk := driftSetup(t, reconcile.ModeDirect)
	m, err := NewAdmissionMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	h := &Admission{Drift: d, Now: clk.now, Metrics: m, Budget: time.Minute, MaxAge: time.Minute, // the first review clones the repository
		Clusters: map[string]config.Admission{"prod": {Mode: mode, Token: config.NewSecret(admissionToken), GitOpsUsers: config.DefaultGitOpsUsers}},
		Routes:   map[string]config.RepoRef{"prod": {Repository: "acme/infra"}},
		// As serve runs it: reviews are judged on warm-stack workers when one is idle.
		warm: newWarmStacks(0)}
	h.warm.Start()
	t.Cleanup(h.warm.Close)
	mux := http.NewServeMux()
	mux.Handle(AdmissionPrefix, h)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, h, d, remote, clk
}

// reviewOf builds an AdmissionReview as the API server sends it.
func reviewOf(uid, user, sub string, obj, old string, dryRun bool) string {
	req := &admissionv1.AdmissionRequest{UID: types.UID("uid-" + uid), Operation: admissionv1.Update, Name: "web", Namespace: "prod",
		Kind:     metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"},
		Resource: metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, SubResource: sub,
		UserInfo: authnv1.UserInfo{Username: user, Groups: []string{"system:authenticated"}},
		Object:   runtime.RawExtension{Raw: []byte(obj)}, OldObject: runtime.RawExtension{Raw: []byte(old)}, DryRun: &dryRun}
	if sub == "scale" {
		req.Kind = metav1.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"}
	}
	b, _ := json.Marshal(admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{Kind: "AdmissionReview", APIVersion: "admission.k8s.io/v1"}, Request: req})
	return string(b)
}

func scaleReview(uid, user string, from, to int, dryRun bool) string {
	sc := `{"kind":"Scale","apiVersion":"autoscaling/v1","metadata":{"name":"web","namespace":"prod","resourceVersion":"41"},"spec":{"replicas":%d}}`
	return reviewOf(uid, user, "scale", fmt.Sprintf(sc, to), fmt.Sprintf(sc, from), dryRun)
}

// deploymentReview is an update of prod/web's image (from Git's 1.41.0) with the given annotations.
func deploymentReview(uid, user, image, annotations string) string {
	dep := `{"kind":"Deployment","apiVersion":"apps/v1","metadata":{"name":"web","namespace":"prod","resourceVersion":"41","annotations":{%s}},` +
		`"spec":{"replicas":3,"template":{"spec":{"containers":[{"name":"web","image":"registry.example.com/shop/web:%s"}]}}}}`
	return reviewOf(uid, user, "", fmt.Sprintf(dep, annotations, image), fmt.Sprintf(dep, "", "1.41.0"), false)
}

var webImage = core.K8sField("apps", "Deployment", "prod", "web", "/spec/template/spec/containers/0/image")

const hotfix = `"parley.dev/intent":"availability","parley.dev/motivation":"incident INC-4300 severity=high","parley.dev/expires":"2h"`

func admit(t *testing.T, srv *httptest.Server, token, body string) (int, *admissionv1.AdmissionResponse, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+AdmissionPrefix+"prod", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	var rev admissionv1.AdmissionReview
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(b.Bytes(), &rev); err != nil {
			t.Fatalf("answer %s: %v", b.String(), err)
		}
		if rev.Kind != "AdmissionReview" || rev.APIVersion != "admission.k8s.io/v1" || rev.Response == nil {
			t.Fatalf("answer %s", b.String())
		}
	}
	return resp.StatusCode, rev.Response, b.String()
}

func standing(t *testing.T, d *Drift, f core.Field) []core.Claim {
	t.Helper()
	st, err := d.State.Standing(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func decisions(h *Admission, decision string) float64 {
	return testutil.ToFloat64(h.Metrics.decisions.WithLabelValues("prod", decision, "false"))
}

func TestAdmissionDeniesTheCostOptimizerDuringAnIncident(t *testing.T) {
	srv, h, d := admissionSetup(t, "deny")

	// On call rolls out a hotfix for an incident, declared in the write's annotations: allowed,
	// and recorded as a live claim until its expiry.
	code, resp, raw := admit(t, srv, admissionToken, deploymentReview("oncall-1", "alice@parley.example", "1.41.4-hotfix", hotfix))
	if code != http.StatusOK || !resp.Allowed || string(resp.UID) != "uid-oncall-1" || len(resp.Warnings) != 0 {
		t.Fatalf("on-call: %d %s", code, raw)
	}
	st := standing(t, d, webImage)
	if len(st) != 1 || st[0].Actor.Name != "oncall" || st[0].Motivation.Kind != "incident" || !st[0].Expires.Equal(clockStart.Add(2*time.Hour)) ||
		st[0].Evidence.Source != reconcile.EvidenceProposal || st[0].Evidence.EventIDs[0] != "admission/prod/uid-oncall-1" {
		t.Fatalf("standing after on-call's patch: %+v", st)
	}

	// The cost optimizer scales prod/web down meanwhile: denied, and the message says who holds
	// the field and why (the HPA owns it; the cost optimizer is confined).
	code, resp, raw = admit(t, srv, admissionToken, scaleReview("cost-1", costSA, 3, 2, false))
	if code != http.StatusOK || resp.Allowed || resp.Result == nil || resp.Result.Code != http.StatusForbidden {
		t.Fatalf("cost optimizer: %d %s", code, raw)
	}
	msg := resp.Result.Message
	for _, want := range []string{"k8s:apps/Deployment/prod/web#/spec/replicas", "cost-optimizer <k8s-user:" + costSA + "> wants 2", "hpa is the standing owner"} {
		if !strings.Contains(msg, want) {
			t.Errorf("denial message lacks %q:\n%s", want, msg)
		}
	}
	if st := standing(t, d, webReplicas); len(st) != 0 {
		t.Fatalf("a denied write was recorded: %+v", st)
	}
	if decisions(h, admDenied) != 1 || decisions(h, admAllowed) != 1 {
		t.Fatalf("counted: denied %v, allowed %v", decisions(h, admDenied), decisions(h, admAllowed))
	}
}

func TestAdmissionWarnModeAllowsWithAWarning(t *testing.T) {
	srv, h, d := admissionSetup(t, "warn")
	code, resp, raw := admit(t, srv, admissionToken, scaleReview("cost-1", costSA, 3, 2, false))
	if code != http.StatusOK || !resp.Allowed || resp.Result != nil || len(resp.Warnings) != 1 {
		t.Fatalf("cost optimizer in warn mode: %d %s", code, raw)
	}
	if w := resp.Warnings[0]; w != "parley: /spec/replicas of Deployment prod/web: yield (owner.replicas), held by its owner hpa" {
		t.Fatalf("warning %q", w)
	}
	if st := standing(t, d, webReplicas); len(st) != 0 {
		t.Fatalf("a refused write was recorded as a claim: %+v", st)
	}
	if decisions(h, admWarned) != 1 {
		t.Fatalf("warned: %v", decisions(h, admWarned))
	}
}

func TestAdmissionFieldBlockModeOverridesTheClusters(t *testing.T) {
	srv, h, _, remote := admissionSetupRemote(t, "warn")
	h.MaxAge = 0 // read the policy as pushed
	if _, resp, raw := admit(t, srv, admissionToken, scaleReview("cost-1", costSA, 3, 2, false)); resp == nil || !resp.Allowed {
		t.Fatalf("warn mode: %s", raw)
	}
	// The replicas block says deny: the cluster still warns elsewhere, this field is enforced.
	work := filepath.Join(t.TempDir(), "work")
	remote.Run("clone", "-q", remote.Dir, work)
	w := gittest.New(t, work)
	pol := filepath.Join(work, ".parley/policy.hcl")
	src, _ := os.ReadFile(pol)
	edited := strings.Replace(string(src), "  owner      = \"hpa\"\n", "  owner      = \"hpa\"\n  admission  = \"deny\"\n", 1)
	if edited == string(src) {
		t.Fatal("the demo policy no longer has the replicas owner line")
	}
	os.WriteFile(pol, []byte(edited), 0o644)
	w.Run("commit", "-q", "-am", "Enforce the replicas' owner at admission\n\nIntent: reliability\nMotivation: maintenance\n")
	w.Run("push", "-q", "origin", "HEAD:main")
	if _, resp, raw := admit(t, srv, admissionToken, scaleReview("cost-2", costSA, 3, 2, false)); resp == nil || resp.Allowed {
		t.Fatalf("the field block's deny: %s", raw)
	}
}

func TestAdmissionOwnerScalingIsAllowedAndRecorded(t *testing.T) {
	srv, h, d := admissionSetup(t, "deny")
	code, resp, raw := admit(t, srv, admissionToken, scaleReview("hpa-1", hpaSA, 3, 7, false))
	if code != http.StatusOK || !resp.Allowed || len(resp.Warnings) != 0 {
		t.Fatalf("hpa: %d %s", code, raw)
	}
	if st := standing(t, d, webReplicas); len(st) != 1 || st[0].Actor.Name != "hpa" || st[0].Value.String() != "7" {
		t.Fatalf("standing: %+v", st)
	}
	if decisions(h, admAllowed) != 1 {
		t.Fatalf("allowed: %v", decisions(h, admAllowed))
	}
}

func TestAdmissionDryRunIsJudgedNotRecorded(t *testing.T) {
	srv, h, d := admissionSetup(t, "deny")
	code, resp, raw := admit(t, srv, admissionToken, scaleReview("hpa-dry", hpaSA, 3, 7, true))
	if code != http.StatusOK || !resp.Allowed {
		t.Fatalf("dry run: %d %s", code, raw)
	}
	if st := standing(t, d, webReplicas); len(st) != 0 {
		t.Fatalf("a dry run left a claim: %+v", st)
	}
	if n := testutil.ToFloat64(h.Metrics.decisions.WithLabelValues("prod", admAllowed, "true")); n != 1 {
		t.Fatalf("dry runs allowed: %v", n)
	}
	// A dry run of a refused write is denied like the write would be.
	if _, resp, raw := admit(t, srv, admissionToken, scaleReview("cost-dry", costSA, 3, 2, true)); resp == nil || resp.Allowed {
		t.Fatalf("dry run of a refused write: %s", raw)
	}
}

func TestAdmissionNeverDeniesTheGitOpsControllers(t *testing.T) {
	srv, h, d := admissionSetup(t, "deny")
	// Flux writes replicas 2, which the cost optimizer would be denied: Git's own claim (a
	// merged change), never denied here; the drift loop and the gates settle the rest.
	code, resp, raw := admit(t, srv, admissionToken, scaleReview("flux-1", fluxSA, 3, 2, false))
	if code != http.StatusOK || !resp.Allowed || len(resp.Warnings) != 0 {
		t.Fatalf("flux: %d %s", code, raw)
	}
	if decisions(h, admGitOps) != 1 {
		t.Fatalf("gitops: %v", decisions(h, admGitOps))
	}
	if st := standing(t, d, webReplicas); len(st) != 0 {
		t.Fatalf("standing: %+v", st)
	}
}

func TestAdmissionAllowsObjectsNoPolicyCovers(t *testing.T) {
	srv, h, _ := admissionSetup(t, "deny")
	cm := `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"web","namespace":"prod"},"data":{"a":"%s"}}`
	body := strings.Replace(reviewOf("cm-1", costSA, "", fmt.Sprintf(cm, "2"), fmt.Sprintf(cm, "1"), false),
		`"resource":{"group":"apps","version":"v1","resource":"deployments"}`, `"resource":{"group":"","version":"v1","resource":"configmaps"}`, 1)
	code, resp, raw := admit(t, srv, admissionToken, body)
	if code != http.StatusOK || !resp.Allowed || len(resp.Warnings) != 0 {
		t.Fatalf("configmap: %d %s", code, raw)
	}
	if decisions(h, admUncovered) != 1 {
		t.Fatalf("uncovered: %v", decisions(h, admUncovered))
	}
}

func TestAdmissionAuthenticatesTheAPIServer(t *testing.T) {
	srv, h, d := admissionSetup(t, "deny")
	body := scaleReview("hpa-1", hpaSA, 3, 7, false)
	for _, tok := range []string{"", "wrong-token"} {
		// Anyone reaching the endpoint could otherwise record claims in any user's name.
		if code, _, raw := admit(t, srv, tok, body); code != http.StatusUnauthorized {
			t.Fatalf("token %q: %d %s", tok, code, raw)
		}
	}
	if st := standing(t, d, webReplicas); len(st) != 0 {
		t.Fatalf("an unauthenticated review was recorded: %+v", st)
	}
	if decisions(h, admRejected) != 2 {
		t.Fatalf("rejected: %v", decisions(h, admRejected))
	}
	// An explicitly unauthenticated cluster (a managed one) is served without credentials.
	h.Clusters["prod"] = config.Admission{Mode: "deny", Unauthenticated: true}
	if code, resp, raw := admit(t, srv, "", body); code != http.StatusOK || !resp.Allowed {
		t.Fatalf("unauthenticated cluster: %d %s", code, raw)
	}
}

// TestAdmissionWrongCredentialsThrottledAndHeld: the admission listener had no budget of failed
// authentications, so a client guessing tokens had each guess answered at once (issue 34's
// admtokens: thousands of 401s a second on the API server's own door). Now, past the budget, a
// wrong token is answered 429 with Retry-After after its hold, while the API server's valid
// token from the same address is judged at once, never refused nor held.
func TestAdmissionWrongCredentialsThrottledAndHeld(t *testing.T) {
	srv, h, _ := admissionSetup(t, "deny")
	holding := make(chan time.Duration, 1)
	release := make(chan struct{})
	h.Failures = guard.NewFailures(guard.FailuresConfig{PerMinute: 1, Burst: 1,
		Sleep: func(ctx context.Context, d time.Duration) {
			holding <- d
			select {
			case <-release:
			case <-ctx.Done():
			}
		}})
	body := scaleReview("hpa-1", hpaSA, 3, 7, false)
	if code, _, raw := admit(t, srv, "wrong-token", body); code != http.StatusUnauthorized {
		t.Fatalf("the first wrong token: %d %s, want 401 (within the budget of 1)", code, raw)
	}
	type answer struct {
		code int
		raw  string
	}
	held := make(chan answer, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+AdmissionPrefix+"prod", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer wrong-again")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			held <- answer{-1, err.Error()}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		held <- answer{resp.StatusCode, resp.Header.Get("Retry-After") + " " + string(b)}
	}()
	select {
	case d := <-holding:
		if d != guard.DefaultHold {
			t.Errorf("held %s, want %s", d, guard.DefaultHold)
		}
	case a := <-held:
		t.Fatalf("the second wrong token was answered without a hold: %d %s", a.code, a.raw)
	case <-time.After(20 * time.Second):
		t.Fatal("the second wrong token was neither held nor answered")
	}
	if code, resp, raw := admit(t, srv, admissionToken, body); code != http.StatusOK || !resp.Allowed {
		t.Fatalf("the API server's token while a wrong one from its address is held: %d %s, want judged", code, raw)
	}
	close(release)
	if a := <-held; a.code != http.StatusTooManyRequests || !strings.HasPrefix(a.raw, "60 ") || !strings.Contains(a.raw, "too many failed authentications") {
		t.Fatalf("the held wrong token: %d %s, want 429 with Retry-After 60", a.code, a.raw)
	}
	if code, resp, raw := admit(t, srv, admissionToken, body); code != http.StatusOK || !resp.Allowed {
		t.Fatalf("the API server's token after its address was throttled: %d %s, want judged", code, raw)
	}
}

func TestAdmissionRejectsWhatIsNoReview(t *testing.T) {
	srv, h, d := admissionSetup(t, "deny")
	// A review naming a key twice: encoding/json would judge the cost optimizer's scale to 2 as
	// the HPA's (the last "username"), or the scale to 7 (the last "spec").
	twoUsers := strings.Replace(scaleReview("dup-1", costSA, 8, 2, false), `"username":"`+costSA+`"`, `"username":"`+costSA+`","username":"`+hpaSA+`"`, 1)
	twoSpecs := strings.Replace(scaleReview("dup-2", costSA, 8, 2, false), `"spec":{"replicas":2}`, `"spec":{"replicas":2},"spec":{"replicas":7}`, 1)
	for body, want := range map[string]string{
		`{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1"}`: "admission review: no request",
		`not json`: "admission review: invalid JSON",
		twoUsers:   `admission review: duplicate key \"username\" in the object at $.request.userInfo`,
		twoSpecs:   `admission review: duplicate key \"spec\" in the object at $.request.object`,
	} {
		code, _, raw := admit(t, srv, admissionToken, body)
		if code != http.StatusBadRequest || !strings.Contains(raw, want) {
			t.Errorf("%q: %d %s; want 400 with %s", body, code, raw, want)
		}
	}
	if st := standing(t, d, webReplicas); len(st) != 0 {
		t.Fatalf("a review with a duplicate key was recorded: %+v", st)
	}
	if n := decisions(h, admRejected); n != 4 {
		t.Errorf("rejected: %v, want 4", n)
	}
}

// TestAdmissionUnknownClusterIsUnauthenticated: a cluster name that is not configured is answered
// as a wrong credential for a configured one is (401, the same words, the same header), before
// anything else, so that cluster names cannot be enumerated without a credential.
func TestAdmissionUnknownClusterIsUnauthenticated(t *testing.T) {
	srv, _, _ := admissionSetup(t, "deny")
	answer := func(cluster, tok string) (int, string, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, srv.URL+AdmissionPrefix+cluster, strings.NewReader(scaleReview("hpa-1", hpaSA, 3, 7, false)))
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("WWW-Authenticate"), strings.ReplaceAll(string(b), cluster, "CLUSTER")
	}
	code, hdr, body := answer("prod", "wrong-token")
	if code != http.StatusUnauthorized {
		t.Fatalf("a wrong credential for prod: %d %s", code, body)
	}
	for _, tc := range []struct{ cluster, tok string }{{"staging", "wrong-token"}, {"staging", admissionToken}, {"staging", ""}} {
		if c, h, b := answer(tc.cluster, tc.tok); c != code || h != hdr || b != body {
			t.Errorf("cluster %s, token %q: %d %q %s; want what a wrong credential for prod gets: %d %q %s", tc.cluster, tc.tok, c, h, b, code, hdr, body)
		}
	}
}

func TestAdmissionFailsOpenAndCountsIt(t *testing.T) {
	srv, h, _ := admissionSetup(t, "deny")
	h.Routes["prod"] = config.RepoRef{Repository: "acme/elsewhere"} // the App is not installed there
	code, resp, raw := admit(t, srv, admissionToken, scaleReview("cost-1", costSA, 8, 2, false))
	if code != http.StatusOK || !resp.Allowed || len(resp.Warnings) != 1 || !strings.Contains(resp.Warnings[0], "could not judge") {
		t.Fatalf("fail open: %d %s", code, raw)
	}
	if decisions(h, admFailOpen) != 1 || testutil.ToFloat64(h.Metrics.failOpen.WithLabelValues("prod", "error")) != 1 {
		t.Fatalf("fail-open not counted")
	}
}

// An on-call patch admitted first is, when its audit event arrives, the claimed change: the
// claim from the audit event carries the admission it carried out.
func TestAdmittedChangeIsRecognisedWhenItsAuditEventArrives(t *testing.T) {
	srv, h, d := admissionSetup(t, "deny")
	// The review comes before the write, whose audit event (examples/drift) is stamped 10:05:00.
	later := d.Now
	asked := func() time.Time { return time.Date(2026, 11, 20, 10, 4, 59, 0, time.UTC) }
	h.Now, d.Now = asked, asked
	if _, resp, raw := admit(t, srv, admissionToken, deploymentReview("oncall-1", "alice@parley.example", "1.41.4-hotfix", hotfix)); resp == nil || !resp.Allowed {
		t.Fatalf("on-call: %s", raw)
	}
	h.Now, d.Now = later, later
	// The audit batch of examples/drift holds alice's hotfix patch (and an HPA scale).
	if err := d.Handle(context.Background(), auditDelivery(t, "batch-1")); err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, c := range standing(t, d, webImage) {
		if c.Evidence.Source == "k8s-audit" {
			found = c.Evidence.Proposal == "admission/prod/uid-oncall-1" && c.Motivation.Kind == "incident"
			if !found {
				t.Fatalf("the audit claim does not carry out the admission: %+v", c)
			}
		}
	}
	if !found {
		t.Fatalf("no claim from the audit event: %+v", standing(t, d, webImage))
	}
}

// clockStart is the drift tests' clock.
var clockStart = time.Date(2026, 11, 20, 10, 6, 0, 0, time.UTC)

func TestAdmissionWarmLoadsEachClustersRepository(t *testing.T) {
	_, h, d := admissionSetup(t, "deny")
	h.Warm(context.Background())
	rd := d.repos["acme/infra"]
	if rd == nil || rd.view.led == nil {
		t.Fatal("the cluster's repository view is not loaded")
	}
}

// observeSetup is admissionSetup for a cluster whose admitted writes are its observations
// (observe = true), over a real delivery store.
func observeSetup(t *testing.T, mode string) (*httptest.Server, *Admission, *Drift, *gittest.Runner, *store.SQLite) {
	t.Helper()
	srv, h, d, remote := admissionSetupRemote(t, mode)
	cfg := h.Clusters["prod"]
	cfg.Observe = true
	h.Clusters["prod"] = cfg
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "deliveries.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	h.Queue = st
	d.Clusters = map[string]config.RepoRef{"prod": {Repository: "acme/infra"}}
	return srv, h, d, remote, st
}

// scaleReviewAt is scaleReview with the resourceVersion the API server stores the object at.
func scaleReviewAt(uid, user string, from, to int, rv string) string {
	return strings.ReplaceAll(scaleReview(uid, user, from, to, false), `"resourceVersion":"41"`, `"resourceVersion":"`+rv+`"`)
}

// queued takes what the admission webhook put in the delivery store.
func queued(t *testing.T, st *store.SQLite) []store.Delivery {
	t.Helper()
	var out []store.Delivery
	for {
		del, ok, err := st.Claim(context.Background(), "test", time.Minute, time.Now().Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return out
		}
		out = append(out, del)
	}
}

func observations(h *Admission, outcome string) float64 {
	return testutil.ToFloat64(h.Metrics.observations.WithLabelValues("prod", outcome))
}

// On a cluster without an audit webhook, a write admitted with a warning (the cost optimizer
// scaling down in warn mode) is an observation once a later review shows it stored: the drift
// loop then judges it as it would its audit event, and answers in Git.
func TestAdmittedWriteConfirmedByALaterReviewIsJudgedByTheDriftLoop(t *testing.T) {
	srv, h, d, remote, st := observeSetup(t, "warn")
	if _, resp, raw := admit(t, srv, admissionToken, scaleReviewAt("cost-1", costSA, 3, 2, "41")); resp == nil || !resp.Allowed || len(resp.Warnings) != 1 {
		t.Fatalf("cost optimizer in warn mode: %s", raw)
	}
	// Admitted is not landed: nothing is judged yet.
	if q := queued(t, st); len(q) != 0 {
		t.Fatalf("queued before any confirmation: %+v", q)
	}
	// A review of the same object with the same base says nothing: the write may be in flight.
	if _, resp, raw := admit(t, srv, admissionToken, scaleReviewAt("cost-1b", costSA, 3, 2, "41")); resp == nil || !resp.Allowed {
		t.Fatalf("second review: %s", raw)
	}
	if q := queued(t, st); len(q) != 0 {
		t.Fatalf("queued on a review of the same base: %+v", q)
	}
	// The HPA scales next: its oldObject is what is stored, at a new resourceVersion, holding 2.
	if _, resp, raw := admit(t, srv, admissionToken, scaleReviewAt("hpa-1", hpaSA, 2, 5, "42")); resp == nil || !resp.Allowed {
		t.Fatalf("hpa: %s", raw)
	}
	q := queued(t, st)
	if len(q) != 2 || q[0].Source != "k8s-admission" || q[0].Scope != "prod" || q[1].Source != "k8s-admission" {
		t.Fatalf("queued: %+v", q)
	}
	if observations(h, obsConfirmed) != 2 || observations(h, obsHeld) != 3 {
		t.Fatalf("confirmed %v, held %v", observations(h, obsConfirmed), observations(h, obsHeld))
	}
	before := remote.Run("rev-parse", "main")
	for _, del := range q {
		if err := d.Handle(context.Background(), del); err != nil {
			t.Fatal(err)
		}
	}
	var fromAdmission bool
	for _, c := range standing(t, d, webReplicas) {
		if c.Evidence.Source == "k8s-admission" && c.Actor.Identity.ID == costSA && c.Value.String() == "2" {
			fromAdmission = true
		}
	}
	if !fromAdmission {
		t.Fatalf("no claim observed from the admitted write: %+v", standing(t, d, webReplicas))
	}
	// The cost optimizer's 2 loses to the HPA's standing claim: the field is gated for the HPA.
	if got := remote.Run("log", "--format=%s", before+"..main"); got != "parley: yield /spec/replicas of Deployment prod/web to hpa" {
		t.Fatalf("commits for the observed write: %q", got)
	}
	if kust := remote.Run("show", "main:clusters/prod/apps.yaml"); !strings.Contains(kust, "- /spec/replicas") {
		t.Fatalf("no gate:\n%s", kust)
	}
}

// A write admitted but then refused by a later admission step or by storage is not taken for one
// that landed: the next review shows the object moved on without it, and it is dropped; one that
// nothing confirms expires. Neither leaves a claim or a verdict.
func TestAdmittedWriteNotStoredIsNoObservation(t *testing.T) {
	srv, h, d, remote, st := observeSetup(t, "warn")
	before := remote.Run("rev-parse", "main")
	if _, resp, raw := admit(t, srv, admissionToken, scaleReviewAt("cost-1", costSA, 3, 2, "41")); resp == nil || !resp.Allowed {
		t.Fatalf("cost optimizer: %s", raw)
	}
	// Refused after Parley allowed it: the next write finds the object at a new version, still 3.
	if _, resp, raw := admit(t, srv, admissionToken, scaleReviewAt("hpa-1", hpaSA, 3, 5, "42")); resp == nil || !resp.Allowed {
		t.Fatalf("hpa: %s", raw)
	}
	if observations(h, obsNotLanded) != 1 || observations(h, obsConfirmed) != 0 {
		t.Fatalf("not landed %v, confirmed %v", observations(h, obsNotLanded), observations(h, obsConfirmed))
	}
	// The HPA's own write is never confirmed: past the window it expires at the next review.
	h.ConfirmWithin = time.Minute
	now := clockStart.Add(10 * time.Minute)
	h.Now = func() time.Time { return now }
	cm := `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"web","namespace":"prod","resourceVersion":"7"},"data":{"a":"%s"}}`
	body := strings.Replace(reviewOf("cm-1", costSA, "", fmt.Sprintf(cm, "2"), fmt.Sprintf(cm, "1"), false),
		`"resource":{"group":"apps","version":"v1","resource":"deployments"}`, `"resource":{"group":"","version":"v1","resource":"configmaps"}`, 1)
	if _, resp, raw := admit(t, srv, admissionToken, body); resp == nil || !resp.Allowed {
		t.Fatalf("configmap: %s", raw)
	}
	if observations(h, obsExpired) != 1 {
		t.Fatalf("expired %v", observations(h, obsExpired))
	}
	if q := queued(t, st); len(q) != 0 {
		t.Fatalf("queued: %+v", q)
	}
	for _, c := range standing(t, d, webReplicas) {
		if c.Evidence.Source == "k8s-admission" {
			t.Fatalf("a write that did not land was observed: %+v", c)
		}
	}
	if remote.Run("rev-parse", "main") != before {
		t.Fatal("a write that did not land got an answer in Git")
	}
}

// The held reviews are bounded in bytes, not only in number: a write past the bound is not held
// (never observed) and is counted.
func TestAdmittedWritesHeldAreBoundedInBytes(t *testing.T) {
	srv, h, _, _, st := observeSetup(t, "warn")
	first, hpa := scaleReviewAt("cost-1", costSA, 3, 2, "41"), scaleReviewAt("hpa-1", hpaSA, 2, 5, "42")
	h.MaxPendingBytes = int64(max(len(first), len(hpa))) + 10 // one review, not two
	for _, body := range []string{first, scaleReviewAt("cost-2", costSA, 2, 1, "41")} {
		if _, resp, raw := admit(t, srv, admissionToken, body); resp == nil || !resp.Allowed {
			t.Fatalf("review: %s", raw)
		}
	}
	if observations(h, obsHeld) != 1 || observations(h, obsOverflow) != 1 {
		t.Fatalf("held %v, overflow %v", observations(h, obsHeld), observations(h, obsOverflow))
	}
	// What is held is released when decided: the next write is held again.
	if _, resp, raw := admit(t, srv, admissionToken, hpa); resp == nil || !resp.Allowed {
		t.Fatalf("hpa: %s", raw)
	}
	if observations(h, obsConfirmed) != 1 || observations(h, obsHeld) != 2 || len(queued(t, st)) != 1 {
		t.Fatalf("confirmed %v, held %v", observations(h, obsConfirmed), observations(h, obsHeld))
	}
}

// A write of more fields than one object may have judged (issue 34: a nodeSelector of 40,000
// keys cost seconds of CPU per review) is not judged: allowed, as the webhook fails open, with
// the problem naming the object as its warning, and counted as a fail-open for the budget.
func TestAdmissionFieldBudgetFailsOpenNamingTheObject(t *testing.T) {
	srv, h, _ := admissionSetup(t, "deny")
	var sel strings.Builder
	for i := range 40_000 {
		fmt.Fprintf(&sel, `"k%d":"v",`, i)
	}
	dep := `{"kind":"Deployment","apiVersion":"apps/v1","metadata":{"name":"web","namespace":"prod","resourceVersion":"41"},` +
		`"spec":{"replicas":%d,"template":{"spec":{"nodeSelector":{%s"zone":"a"},"containers":[{"name":"web","image":"registry.example.com/shop/web:1.41.0"}]}}}}`
	body := reviewOf("big-1", costSA, "", fmt.Sprintf(dep, 2, sel.String()), fmt.Sprintf(dep, 3, ""), false)
	code, resp, raw := admit(t, srv, admissionToken, body)
	if code != http.StatusOK || !resp.Allowed || string(resp.UID) != "uid-big-1" || len(resp.Warnings) != 1 ||
		!strings.Contains(resp.Warnings[0], "k8s:apps/Deployment/prod/web: more than 1000 changed fields, the most Parley judges in one object; not judged") {
		t.Fatalf("over the budget: %d %.600s", code, raw)
	}
	if testutil.ToFloat64(h.Metrics.failOpen.WithLabelValues("prod", "budget")) != 1 {
		t.Fatal("fail-open for the budget not counted")
	}
}

// TestAdmissionDeclaringNeverBeatsSilence is issue 33's attack at the admission door: during the
// demo's peak-sales freeze, a cluster user no actor names raises prod/web's CPU request and writes
// parley.dev/intent: availability on the Deployment (the intent the freeze admits, outranking
// Git's performance claim). The annotation is not counted: the write is denied exactly as the same
// write without it, nothing is recorded, and the message says why.
func TestAdmissionDeclaringNeverBeatsSilence(t *testing.T) {
	srv, _, d, clk := admissionSetupClock(t, "deny")
	clk.set(time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC))
	cpu := core.K8sField("apps", "Deployment", "prod", "web", "/spec/template/spec/containers/0/resources/requests/cpu")
	dep := `{"kind":"Deployment","apiVersion":"apps/v1","metadata":{"name":"web","namespace":"prod","resourceVersion":"41","annotations":{%s}},` +
		`"spec":{"template":{"spec":{"containers":[{"name":"web","resources":{"requests":{"cpu":%q}}}]}}}}`
	for _, tc := range []struct{ uid, annotations string }{
		{"declared", `"parley.dev/intent":"availability"`},
		{"silent", ""},
	} {
		body := reviewOf(tc.uid, "mallory", "", fmt.Sprintf(dep, tc.annotations, "1500m"), fmt.Sprintf(dep, "", "750m"), false)
		code, resp, raw := admit(t, srv, admissionToken, body)
		if code != http.StatusOK || resp.Allowed || resp.Result == nil {
			t.Fatalf("%s: a stranger's CPU raise during the freeze was allowed: %d %s", tc.uid, code, raw)
		}
		msg := resp.Result.Message
		for _, want := range []string{"rule:     freeze.peak-sales", `deferred until it ends: k8s-user:mallory ("1500m")`} {
			if !strings.Contains(msg, want) {
				t.Errorf("%s: denial message lacks %q:\n%s", tc.uid, want, msg)
			}
		}
		if declared := strings.Contains(msg, "k8s-user:mallory declares intent availability, which is not one an unknown actor may declare"); declared != (tc.annotations != "") {
			t.Errorf("%s: the message says the declaration was not counted: %v:\n%s", tc.uid, declared, msg)
		}
		if st := standing(t, d, cpu); len(st) != 0 {
			t.Fatalf("%s: a denied write was recorded: %+v", tc.uid, st)
		}
	}
}

// TestAdmissionLargeReviewsTakeOneLane: reviews of largeReview bytes or more are read and judged
// one at a time (issue 34's bigmap attack: two connections of 2.8 MB reviews held both cores), so
// while one is judged another waits, within the budget, and gets a 503 (the API server's
// failurePolicy decides) when the lane stays taken; an ordinary review never waits for it.
func TestAdmissionLargeReviewsTakeOneLane(t *testing.T) {
	srv, h, _ := admissionSetup(t, "deny")
	var sel strings.Builder
	for i := 0; sel.Len() < largeReview; i++ {
		fmt.Fprintf(&sel, `"node.example.com/k%06d":"v",`, i)
	}
	dep := `{"kind":"Deployment","apiVersion":"apps/v1","metadata":{"name":"web","namespace":"prod","resourceVersion":"41"},` +
		`"spec":{"template":{"spec":{"nodeSelector":{%s"zone":"a"}}}}}`
	big := reviewOf("large", costSA, "", fmt.Sprintf(dep, sel.String()), fmt.Sprintf(dep, ""), false)
	if _, _, raw := admit(t, srv, admissionToken, scaleReview("warm", hpaSA, 3, 4, false)); !strings.Contains(raw, "uid-warm") {
		t.Fatalf("warm-up: %s", raw) // the first review clones the repository
	}

	// Another large review holds the lane for longer than the budget.
	h.Budget = 300 * time.Millisecond
	release, ok := h.large.acquire(context.Background(), time.Now().Add(time.Second))
	if !ok {
		t.Fatal("the lane is taken with nothing running")
	}
	code, _, raw := admit(t, srv, admissionToken, big)
	if code != http.StatusServiceUnavailable || !strings.Contains(raw, "is being judged") {
		t.Fatalf("a large review while the lane is taken: %d %.300s, want 503", code, raw)
	}
	if got := testutil.ToFloat64(h.Metrics.decisions.WithLabelValues("prod", admBusy, "false")); got != 1 {
		t.Fatalf("busy answers counted %v, want 1", got)
	}
	// An ordinary review does not wait for the lane.
	if code, resp, raw := admit(t, srv, admissionToken, scaleReview("small", hpaSA, 4, 5, false)); code != http.StatusOK || !resp.Allowed || len(resp.Warnings) != 0 {
		t.Fatalf("an ordinary review while the lane is taken: %d %.300s", code, raw)
	}
	release()
	h.Budget = time.Minute
	if code, resp, raw := admit(t, srv, admissionToken, big); code != http.StatusOK || string(resp.UID) != "uid-large" {
		t.Fatalf("a large review with the lane free: %d %.300s", code, raw)
	}
}

// A judged review's log line is at info when a change was refused (denied, or warned) and at debug
// when it went through as the policy expects: at an HPA's pace the allowed lines were a twentieth
// of serve's CPU. At debug both are written, with the same attributes.
func TestAdmissionLogsRefusalsAtInfoAndRoutineAnswersAtDebug(t *testing.T) {
	for _, level := range []slog.Level{slog.LevelInfo, slog.LevelDebug} {
		t.Run(level.String(), func(t *testing.T) {
			srv, h, _ := admissionSetup(t, "deny")
			var logs bytes.Buffer
			h.Log = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: level}))
			if _, resp, raw := admit(t, srv, admissionToken, scaleReview("hpa-1", hpaSA, 3, 7, false)); resp == nil || !resp.Allowed {
				t.Fatalf("hpa: %s", raw)
			}
			if _, resp, raw := admit(t, srv, admissionToken, scaleReview("cost-1", costSA, 7, 2, false)); resp == nil || resp.Allowed {
				t.Fatalf("cost optimizer: %s", raw)
			}
			lines := map[string]map[string]any{} // by uid
			dec := json.NewDecoder(&logs)
			for dec.More() {
				var l map[string]any
				if err := dec.Decode(&l); err != nil {
					t.Fatal(err)
				}
				if l["msg"] == "admission review" {
					lines[fmt.Sprint(l["uid"])] = l
				}
			}
			denied, ok := lines["uid-cost-1"]
			if !ok || denied["level"] != "INFO" || denied["decision"] != admDenied || denied["user"] != costSA || denied["object"] != "k8s:apps/Deployment/prod/web" {
				t.Fatalf("the denied review's line: %v", denied)
			}
			allowed, ok := lines["uid-hpa-1"]
			if level == slog.LevelInfo && ok {
				t.Fatalf("an allowed review logged at info: %v", allowed)
			}
			if level == slog.LevelDebug && (!ok || allowed["level"] != "DEBUG" || allowed["decision"] != admAllowed || allowed["user"] != hpaSA) {
				t.Fatalf("the allowed review's line at debug: %v", allowed)
			}
		})
	}
}

// An accepted review wakes the timer loop when the timer its verdict sets comes due before the
// loop wakes by itself, or while the loop is not waiting (it may have read the timers before the
// record): the HPA's scale sets a recheck an hour on. Otherwise it does not: at admission rates
// each wake was a read of the drift state for nothing.
func TestAdmissionWakesTheTimerLoopOnlyForAnEarlierTimer(t *testing.T) {
	srv, _, d := admissionSetup(t, "deny")
	d.init()
	woken := func() bool {
		select {
		case <-d.wake:
			return true
		default:
			return false
		}
	}
	// A first review serves the repository, which wakes the loop for the timers it holds.
	if _, resp, raw := admit(t, srv, admissionToken, scaleReview("cost-1", costSA, 3, 2, false)); resp == nil || resp.Allowed {
		t.Fatalf("cost optimizer: %s", raw)
	}
	woken()
	for i, c := range []struct {
		loopWakes time.Time // zero: the loop is not waiting
		want      bool
	}{
		{time.Time{}, true},
		{clockStart.Add(30 * time.Minute), false},
		{clockStart.Add(90 * time.Minute), true},
	} {
		d.nextWake.Store(0)
		if !c.loopWakes.IsZero() {
			d.nextWake.Store(c.loopWakes.UnixNano())
		}
		if _, resp, raw := admit(t, srv, admissionToken, scaleReview(fmt.Sprintf("hpa-%d", i), hpaSA, 3+i, 4+i, false)); resp == nil || !resp.Allowed {
			t.Fatalf("hpa: %s", raw)
		}
		if got := woken(); got != c.want {
			ts, _ := d.served()[0].state.Timers(context.Background())
			t.Fatalf("the loop waiting until %v: woken %v, want %v (timers %+v)", c.loopWakes, got, c.want, ts)
		}
	}
	due, ok, err := d.served()[0].state.Next(context.Background())
	if err != nil || !ok || !due.Equal(clockStart.Add(time.Hour)) {
		t.Fatalf("the timer the HPA's scale set: %v %v %v", due, ok, err)
	}
}
