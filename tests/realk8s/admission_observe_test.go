package realk8s

import (
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/parleyhq/parley/app/config"
	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/reconcile/driftstate"
)

// guardWebhook is a second validating webhook, as a policy engine (Gatekeeper, Kyverno) would be
// one: it refuses any scale to 4 replicas. The API server calls it and Parley in parallel, so
// Parley admits a write that then does not land.
func guardWebhook(t *testing.T) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var denied atomic.Int32
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var rev admissionv1.AdmissionReview
		if err := json.Unmarshal(body, &rev); err != nil || rev.Request == nil {
			http.Error(w, "not a review", http.StatusBadRequest)
			return
		}
		var sc autoscalingv1.Scale
		json.Unmarshal(rev.Request.Object.Raw, &sc)
		resp := &admissionv1.AdmissionResponse{UID: rev.Request.UID, Allowed: true}
		if rev.Request.SubResource == "scale" && sc.Spec.Replicas == 4 {
			resp.Allowed = false
			resp.Result = &metav1.Status{Code: http.StatusForbidden, Message: "guard: 4 replicas are not allowed"}
			if rev.Request.DryRun == nil || !*rev.Request.DryRun {
				denied.Add(1)
			}
		}
		rev.Response, rev.Request = resp, nil
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(rev)
	}))
	t.Cleanup(srv.Close)
	return srv, &denied
}

