package gitops

import (
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/core"
)

const helmRelease = `# The web shop, from the chart in this repository.
apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: web
  namespace: flux-system
spec:
  interval: 10m
  targetNamespace: prod
  chart:
    spec:
      chart: ./charts/web
      sourceRef:
        kind: GitRepository
        name: flux-system
%s  values:
    replicaCount: 3 # the HPA scales from here
`

func TestHelmReleaseGateAddAndResumeExactly(t *testing.T) {
	f := core.K8sField("apps", "Deployment", "prod", "web", "/spec/replicas")
	tgt := Target{Kind: KindHelmRelease, Name: "web", Namespace: "flux-system"}
	for _, tt := range []struct{ name, drift, want string }{
		{"no driftDetection", "", "  driftDetection:\n    ignore:\n    - paths:\n      - /spec/replicas\n      target:\n        group: apps\n        kind: Deployment\n        name: web\n        namespace: prod\n"},
		{"drift detection enabled", "  driftDetection:\n    mode: enabled\n", "    mode: enabled\n    ignore:\n    - paths:\n      - /spec/replicas\n"},
		{"a rule of the file's own", "  driftDetection:\n    mode: enabled\n    ignore:\n      - paths: [\"/metadata/annotations\"]\n", "      - paths: [\"/metadata/annotations\"]\n      - paths:\n          - /spec/replicas\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			src := []byte(strings.Replace(helmRelease, "%s", tt.drift, 1))
			out, changed, err := AddGate("flux/web.yaml", src, tgt, Gate{Field: f, Until: time.Date(2026, 11, 22, 13, 0, 0, 0, time.UTC), Rule: "owner.replicas"})
			if err != nil || !changed {
				t.Fatalf("add: %v %v", changed, err)
			}
			if !strings.Contains(string(out), tt.want) || !strings.Contains(string(out), "parley.dev/gates: '[{\"field\":\"k8s:apps/Deployment/prod/web#/spec/replicas\"") {
				t.Fatalf("add: want %q in\n%s", tt.want, out)
			}
			if !strings.Contains(string(out), "# the HPA scales from here") || !strings.Contains(string(out), "# The web shop") {
				t.Fatalf("comments lost:\n%s", out)
			}
			listed, err := ListGates("flux/web.yaml", out)
			if err != nil || len(listed) != 1 || listed[0].Target != tgt || listed[0].Field != f {
				t.Fatalf("listed %+v %v", listed, err)
			}
			if again, changed, err := AddGate("flux/web.yaml", out, tgt, Gate{Field: f, Until: time.Date(2026, 11, 22, 13, 0, 0, 0, time.UTC), Rule: "owner.replicas"}); err != nil || changed || string(again) != string(out) {
				t.Fatalf("adding twice: %v %v", changed, err)
			}
			back, changed, err := RemoveGate("flux/web.yaml", out, tgt, f)
			if err != nil || !changed || string(back) != string(src) {
				t.Fatalf("resume (%v, %v) did not give back the bytes:\n%s\n--- want\n%s", changed, err, back, src)
			}
		})
	}
}

func TestHelmReleaseGateRefusals(t *testing.T) {
	f := core.K8sField("apps", "Deployment", "prod", "web", "/spec/replicas")
	tgt := Target{Kind: KindHelmRelease, Name: "web", Namespace: "flux-system"}
	for _, tt := range []struct{ content, want string }{
		{strings.Replace(strings.Replace(helmRelease, "%s", "", 1), "helm.toolkit.fluxcd.io/v2", "helm.toolkit.fluxcd.io/v2beta1", 1), "v2beta1"},
		{strings.Replace(helmRelease, "%s", "  driftDetection:\n    mode: sometimes\n    colour: red\n", 1), "colour"},
	} {
		if _, _, err := AddGate("flux/web.yaml", []byte(tt.content), tgt, Gate{Field: f}); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("got %v, want an error naming %q", err, tt.want)
		}
	}
	for _, tt := range []struct{ drift, mode string }{{"", "disabled"}, {"  driftDetection:\n    mode: warn\n", "warn"}, {"  driftDetection:\n    mode: enabled\n", "enabled"}} {
		if m, err := HelmDriftMode("flux/web.yaml", []byte(strings.Replace(helmRelease, "%s", tt.drift, 1)), tgt); err != nil || m != tt.mode {
			t.Errorf("mode %q: got %q, %v", tt.mode, m, err)
		}
	}
}

