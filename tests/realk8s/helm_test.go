package realk8s

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/reconcile/gitops"
)

var hrGVR = schema.GroupVersionResource{Group: "helm.toolkit.fluxcd.io", Version: "v2", Resource: "helmreleases"}

// The chart, as a packaged chart (a tarball with the chart's directory at its top) in an
// ExternalArtifact: what a source controller would hand helm-controller.
var shopChart = map[string]string{
	"shop/Chart.yaml":  "apiVersion: v2\nname: shop\nversion: 1.2.0\n",
	"shop/values.yaml": "replicaCount: 1\n",
	"shop/templates/deployment.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}-api
spec:
  replicas: {{ .Values.replicaCount }}
  selector:
    matchLabels:
      app: shop-api
  template:
    metadata:
      labels:
        app: shop-api
    spec:
      containers:
      - name: api
        image: registry.example/shop-api:2.0
`,
}

// helmReleaseYAML is the HelmRelease as committed to Git: drift detection on, so helm-controller
// corrects drift, and no waiting for readiness (nothing runs pods here).
const helmReleaseYAML = `# The shop, installed by helm-controller.
apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: shop
  namespace: flux-system
spec:
  interval: 10m # only forced reconciles run during the test
  releaseName: shop
  targetNamespace: default
  chartRef:
    kind: ExternalArtifact
    name: shop-chart
  install:
    disableWait: true
  upgrade:
    disableWait: true
  driftDetection:
    mode: enabled
  values:
    replicaCount: 3
`

// TestHelmControllerYieldsToHPA: the real helm-controller, with drift detection enabled, reverts
// an HPA's replicas on a Deployment its release installed; with Parley's gate in the HelmRelease's
// spec.driftDetection.ignore it leaves them; the resume gives back the committed bytes and the
// correction.
func TestHelmControllerYieldsToHPA(t *testing.T) {
	bins := findBinaries(t)
	began := time.Now()
	ctx := t.Context()
	c := startCluster(t, bins)
	admin := c.config(adminToken, "parley-realk8s-test")
	dyn, err := dynamic.NewForConfig(admin)
	if err != nil {
		t.Fatal(err)
	}
	kube, err := kubernetes.NewForConfig(admin)
	if err != nil {
		t.Fatal(err)
	}
	hpa, err := kubernetes.NewForConfig(c.config(hpaToken, hpaUserAgent))
	if err != nil {
		t.Fatal(err)
	}
	installCRDs(t, ctx, dyn, bins.crdDir)
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fluxNS}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	publishArtifact(t, ctx, dyn, "shop-chart", shopChart)
	applyFlux(t, ctx, dyn, hrGVR, []byte(helmReleaseYAML))
	hc := startFluxController(t, c, "helm-controller", bins.helmController)
	const name = "shop-api"
	field := core.K8sField("apps", "Deployment", "default", name, "/spec/replicas")
	step := func(n string, f func(t *testing.T)) {
		if !t.Run(n, f) {
			t.FailNow()
		}
	}
	step("a/helm-installs", func(t *testing.T) {
		waitFor(t, 180*time.Second, "helm-controller to install Deployment default/shop-api with replicas 3", func() (bool, error) {
			if err := hc.exited(); err != nil {
				return false, err
			}
			d, err := kube.AppsV1().Deployments("default").Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				hr, _ := dyn.Resource(hrGVR).Namespace(fluxNS).Get(ctx, "shop", metav1.GetOptions{})
				msg := ""
				if hr != nil {
					msg = conditionMessage(hr, "Ready")
				}
				return false, notYet("get deployment: %v (HelmRelease Ready: %s)", err, msg)
			}
			return replicas(d) == 3, nil
		})
		waitGenerationReady(t, ctx, dyn, hrGVR, "shop")
		t.Logf("a: helm-controller installed shop-api with replicas 3 after %s", time.Since(began).Round(time.Millisecond))
	})
	step("b/helm-corrects-drift", func(t *testing.T) {
		scaleAsHPA(t, ctx, hpa, name, 7)
		reconcile(t, ctx, dyn, hrGVR, "shop")
		if got := replicas(getDeployment(t, ctx, kube, name)); got != 3 {
			t.Fatalf("replicas after an ungated reconcile: %d, want 3 (helm-controller correcting the drift)", got)
		}
		t.Log("b: an ungated reconcile corrected replicas back to 3")
	})
	path := "clusters/e2e/shop.yaml"
	target := gitops.Target{Kind: gitops.KindHelmRelease, Name: "shop", Namespace: fluxNS}
	var gated []byte
	step("c/gate-holds", func(t *testing.T) {
		var changed bool
		gated, changed, err = gitops.AddGate(path, []byte(helmReleaseYAML), target, gitops.Gate{Field: field, Rule: "e2e: the HPA owns replicas"})
		if err != nil || !changed {
			t.Fatalf("gitops.AddGate: %v %v", changed, err)
		}
		t.Logf("c: Parley's gated HelmRelease:\n%s", gated)
		applyFlux(t, ctx, dyn, hrGVR, gated)
		waitGenerationReady(t, ctx, dyn, hrGVR, "shop")
		scaleAsHPA(t, ctx, hpa, name, 7)
		reconcile(t, ctx, dyn, hrGVR, "shop") // a correction is part of the reconcile, so it has happened by now
		if got := replicas(getDeployment(t, ctx, kube, name)); got != 7 {
			t.Fatalf("replicas after a gated reconcile: %d, want the HPA's 7", got)
		}
		t.Log("c: a gated reconcile kept the HPA's 7")
	})
	step("d/resume", func(t *testing.T) {
		back, changed, err := gitops.RemoveGate(path, gated, target, field)
		if err != nil || !changed || string(back) != helmReleaseYAML {
			t.Fatalf("resume (%v, %v) must give back the committed bytes; got\n%s", changed, err, back)
		}
		applyFlux(t, ctx, dyn, hrGVR, back)
		waitGenerationReady(t, ctx, dyn, hrGVR, "shop")
		reconcile(t, ctx, dyn, hrGVR, "shop")
		waitFor(t, 60*time.Second, "helm-controller to correct replicas back to 3 after the resume", func() (bool, error) {
			return replicas(getDeployment(t, ctx, kube, name)) == 3, nil
		})
		t.Logf("d: resumed; replicas back to 3 (whole test %s)", time.Since(began).Round(time.Millisecond))
	})
}
