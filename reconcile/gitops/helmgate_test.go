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
