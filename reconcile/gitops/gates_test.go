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

// Kustomizations whose gates take the remove patch form, and one that takes spec.ignore.
const (
	kustomizationV1beta2 = `apiVersion: kustomize.toolkit.fluxcd.io/v1beta2
kind: Kustomization
metadata:
  name: apps
  namespace: flux-system
spec:
  interval: 10m # older controller: no spec.ignore
  path: ./k8s/prod
  prune: true
  sourceRef:
    kind: GitRepository
    name: infra
`
	kustomizationV1beta1 = `apiVersion: kustomize.toolkit.fluxcd.io/v1beta1
kind: Kustomization
metadata:
  name: apps
  namespace: flux-system
spec:
  interval: 10m
  path: ./k8s/prod
  prune: true
  sourceRef:
    kind: GitRepository
    name: infra
`
	kustomizationV1Patch = `apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: apps
  namespace: flux-system
  annotations:
    parley.dev/flux-gate: patch # the cluster runs kustomize-controller v1.8
spec:
  interval: 10m
  path: ./k8s/prod
  prune: true
  sourceRef:
    kind: GitRepository
    name: infra
`
	// A user's own patches stay as they are around Parley's entry.
	kustomizationV1beta2UserPatch = `apiVersion: kustomize.toolkit.fluxcd.io/v1beta2
kind: Kustomization
metadata:
  name: apps
  namespace: flux-system
spec:
  interval: 10m
  path: ./k8s/prod
  prune: true
  sourceRef:
    kind: GitRepository
    name: infra
  patches:
    - target:
        kind: Deployment
        name: web
      patch: |
        - op: replace
          path: /spec/template/spec/containers/0/image
          value: web:2
`
)

