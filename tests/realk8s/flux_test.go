package realk8s

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/yaml"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/reconcile/events"
	"github.com/parleyhq/parley/reconcile/gitops"
)

var (
	crdGVR    = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	eaGVR     = schema.GroupVersionResource{Group: "source.toolkit.fluxcd.io", Version: "v1", Resource: "externalartifacts"}
	ksGVR     = schema.GroupVersionResource{Group: "kustomize.toolkit.fluxcd.io", Version: "v1", Resource: "kustomizations"}
	replicasP = fieldpath.MakePathOrDie("spec", "replicas")
)

const (
	fluxNS = "flux-system"
	// hpaUserAgent is what the real kube-controller-manager sends when its HPA controller runs with
	// service account credentials; the apiserver names the field manager after its first token.
	hpaUserAgent = "kube-controller-manager/" + kubernetesVersion + " (linux/amd64) kubernetes/abcdef/" + hpaUser
	// gitManager applies the Kustomization as a GitOps bootstrap (Flux applying its own
	// configuration from Git) would: server-side, so fields dropped from Git are dropped live.
	gitManager = "parley-e2e-git"
)

// deploymentYAML is the application manifest in the artifact Flux applies.
const deploymentYAML = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: default
spec:
  replicas: 3
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
      - name: web
        image: registry.example/web:1.0
`

// kustomizationYAML is the Flux Kustomization exactly as it would be committed to Git. Parley
// edits these bytes; the cluster gets Parley's output, not a re-serialisation of it.
const kustomizationYAML = `# The web application, reconciled by Flux from the artifact.
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: web
  namespace: flux-system
spec:
  interval: 10m # only forced reconciles run during the test
  retryInterval: 2s # a failed first reconcile (caches still syncing) is retried at once
  path: ./
  prune: true
  sourceRef:
    kind: ExternalArtifact
    name: web
