package realk8s

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"net/http/httptest"
	"net/http/httputil"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/parleyhq/parley/app"
	"github.com/parleyhq/parley/app/config"
	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/internal/demo"
	"github.com/parleyhq/parley/internal/fakegithub"
	"github.com/parleyhq/parley/reconcile/driftstate"
)

// Identities of the admission test, each with a static token (system:masters, so RBAC lets
// every write reach admission; Parley's policy is what stands in the way).
const (
	fluxSA      = "system:serviceaccount:flux-system:kustomize-controller"
	costSA      = "system:serviceaccount:finops:cost-optimizer"
	oncallUser  = "alice@parley.example"
	fluxToken   = "parley-e2e-flux"
	costToken   = "parley-e2e-cost"
	oncallToken = "parley-e2e-oncall"
	// admissionToken is what the API server sends Parley (its admission kubeconfig).
	admissionToken = "parley-e2e-apiserver-to-parley-0123456789"
	auditToken     = "parley-e2e-audit"
)

// findAPIServer locates etcd and kube-apiserver only: the admission test runs no controller.
func findAPIServer(t *testing.T) binaries {
	t.Helper()
	base := os.Getenv("PARLEY_CACHE")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			t.Fatalf("no PARLEY_CACHE and no home directory: %v", err)
		}
		base = filepath.Join(home, ".cache", "parley")
	}
	dir := filepath.Join(base, "real-controllers")
	b := binaries{etcd: filepath.Join(dir, "etcd-"+etcdVersion, "etcd"), apiserver: filepath.Join(dir, "kube-apiserver-"+kubernetesVersion, "kube-apiserver")}
	for _, p := range []string{b.etcd, b.apiserver} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s is missing (%v): run scripts/real-controllers.sh first", p, err)
		}
	}
	return b
}

// parley is a running parley serve.
type parley struct {
	srv    *app.Server
	cancel context.CancelFunc
	done   chan struct{} // closed when Run returned, with its error in err
	err    error
}

// stop stops parley serve and waits for it; stopping it again is a no-op.
func (p *parley) stop(t *testing.T) {
	t.Helper()
	p.cancel()
	<-p.done
	if p.err != nil {
		t.Fatalf("parley serve: %v", p.err)
	}
}

// startParley runs parley serve in this process on cfg, until stop or the test's end.
func startParley(t *testing.T, cfg config.Config) *parley {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := app.NewServer(ctx, cfg, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		cancel()
		t.Fatalf("parley serve: %v", err)
	}
	p := &parley{srv: srv, cancel: cancel, done: make(chan struct{})}
	ready := make(chan struct{})
	go func() { // owned by the test: ends when stop or the cleanup cancels ctx
		p.err = srv.Run(ctx, func(string) { close(ready) })
		close(p.done)
	}()
	select {
	case <-ready:
	case <-p.done:
		t.Fatalf("parley serve stopped before it listened: %v", p.err)
	}
	t.Cleanup(func() { cancel(); <-p.done })
	return p
}

// servingCert writes a certificate for 127.0.0.1 and its key; it returns their paths and the
// certificate's PEM (the webhook's caBundle).
func servingCert(t *testing.T, dir string) (string, string, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "parley-admission"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	writeFile(t, certFile, string(certPEM))
	writeFile(t, keyFile, string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})))
	return certFile, keyFile, certPEM
}

// hostDemoRepository serves the demo repository (acme/infra) through a fake GitHub with the App
// installed, and returns the App's private key.
func hostDemoRepository(t *testing.T) (*fakegithub.Server, []byte) {
	t.Helper()
	gh := fakegithub.New(t)
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	gh.AppPublicKey, gh.AppID = &key.PublicKey, 99
	work := filepath.Join(t.TempDir(), "work")
	if _, err := demo.Build(work); err != nil {
		t.Fatal(err)
	}
	bare := filepath.Join(t.TempDir(), "infra.git")
	if out, err := exec.Command("git", "clone", "-q", "--bare", work, bare).CombinedOutput(); err != nil {
		t.Fatalf("git clone: %v: %s", err, out)
	}
	gh.SetInstallation("acme/infra", 5)
	gh.SetRepository("acme/infra", map[string]any{"clone_url": bare, "default_branch": "main"})
	return gh, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
}

