package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parleyhq/parley/internal/demo"
	"github.com/parleyhq/parley/internal/gittest"
)

var driftExamples = []string{"../../examples/drift/k8s-audit.json", "../../examples/drift/flux.json", "../../examples/drift/kafka-agent.jsonl"}

func demoRepo(t *testing.T) (string, *gittest.Runner) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "infra")
	if _, err := demo.Build(dir); err != nil {
		t.Fatal(err)
	}
	return dir, gittest.New(t, dir)
}

func TestIngestPlansWithoutWriting(t *testing.T) {
	dir, git := demoRepo(t)
	head := git.Run("rev-parse", "HEAD")
	code, out, errOut := runCLI(t, append([]string{"ingest", "--repo", dir}, driftExamples...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"decision: yield (owner.replicas)",
		"decision: yield (rule.incident-first)",
		"git:      gate clusters/prod/apps.yaml (would commit)",
		"+    - /spec/replicas",
		"decision: veto (bounds)", "kafka-agent wants 24, above the maximum 16",
		"decision: adopt (rank)", "-  desired_capacity    = 5", "+  desired_capacity    = 9",
		"1 object(s) reverted by the GitOps tool",
		// The dry run carries its planned gates forward: the image's gate, planned at 10:05, is
		// resumed when its yield ends at 12:05, and the replicas gate is not planned twice.
		"git:      resume clusters/prod/apps.yaml (would commit)",
		"yielded; already gated in clusters/prod/apps.yaml",
		"run again with --apply to commit them",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if git.Run("rev-parse", "HEAD") != head || git.Run("status", "--porcelain") != "" {
		t.Fatal("ingest without --apply changed the repository")
	}
}

func TestIngestApplyCommitsEachVerdictOnceAndReplaysIdempotently(t *testing.T) {
	dir, git := demoRepo(t)
	state := filepath.Join(t.TempDir(), "drift.db")
	before := git.Run("rev-parse", "HEAD")
	code, out, errOut := runCLI(t, append([]string{"ingest", "--repo", dir, "--apply", "--state", state, "--author", "Parley Bot <bot@parley.example>"}, driftExamples...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errOut, out)
	}
	subjects := git.Run("log", "--format=%s", before+"..HEAD")
	want := []string{
		"parley: adopt desired_capacity of aws_autoscaling_group.consumer = 9 from kafka-agent",
		"parley: resume Git's /spec/template/spec/containers/0/image of Deployment prod/web",
		"parley: yield /spec/template/spec/containers/0/image of Deployment prod/web to oncall",
		"parley: yield /spec/replicas of Deployment prod/web to hpa",
	}
	if subjects != strings.Join(want, "\n") {
		t.Fatalf("commits:\n%s\nwant:\n%s", subjects, strings.Join(want, "\n"))
	}
	if got := git.Run("log", "-1", "--format=%an <%ae>", "HEAD"); got != "Parley Bot <bot@parley.example>" {
		t.Errorf("author %q", got)
	}
	kust, _ := os.ReadFile(filepath.Join(dir, "clusters/prod/apps.yaml"))
	if !strings.Contains(string(kust), "- /spec/replicas") || strings.Contains(string(kust), "containers/0/image") {
		t.Errorf("after the replay the Kustomization should gate replicas only:\n%s", kust)
	}
	if git.Run("status", "--porcelain") != "" {
		t.Fatal("work tree not clean after --apply")
	}
	// The same events again, with the same state: all taken in before, nothing written.
	head := git.Run("rev-parse", "HEAD")
	code, out, errOut = runCLI(t, append([]string{"ingest", "--repo", dir, "--apply", "--state", state, "--json"}, driftExamples...)...)
	if code != 0 {
		t.Fatalf("second run: exit %d: %s", code, errOut)
	}
	if git.Run("rev-parse", "HEAD") != head {
		t.Fatal("a replay with the same state committed again")
	}
	var rep struct {
		Batches []struct {
			Duplicates int               `json:"duplicates"`
			Results    []json.RawMessage `json:"results"`
		} `json:"batches"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	dups := 0
	for _, b := range rep.Batches {
		dups += b.Duplicates
	}
	if dups != 6 { // the 2 relevant audit events, the Flux event and the 3 CloudTrail calls
		t.Fatalf("duplicates on replay: %d, want 6", dups)
	}
}

func TestIngestRefusesBadInput(t *testing.T) {
	dir, _ := demoRepo(t)
	bad := filepath.Join(t.TempDir(), "bad.json")
	os.WriteFile(bad, []byte(`{"kind":"EventList","items":[{"auditID": 7}]}`), 0o644)
	notJSON := filepath.Join(t.TempDir(), "x.json")
	os.WriteFile(notJSON, []byte("{\"a\":1}\nnot json"), 0o644)
	unknown := filepath.Join(t.TempDir(), "u.json")
	os.WriteFile(unknown, []byte(`{"hello":"world"}`), 0o644)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{bad}, "bad.json#1: k8s-audit: decode EventList"},
		{[]string{notJSON}, "x.json: body 2 (line 2): not JSON"},
		{[]string{unknown}, "cannot tell the source"},
		{[]string{"--source", "syslog", unknown}, `--source "syslog"`},
		{[]string{"--at", "yesterday", unknown}, `--at "yesterday"`},
		{[]string{"--author", "bot", unknown}, `--author "bot"`},
		{[]string{filepath.Join(dir, "missing.json")}, "missing.json"},
	} {
		code, _, errOut := runCLI(t, append([]string{"ingest", "--repo", dir}, tc.args...)...)
		if code != exitUsage || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 naming %q", tc.args, code, errOut, tc.want)
		}
	}
}

func TestVerdictsListsWhatIngestRecorded(t *testing.T) {
	dir, _ := demoRepo(t)
	state := filepath.Join(t.TempDir(), "drift.db")
	if code, _, errOut := runCLI(t, append([]string{"ingest", "--repo", dir, "--apply", "--state", state}, driftExamples...)...); code != 0 {
		t.Fatalf("ingest: %s", errOut)
	}
	code, out, errOut := runCLI(t, "verdicts", "--state", state)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"k8s:apps/Deployment/prod/web#/spec/replicas\n  decision: yield (owner.replicas)\n  winner:   hpa wants 11\n  git:      gate, commit ",
		"decision: veto (bounds)", "git:      vetoed: Git's value stands (the next terraform apply restores it); nothing to write",
		"evidence: k8s-audit/7c1e0a00-0000-4000-8000-000000000002",
		"evidence: cloudtrail/5d1a0c77-1111-4e0b-9a43-6f0d2e7c1a01",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("verdicts lack %q:\n%s", want, out)
		}
	}
	code, out, _ = runCLI(t, "verdicts", "--state", state, "--field", "tf:infra/kafka//aws_autoscaling_group.consumer#/desired_capacity", "--json")
	var recs []struct {
		Verdict struct{ Decision string } `json:"verdict"`
		Commit  string                    `json:"commit"`
	}
	if err := json.Unmarshal([]byte(out), &recs); code != 0 || err != nil || len(recs) != 2 || recs[0].Verdict.Decision != "veto" || recs[1].Commit == "" {
		t.Fatalf("--field --json: exit %d, %v, %+v", code, err, recs)
	}
	if code, out, _ = runCLI(t, "verdicts", "--state", state, "--timers"); code != 0 || !strings.Contains(out, "recheck yield (owner.replicas)") {
		t.Fatalf("--timers: exit %d\n%s", code, out)
	}
	for _, bad := range [][]string{{"--state", filepath.Join(t.TempDir(), "none.db")}, {"--state", state, "--field", "nope"}} {
		if code, _, errOut := runCLI(t, append([]string{"verdicts"}, bad...)...); code != exitUsage || errOut == "" {
			t.Errorf("%v: exit %d %q", bad, code, errOut)
		}
	}
}