// TestAdmissionObservesOnlyWritesThatLanded runs a cluster without an audit webhook (its audit
// events go to the harness's sink, never to Parley), where Parley's admission block has
// observe = true: a write Parley admitted but another webhook refused is not observed, and a
// write that landed is, once the next write of the object shows it stored.
func TestAdmissionObservesOnlyWritesThatLanded(t *testing.T) {
	bins := findAPIServer(t)
	ctx := t.Context()
	dir := t.TempDir()

	gh, appKey := hostDemoRepository(t)
	certFile, keyFile, caPEM := servingCert(t, dir)
	tokFile := filepath.Join(dir, "admission-token")
	writeFile(t, tokFile, admissionToken)
	admissionPort, listenPort := freePort(t), freePort(t)
	cfgFile := filepath.Join(dir, "parley.hcl")
	writeFile(t, cfgFile, admissionServeConfig(gh.URL, dir, listenPort, admissionPort, certFile, keyFile, fmt.Sprintf(`cluster "e2e" {
  repository = "acme/infra"
}
admission "e2e" {
  token_file = %q
  observe    = true
}
`, tokFile)))
	cfg, err := config.Load(cfgFile, func(k string) string {
		return map[string]string{"PARLEY_PRIVATE_KEY": string(appKey)}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	startParley(t, cfg)

	admConfig := apiServerAdmissionConfig(t, dir, admissionPort)
	c := startClusterWith(t, bins, clusterOptions{
		tokens: fmt.Sprintf("%s,%s,cost,\"system:serviceaccounts,system:masters\"\n", costToken, costSA),
		args:   []string{"--admission-control-config-file=" + admConfig},
	})
	client := func(token string) *kubernetes.Clientset {
		cs, err := kubernetes.NewForConfig(c.config(token, "parley-realk8s-observe"))
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	admin, cost, hpa := client(adminToken), client(costToken), client(hpaToken)

	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "prod"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	replicas := int32(3)
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "prod", Labels: map[string]string{"app": "web"}},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "registry.example.com/shop/web:1.41.0"}}}}}}
	if _, err := admin.AppsV1().Deployments("prod").Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// Parley (warn mode: it allows the cost optimizer with a warning) and the guard, called in
	// parallel for every write of prod/web's scale.
	guard, guardDenied := guardWebhook(t)
	guardCA := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: guard.Certificate().Raw})
	fail, none, timeout := admissionregv1.Ignore, admissionregv1.SideEffectClassNone, int32(5)
	onDry := admissionregv1.SideEffectClassNoneOnDryRun
	rules := []admissionregv1.RuleWithOperations{{Operations: []admissionregv1.OperationType{admissionregv1.Create, admissionregv1.Update},
		Rule: admissionregv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments", "deployments/scale"}}}}
	url := fmt.Sprintf("https://127.0.0.1:%d/admission/e2e", admissionPort)
	vwc := &admissionregv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "parley-and-guard"},
		Webhooks: []admissionregv1.ValidatingWebhook{
			{Name: "fields.parley.dev", AdmissionReviewVersions: []string{"v1"}, SideEffects: &onDry, FailurePolicy: &fail, TimeoutSeconds: &timeout,
				ClientConfig: admissionregv1.WebhookClientConfig{URL: &url, CABundle: caPEM}, Rules: rules},
			{Name: "guard.example.com", AdmissionReviewVersions: []string{"v1"}, SideEffects: &none, FailurePolicy: &fail, TimeoutSeconds: &timeout,
				ClientConfig: admissionregv1.WebhookClientConfig{URL: &guard.URL, CABundle: guardCA}, Rules: rules},
		}}
	if _, err := admin.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, vwc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	scale := func(cs *kubernetes.Clientset, n int32, dry bool) error {
		opts := metav1.UpdateOptions{}
		if dry {
			opts.DryRun = []string{metav1.DryRunAll}
		}
		_, err := cs.AppsV1().Deployments("prod").UpdateScale(ctx, "web", &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "prod"},
			Spec: autoscalingv1.ScaleSpec{Replicas: n}}, opts)
		return err
	}
	// The configuration is in effect once the guard refuses a dry run (nothing lands meanwhile).
	waitFor(t, 30*time.Second, "the API server to call the webhooks", func() (bool, error) {
		err := scale(cost, 4, true)
		return err != nil && strings.Contains(err.Error(), "guard: 4 replicas"), nil
	})

	// 1. The cost optimizer scales to 4: Parley allows it (warn), the guard refuses it.
	if err := scale(cost, 4, false); err == nil || !strings.Contains(err.Error(), "guard: 4 replicas") || guardDenied.Load() != 1 {
		t.Fatalf("the guard's refusal: %v (denied %d)", err, guardDenied.Load())
	}
	// 2. The HPA scales to 6: it lands. 3. The HPA scales to 7: this review's oldObject is what
	// is stored (6, at a new resourceVersion), which settles both writes held before it.
	for _, n := range []int32{6, 7} {
		if err := scale(hpa, n, false); err != nil {
			t.Fatalf("the HPA's scale to %d: %v", n, err)
		}
	}

	st, err := driftstate.Open(ctx, filepath.Join(dir, "drift.acme.infra.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	replicasField := core.K8sField("apps", "Deployment", "prod", "web", "/spec/replicas")
	waitFor(t, 60*time.Second, "the HPA's landed write to be observed", func() (bool, error) {
		h, err := st.History(ctx, replicasField, time.Time{})
		if err != nil {
			return false, err
		}
		var seen []string
		for _, c := range h {
			if c.Evidence.Source == "k8s-admission" && c.Actor.Identity.ID == hpaUser && c.Value.String() == "6" {
				return true, nil
			}
			seen = append(seen, fmt.Sprintf("%s %s %s", c.Evidence.Source, c.Actor.Identity.ID, c.Value))
		}
		return false, notYet("claims on replicas: %v", seen)
	})
	h, err := st.History(ctx, replicasField, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range h {
		if c.Value.String() == "4" {
			t.Fatalf("the write the guard refused was observed: %+v", c)
		}
	}
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", listenPort))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	m, _ := io.ReadAll(resp.Body)
	for _, want := range []string{`parley_admission_observations_total{cluster="e2e",outcome="not-landed"} 1`,
		`parley_admission_observations_total{cluster="e2e",outcome="confirmed"} 1`} {
		if !strings.Contains(string(m), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}