// warnings collects the warnings the API server returns to a client.
type warnings struct {
	mu  sync.Mutex
	got []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	w.got = append(w.got, text)
	w.mu.Unlock()
}

func (w *warnings) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.got...)
}

// TestAdmissionWebhookOnTheRealAPIServer registers parley serve as the real kube-apiserver's
// validating admission webhook (TLS, url client config, the API server authenticating with a
// token from its admission configuration) and checks what the API server's clients see.
func TestAdmissionWebhookOnTheRealAPIServer(t *testing.T) {
	bins := findAPIServer(t)
	ctx := t.Context()
	dir := t.TempDir()

	// Parley: the demo repository (prod/web, whose replicas the HPA owns), one cluster "e2e" in
	// deny mode and one "e2e-warn" in warn mode on the same repository.
	gh, appKey := hostDemoRepository(t)
	certFile, keyFile, caPEM := servingCert(t, dir)
	tokFile := filepath.Join(dir, "admission-token")
	writeFile(t, tokFile, admissionToken)
	admissionPort, listenPort := freePort(t), freePort(t)
	cfgFile := filepath.Join(dir, "parley.hcl")
	writeFile(t, cfgFile, admissionServeConfig(gh.URL, dir, listenPort, admissionPort, certFile, keyFile, fmt.Sprintf(`cluster "e2e" {
  repository = "acme/infra"
}
cluster "e2e-warn" {
  repository = "acme/infra"
}
admission "e2e" {
  mode       = "deny"
  token_file = %q
}
admission "e2e-warn" {
  token_file = %q
}
`, tokFile, tokFile)))
	cfg, err := config.Load(cfgFile, func(k string) string {
		return map[string]string{"PARLEY_PRIVATE_KEY": string(appKey), "PARLEY_KUBE_AUDIT_TOKEN": auditToken}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	p := startParley(t, cfg)

	// The API server: audit events to Parley's /events/k8s-audit/e2e, and the token it sends
	// webhooks at 127.0.0.1:<admissionPort> from its admission configuration.
	admConfig := apiServerAdmissionConfig(t, dir, admissionPort)
	// The audit backend sends its token over TLS only: a TLS front for Parley's plain listener,
	// as an ingress would be.
	target, _ := neturl.Parse(fmt.Sprintf("http://127.0.0.1:%d", listenPort))
	front := httptest.NewTLSServer(httputil.NewSingleHostReverseProxy(target))
	t.Cleanup(front.Close)
	masters := `"system:serviceaccounts,system:masters"`
	c := startClusterWith(t, bins, clusterOptions{
		auditURL: front.URL + "/events/k8s-audit/e2e", auditToken: auditToken,
		tokens: fmt.Sprintf("%s,%s,flux,%s\n%s,%s,cost,%s\n%s,%s,alice,\"sre,system:masters\"\n", fluxToken, fluxSA, masters, costToken, costSA, masters,
			oncallToken, oncallUser),
		args: []string{"--admission-control-config-file=" + admConfig},
	})
	client := func(token string, w rest.WarningHandler) *kubernetes.Clientset {
		cfg := c.config(token, "parley-realk8s-admission")
		cfg.WarningHandler = w
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	admin, flux, oncall := client(adminToken, nil), client(fluxToken, nil), client(oncallToken, nil)
	costWarnings := &warnings{}
	cost := client(costToken, costWarnings)
	hpa := client(hpaToken, nil)

	// Flux applies prod/web as Git holds it, before the webhook exists.
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "prod"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	replicas := int32(3)
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "prod", Labels: map[string]string{"app": "web"}},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "registry.example.com/shop/web:1.41.0"}}}}}}
	if _, err := flux.AppsV1().Deployments("prod").Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// Parley becomes the validating webhook, failing open.
	fail, none, timeout := admissionregv1.Ignore, admissionregv1.SideEffectClassNoneOnDryRun, int32(5)
	url := fmt.Sprintf("https://127.0.0.1:%d/admission/e2e", admissionPort)
	vwc := &admissionregv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "parley"},
		Webhooks: []admissionregv1.ValidatingWebhook{{Name: "fields.parley.dev", AdmissionReviewVersions: []string{"v1"}, SideEffects: &none,
			FailurePolicy: &fail, TimeoutSeconds: &timeout, ClientConfig: admissionregv1.WebhookClientConfig{URL: &url, CABundle: caPEM},
			Rules: []admissionregv1.RuleWithOperations{{Operations: []admissionregv1.OperationType{admissionregv1.Create, admissionregv1.Update},
				Rule: admissionregv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments", "deployments/scale"}}}}}}}
	if _, err := admin.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, vwc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	scale := func(cs *kubernetes.Clientset, n int32) error {
		_, err := cs.AppsV1().Deployments("prod").UpdateScale(ctx, "web", &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "prod"},
			Spec: autoscalingv1.ScaleSpec{Replicas: n}}, metav1.UpdateOptions{})
		return err
	}
	// The webhook configuration takes effect when the API server's informer sees it: wait until
	// Parley answers (a denial names it). The wait asks with dry runs, which Parley judges the same
	// way and the API server never stores: a scale that went through before the webhook was in
	// place would have changed the Deployment under the rest of the test.
	waitFor(t, 30*time.Second, "the API server to call Parley", func() (bool, error) {
		_, err := cost.AppsV1().Deployments("prod").UpdateScale(ctx, "web", &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "prod"},
			Spec: autoscalingv1.ScaleSpec{Replicas: 2}}, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
		switch {
		case err == nil:
			return false, notYet("the cost optimizer's dry-run scale to 2 went through: Parley not asked yet")
		case !strings.Contains(err.Error(), "parley"):
			return false, notYet("%v", err)
		}
		return true, nil
	})
	denial := scale(cost, 2)
	if denial == nil {
		t.Fatal("the cost optimizer's scale to 2 went through once Parley answered dry runs")
	}

	// 1. The cost optimizer scaling down is denied with Parley's explanation.
	for _, want := range []string{`admission webhook "fields.parley.dev" denied the request`, "k8s:apps/Deployment/prod/web#/spec/replicas",
		"cost-optimizer <k8s-user:" + costSA + "> wants 2", "hpa is the standing owner"} {
		if !strings.Contains(denial.Error(), want) {
			t.Errorf("the denial lacks %q:\n%v", want, denial)
		}
	}

	// 2. The HPA writing scale is allowed: it owns the field.
	if err := scale(hpa, 7); err != nil {
		t.Fatalf("the HPA's scale: %v", err)
	}

	// 3. On call's annotated patch is allowed, then recognised when its audit event arrives.
	patch := `{"metadata":{"annotations":{"parley.dev/intent":"availability","parley.dev/motivation":"incident INC-4300 severity=high","parley.dev/expires":"2h"}},` +
		`"spec":{"template":{"spec":{"containers":[{"name":"web","image":"registry.example.com/shop/web:1.41.4-hotfix"}]}}}}`
	if _, err := oncall.AppsV1().Deployments("prod").Patch(ctx, "web", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("on call's patch: %v", err)
	}
	// 4. A dry run is judged and leaves no claim (it declares itself anew: a declaration left on
	// the object by the earlier patch is not this write's).
	dry := `{"metadata":{"annotations":{"parley.dev/expires":"3h"}},"spec":{"template":{"spec":{"containers":[{"name":"web","image":"registry.example.com/shop/web:dry-run"}]}}}}`
	if _, err := oncall.AppsV1().Deployments("prod").Patch(ctx, "web", types.StrategicMergePatchType, []byte(dry),
		metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Fatalf("on call's dry run: %v", err)
	}
	image := core.K8sField("apps", "Deployment", "prod", "web", "/spec/template/spec/containers/0/image")
	st, err := driftstate.Open(ctx, filepath.Join(dir, "drift.acme.infra.db")) // the cluster's repository's drift state
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	waitFor(t, 60*time.Second, "on call's audit event to be judged as the admitted change", func() (bool, error) {
		claims, err := st.Standing(ctx, image)
		if err != nil {
			return false, err
		}
		var seen []string
		for _, c := range claims {
			if strings.Contains(c.Value.String(), "dry-run") {
				return false, fmt.Errorf("the dry run left a claim: %+v", c)
			}
			if c.Evidence.Source == "k8s-audit" && strings.HasPrefix(c.Evidence.Proposal, "admission/e2e/") && c.Motivation.Kind == "incident" {
				return true, nil
			}
			seen = append(seen, fmt.Sprintf("%s %s %s", c.Evidence.Source, c.Evidence.Proposal, c.Value))
		}
		return false, notYet("claims on the image: %v", seen)
	})

	// 5. Warn mode: the same refusal arrives as a warning, and the write goes through.
	warnURL := strings.Replace(url, "/admission/e2e", "/admission/e2e-warn", 1)
	cur, err := admin.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "parley", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Webhooks[0].ClientConfig.URL = &warnURL
	if _, err := admin.AdmissionregistrationV1().ValidatingWebhookConfigurations().Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the warn-mode webhook", func() (bool, error) {
		err := scale(cost, 2)
		if err != nil && strings.Contains(err.Error(), "denied the request") {
			return false, nil // the API server still calls the deny-mode URL
		}
		if err != nil {
			return false, err
		}
		for _, w := range costWarnings.all() {
			// The verdict by now may be the owner's or an oscillation hold (the HPA and the
			// cost optimizer have flipped the field): either is Parley's refusal, as a warning.
			if strings.HasPrefix(w, "parley: /spec/replicas of Deployment prod/web: ") {
				return true, nil
			}
		}
		return false, fmt.Errorf("allowed without Parley's warning: %q", costWarnings.all())
	})

	// 6. Parley stopped: the API server fails open and the write goes through.
	p.stop(t)
	if err := scale(cost, 1); err != nil {
		t.Fatalf("with Parley stopped the write must go through (failurePolicy Ignore): %v", err)
	}
	got, err := admin.AppsV1().Deployments("prod").GetScale(ctx, "web", metav1.GetOptions{})
	if err != nil || got.Spec.Replicas != 1 {
		t.Fatalf("replicas after the fail-open write: %v %v", got, err)
	}
	// When Parley returns, the write it never saw reaches it through its audit event (the audit
	// backend retries): judged after the fact, as on a cluster without the webhook.
	startParley(t, cfg)
	replicasField := core.K8sField("apps", "Deployment", "prod", "web", "/spec/replicas")
	waitFor(t, 60*time.Second, "the fail-open write's audit event", func() (bool, error) {
		h, err := st.History(ctx, replicasField, time.Time{})
		if err != nil {
			return false, err
		}
		for _, c := range h {
			if c.Actor.Identity.ID == costSA && c.Value.String() == "1" && c.Evidence.Source == "k8s-audit" {
				return true, nil
			}
		}
		return false, notYet("%d claims on replicas, none the cost optimizer's 1", len(h))
	})
}

