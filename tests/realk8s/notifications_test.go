package realk8s

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"
)

// The notification-controller API Flux ships beside kustomize-controller v1.9.4, and the
// controller-gen release that turns its Go types into CRDs.
const (
	notificationAPIVersion = "v1.9.4"
	controllerGenVersion   = "v0.19.0"
)

var (
	providerGVR = schema.GroupVersionResource{Group: "notification.toolkit.fluxcd.io", Version: "v1beta3", Resource: "providers"}
	alertGVR    = schema.GroupVersionResource{Group: "notification.toolkit.fluxcd.io", Version: "v1beta3", Resource: "alerts"}
	secretGVR   = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
)

// notificationCRDs returns a directory with notification-controller's v1beta3 Provider and Alert
// CRDs, made once per version into the cache. The Go module proxy serves the controller's api
// module but not the repository whose config/crd holds the YAML, so the CRDs are generated from
// that module's types with controller-gen, as Flux itself generates them (kubebuilder markers:
// enums, required fields, CEL rules).
func notificationCRDs(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(cacheDir(t), "crds-notification-controller-api-"+notificationAPIVersion+"-controller-gen-"+controllerGenVersion)
	want := []string{"notification.toolkit.fluxcd.io_providers.yaml", "notification.toolkit.fluxcd.io_alerts.yaml"}
	have := func(d string) bool {
		for _, f := range want {
			if fi, err := os.Stat(filepath.Join(d, f)); err != nil || fi.Size() == 0 {
				return false
			}
		}
		return true
	}
	if have(dir) {
		return dir
	}
	run := func(dir string, args ...string) []byte {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, errb.String())
		}
		return out.Bytes()
	}
	var mod struct{ Dir, Error string }
	if err := json.Unmarshal(run(t.TempDir(), "mod", "download", "-json", "github.com/fluxcd/notification-controller/api@"+notificationAPIVersion), &mod); err != nil || mod.Dir == "" {
		t.Fatalf("download notification-controller/api %s: %v %s", notificationAPIVersion, err, mod.Error)
	}
	// A writable copy: loading the packages may complete its go.sum.
	src := filepath.Join(t.TempDir(), "api")
	if err := os.CopyFS(src, os.DirFS(mod.Dir)); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "crds.")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	run(src, "run", "sigs.k8s.io/controller-tools/cmd/controller-gen@"+controllerGenVersion, "crd", "paths=./v1beta3/...", "output:crd:dir="+tmp)
	if !have(tmp) {
		t.Fatalf("controller-gen wrote no %v into %s", want, tmp)
	}
	os.RemoveAll(dir)
	if err := os.Rename(tmp, dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestShippedFluxNotifications applies charts/parley/flux-notifications.yaml to the real
// kube-apiserver with Flux's notification CRDs, which validate every field (the provider type, the
// event sources' kinds, the severity): the shipped Provider and Alert are accepted as written, name
// each other and the Secret whose `token` signs the events, and a wrong one is refused (so the
// acceptance means something).
func TestShippedFluxNotifications(t *testing.T) {
	bins := cachedBinaries(t)
	bins.require(t, bins.etcd, bins.apiserver)
	crds := notificationCRDs(t)
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
	installCRDs(t, ctx, dyn, crds)
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "flux-system"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	raw, err := os.ReadFile(filepath.Join(chartDir, "flux-notifications.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	objs := map[string]*unstructured.Unstructured{}
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatalf("flux-notifications.yaml: %v", err)
		}
		u := &unstructured.Unstructured{Object: obj}
		gvr := map[string]schema.GroupVersionResource{"Secret": secretGVR, "Provider": providerGVR, "Alert": alertGVR}[u.GetKind()]
		if gvr.Resource == "" || u.GetAPIVersion() != (schema.GroupVersion{Group: gvr.Group, Version: gvr.Version}).String() {
			t.Fatalf("flux-notifications.yaml holds %s %s: want the Secret, the v1beta3 Provider and Alert", u.GetAPIVersion(), u.GetKind())
		}
		if err := apply(ctx, dyn, gvr, u); err != nil {
			t.Fatalf("the real API server refuses the shipped %s: %v", u.GetKind(), err)
		}
		objs[u.GetKind()] = u
	}
	if len(objs) != 3 {
		t.Fatalf("flux-notifications.yaml holds %d kinds, want Secret, Provider and Alert", len(objs))
	}

	provider, err := dyn.Resource(providerGVR).Namespace("flux-system").Get(ctx, objs["Provider"].GetName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	typ, _, _ := unstructured.NestedString(provider.Object, "spec", "type")
	secretName, _, _ := unstructured.NestedString(provider.Object, "spec", "secretRef", "name")
	address, _, _ := unstructured.NestedString(provider.Object, "spec", "address")
	if typ != "generic-hmac" || secretName != objs["Secret"].GetName() || !strings.HasSuffix(address, "/events/flux") {
		t.Errorf("provider type %q, secret %q, address %q: want generic-hmac to Parley's /events/flux, keyed by the shipped Secret", typ, secretName, address)
	}
	secret, err := kube.CoreV1().Secrets("flux-system").Get(ctx, secretName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(secret.Data["token"]) == 0 {
		t.Errorf("the Secret has no token, the key generic-hmac signs with: %v", secret.Data)
	}
	alert, err := dyn.Resource(alertGVR).Namespace("flux-system").Get(ctx, objs["Alert"].GetName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ref, _, _ := unstructured.NestedString(alert.Object, "spec", "providerRef", "name")
	sources, _, _ := unstructured.NestedSlice(alert.Object, "spec", "eventSources")
	kinds := map[string]bool{}
	for _, s := range sources {
		m, _ := s.(map[string]any)
		if m["name"] == "*" {
			kinds[m["kind"].(string)] = true
		}
	}
	if ref != provider.GetName() || !kinds["Kustomization"] || !kinds["HelmRelease"] {
		t.Errorf("alert provider %q, every-name sources %v: want the Provider, every Kustomization and HelmRelease", ref, kinds)
	}

	// The server validates: a type notification-controller does not know, or a severity it does
	// not have, is refused.
	bad := objs["Provider"].DeepCopy()
	bad.SetName("typo")
	unstructured.SetNestedField(bad.Object, "generic-hmax", "spec", "type")
	if err := apply(ctx, dyn, providerGVR, bad); err == nil || !strings.Contains(err.Error(), "spec.type") {
		t.Errorf("a Provider of type generic-hmax: %v, want refused on spec.type", err)
	}
	badAlert := objs["Alert"].DeepCopy()
	badAlert.SetName("debug")
	unstructured.SetNestedField(badAlert.Object, "debug", "spec", "eventSeverity")
	if err := apply(ctx, dyn, alertGVR, badAlert); err == nil || !strings.Contains(err.Error(), "spec.eventSeverity") {
		t.Errorf("an Alert of severity debug: %v, want refused on spec.eventSeverity", err)
	}
}

func apply(ctx context.Context, dyn dynamic.Interface, gvr schema.GroupVersionResource, u *unstructured.Unstructured) error {
	if u.GetNamespace() == "" {
		return errors.New(u.GetKind() + " " + u.GetName() + " names no namespace")
	}
	_, err := dyn.Resource(gvr).Namespace(u.GetNamespace()).Apply(ctx, u.GetName(), u, metav1.ApplyOptions{FieldManager: "parley-realk8s-test", Force: true})
	return err
}
