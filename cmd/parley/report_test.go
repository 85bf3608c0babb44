package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/internal/demo"
	"github.com/parleyhq/parley/reconcile"
	"github.com/parleyhq/parley/trailers/ledger"
)

// TestReportWritesTheDemoRepositorysPages: parley report on the demo repository writes an index
// linking a page per field with claims, and the replicas field's timeline draws every claim its
// ledger holds.
func TestReportWritesTheDemoRepositorysPages(t *testing.T) {
	repo := filepath.Join(t.TempDir(), "demo")
	res, err := demo.Build(repo)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "report")
	code, stdout, stderr := runIn(t, "", "report", "--repo", repo, "--out", out, "--at", "2026-11-22T12:00:00Z")
	if code != 0 || !strings.Contains(stdout, "open "+filepath.Join(out, "index.html")) {
		t.Fatalf("report: exit %d\n%s%s", code, stdout, stderr)
	}
	index, err := os.ReadFile(filepath.Join(out, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	links := regexp.MustCompile(`href="(fields/[^"]+)"`).FindAllStringSubmatch(string(index), -1)
	if len(links) < 10 {
		t.Fatalf("the index links %d field pages", len(links))
	}
	for _, l := range links {
		if _, err := os.Stat(filepath.Join(out, l[1])); err != nil {
			t.Errorf("the index links %s, which was not written", l[1])
		}
	}

	replicas := core.K8sField("apps", "Deployment", "prod", "web", "/spec/replicas")
	led, err := reconcile.OpenLedger(res.Dir, res.Branch, "", ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer led.Close()
	if _, err := led.Update(t.Context(), res.Branch); err != nil {
		t.Fatal(err)
	}
	hist, err := led.History(replicas)
	if err != nil || len(hist) < 2 {
		t.Fatalf("the demo's replicas history: %d claims, %v", len(hist), err)
	}
	page, err := os.ReadFile(filepath.Join(out, "fields", pageName(replicas)))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(page), `class="claim `); n != len(hist) {
		t.Errorf("the replicas timeline draws %d claims; the ledger holds %d", n, len(hist))
	}
	for _, want := range []string{"owner.replicas", "yield", `href="../index.html"`} {
		if !strings.Contains(string(page), want) {
			t.Errorf("the replicas page lacks %q", want)
		}
	}

	// Only the fields a pattern names; bad input named.
	only := filepath.Join(t.TempDir(), "only")
	if code, stdout, stderr := runIn(t, "", "report", "--repo", repo, "--out", only, "--field", "k8s:apps/Deployment/prod/web#/spec/replicas"); code != 0 || !strings.Contains(stdout, "wrote 2 pages") {
		t.Errorf("one field: exit %d %s%s", code, stdout, stderr)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"report", "--repo", repo}, "--out DIR is required"},
		{[]string{"report", "--repo", repo, "--out", only, "--field", "nonsense"}, "--field"},
		{[]string{"report", "--repo", repo, "--out", only, "--field", "k8s:apps/Deployment/prod/none#/spec/replicas"}, "no field with claims matches"},
		{[]string{"report", "--repo", t.TempDir(), "--out", only}, "not a git repository"},
		{[]string{"report", "--repo", repo, "--out", only, "--at", "yesterday"}, "--at"},
	} {
		if code, _, stderr := runIn(t, "", tc.args...); code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, %q; want usage error naming %q", tc.args, code, stderr, tc.want)
		}
	}
}

// TestReportShowsADriftState: with --state, the live claims a drift state holds are on the
// timeline and its drift verdicts are listed with their evidence.
func TestReportShowsADriftState(t *testing.T) {
	repo := filepath.Join(t.TempDir(), "demo")
	if _, err := demo.Build(repo); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(t.TempDir(), "drift.db")
	if code, out, stderr := runIn(t, "", "ingest", "../../examples/drift/k8s-audit.json", "--repo", repo, "--state", state); code != 0 {
		t.Fatalf("ingest: exit %d\n%s%s", code, out, stderr)
	}
	out := filepath.Join(t.TempDir(), "report")
	if code, stdout, stderr := runIn(t, "", "report", "--repo", repo, "--out", out, "--state", state, "--at", "2026-11-20T10:06:00Z",
		"--field", "k8s:apps/Deployment/prod/web#/spec/replicas"); code != 0 {
		t.Fatalf("report: exit %d\n%s%s", code, stdout, stderr)
	}
	page, err := os.ReadFile(filepath.Join(out, "fields", pageName(core.K8sField("apps", "Deployment", "prod", "web", "/spec/replicas"))))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(page), `class="claim live`) || !strings.Contains(string(page), "Drift verdicts") || !strings.Contains(string(page), "k8s-audit/") {
		t.Errorf("the replicas page lacks the drift state's claims or verdicts")
	}
	if code, _, stderr := runIn(t, "", "report", "--repo", repo, "--out", out, "--state", filepath.Join(t.TempDir(), "none.db")); code != exitUsage || !strings.Contains(stderr, "--state") {
		t.Errorf("a missing state: exit %d %s", code, stderr)
	}
}