`

// TestFluxYieldsToHPA reproduces the fight between Flux and an HPA over a Deployment's replicas
// on a real kube-apiserver with the real kustomize-controller, checks that Parley's audit decoder
// names the same actor as the apiserver's managedFields, and that the gate Parley writes into the
// Kustomization stops the fight and that removing it resumes Flux's control.
func TestFluxYieldsToHPA(t *testing.T) {
	bins := findBinaries(t)
	began := time.Now()
	ctx := t.Context()

	c := startCluster(t, bins)
	t.Logf("kube-apiserver %s ready at %s after %s", kubernetesVersion, c.host, time.Since(began).Round(time.Millisecond))
	admin := c.config(adminToken, "parley-realk8s-test")
	dyn, err := dynamic.NewForConfig(admin)
	if err != nil {
		t.Fatalf("dynamic client: %v", err)
	}
	kube, err := kubernetes.NewForConfig(admin)
	if err != nil {
		t.Fatalf("clientset: %v", err)
	}
	hpa, err := kubernetes.NewForConfig(c.config(hpaToken, hpaUserAgent))
	if err != nil {
		t.Fatalf("HPA clientset: %v", err)
	}

	installCRDs(t, ctx, dyn, bins.crdDir)
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fluxNS}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", fluxNS, err)
	}
	publishArtifact(t, ctx, dyn, "web", map[string]string{"deployment.yaml": deploymentYAML})
	applyFlux(t, ctx, dyn, ksGVR, []byte(kustomizationYAML))

	kc := startFluxController(t, c, "kustomize-controller", bins.kustomizeController)

	field := core.K8sField("apps", "Deployment", "default", "web", "/spec/replicas")
	if _, err := core.ParseField(field.String()); err != nil || field.String() != "k8s:apps/Deployment/default/web#/spec/replicas" {
		t.Fatalf("field %q: %v", field, err)
	}

	// Each step builds on the previous one: stop at the first that fails.
	step := func(name string, f func(t *testing.T)) {
		if !t.Run(name, f) {
			t.FailNow()
		}
	}

	// a. Flux applies the Deployment and owns its replicas.
	step("a/flux-applies", func(t *testing.T) {
		waitFor(t, 120*time.Second, "Flux to apply Deployment default/web with replicas 3, owned by kustomize-controller", func() (bool, error) {
			if err := kc.exited(); err != nil {
				return false, err
			}
			d, err := kube.AppsV1().Deployments("default").Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return false, notYet("get deployment: %v", err)
			}
			owners, err := replicasOwners(d)
			if err != nil {
				return false, err
			}
			if replicas(d) != 3 || !hasOwner(owners, "kustomize-controller", metav1.ManagedFieldsOperationApply, "") {
				return false, notYet("replicas %d, owners of spec.replicas %v", replicas(d), describe(owners))
			}
			return true, nil
		})
		waitGenerationReady(t, ctx, dyn, ksGVR, "web")
		t.Logf("a: Flux applied web with replicas 3 owned by kustomize-controller (Apply) after %s", time.Since(began).Round(time.Millisecond))
	})

	// b. An HPA-style write through the scale subresource takes the field over.
	var hpaManager string
	step("b/hpa-scales", func(t *testing.T) {
		scaleAsHPA(t, ctx, hpa, "web", 7)
		d := getDeployment(t, ctx, kube, "web")
		owners, err := replicasOwners(d)
		if err != nil {
			t.Fatal(err)
		}
		if replicas(d) != 7 {
			t.Fatalf("replicas after the HPA's scale update: %d, want 7", replicas(d))
		}
		if !hasOwner(owners, "kube-controller-manager", metav1.ManagedFieldsOperationUpdate, "scale") {
			t.Fatalf("spec.replicas owners %v, want kube-controller-manager (Update, scale)", describe(owners))
		}
		if hasOwner(owners, "kustomize-controller", "", "") {
			t.Fatalf("spec.replicas owners %v: kustomize-controller must have lost it to the update", describe(owners))
		}
		for _, e := range owners {
			if e.Subresource == "scale" {
				hpaManager = e.Manager
			}
		}
		t.Logf("b: spec.replicas now owned by %v", describe(owners))
	})

	// c. Parley's audit decoder names the same actor and manager.
	step("c/audit-names-actor", func(t *testing.T) {
		var seen []events.Observation
		waitFor(t, 30*time.Second, "an audit observation of "+field.String()+" = 7", func() (bool, error) {
			seen = seen[:0]
			for i, body := range c.audit.all() {
				b, err := events.DecodeK8sAudit(body)
				if err != nil {
					return false, fmt.Errorf("decode audit body %d: %w", i, err)
				}
				for _, o := range b.Observations {
					if o.Field == field && o.Value.JSON() == "7" {
						seen = append(seen, o)
					}
				}
			}
			if len(seen) == 0 {
				return false, notYet("%d audit bodies, no such observation", len(c.audit.all()))
			}
			return true, nil
		})
		for _, o := range seen {
			if o.Identity.ID != hpaUser || o.Manager != hpaManager {
				t.Errorf("observation %s = 7 (event %s): identity %q manager %q, want %q and %q (the managedFields manager)",
					o.Field, o.EventID, o.Identity.ID, o.Manager, hpaUser, hpaManager)
			}
		}
		t.Logf("c: audit event %s: %s set %s = 7 via %s", seen[0].EventID, seen[0].Identity.ID, seen[0].Field, seen[0].Manager)
	})

	// d. Without a gate, a Flux reconcile takes the field back: the fight.
	step("d/flux-reverts", func(t *testing.T) {
		reconcile(t, ctx, dyn, ksGVR, "web")
		if got := replicas(getDeployment(t, ctx, kube, "web")); got != 3 {
			t.Fatalf("replicas after an ungated Flux reconcile: %d, want 3 (Flux restoring Git)", got)
		}
		t.Log("d: an ungated reconcile put replicas back to 3")
	})

	// e. With Parley's gate in the Kustomization, Flux leaves the HPA's value alone.
	path := "clusters/e2e/web.yaml"
	target := gitops.Target{Kind: "Kustomization", Name: "web", Namespace: fluxNS}
	var gated []byte
	step("e/gate-holds", func(t *testing.T) {
		var changed bool
		gated, changed, err = gitops.AddGate(path, []byte(kustomizationYAML), target, gitops.Gate{Field: field, Rule: "e2e: the HPA owns replicas"})
		if err != nil || !changed {
			t.Fatalf("gitops.AddGate: changed %v, err %v", changed, err)
		}
		t.Logf("e: Parley's gated Kustomization:\n%s", gated)
		applyFlux(t, ctx, dyn, ksGVR, gated)
		if got := liveIgnore(t, ctx, dyn, "web"); len(got) != 1 {
			t.Fatalf("live spec.ignore after applying Parley's YAML: %v, want its one entry", got)
		}
		waitGenerationReady(t, ctx, dyn, ksGVR, "web")
		scaleAsHPA(t, ctx, hpa, "web", 7)
		reconcile(t, ctx, dyn, ksGVR, "web")
		d := getDeployment(t, ctx, kube, "web")
		if replicas(d) != 7 {
			t.Fatalf("replicas after a gated Flux reconcile: %d, want the HPA's 7", replicas(d))
		}
		owners, _ := replicasOwners(d)
		t.Logf("e: a gated reconcile kept replicas 7; owners of spec.replicas %v", describe(owners))
	})

	// f. Resuming gives back the committed bytes and Flux's control.
	step("f/resume", func(t *testing.T) {
		back, changed, err := gitops.RemoveGate(path, gated, target, field)
		if err != nil || !changed {
			t.Fatalf("gitops.RemoveGate: changed %v, err %v", changed, err)
		}
		if string(back) != kustomizationYAML {
			t.Fatalf("resume must give back the committed bytes; got:\n%s\nwant:\n%s", back, kustomizationYAML)
		}
		applyFlux(t, ctx, dyn, ksGVR, back)
		if got := liveIgnore(t, ctx, dyn, "web"); len(got) != 0 {
			t.Fatalf("live spec.ignore after applying the resumed YAML: %v, want none", got)
		}
		reconcile(t, ctx, dyn, ksGVR, "web")
		if got := replicas(getDeployment(t, ctx, kube, "web")); got != 3 {
			t.Fatalf("replicas after resuming and reconciling: %d, want 3", got)
		}
		t.Logf("f: resumed; replicas back to 3 (whole test %s)", time.Since(began).Round(time.Millisecond))
	})

	// g. An overlay renames the Deployment (namePrefix): Parley's discovery builds the overlay with
	// the Kustomize API, finds the object under the name the cluster knows and the Kustomization
	// that applies it, and the gate it writes there holds on the real controller.
	overlayFiles := map[string]string{
		"kustomization.yaml": "namePrefix: staging-\nresources:\n  - deployment.yaml\n",
		"deployment.yaml":    deploymentYAML,
	}
	overlayYAML := strings.ReplaceAll(kustomizationYAML, "name: web\n", "name: overlay\n")
	renamed := core.K8sField("apps", "Deployment", "default", "staging-web", "/spec/replicas")
	step("g/overlay-name-prefix", func(t *testing.T) {
		publishArtifact(t, ctx, dyn, "overlay", overlayFiles)
		applyFlux(t, ctx, dyn, ksGVR, []byte(overlayYAML))
		waitFor(t, 120*time.Second, "Flux to apply the overlay's Deployment default/staging-web", func() (bool, error) {
			d, err := kube.AppsV1().Deployments("default").Get(ctx, "staging-web", metav1.GetOptions{})
			if err != nil {
				return false, notYet("get deployment: %v", err)
			}
			return replicas(d) == 3, nil
		})
		waitGenerationReady(t, ctx, dyn, ksGVR, "overlay")
		scaleAsHPA(t, ctx, hpa, "staging-web", 7)
		reconcile(t, ctx, dyn, ksGVR, "overlay")
		if got := replicas(getDeployment(t, ctx, kube, "staging-web")); got != 3 {
			t.Fatalf("replicas of staging-web after an ungated reconcile: %d, want 3", got)
		}

		repo := map[string][]byte{"clusters/e2e/overlay.yaml": []byte(overlayYAML)}
		for n, c := range overlayFiles {
			repo[n] = []byte(c)
		}
		inv, problems := gitops.Discover(repo)
		if len(problems) > 0 {
			t.Fatalf("discovery problems: %v", problems)
		}
		pl, ok := inv.Locate(renamed)
		if !ok || pl.Manifest != "deployment.yaml" || len(pl.Managers) != 1 || pl.Managers[0].Target.Name != "overlay" {
			t.Fatalf("placement of staging-web: %+v %v", pl, ok)
		}
		m := pl.Managers[0]
		gatedOverlay, changed, err := gitops.AddGate(m.File, repo[m.File], m.Target, gitops.Gate{Field: renamed, Rule: "e2e: the HPA owns replicas"})
		if err != nil || !changed {
			t.Fatalf("gitops.AddGate: changed %v, err %v", changed, err)
		}
		applyFlux(t, ctx, dyn, ksGVR, gatedOverlay)
		ignore := liveIgnore(t, ctx, dyn, "overlay")
		if len(ignore) != 1 || !strings.Contains(fmt.Sprint(ignore), "staging-web") {
			t.Fatalf("live spec.ignore %v, want one entry for staging-web", ignore)
		}
		waitGenerationReady(t, ctx, dyn, ksGVR, "overlay")
		scaleAsHPA(t, ctx, hpa, "staging-web", 7)
		reconcile(t, ctx, dyn, ksGVR, "overlay")
		if got := replicas(getDeployment(t, ctx, kube, "staging-web")); got != 7 {
			t.Fatalf("replicas of staging-web after a gated reconcile: %d, want the HPA's 7", got)
		}
		back, _, err := gitops.RemoveGate(m.File, gatedOverlay, m.Target, renamed)
		if err != nil || string(back) != overlayYAML {
			t.Fatalf("resume: %v; got\n%s", err, back)
		}
		applyFlux(t, ctx, dyn, ksGVR, back)
		reconcile(t, ctx, dyn, ksGVR, "overlay")
		if got := replicas(getDeployment(t, ctx, kube, "staging-web")); got != 3 {
			t.Fatalf("replicas of staging-web after resuming: %d, want 3", got)
		}
		t.Logf("g: the overlay's staging-web kept the HPA's 7 under Parley's gate and went back to 3 on resume (whole test %s)", time.Since(began).Round(time.Millisecond))
	})
}

// startFluxController runs a Flux controller out of cluster against the test's apiserver, with
// ExternalArtifact sources allowed and no event recorder.
func startFluxController(t *testing.T, c *cluster, name, bin string) *process {
	t.Helper()
	ports := [2]int{freePort(t), freePort(t)}
	return start(t, c.dir, name, []string{"KUBECONFIG=" + c.kubeconfig(t), "RUNTIME_NAMESPACE=" + fluxNS}, bin,
		fmt.Sprintf("--metrics-addr=127.0.0.1:%d", ports[0]),
		fmt.Sprintf("--health-addr=127.0.0.1:%d", ports[1]),
		"--events-addr=",
		"--feature-gates=ExternalArtifact=true",
		"--log-encoding=console",
	)
}

// installCRDs creates the Flux CRDs and waits until each is established.
func installCRDs(t *testing.T, ctx context.Context, dyn dynamic.Interface, dir string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs in %s (%v): run scripts/real-controllers.sh first", dir, err)
	}
	var names []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatalf("read CRD: %v", err)
		}
		var obj map[string]any
		if err := yaml.Unmarshal(b, &obj); err != nil {
			t.Fatalf("decode CRD %s: %v", f, err)
		}
		u := &unstructured.Unstructured{Object: obj}
		if _, err := dyn.Resource(crdGVR).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create CRD %s: %v", u.GetName(), err)
		}
		names = append(names, u.GetName())
	}
	for _, n := range names {
		waitFor(t, 30*time.Second, "CRD "+n+" to be established", func() (bool, error) {
			u, err := dyn.Resource(crdGVR).Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				return false, notYet("get: %v", err)
			}
			return condition(u, "Established") == "True", nil
		})
	}
}

// publishArtifact serves a tarball of the given files and publishes it as the status of an
// ExternalArtifact named name, the way a source controller would.
func publishArtifact(t *testing.T, ctx context.Context, dyn dynamic.Interface, name string, files map[string]string) {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	now := time.Now().UTC().Truncate(time.Second)
	for _, n := range slices.Sorted(maps.Keys(files)) {
		if err := tw.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Size: int64(len(files[n])), ModTime: now, Typeflag: tar.TypeReg}); err != nil {
			t.Fatalf("tar header: %v", err)
		}
		if _, err := tw.Write([]byte(files[n])); err != nil {
			t.Fatalf("tar body: %v", err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatalf("close tar: %v", err)
	}
	if err := gz.Close(); err != nil {
		t.Fatalf("close gzip: %v", err)
	}
	tarball := buf.Bytes()
	sum := sha256.Sum256(tarball)
	digest := "sha256:" + hex.EncodeToString(sum[:])

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/gzip")
		_, _ = w.Write(tarball)
	}))
	t.Cleanup(srv.Close)

	eas := dyn.Resource(eaGVR).Namespace(fluxNS)
	ea := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "source.toolkit.fluxcd.io/v1",
		"kind":       "ExternalArtifact",
		"metadata":   map[string]any{"name": name, "namespace": fluxNS},
		"spec":       map[string]any{},
	}}
	created, err := eas.Create(ctx, ea, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create ExternalArtifact %s: %v", name, err)
	}
	created.Object["status"] = map[string]any{
		"artifact": map[string]any{
			"url":            srv.URL + "/" + name + ".tar.gz",
			"digest":         digest,
			"revision":       "latest@" + digest,
			"path":           "externalartifact/" + fluxNS + "/" + name + "/" + hex.EncodeToString(sum[:]) + ".tar.gz",
			"size":           int64(len(tarball)),
			"lastUpdateTime": now.Format(time.RFC3339),
		},
		"conditions": []any{map[string]any{
			"type":               "Ready",
			"status":             "True",
			"reason":             "Succeeded",
			"message":            "artifact published by the test",
			"observedGeneration": created.GetGeneration(),
			"lastTransitionTime": now.Format(time.RFC3339),
		}},
	}
	if _, err := eas.UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("set ExternalArtifact status: %v", err)
	}
}

// applyFlux server-side applies a Flux object's YAML (a Kustomization, a HelmRelease) as committed
// to Git.
func applyFlux(t *testing.T, ctx context.Context, dyn dynamic.Interface, gvr schema.GroupVersionResource, content []byte) {
	t.Helper()
	var obj map[string]any
	if err := yaml.Unmarshal(content, &obj); err != nil {
		t.Fatalf("decode %s YAML: %v\n%s", gvr.Resource, err, content)
	}
	u := &unstructured.Unstructured{Object: obj}
	if _, err := dyn.Resource(gvr).Namespace(u.GetNamespace()).Apply(ctx, u.GetName(), u, metav1.ApplyOptions{FieldManager: gitManager, Force: true}); err != nil {
		t.Fatalf("apply %s %s/%s: %v", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
}

// liveIgnore returns the Kustomization's spec.ignore as stored by the apiserver.
func liveIgnore(t *testing.T, ctx context.Context, dyn dynamic.Interface, ks string) []any {
	t.Helper()
	u, err := dyn.Resource(ksGVR).Namespace(fluxNS).Get(ctx, ks, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get Kustomization: %v", err)
	}
	ignore, _, _ := unstructured.NestedSlice(u.Object, "spec", "ignore")
	return ignore
}

// reconcile asks Flux for a reconcile of a Kustomization or HelmRelease in flux-system, as `flux
// reconcile` does, and waits until the status shows that this very request was handled and the
// object is Ready at its current generation.
func reconcile(t *testing.T, ctx context.Context, dyn dynamic.Interface, gvr schema.GroupVersionResource, name string) {
	t.Helper()
	at := time.Now().UTC().Format(time.RFC3339Nano)
	patch := fmt.Sprintf(`{"metadata":{"annotations":{"reconcile.fluxcd.io/requestedAt":%q}}}`, at)
	if _, err := dyn.Resource(gvr).Namespace(fluxNS).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: "flux"}); err != nil {
		t.Fatalf("request a reconcile of %s %s: %v", gvr.Resource, name, err)
	}
	waitFor(t, 90*time.Second, "Flux to handle the reconcile of "+name+" requested at "+at, func() (bool, error) {
		u, err := dyn.Resource(gvr).Namespace(fluxNS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, notYet("get %s %s: %v", gvr.Resource, name, err)
		}
		handled, _, _ := unstructured.NestedString(u.Object, "status", "lastHandledReconcileAt")
		if handled != at {
			return false, notYet("lastHandledReconcileAt %q (Ready: %s)", handled, conditionMessage(u, "Ready"))
		}
		return readyAtGeneration(u)
	})
}

