package gitops

import (
	"context"
	"maps"
	"strings"
	"testing"

	"github.com/parleyhq/parley/core"
)

const overlayBaseDeployment = `# Shared by every environment.
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 2 # staging's default
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
        - name: sidecar
          image: envoy:1.30
        - name: web
          image: registry.example.com/web:1.4.2
---
apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  ports:
    - port: 80
`

const overlayProdKustomization = `# The production overlay.
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namePrefix: prod-
namespace: prod # every object lands here
resources:
  - ../../base # shared with staging
`

// overlayRepo is a base shared by two overlays, and a Flux Kustomization applying the prod one.
func overlayRepo(prod string, extra map[string]string) map[string][]byte {
	files := map[string][]byte{
		"base/deployment.yaml":                []byte(overlayBaseDeployment),
		"base/kustomization.yaml":             []byte("resources:\n  - deployment.yaml\n"),
		"overlays/prod/kustomization.yaml":    []byte(prod),
		"overlays/staging/kustomization.yaml": []byte("namespace: staging\nresources:\n  - ../../base\n"),
		"clusters/prod.yaml":                  []byte("apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: prod\n  namespace: flux-system\nspec:\n  path: ./overlays/prod\n"),
	}
	for k, v := range extra {
		files[k] = []byte(v)
	}
	return files
}

func overlayValue(t *testing.T, v any) core.Value {
	t.Helper()
	val, err := core.JSONValue(v)
	if err != nil {
		t.Fatal(err)
	}
	return val
}

// builtValue is f's value as Discover builds the repository.
func overlayBuilt(t *testing.T, files map[string][]byte, f core.Field) (core.Value, bool) {
	t.Helper()
	inv, problems := Discover(files)
	for _, p := range problems {
		t.Errorf("discover: %v", p)
	}
	return inv.RenderedValue(f)
}

// adoptOverlay runs AdoptOverlayPatch, checks what any adoption must give (only overlay files
// changed, the value built, the base untouched, a second call changing nothing) and returns the
// changed files and the repository after the change.
func adoptOverlay(t *testing.T, files map[string][]byte, f core.Field, v core.Value) (map[string][]byte, map[string][]byte) {
	t.Helper()
	orig := maps.Clone(files)
	changed, err := AdoptOverlayPatch(context.Background(), nil, files, "overlays/prod", f, v)
	if err != nil {
		t.Fatalf("AdoptOverlayPatch: %v", err)
	}
	if len(changed) == 0 {
		t.Fatal("nothing changed")
	}
	for name := range changed {
		if !strings.HasPrefix(name, "overlays/prod/") {
			t.Errorf("changed %s, outside the overlay", name)
		}
	}
	if !maps.EqualFunc(files, orig, func(a, b []byte) bool { return string(a) == string(b) }) {
		t.Error("the input map was modified")
	}
	after := maps.Clone(files)
	maps.Copy(after, changed)
	if got, ok := overlayBuilt(t, after, f); !ok || !got.Equal(v) {
		t.Errorf("built value after the change = %v (%v), want %v", got, ok, v)
	}
	// The staging overlay, sharing the base, is unchanged.
	staging := core.K8sField(f.Group, f.Kind, "staging", "web", f.Path)
	was, _ := overlayBuilt(t, files, staging)
	if now, _ := overlayBuilt(t, after, staging); !now.Equal(was) {
		t.Errorf("staging changed: %v -> %v", was, now)
	}
	again, err := AdoptOverlayPatch(context.Background(), nil, after, "overlays/prod", f, v)
	if err != nil {
		t.Fatalf("second AdoptOverlayPatch: %v", err)
	}
	if len(again) != 0 {
		t.Errorf("second call changed %v", overlayKeys(again))
	}
	return changed, after
}

func overlayKeys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestOverlayPatchNewPatch(t *testing.T) {
	f := core.K8sField("apps", "Deployment", "prod", "prod-web", "/spec/replicas")
	changed, _ := adoptOverlay(t, overlayRepo(overlayProdKustomization, nil), f, overlayValue(t, 7))
	got := string(changed["overlays/prod/kustomization.yaml"])
	want := overlayProdKustomization + `patches:
  - target: {group: apps, version: v1, kind: Deployment, name: web}
    patch: |-
      - op: replace
        path: /spec/replicas
        value: 7
`
	if got != want {
		t.Errorf("kustomization:\n%s\nwant:\n%s", got, want)
	}
	if len(changed) != 1 {
		t.Errorf("changed %v", overlayKeys(changed))
	}
}

