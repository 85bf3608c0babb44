package events

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

func revertLines(b Batch) []string {
	var out []string
	for _, r := range b.Reverts {
		s := fmt.Sprintf("%s %s @%s by %s", r.Object, r.Action, r.Revision, r.Controller)
		if r.GroupUnknown {
			s += " (group unknown)"
		}
		out = append(out, s)
	}
	for _, o := range b.OutOfSync {
		out = append(out, fmt.Sprintf("%s OutOfSync in %s @%s health=%s", o.Object, o.App, o.Revision, o.Health))
	}
	return out
}

func TestDecodeFlux(t *testing.T) {
	const rev = "main@sha1:802723078affd3eb2a3898630261ab3ca5d6dd40"
	cases := []struct {
		file    string
		want    []string
		ignored string
	}{
		{"configured.json", []string{
			"k8s:apps/Deployment/prod/web configured @" + rev + " by kustomize-controller",
			"k8s:core/ConfigMap/prod/settings configured @" + rev + " by kustomize-controller",
			"k8s:rbac.authorization.k8s.io/ClusterRole/web-reader created @" + rev + " by kustomize-controller",
			"k8s:core/Widget/prod/w1 configured @" + rev + " by kustomize-controller (group unknown)",
		}, "flux-deleted=1 flux-unchanged=3"},
		{"finished.json", nil, "flux-no-change-set=1"},
		{"error.json", nil, "flux-error-event=1"},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			b, err := DecodeFlux(readTestdata(t, "flux", c.file))
			if err != nil {
				t.Fatal(err)
			}
			if got := revertLines(b); !slices.Equal(got, c.want) {
				t.Errorf("reverts:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
			if got := ignoredString(b.Ignored); got != c.ignored {
				t.Errorf("ignored = %q, want %q", got, c.ignored)
			}
			if len(b.Reverts) > 0 && (len(b.EventIDs) != 1 || b.EventIDs[0] != b.Reverts[0].EventID || !strings.HasPrefix(b.EventIDs[0], "flux-")) {
				t.Errorf("event IDs %v, revert ID %q", b.EventIDs, b.Reverts[0].EventID)
			}
		})
	}
}