// waitGenerationReady waits until Flux has reconciled the object's current spec.
func waitGenerationReady(t *testing.T, ctx context.Context, dyn dynamic.Interface, gvr schema.GroupVersionResource, name string) {
	t.Helper()
	waitFor(t, 120*time.Second, gvr.Resource+" "+name+" to be Ready at its generation", func() (bool, error) {
		u, err := dyn.Resource(gvr).Namespace(fluxNS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, notYet("get %s %s: %v", gvr.Resource, name, err)
		}
		return readyAtGeneration(u)
	})
}

func readyAtGeneration(u *unstructured.Unstructured) (bool, error) {
	observed, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
	if observed != u.GetGeneration() {
		return false, notYet("observedGeneration %d, generation %d", observed, u.GetGeneration())
	}
	if s := condition(u, "Ready"); s != "True" {
		return false, notYet("Ready %q: %s", s, conditionMessage(u, "Ready"))
	}
	return true, nil
}

// scaleAsHPA updates the scale subresource the way the HPA controller does: an update (not an
// apply) of autoscaling/v1 Scale, as the HPA's service account, with kube-controller-manager's
// User-Agent.
func scaleAsHPA(t *testing.T, ctx context.Context, hpa kubernetes.Interface, name string, n int32) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s, err := hpa.AppsV1().Deployments("default").GetScale(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		s.Spec.Replicas = n
		_, err = hpa.AppsV1().Deployments("default").UpdateScale(ctx, name, s, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("scale deployment default/%s to %d as the HPA: %v", name, n, err)
	}
}