func TestOverlayPatchContainerImage(t *testing.T) {
	f := core.K8sField("apps", "Deployment", "prod", "prod-web", "/spec/template/spec/containers/1/image")
	changed, _ := adoptOverlay(t, overlayRepo(overlayProdKustomization, nil), f, overlayValue(t, "registry.example.com/web:1.5.0"))
	got := string(changed["overlays/prod/kustomization.yaml"])
	if !strings.Contains(got, "      - op: replace\n        path: /spec/template/spec/containers/1/image\n        value: registry.example.com/web:1.5.0") {
		t.Errorf("kustomization:\n%s", got)
	}
}

func TestOverlayPatchAbsentField(t *testing.T) {
	f := core.K8sField("apps", "Deployment", "prod", "prod-web", "/spec/revisionHistoryLimit")
	changed, _ := adoptOverlay(t, overlayRepo(overlayProdKustomization, nil), f, overlayValue(t, 3))
	got := string(changed["overlays/prod/kustomization.yaml"])
	if !strings.Contains(got, "- op: add\n        path: /spec/revisionHistoryLimit\n        value: 3") {
		t.Errorf("kustomization:\n%s", got)
	}
}

func TestOverlayPatchEscapedPointer(t *testing.T) {
	f := core.K8sField("apps", "Deployment", "prod", "prod-web", "/spec/template/metadata/annotations/example.com~1tier")
	// The parent exists in the base: an annotations map.
	base := strings.Replace(overlayBaseDeployment, "      labels:\n        app: web\n    spec:", "      labels:\n        app: web\n      annotations:\n        owner: team-a\n    spec:", 1)
	files := overlayRepo(overlayProdKustomization, map[string]string{"base/deployment.yaml": base})
	changed, _ := adoptOverlay(t, files, f, overlayValue(t, "gold"))
	got := string(changed["overlays/prod/kustomization.yaml"])
	if !strings.Contains(got, "path: /spec/template/metadata/annotations/example.com~1tier") {
		t.Errorf("kustomization:\n%s", got)
	}
}

func TestOverlayPatchEditsJSON6902(t *testing.T) {
	prod := overlayProdKustomization + `patches:
  - target:
      kind: Deployment
      name: web
    patch: |-
      # scaled for the launch
      - op: replace
        path: /spec/replicas
        value: 5 # launch
`
	f := core.K8sField("apps", "Deployment", "prod", "prod-web", "/spec/replicas")
	changed, _ := adoptOverlay(t, overlayRepo(prod, nil), f, overlayValue(t, 9))
	got := string(changed["overlays/prod/kustomization.yaml"])
	if want := strings.Replace(prod, "value: 5 # launch", "value: 9 # launch", 1); got != want {
		t.Errorf("kustomization:\n%s\nwant:\n%s", got, want)
	}
}

func TestOverlayPatchEditsJSON6902File(t *testing.T) {
	prod := overlayProdKustomization + "patches:\n  - path: replicas.yaml\n    target:\n      kind: Deployment\n"
	patch := "- op: replace\n  path: /spec/replicas\n  value: 5 # launch\n"
	f := core.K8sField("apps", "Deployment", "prod", "prod-web", "/spec/replicas")
	changed, _ := adoptOverlay(t, overlayRepo(prod, map[string]string{"overlays/prod/replicas.yaml": patch}), f, overlayValue(t, 4))
	if len(changed) != 1 {
		t.Errorf("changed %v, want only the patch file", overlayKeys(changed))
	}
	if got, want := string(changed["overlays/prod/replicas.yaml"]), strings.Replace(patch, "5", "4", 1); got != want {
		t.Errorf("patch:\n%s\nwant:\n%s", got, want)
	}
}

func TestOverlayPatchEditsStrategicMerge(t *testing.T) {
	prod := overlayProdKustomization + "patches:\n  - path: scale.yaml\n"
	patch := `# Production sizing.
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 5 # launch
  template:
    spec:
      containers:
        - name: web
          image: registry.example.com/web:1.4.3 # hotfix
`
	files := overlayRepo(prod, map[string]string{"overlays/prod/scale.yaml": patch})
	f := core.K8sField("apps", "Deployment", "prod", "prod-web", "/spec/replicas")
	changed, after := adoptOverlay(t, files, f, overlayValue(t, 6))
	if len(changed) != 1 {
		t.Errorf("changed %v, want only the patch file", overlayKeys(changed))
	}
	if got, want := string(changed["overlays/prod/scale.yaml"]), strings.Replace(patch, "replicas: 5", "replicas: 6", 1); got != want {
		t.Errorf("patch:\n%s\nwant:\n%s", got, want)
	}
	// The strategic merge puts the patch's container first: web is container 0 of the built object.
	img := core.K8sField("apps", "Deployment", "prod", "prod-web", "/spec/template/spec/containers/0/image")
	changed, _ = adoptOverlay(t, after, img, overlayValue(t, "registry.example.com/web:1.4.4"))
	if got, want := string(changed["overlays/prod/scale.yaml"]), strings.Replace(strings.Replace(patch, "replicas: 5", "replicas: 6", 1), "1.4.3", "1.4.4", 1); got != want {
		t.Errorf("patch:\n%s\nwant:\n%s", got, want)
	}
}

