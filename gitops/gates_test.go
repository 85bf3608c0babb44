package gitops

import (
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/core"
)

var replicas = core.K8sField("apps", "Deployment", "prod", "web", "/spec/replicas")

const application = `apiVersion: argoproj.io/v1alpha1
kind: Application
metadata:
  name: web
  namespace: argocd
spec:
  project: default # the shop
  source:
    repoURL: https://github.com/acme/infra
    path: k8s/prod
  destination:
    server: https://kubernetes.default.svc
    namespace: prod
  syncPolicy:
    automated:
      selfHeal: true
`

const kustomization = `apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: apps
  namespace: flux-system
spec:
  interval: 10m # reconcile often
  path: ./k8s/prod
  prune: true
  sourceRef:
    kind: GitRepository
    name: infra
`

func TestArgoCDYieldAndResume(t *testing.T) {
	app := Target{Kind: "Application", Name: "web", Namespace: "argocd"}
	until := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	out, changed, err := AddGate("apps/web.yaml", []byte(application), app, Gate{Field: replicas, Until: until, Rule: "owner.replicas"})
	if err != nil || !changed {
		t.Fatalf("add: %v %v", changed, err)
	}
	s := string(out)
	for _, want := range []string{"ignoreDifferences:", "group: apps", "kind: Deployment", "name: web", "namespace: prod",
		"jsonPointers:", "- /spec/replicas", "syncOptions:", "- RespectIgnoreDifferences=true", "parley.dev/gates", "# the shop"} {
		if !strings.Contains(s, want) {
			t.Errorf("after the yield the Application lacks %q:\n%s", want, s)
		}
	}
	again, changed, err := AddGate("apps/web.yaml", out, app, Gate{Field: replicas, Until: until, Rule: "owner.replicas"})
	if err != nil || changed || string(again) != s {
		t.Errorf("adding the same gate twice changed the file: %v %v", changed, err)
	}
	gates, err := ListGates("apps/web.yaml", out)
	if err != nil || len(gates) != 1 || gates[0].Field != replicas || !gates[0].Until.Equal(until) || gates[0].Target != app {
		t.Fatalf("listed %+v, %v", gates, err)
	}
	back, changed, err := RemoveGate("apps/web.yaml", out, app, replicas)
	if err != nil || !changed {
		t.Fatalf("remove: %v %v", changed, err)
	}
	if string(back) != application {
		t.Errorf("yield then resume must give back the original bytes:\n%s\n---\n%s", back, application)
	}
	if _, changed, _ := RemoveGate("apps/web.yaml", back, app, replicas); changed {
		t.Error("removing a gate that is not there changed the file")
	}
}

func TestArgoCDMergesIntoExistingEntryAndKeepsUserOption(t *testing.T) {
	withEntry := strings.Replace(application, "  syncPolicy:\n", `  ignoreDifferences:
    - group: apps
      kind: Deployment
      name: web
      namespace: prod
      jsonPointers:
        - /spec/template/metadata/annotations
  syncPolicy:
    syncOptions:
      - RespectIgnoreDifferences=true
`, 1)
	app := Target{Kind: "Application", Name: "web", Namespace: "argocd"}
	out, _, err := AddGate("a.yaml", []byte(withEntry), app, Gate{Field: replicas})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(string(out), "group: apps") != 1 || !strings.Contains(string(out), "- /spec/replicas") {
		t.Errorf("the pointer must join the existing entry:\n%s", out)
	}
	back, _, err := RemoveGate("a.yaml", out, app, replicas)
	if err != nil {
		t.Fatal(err)
	}
	if string(back) != withEntry {
		t.Errorf("the user's entry and sync option must survive:\n%s\n---\n%s", back, withEntry)
	}
}

func TestApplicationSetTemplate(t *testing.T) {
	set := `apiVersion: argoproj.io/v1alpha1
kind: ApplicationSet
metadata:
  name: shops
  namespace: argocd
spec:
  generators:
    - list:
        elements:
          - env: prod
  template:
    metadata:
      name: 'shop-{{env}}'
    spec:
      project: default
`
	tgt := Target{Kind: "ApplicationSet", Name: "shops", Namespace: "argocd"}
	out, _, err := AddGate("set.yaml", []byte(set), tgt, Gate{Field: replicas})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "    spec:\n      project: default\n      ignoreDifferences:") {
		t.Errorf("the gate belongs in spec.template.spec:\n%s", out)
	}
	if back, _, _ := RemoveGate("set.yaml", out, tgt, replicas); string(back) != set {
		t.Errorf("round trip:\n%s", back)
	}
}

func TestFluxYieldAndResume(t *testing.T) {
	ks := Target{Kind: "Kustomization", Name: "apps", Namespace: "flux-system"}
	out, changed, err := AddGate("clusters/prod/apps.yaml", []byte(kustomization), ks, Gate{Field: replicas, Rule: "owner.replicas"})
	if err != nil || !changed {
		t.Fatal(err)
	}
	for _, want := range []string{"ignore:", "paths:", "- /spec/replicas", "target:", "kind: Deployment", "namespace: prod", "# reconcile often"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("lacks %q:\n%s", want, out)
		}
	}
	other := core.K8sField("apps", "Deployment", "prod", "api", "/spec/replicas")
	out2, _, err := AddGate("clusters/prod/apps.yaml", out, ks, Gate{Field: other})
	if err != nil || strings.Count(string(out2), "target:") != 2 {
		t.Fatalf("a second object gets its own entry: %v\n%s", err, out2)
	}
	out3, _, _ := RemoveGate("clusters/prod/apps.yaml", out2, ks, other)
	if string(out3) != string(out) {
		t.Errorf("removing the second gate must leave the first exactly:\n%s\n---\n%s", out3, out)
	}
	back, _, _ := RemoveGate("clusters/prod/apps.yaml", out3, ks, replicas)
	if string(back) != kustomization {
		t.Errorf("round trip:\n%s", back)
	}
}

func TestGateErrors(t *testing.T) {
	app := Target{Kind: "Application", Name: "web", Namespace: "argocd"}
	cases := []struct {
		content string
		target  Target
		field   core.Field
		want    string
	}{
		{"kind: [unclosed\n", app, replicas, "bad.yaml"},
		{application, Target{Kind: "Application", Name: "api", Namespace: "argocd"}, replicas, "no Application argocd/api"},
		{application, app, core.TFField("infra", "aws_instance.x", "/count"), "only Kubernetes object fields"},
		{application, Target{Kind: "Deployment", Name: "web", Namespace: "argocd"}, replicas, "no Deployment"},
	}
	for _, c := range cases {
		out, _, err := AddGate("bad.yaml", []byte(c.content), c.target, Gate{Field: c.field})
		if err == nil || !strings.Contains(err.Error(), c.want) || out != nil {
			t.Errorf("%s: error %v (output %q), want one mentioning %q and no output", c.target, err, out, c.want)
		}
	}
}