func getDeployment(t *testing.T, ctx context.Context, kube kubernetes.Interface, name string) *appsv1.Deployment {
	t.Helper()
	d, err := kube.AppsV1().Deployments("default").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get deployment default/%s: %v", name, err)
	}
	return d
}

func replicas(d *appsv1.Deployment) int32 {
	if d.Spec.Replicas == nil {
		return -1
	}
	return *d.Spec.Replicas
}

// replicasOwners returns the managedFields entries whose field set holds spec.replicas.
func replicasOwners(d *appsv1.Deployment) ([]metav1.ManagedFieldsEntry, error) {
	var out []metav1.ManagedFieldsEntry
	for _, e := range d.ManagedFields {
		if e.FieldsV1 == nil {
			continue
		}
		var s fieldpath.Set
		if err := s.FromJSON(bytes.NewReader(e.FieldsV1.Raw)); err != nil {
			return nil, fmt.Errorf("parse fieldsV1 of manager %s: %w", e.Manager, err)
		}
		if s.Has(replicasP) {
			out = append(out, e)
		}
	}
	return out, nil
}

// hasOwner reports whether an entry of manager owns the field; an empty operation or subresource
// matches any.
func hasOwner(owners []metav1.ManagedFieldsEntry, manager string, op metav1.ManagedFieldsOperationType, sub string) bool {
	return slices.ContainsFunc(owners, func(e metav1.ManagedFieldsEntry) bool {
		return e.Manager == manager && (op == "" || e.Operation == op) && (sub == "" || e.Subresource == sub)
	})
}

func describe(owners []metav1.ManagedFieldsEntry) string {
	var s []string
	for _, e := range owners {
		d := e.Manager + " (" + string(e.Operation)
		if e.Subresource != "" {
			d += ", " + e.Subresource
		}
		s = append(s, d+")")
	}
	return "[" + strings.Join(s, "; ") + "]"
}

func condition(u *unstructured.Unstructured, typ string) string {
	return conditionField(u, typ, "status")
}

func conditionMessage(u *unstructured.Unstructured, typ string) string {
	return conditionField(u, typ, "message")
}

func conditionField(u *unstructured.Unstructured, typ, field string) string {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if ok && m["type"] == typ {
			s, _ := m[field].(string)
			return s
		}
	}
	return ""
}