func TestFluxGateForms(t *testing.T) {
	ks := Target{Kind: "Kustomization", Name: "apps", Namespace: "flux-system"}
	image := core.K8sField("apps", "Deployment", "prod", "web", "/spec/template/spec/containers/0/image")
	api := core.K8sField("apps", "Deployment", "prod", "api", "/spec/replicas")
	cases := []struct {
		name    string
		doc     string
		form    string
		want    []string // in the file after the first gate
		never   []string
		entries string // what counts one entry of the form
	}{
		{"v1 takes spec.ignore", kustomization, FormIgnore,
			[]string{"  ignore:\n", "- /spec/replicas", "kind: Deployment"},
			[]string{"patches", `"form"`}, "- /spec/"},
		{"v1beta2 takes a remove patch", kustomizationV1beta2, FormPatch,
			[]string{"  patches:\n", "  patch: |\n      - op: remove\n        path: /spec/replicas\n", "group: apps", "namespace: prod", `"form":"patch"`, "# older controller"},
			[]string{"ignore:", "version:"}, "op: remove"},
		{"v1 annotated patch takes a remove patch", kustomizationV1Patch, FormPatch,
			[]string{"  patches:\n", "- op: remove", "path: /spec/replicas", `"form":"patch"`, "# the cluster runs"},
			[]string{"ignore:"}, "op: remove"},
		{"v1beta1 takes patchesJson6902", kustomizationV1beta1, FormPatchesJSON6902,
			[]string{"  patchesJson6902:\n", "patch:\n", "- op: remove\n", "path: /spec/replicas", `"form":"patchesJson6902"`},
			[]string{"patches:", "patch: |", "ignore:"}, "op: remove"},
		{"a user's patch is left alone", kustomizationV1beta2UserPatch, FormPatch,
			[]string{"op: replace", "value: web:2", "- op: remove\n          path: /spec/replicas\n"},
			nil, "op: remove"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, changed, err := AddGate("clusters/prod/apps.yaml", []byte(c.doc), ks, Gate{Field: replicas, Rule: "owner.replicas"})
			if err != nil || !changed {
				t.Fatalf("add: %v %v", changed, err)
			}
			for _, w := range c.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("lacks %q:\n%s", w, out)
				}
			}
			for _, n := range c.never {
				if strings.Contains(string(out), n) {
					t.Errorf("has %q:\n%s", n, out)
				}
			}
			listed, err := ListGates("clusters/prod/apps.yaml", out)
			if err != nil || len(listed) != 1 || listed[0].Form != c.form {
				t.Fatalf("listed %+v, %v; want one gate of form %q", listed, err, c.form)
			}
			assertFluxHolds(t, out, c.form, replicas)

			again, changed, err := AddGate("clusters/prod/apps.yaml", out, ks, Gate{Field: replicas, Rule: "owner.replicas"})
			if err != nil || changed || string(again) != string(out) {
				t.Errorf("adding the same gate twice changed the file: %v %v", changed, err)
			}

			// A second pointer of the same object joins its entry; another object gets its own.
			out2, _, err := AddGate("clusters/prod/apps.yaml", out, ks, Gate{Field: image})
			if err != nil {
				t.Fatal(err)
			}
			assertFluxHolds(t, out2, c.form, image)
			if strings.Count(string(out2), "target:") != strings.Count(string(out), "target:") {
				t.Errorf("a second pointer of the same object must join its entry:\n%s", out2)
			}
			out3, _, err := AddGate("clusters/prod/apps.yaml", out2, ks, Gate{Field: api})
			if err != nil {
				t.Fatal(err)
			}
			if strings.Count(string(out3), "target:") != strings.Count(string(out2), "target:")+1 {
				t.Errorf("another object gets its own entry:\n%s", out3)
			}
			if got := strings.Count(string(out3), c.entries); got < 3 {
				t.Errorf("three gates, %d %q:\n%s", got, c.entries, out3)
			}

			// Resume in the opposite order: every step gives back the bytes before the matching yield.
			back2, _, err := RemoveGate("clusters/prod/apps.yaml", out3, ks, api)
			if err != nil || string(back2) != string(out2) {
				t.Fatalf("removing the other object's gate: %v\n%s\n---\n%s", err, back2, out2)
			}
			back1, _, err := RemoveGate("clusters/prod/apps.yaml", back2, ks, image)
			if err != nil || string(back1) != string(out) {
				t.Fatalf("removing the second pointer: %v\n%s\n---\n%s", err, back1, out)
			}
			back, changed, err := RemoveGate("clusters/prod/apps.yaml", back1, ks, replicas)
			if err != nil || !changed || string(back) != c.doc {
				t.Fatalf("yield then resume must give back the original bytes: %v %v\n%s\n---\n%s", changed, err, back, c.doc)
			}
		})
	}
}

// assertFluxHolds decodes the Kustomization in content with kustomize-controller's types and
// checks that the gate on f is there in the given form.
func assertFluxHolds(t *testing.T, content []byte, form string, f core.Field) {
	t.Helper()
	nodes, err := readNodes(content)
	if err != nil {
		t.Fatal(err)
	}
	var k fluxTyped
	for _, n := range nodes {
		if n.GetKind() == "Kustomization" {
			if k, err = decodeFlux(n); err != nil {
				t.Fatalf("kustomize-controller's types reject the result: %v\n%s", err, content)
			}
		}
	}
	if err := k.holds(form, f); err != nil {
		t.Errorf("%v\n%s", err, content)
	}
}

// TestFluxGateFormIsRecorded checks that a resume removes what the yield wrote, even once the
// Kustomization asks for another form, and that a new yield moves the gate to the new form.
func TestFluxGateFormIsRecorded(t *testing.T) {
	ks := Target{Kind: "Kustomization", Name: "apps", Namespace: "flux-system"}
	const path = "clusters/prod/apps.yaml"
	toIgnore := func(b []byte) string {
		return strings.Replace(string(b), "parley.dev/flux-gate: patch", "parley.dev/flux-gate: ignore", 1)
	}
	out, _, err := AddGate(path, []byte(kustomizationV1Patch), ks, Gate{Field: replicas, Rule: "owner.replicas"})
	if err != nil {
		t.Fatal(err)
	}
	switched := toIgnore(out)
	back, changed, err := RemoveGate(path, []byte(switched), ks, replicas)
	if err != nil || !changed || string(back) != toIgnore([]byte(kustomizationV1Patch)) {
		t.Fatalf("the patch written must go, whatever the annotation says now: %v %v\n%s", changed, err, back)
	}

	moved, changed, err := AddGate(path, []byte(switched), ks, Gate{Field: replicas, Rule: "owner.replicas"})
	if err != nil || !changed {
		t.Fatalf("re-yielding under the new form: %v %v", changed, err)
	}
	if strings.Contains(string(moved), "patches:") || !strings.Contains(string(moved), "  ignore:\n") || strings.Contains(string(moved), `"form"`) {
		t.Errorf("the gate must move from the patch to spec.ignore:\n%s", moved)
	}
	assertFluxHolds(t, moved, FormIgnore, replicas)
	back, _, err = RemoveGate(path, moved, ks, replicas)
	if err != nil || string(back) != toIgnore([]byte(kustomizationV1Patch)) {
		t.Errorf("round trip after the move: %v\n%s", err, back)
	}
}