func TestFluxEventIDStable(t *testing.T) {
	body := readTestdata(t, "flux", "configured.json")
	a, err := DecodeFlux(body)
	if err != nil {
		t.Fatal(err)
	}
	// The same event re-encoded (other key order, other spacing) has the same ID; another timestamp does not.
	again, err := DecodeFlux([]byte(strings.ReplaceAll(string(body), "\n  ", "\n")))
	if err != nil {
		t.Fatal(err)
	}
	later, err := DecodeFlux([]byte(strings.Replace(string(body), "10:05:00Z", "10:15:00Z", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if a.EventIDs[0] != again.EventIDs[0] || a.EventIDs[0] == later.EventIDs[0] {
		t.Errorf("IDs %s, %s (same event), %s (later)", a.EventIDs[0], again.EventIDs[0], later.EventIDs[0])
	}
}

func TestFluxRevisionKeys(t *testing.T) {
	cases := []struct {
		md         map[string]string
		apiVersion string
		want       string
	}{
		{map[string]string{"kustomize.toolkit.fluxcd.io/revision": "a"}, "kustomize.toolkit.fluxcd.io/v1", "a"},
		{map[string]string{"revision": "b"}, "kustomize.toolkit.fluxcd.io/v1", "b"},
		{map[string]string{"helm.toolkit.fluxcd.io/revision": "c", "kustomize.toolkit.fluxcd.io/revision": "d"}, "kustomize.toolkit.fluxcd.io/v1", "d"},
		{map[string]string{"helm.toolkit.fluxcd.io/revision": "c"}, "kustomize.toolkit.fluxcd.io/v1", "c"},
		{map[string]string{"token": "x"}, "v1", ""},
	}
	for _, c := range cases {
		if got := fluxRevision(c.md, c.apiVersion); got != c.want {
			t.Errorf("fluxRevision(%v) = %q, want %q", c.md, got, c.want)
		}
	}
}

func TestDecodeFluxErrors(t *testing.T) {
	cases := []struct{ body, want string }{
		{`{"involvedObject": {"kind": "Kustomization"`, "invalid JSON"},
		{`{"severity": "info", "timestamp": "2026-11-20T10:05:00Z"}`, "no involvedObject"},
		{`{"involvedObject": {"kind": "Kustomization", "name": "a"}, "message": "x"}`, "no timestamp"},
		{`{"involvedObject": {"kind": "Kustomization", "name": "a"}, "timestamp": "yesterday"}`, "yesterday"},
		{`{"involvedObject": {"kind": 3}}`, "involvedObject.kind"},
	}
	for _, c := range cases {
		_, err := DecodeFlux([]byte(c.body))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("DecodeFlux(%q) error = %v, want it to mention %q", c.body, err, c.want)
		}
	}
}

func TestDecodeArgoCD(t *testing.T) {
	const rev = "8e3f1b6c0b9f3f0a6d3c2e1f4a5b6c7d8e9f0a1b"
	cases := []struct {
		file    string
		want    []string
		ignored string
	}{
		{"out-of-sync.json", []string{
			"k8s:apps/Deployment/prod/web OutOfSync in argocd/web @" + rev + " health=Healthy",
			"k8s:core/ConfigMap/prod/settings OutOfSync in argocd/web @" + rev + " health=",
			"k8s:rbac.authorization.k8s.io/ClusterRole/web-reader OutOfSync in argocd/web @" + rev + " health=",
		}, ""},
		{"sync-succeeded.json", []string{
			"k8s:apps/Deployment/prod/web configured @" + rev + " by argocd-application-controller",
			"k8s:core/ConfigMap/prod/settings serverside-applied @" + rev + " by argocd-application-controller",
		}, "argocd-hook=1 argocd-not-synced=1 argocd-unchanged=1"},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			b, err := DecodeArgoCD(readTestdata(t, "argocd", c.file))
			if err != nil {
				t.Fatal(err)
			}
			if got := revertLines(b); !slices.Equal(got, c.want) {
				t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
			if got := ignoredString(b.Ignored); got != c.ignored {
				t.Errorf("ignored = %q, want %q", got, c.ignored)
			}
			if len(b.EventIDs) != 1 || !strings.HasPrefix(b.EventIDs[0], "argocd-") {
				t.Errorf("event IDs = %v", b.EventIDs)
			}
		})
	}
	a, _ := DecodeArgoCD(readTestdata(t, "argocd", "out-of-sync.json"))
	s, _ := DecodeArgoCD(readTestdata(t, "argocd", "sync-succeeded.json"))
	if a.EventIDs[0] == s.EventIDs[0] {
		t.Errorf("out-of-sync and sync-succeeded share the ID %s", a.EventIDs[0])
	}
}

func TestDecodeArgoCDIgnoredAndErrors(t *testing.T) {
	b, err := DecodeArgoCD([]byte(`{"event":"on-deployed","app":{"name":"web"}}`))
	if err != nil || ignoredString(b.Ignored) != "argocd-unknown-event=1" {
		t.Errorf("unknown event: %v %v", b.Ignored, err)
	}
	b, err = DecodeArgoCD([]byte(`{"event":"sync-succeeded","app":{"name":"web"},"operation":null}`))
	if err != nil || ignoredString(b.Ignored) != "argocd-no-sync-result=1" {
		t.Errorf("no sync result: %v %v", b.Ignored, err)
	}
	cases := []struct{ body, want string }{
		{`{"event": "out-of-sync", "app": {"name": "web"}, "resources": [}`, "invalid JSON at byte"},
		{`{"event": "out-of-sync"}`, "no app.name"},
		{`{"event": "out-of-sync", "app": {"name": "web"}, "reconciledAt": "noon"}`, "reconciledAt"},
		{`{"event": "out-of-sync", "app": {"name": "web"}, "resources": {"a": 1}}`, "resources"},
	}
	for _, c := range cases {
		_, err := DecodeArgoCD([]byte(c.body))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("DecodeArgoCD(%q) error = %v, want it to mention %q", c.body, err, c.want)
		}
	}
}
