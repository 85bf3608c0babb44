package inspect

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/app/pages"
	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/internal/demo"
	"github.com/parleyhq/parley/policy"
	"github.com/parleyhq/parley/reconcile/gitops"
)

// history is a ledger in memory: the claims Git's commits made, per field, oldest first.
type history map[core.Field][]core.Claim

func (h history) History(f core.Field) ([]core.Claim, error) { return h[f], nil }

func (h history) Current(f core.Field) (core.Claim, bool, error) {
	if cs := h[f]; len(cs) > 0 {
		return cs[len(cs)-1], true, nil
	}
	return core.Claim{}, false, nil
}

func (h history) Fields(p core.FieldPattern) ([]core.Field, error) {
	var out []core.Field
	for f := range h {
		if p.Scheme == "" || p.Match(f) {
			out = append(out, f)
		}
	}
	return out, nil
}

var (
	t0       = time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC)
	replicas = core.K8sField("apps", "Deployment", "prod", "web", "/spec/replicas")
	image    = core.K8sField("apps", "Deployment", "prod", "web", "/spec/template/spec/containers/0/image")
)

func claim(f core.Field, actor core.Identity, v any, intent core.Intent, at time.Time) core.Claim {
	val, _ := core.JSONValue(v)
	return core.Claim{Field: f, Actor: core.Actor{Identity: actor}, Value: val, Intent: intent, At: at}
}

func source(t *testing.T) Source {
	t.Helper()
	pol, err := policy.Parse([]byte(demo.Policy()), "policy.hcl")
	if err != nil {
		t.Fatal(err)
	}
	dana := core.Identity{Source: core.SourceGitAuthor, ID: "dana@parley.example"}
	hpa := core.Identity{Source: core.SourceKubeUser, ID: "system:serviceaccount:kube-system:horizontal-pod-autoscaler"}
	hist := history{
		replicas: {claim(replicas, dana, 3, core.IntentBaseline, t0.Add(-72*time.Hour)), claim(replicas, dana, 4, core.IntentAvailability, t0.Add(-24*time.Hour))},
		image:    {claim(image, dana, "web:1.0", core.IntentBaseline, t0.Add(-72*time.Hour))},
	}
	// The Flux Kustomization applying prod, with the gate Parley wrote on the replicas.
	flux := []byte("apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: apps\n  namespace: flux-system\nspec:\n  interval: 10m\n  path: ./k8s/prod\n  prune: true\n  sourceRef:\n    kind: GitRepository\n    name: flux-system\n")
	gated, _, err := gitops.AddGate("clusters/prod/apps.yaml", flux, gitops.Target{Kind: "Kustomization", Name: "apps", Namespace: "flux-system"},
		gitops.Gate{Field: replicas, Rule: "owner.replicas", Until: t0.Add(6 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	live := claim(replicas, hpa, 7, core.IntentAvailability, t0.Add(-time.Hour))
	live.Actor.Name = "hpa"
	return Source{Repository: "acme/infra", Ledger: hist, Policy: pol, Files: map[string][]byte{"clusters/prod/apps.yaml": gated}, Live: []core.Claim{live}}
}

// TestFieldPageGathersEverything: Git's history and the live claims, a verdict decided with the
// live claim, the freeze that covers the field within the span, and the gate Parley wrote.
func TestFieldPageGathersEverything(t *testing.T) {
	at := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC) // inside the demo's peak-sales freeze
	page, err := New(source(t)).Field(replicas, at)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Git) != 2 || len(page.Live) != 1 || page.Live[0].Actor.Name != "hpa" {
		t.Fatalf("claims: git %d, live %+v", len(page.Git), page.Live)
	}
	if page.Verdict.Field != replicas || page.Verdict.Rule == "" || len(page.Verdict.Explanation) == 0 {
		t.Fatalf("verdict %+v", page.Verdict)
	}
	kinds := map[pages.WindowKind][]pages.Window{}
	for _, w := range page.Windows {
		kinds[w.Kind] = append(kinds[w.Kind], w)
	}
	if fz := kinds[pages.WindowFreeze]; len(fz) != 1 || fz[0].Label != "peak-sales" || !fz[0].From.Equal(time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("freeze windows %+v", fz)
	}
	if g := kinds[pages.WindowGate]; len(g) != 1 || !strings.Contains(g[0].Label, "clusters/prod/apps.yaml") || !strings.Contains(g[0].Label, "owner.replicas") ||
		!g[0].Until.Equal(t0.Add(6*time.Hour)) {
		t.Errorf("gate windows %+v", g)
	}
	// Before the freeze starts, no freeze window.
	early, err := New(source(t)).Field(replicas, t0)
	if err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(early.Windows, func(w pages.Window) bool { return w.Kind == pages.WindowFreeze }) {
		t.Errorf("a freeze drawn before it starts: %+v", early.Windows)
	}
}

// TestIndexListsFieldsAndGatesWithinALimit: every field with claims (Git's or live), the gates,
// and with a limit only the first fields, saying how many there are.
func TestIndexListsFieldsAndGatesWithinALimit(t *testing.T) {
	idx, fields, err := New(source(t)).Index(core.FieldPattern{}, t0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if idx.Total != 2 || len(idx.Fields) != 2 || len(fields) != 2 || idx.Fields[0].Field != replicas || idx.Fields[0].Claims != 3 {
		t.Fatalf("index %+v", idx)
	}
	if len(idx.Gates) != 1 || idx.Gates[0].Field != replicas || idx.Gates[0].File != "clusters/prod/apps.yaml" {
		t.Errorf("gates %+v", idx.Gates)
	}
	idx, fields, err = New(source(t)).Index(core.FieldPattern{}, t0, 1)
	if err != nil || idx.Total != 2 || len(idx.Fields) != 1 || len(fields) != 1 {
		t.Fatalf("limited: total %d, %d fields, %v", idx.Total, len(idx.Fields), err)
	}
	p, _ := core.ParseFieldPattern("k8s:apps/Deployment/prod/web#/spec/template/**")
	if idx, _, err := New(source(t)).Index(p, t0, 0); err != nil || idx.Total != 1 || idx.Fields[0].Field != image {
		t.Fatalf("a pattern: %+v %v", idx, err)
	}
}