// The values key behind a rendered field is found by rendering, and the value lands in the
// HelmRelease's spec.values, comments kept.
func TestHelmValuesKeyAndAdoption(t *testing.T) {
	release := strings.Replace(helmRelease, "%s", "", 1)
	files := map[string][]byte{
		"flux/web.yaml":         []byte(release),
		"charts/web/Chart.yaml": []byte("apiVersion: v2\nname: web\nversion: 1.0.0\n"),
		"charts/web/values.yaml": []byte("replicaCount: 1\nresources:\n  requests:\n    cpu: 100m\n    memory: 128Mi\n" +
			"image:\n  repository: registry.example/web\n  tag: \"1.0\"\nlimits: 128Mi\n"),
		"charts/web/templates/deploy.yaml": []byte(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}
spec:
  replicas: {{ .Values.replicaCount }}
  template:
    spec:
      containers:
        - name: web
          image: "{{ .Values.image.repository }}:{{ .Values.image.tag }}"
          resources:
            requests:
              cpu: {{ .Values.resources.requests.cpu }}
              memory: {{ .Values.resources.requests.memory }}
            limits:
              memory: {{ .Values.limits }}
`),
	}
	// A HelmRelease in flux-system installing into prod: release name prod-web.
	files["flux/web.yaml"] = []byte(strings.Replace(release, "chart: ./charts/web", "chart: ./charts/web", 1))
	inv, problems := Discover(files)
	if len(problems) > 0 {
		t.Fatalf("problems %v", problems)
	}
	obj := func(ptr string) core.Field { return core.K8sField("apps", "Deployment", "prod", "prod-web", ptr) }
	if v, ok := inv.RenderedValue(obj("/spec/replicas")); !ok || v.JSON() != "3" {
		t.Fatalf("rendered replicas %s %v, want the release's 3", v, ok)
	}
	val := func(s string) core.Value { v, _ := core.ParseJSONValue([]byte(s)); return v }
	for _, tt := range []struct {
		ptr, value, key string
		several         bool
	}{
		{"/spec/replicas", "5", "replicaCount", false},
		{"/spec/template/spec/containers/0/resources/requests/cpu", `"250m"`, "resources.requests.cpu", false},
		// 128Mi is both the request and the limit: setting the request's key to 256Mi moves the
		// request alone, so one key maps.
		{"/spec/template/spec/containers/0/resources/requests/memory", `"256Mi"`, "resources.requests.memory", false},
		// The image is built from two keys: no single key renders the whole new value.
		{"/spec/template/spec/containers/0/image", `"registry.example/web:2.0"`, "", false},
	} {
		key, mapping, m, err := inv.HelmValuesKey(obj(tt.ptr), val(tt.value))
		if err != nil {
			t.Fatalf("%s: %v", tt.ptr, err)
		}
		if key.String() != tt.key || (tt.key == "" && len(mapping) != 0) {
			t.Errorf("%s = %s: key %q (mapping %v), want %q", tt.ptr, tt.value, key, mapping, tt.key)
		}
		if m.Target.Kind != KindHelmRelease || m.Target.Name != "web" {
			t.Errorf("%s: manager %+v", tt.ptr, m.Target)
		}
	}
	out, changed, err := AdoptHelmValue("flux/web.yaml", files["flux/web.yaml"], Target{Kind: KindHelmRelease, Name: "web", Namespace: "flux-system"},
		ValuesKey{"resources", "requests", "cpu"}, val(`"250m"`))
	if err != nil || !changed {
		t.Fatalf("AdoptHelmValue: %v %v", changed, err)
	}
	if !strings.Contains(string(out), "    replicaCount: 3 # the HPA scales from here\n    resources:\n      requests:\n        cpu: 250m\n") {
		t.Fatalf("values after adoption:\n%s", out)
	}
	files["flux/web.yaml"] = out
	inv, _ = Discover(files)
	if v, _ := inv.RenderedValue(obj("/spec/template/spec/containers/0/resources/requests/cpu")); v.JSON() != `"250m"` {
		t.Fatalf("after adoption the chart renders cpu %s", v)
	}
	if again, changed, err := AdoptHelmValue("flux/web.yaml", out, Target{Kind: KindHelmRelease, Name: "web", Namespace: "flux-system"},
		ValuesKey{"resources", "requests", "cpu"}, val(`"250m"`)); err != nil || changed || string(again) != string(out) {
		t.Fatalf("adopting again: %v %v", changed, err)
	}
}

// Where the policy allows it, a gate turns a HelmRelease's drift detection on, and the last
// resume puts the mode back as it was: unset, or warn.
func TestHelmReleaseGateEnablesDriftDetection(t *testing.T) {
	tgt := Target{Kind: KindHelmRelease, Name: "web", Namespace: "flux-system"}
	a := core.K8sField("apps", "Deployment", "prod", "web", "/spec/replicas")
	b := core.K8sField("apps", "Deployment", "prod", "web", "/spec/template/spec/containers/0/image")
	for _, drift := range []string{"", "  driftDetection:\n    mode: warn\n", "  driftDetection:\n    mode: enabled\n"} {
		src := []byte(strings.Replace(helmRelease, "%s", drift, 1))
		out, _, err := AddGate("flux/web.yaml", src, tgt, Gate{Field: a, Rule: "owner", EnableDriftDetection: true})
		if err != nil {
			t.Fatal(err)
		}
		out, _, err = AddGate("flux/web.yaml", out, tgt, Gate{Field: b, Rule: "rank", EnableDriftDetection: true})
		if err != nil {
			t.Fatal(err)
		}
		if m, _ := HelmDriftMode("flux/web.yaml", out, tgt); m != "enabled" {
			t.Fatalf("%q: mode %q after the gates, want enabled\n%s", drift, m, out)
		}
		out, _, err = RemoveGate("flux/web.yaml", out, tgt, a)
		if err != nil {
			t.Fatal(err)
		}
		if m, _ := HelmDriftMode("flux/web.yaml", out, tgt); m != "enabled" {
			t.Fatalf("%q: mode %q while a gate remains, want enabled", drift, m)
		}
		back, _, err := RemoveGate("flux/web.yaml", out, tgt, b)
		if err != nil || string(back) != string(src) {
			t.Fatalf("%q: the last resume did not give back the bytes (%v):\n%s\n--- want\n%s", drift, err, back, src)
		}
	}
	// Without the policy's leave the mode is the owner's.
	src := []byte(strings.Replace(helmRelease, "%s", "", 1))
	out, _, err := AddGate("flux/web.yaml", src, tgt, Gate{Field: a})
	if m, _ := HelmDriftMode("flux/web.yaml", out, tgt); err != nil || m != "disabled" {
		t.Fatalf("mode %q (%v), want disabled", m, err)
	}
}