func TestOverlayPatchEditsLegacyStrategicMerge(t *testing.T) {
	prod := overlayProdKustomization + "patchesStrategicMerge:\n  - |-\n    apiVersion: apps/v1\n    kind: Deployment\n    metadata:\n      name: web\n    spec:\n      replicas: 5\n"
	f := core.K8sField("apps", "Deployment", "prod", "prod-web", "/spec/replicas")
	changed, _ := adoptOverlay(t, overlayRepo(prod, nil), f, overlayValue(t, 8))
	if got, want := string(changed["overlays/prod/kustomization.yaml"]), strings.Replace(prod, "replicas: 5", "replicas: 8", 1); got != want {
		t.Errorf("kustomization:\n%s\nwant:\n%s", got, want)
	}
}

// A patch that sets replicas of every Deployment cannot be edited for one: a new patch overrides it.
func TestOverlayPatchBroadPatchNotEdited(t *testing.T) {
	prod := overlayProdKustomization + `resources:
  - ../../base
  - worker.yaml
patches:
  - target:
      kind: Deployment
    patch: |-
      - op: replace
        path: /spec/replicas
        value: 5
`
	prod = strings.Replace(prod, "resources:\n  - ../../base # shared with staging\n", "", 1)
	worker := strings.Replace(strings.SplitN(overlayBaseDeployment, "---", 2)[0], "name: web\nspec", "name: worker\nspec", 1)
	files := overlayRepo(prod, map[string]string{"overlays/prod/worker.yaml": worker})
	f := core.K8sField("apps", "Deployment", "prod", "prod-web", "/spec/replicas")
	changed, after := adoptOverlay(t, files, f, overlayValue(t, 9))
	got := string(changed["overlays/prod/kustomization.yaml"])
	if !strings.Contains(got, "value: 5\n") || !strings.Contains(got, "target: {group: apps, version: v1, kind: Deployment, name: web}") {
		t.Errorf("kustomization:\n%s", got)
	}
	if v, _ := overlayBuilt(t, after, core.K8sField("apps", "Deployment", "prod", "prod-worker", "/spec/replicas")); !v.Equal(overlayValue(t, 5)) {
		t.Errorf("worker replicas = %v", v)
	}
}

// A base with a prefix of its own: the patch targets the name the overlay receives.
func TestOverlayPatchNestedPrefix(t *testing.T) {
	files := overlayRepo(overlayProdKustomization, map[string]string{
		"base/kustomization.yaml": "namePrefix: app-\nnamespace: shared\nresources:\n  - deployment.yaml\n",
	})
	f := core.K8sField("apps", "Deployment", "prod", "prod-app-web", "/spec/replicas")
	orig := maps.Clone(files)
	changed, err := AdoptOverlayPatch(context.Background(), nil, files, "overlays/prod", f, overlayValue(t, 7))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(changed["overlays/prod/kustomization.yaml"]); !strings.Contains(got, "target: {group: apps, version: v1, kind: Deployment, name: app-web, namespace: shared}") {
		t.Errorf("kustomization:\n%s", got)
	}
	after := maps.Clone(orig)
	maps.Copy(after, changed)
	if v, ok := overlayBuilt(t, after, f); !ok || !v.Equal(overlayValue(t, 7)) {
		t.Errorf("built %v", v)
	}
}

func TestOverlayPatchAlreadyBuilt(t *testing.T) {
	f := core.K8sField("apps", "Deployment", "prod", "prod-web", "/spec/replicas")
	changed, err := AdoptOverlayPatch(context.Background(), nil, overlayRepo(overlayProdKustomization, nil), "overlays/prod", f, overlayValue(t, 2))
	if err != nil || changed == nil || len(changed) != 0 {
		t.Errorf("got %v, %v; want an empty map", overlayKeys(changed), err)
	}
}