func TestFluxGateRefusals(t *testing.T) {
	ks := Target{Kind: "Kustomization", Name: "apps", Namespace: "flux-system"}
	const path = "clusters/prod/apps.yaml"
	cases := []struct {
		name string
		doc  string
		want []string
	}{
		{"spec.ignore is a string",
			strings.Replace(kustomization, "  prune: true\n", "  prune: true\n  ignore: /spec/replicas\n", 1),
			[]string{path, "Kustomization flux-system/apps", "does not decode", "kustomize.toolkit.fluxcd.io/v1", "ignore"}},
		{"unknown field",
			strings.Replace(kustomization, "  prune: true\n", "  prune: true\n  ignores: []\n", 1),
			[]string{path, "Kustomization flux-system/apps", "does not decode", "ignores"}},
		{"patches is a map",
			strings.Replace(kustomizationV1beta2, "  prune: true\n", "  prune: true\n  patches: {target: {kind: Deployment}}\n", 1),
			[]string{path, "Kustomization flux-system/apps", "does not decode"}},
		{"spec.ignore asked of v1beta2",
			strings.Replace(kustomizationV1beta2, "  namespace: flux-system\n", "  namespace: flux-system\n  annotations:\n    parley.dev/flux-gate: ignore\n", 1),
			[]string{path, "Kustomization flux-system/apps", "parley.dev/flux-gate", "needs apiVersion kustomize.toolkit.fluxcd.io/v1"}},
		{"unknown gate form asked",
			strings.Replace(kustomizationV1Patch, "flux-gate: patch", "flux-gate: strip", 1),
			[]string{path, "Kustomization flux-system/apps", `"strip" is neither ignore nor patch`}},
		{"unknown Flux version",
			strings.Replace(kustomization, "fluxcd.io/v1", "fluxcd.io/v2", 1),
			[]string{path, "Kustomization flux-system/apps", `"kustomize.toolkit.fluxcd.io/v2"`}},
		{"kustomize's own Kustomization",
			"apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nmetadata:\n  name: apps\n  namespace: flux-system\nresources: [web.yaml]\n",
			[]string{path, "Kustomization flux-system/apps", "kustomize.config.k8s.io/v1beta1"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, _, err := AddGate(path, []byte(c.doc), ks, Gate{Field: replicas})
			if err == nil || out != nil {
				t.Fatalf("AddGate accepted it:\n%s", out)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
	// A resume refuses a malformed Kustomization too, rather than write it back.
	bad := strings.Replace(kustomization, "  prune: true\n", "  prune: true\n  ignore: /spec/replicas\n", 1)
	if _, _, err := RemoveGate(path, []byte(bad), ks, replicas); err == nil || !strings.Contains(err.Error(), "does not decode") {
		t.Errorf("RemoveGate on a malformed Kustomization: %v", err)
	}
}

// TestFluxHolds checks the typed verification itself: a rule that would miss the object, or miss
// the pointer, does not count as the gate.
func TestFluxHolds(t *testing.T) {
	cases := []struct {
		name, spec, form string
		ok               bool
	}{
		{"exact ignore rule", "  ignore:\n  - paths: [/spec/replicas]\n    target: {group: apps, kind: Deployment, name: web, namespace: prod}\n", FormIgnore, true},
		{"rule with a version", "  ignore:\n  - paths: [/spec/replicas]\n    target: {group: apps, version: v1, kind: Deployment, name: web, namespace: prod}\n", FormIgnore, false},
		{"rule with a label selector", "  ignore:\n  - paths: [/spec/replicas]\n    target: {group: apps, kind: Deployment, name: web, namespace: prod, labelSelector: a=b}\n", FormIgnore, false},
		{"other pointer", "  ignore:\n  - paths: [/spec/template]\n    target: {group: apps, kind: Deployment, name: web, namespace: prod}\n", FormIgnore, false},
		{"no target", "  ignore:\n  - paths: [/spec/replicas]\n", FormIgnore, false},
		{"remove patch in JSON", "  patches:\n  - target: {group: apps, kind: Deployment, name: web, namespace: prod}\n    patch: '[{\"op\": \"remove\", \"path\": \"/spec/replicas\"}]'\n", FormPatch, true},
		{"replace is not remove", "  patches:\n  - target: {group: apps, kind: Deployment, name: web, namespace: prod}\n    patch: '[{\"op\": \"replace\", \"path\": \"/spec/replicas\", \"value\": 1}]'\n", FormPatch, false},
		{"ignore rule is not a patch", "  ignore:\n  - paths: [/spec/replicas]\n    target: {group: apps, kind: Deployment, name: web, namespace: prod}\n", FormPatch, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			nodes, err := readNodes([]byte(kustomization + c.spec))
			if err != nil {
				t.Fatal(err)
			}
			k, err := decodeFlux(nodes[0])
			if err != nil {
				t.Fatal(err)
			}
			if err := k.holds(c.form, replicas); (err == nil) != c.ok {
				t.Errorf("holds = %v, want ok %v", err, c.ok)
			}
		})
	}
}

// FuzzFluxPatchRoundTrip checks, for any Kustomization and pointer AddGate accepts, that the
// result decodes with kustomize-controller's types and holds the gate, and that a resume gives
// back the input exactly when the input is in the writer's layout (and otherwise a stable
// normal form).
func FuzzFluxPatchRoundTrip(f *testing.F) {
	for _, doc := range []string{kustomizationV1beta2, kustomizationV1beta1, kustomizationV1Patch, kustomizationV1beta2UserPatch} {
		f.Add(doc, "/spec/replicas")
	}
	f.Fuzz(func(t *testing.T, doc, ptr string) {
		if !strings.HasPrefix(ptr, "/") {
			return
		}
		ks := Target{Kind: "Kustomization", Name: "apps", Namespace: "flux-system"}
		fld := core.K8sField("apps", "Deployment", "prod", "web", ptr)
		out, changed, err := AddGate("x.yaml", []byte(doc), ks, Gate{Field: fld})
		if err != nil || !changed {
			return
		}
		listed, err := ListGates("x.yaml", out)
		if err != nil || len(listed) == 0 {
			t.Fatalf("the gate is not listed: %v\n%s", err, out)
		}
		var form string
		for _, l := range listed {
			if l.Field == fld {
				form = l.Form
			}
		}
		assertFluxHolds(t, out, form, fld)
		back, _, err := RemoveGate("x.yaml", out, ks, fld)
		if err != nil {
			t.Fatalf("a gate that was added cannot be removed: %v", err)
		}
		nodes, err := readNodes([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		norm, err := writeNodes(nodes)
		if err != nil {
			t.Fatal(err)
		}
		if string(norm) == doc && string(back) != doc {
			t.Fatalf("yield+resume changed the bytes:\n%s\n---\n%s", doc, back)
		}
		out2, _, err := AddGate("x.yaml", back, ks, Gate{Field: fld})
		if err != nil {
			t.Fatalf("re-adding: %v", err)
		}
		back2, _, err := RemoveGate("x.yaml", out2, ks, fld)
		if err != nil || string(back2) != string(back) {
			t.Fatalf("yield+resume is not stable: %v\n%s\n---\n%s", err, back, back2)
		}
	})
}