// admissionServeConfig is parley serve's configuration for these tests: the App on the fake GitHub
// at ghURL, a SQLite store in dir, the intake on listenPort and the HTTPS admission listener on
// admissionPort with the given serving certificate, followed by blocks (clusters, admission).
func admissionServeConfig(ghURL, dir string, listenPort, admissionPort int, certFile, keyFile, blocks string) string {
	return fmt.Sprintf(`
app_id                  = 99
webhook_secrets         = ["hook"]
github_url              = %q
store                   = %q
listen                  = "127.0.0.1:%d"
write_mode              = "direct"
proposals_max_age       = "1m"
admission_listen        = "127.0.0.1:%d"
admission_tls_cert_file = %q
admission_tls_key_file  = %q
`, ghURL+"/api/v3/", filepath.Join(dir, "parley.db"), listenPort, admissionPort, certFile, keyFile) + blocks
}

// apiServerAdmissionConfig writes the API server's admission configuration: its
// ValidatingAdmissionWebhook plugin sends admissionToken to the webhook at
// 127.0.0.1:admissionPort. It returns the file for --admission-control-config-file.
func apiServerAdmissionConfig(t *testing.T, dir string, admissionPort int) string {
	t.Helper()
	admKubeconfig := filepath.Join(dir, "admission.kubeconfig")
	writeFile(t, admKubeconfig, fmt.Sprintf(`apiVersion: v1
kind: Config
users:
- name: "127.0.0.1:%d"
  user: {token: %q}
`, admissionPort, admissionToken))
	admConfig := filepath.Join(dir, "admission-config.yaml")
	writeFile(t, admConfig, fmt.Sprintf(`apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: ValidatingAdmissionWebhook
  configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: WebhookAdmissionConfiguration
    kubeConfigFile: %q
`, admKubeconfig))
	return admConfig
}