func TestOverlayPatchRefuses(t *testing.T) {
	replicas := core.K8sField("apps", "Deployment", "prod", "prod-web", "/spec/replicas")
	files := overlayRepo(overlayProdKustomization, nil)
	remote := overlayRepo(overlayProdKustomization+"  - https://github.com/example/app//deploy?ref=v1\n", nil)
	// kustomize's replicas transformer runs after patches: no patch can set it.
	replicasField := overlayRepo(overlayProdKustomization+"replicas:\n  - name: web\n    count: 3\n", nil)
	generated := overlayRepo(overlayProdKustomization+"configMapGenerator:\n  - name: settings\n    literals: [LOG=info]\n", nil)
	for _, tc := range []struct {
		name    string
		files   map[string][]byte
		overlay string
		f       core.Field
		v       core.Value
		want    string
	}{
		{"expression", files, "overlays/prod", replicas, core.ExprValue("${var.replicas}"), "only a literal value"},
		{"absent value", files, "overlays/prod", replicas, core.Value{}, "only a literal value"},
		{"no kustomization", files, "base/none", replicas, overlayValue(t, 7), "no kustomization file"},
		{"remote resource", remote, "overlays/prod", replicas, overlayValue(t, 7), "remote resource https://github.com/example/app//deploy?ref=v1"},
		{"object not built", files, "overlays/prod", core.K8sField("apps", "Deployment", "prod", "web", "/spec/replicas"), overlayValue(t, 7), "does not build Deployment prod/web"},
		{"later transformer", replicasField, "overlays/prod", replicas, overlayValue(t, 7), "replicas = 3"},
		{"generated", generated, "overlays/prod", core.K8sField("", "ConfigMap", "prod", "prod-settings-"+generatedSuffix(t, generated), "/data/LOG"), overlayValue(t, "debug"), "generator"},
		{"terraform", files, "overlays/prod", core.TFField(".", "aws_instance.web", "/ami"), overlayValue(t, "x"), "not a Kubernetes object field"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			changed, err := AdoptOverlayPatch(context.Background(), nil, tc.files, tc.overlay, tc.f, tc.v)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, %v; want an error with %q", overlayKeys(changed), err, tc.want)
			}
			if changed != nil {
				t.Errorf("returned files with an error: %v", overlayKeys(changed))
			}
		})
	}
}

// generatedSuffix is the hash kustomize gives the generated ConfigMap of the overlay.
func generatedSuffix(t *testing.T, files map[string][]byte) string {
	t.Helper()
	d := &discovery{files: files, kustomize: map[string]*kustomizeFile{}, builtFiles: map[string]bool{}}
	docs, err := overlayBuild(d, files, "overlays/prod", "overlays/prod/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range docs {
		if b.key.kind == "ConfigMap" {
			return strings.TrimPrefix(b.key.name, "prod-settings-")
		}
	}
	t.Fatal("no ConfigMap built")
	return ""
}

// An operation that sets a list element whole is edited inside its value.
func TestOverlayPatchEditsInsideAnOperation(t *testing.T) {
	prod := overlayProdKustomization + `patches:
  - target: {kind: Deployment, name: web}
    patch: |-
      - op: replace
        path: /spec/template/spec/containers/1
        value:
          name: web
          image: registry.example.com/web:1.4.3 # hotfix
`
	f := core.K8sField("apps", "Deployment", "prod", "prod-web", "/spec/template/spec/containers/1/image")
	changed, _ := adoptOverlay(t, overlayRepo(prod, nil), f, overlayValue(t, "registry.example.com/web:1.4.4"))
	if got, want := string(changed["overlays/prod/kustomization.yaml"]), strings.Replace(prod, "1.4.3", "1.4.4", 1); got != want {
		t.Errorf("kustomization:\n%s\nwant:\n%s", got, want)
	}
}

// A patch file outside the overlay may be shared with other overlays: it is not edited, and a new
// patch of the overlay's own overrides it.
func TestOverlayPatchSharedPatchFileNotEdited(t *testing.T) {
	prod := overlayProdKustomization + "patches:\n  - path: ../../patches/scale.yaml\n"
	shared := "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 5\n"
	files := overlayRepo(prod, map[string]string{"patches/scale.yaml": shared})
	f := core.K8sField("apps", "Deployment", "prod", "prod-web", "/spec/replicas")
	changed, _ := adoptOverlay(t, files, f, overlayValue(t, 6))
	if len(changed) != 1 || changed["overlays/prod/kustomization.yaml"] == nil {
		t.Fatalf("changed %v", overlayKeys(changed))
	}
	if got := string(changed["overlays/prod/kustomization.yaml"]); !strings.HasSuffix(got, "  - path: ../../patches/scale.yaml\n  - target: {group: apps, version: v1, kind: Deployment, name: web}\n    patch: |-\n      - op: replace\n        path: /spec/replicas\n        value: 6\n") {
		t.Errorf("kustomization:\n%s", got)
	}
}
