package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReviewCommand(t *testing.T) {
	dir, git := cliRepo(t)
	pol, err := os.ReadFile(filepath.Join("..", "..", "internal", "demo", "policy.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	hpa := "---\napiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata: {name: web, namespace: prod}\n" +
		"spec:\n  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}\n  maxReplicas: 20\n"
	writeFile(t, filepath.Join(dir, ".parley/policy.hcl"), string(pol))
	writeFile(t, filepath.Join(dir, "k8s/prod/web.yaml"), deploymentYAML(3, "1.0")+hpa)
	git("add", "-A")
	git("commit", "--quiet", "-m", "Add web")
	git("checkout", "--quiet", "-b", "scale")
	writeFile(t, filepath.Join(dir, "k8s/prod/web.yaml"), deploymentYAML(9, "1.0")+hpa)
	git("commit", "--quiet", "-am", "Scale web\n\nIntent: performance\nMotivation: launch\n")

	// The HPA owns the replicas: the branch's 9 loses to it, so the branch may not merge as it is
	// (issue 33: a change whose own value loses does not pass).
	code, out, stderr := runIn(t, "", "review", "--repo", dir, "--head", "scale", "--at", "2026-03-02T10:00:00Z")
	if code != 1 || !strings.Contains(stderr, "another claim holds a field it changes") {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"1 field", "k8s:apps/Deployment/prod/web#/spec/replicas", "owner.replicas", "intent performance from commit",
		"branch:   loses to the field's standing owner (owner.replicas)", "conclusion: failure"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// The output says which base it judged against, at which commit, and why that one.
	mainSHA := git("rev-parse", "main")
	if want := "base: main at " + mainSHA[:8] + " (no origin/HEAD here, so the local main; --base names another)"; !strings.Contains(out, want) {
		t.Errorf("output lacks %q:\n%s", want, out)
	}
	code, out, stderr = runIn(t, "", "review", "--repo", dir, "--head", "scale", "--json", "--at", "2026-03-02T10:00:00Z")
	var doc struct {
		Schema     string
		Conclusion string
		Verdicts   []struct{ Decision string }
		Outcomes   []struct{ Field, Kind, By string }
		Base       struct {
			Ref, Commit string
			ChosenBy    string `json:"chosen_by"`
		}
	}
	if code != 1 || json.Unmarshal([]byte(out), &doc) != nil || doc.Schema != "parley.dev/verdicts/v2" || len(doc.Verdicts) != 1 || doc.Conclusion != "failure" ||
		len(doc.Outcomes) != 1 || doc.Outcomes[0].Kind != "loses" || doc.Outcomes[0].By != "the field's standing owner (owner.replicas)" ||
		doc.Base.Ref != "main" || doc.Base.Commit != mainSHA || !strings.HasPrefix(doc.Base.ChosenBy, "no origin/HEAD here") {
		t.Errorf("--json: exit %d, %s %s", code, out, stderr)
	}
	// A branch named main, with no origin/HEAD, is its own base: refused, not judged under its
	// own policy; so is a head that is the base's commit under another name.
	for _, head := range []string{"main", mainSHA} {
		if code, out, stderr := runIn(t, "", "review", "--repo", dir, "--head", head); code != 2 || out != "" ||
			!strings.Contains(stderr, "--head "+head+" is the base itself: the base main (no origin/HEAD here, so the local main; --base names another) is commit "+mainSHA[:8]) {
			t.Errorf("--head %s: exit %d, %s %s", head, code, out, stderr)
		}
	}
	// Under a budget the file is too large to read: a problem, and nothing judged.
	code, out, stderr = runIn(t, "", "review", "--repo", dir, "--head", "scale", "--max-file-size", "100", "--at", "2026-03-02T10:00:00Z")
	if code != 1 || !strings.Contains(out, "conclusion: action_required") || !strings.Contains(out, "problem: k8s/prod/web.yaml: ") || !strings.Contains(out, "above the 100 bytes Parley reads; not judged") || strings.Contains(out, "#/spec/replicas") {
		t.Errorf("--max-file-size 100: exit %d, %s %s", code, out, stderr)
	}
	if code, _, stderr := runIn(t, "", "review", "--repo", dir, "--head", "no-such-branch"); code != 2 || !strings.Contains(stderr, "no-such-branch") {
		t.Errorf("unknown head: exit %d, %s", code, stderr)
	}
	if code, _, stderr := runIn(t, "", "review", "--repo", dir); code != 2 || !strings.Contains(stderr, "--head is required") {
		t.Errorf("missing --head: exit %d, %s", code, stderr)
	}
}

// TestReviewDeepensAShallowClone: CI checks out one commit; the branch's merge base with main is
// not there until the history is deepened from origin, which review does, saying so.
func TestReviewDeepensAShallowClone(t *testing.T) {
	dir, git := cliRepo(t)
	pol, err := os.ReadFile(filepath.Join("..", "..", "internal", "demo", "policy.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, ".parley/policy.hcl"), string(pol))
	writeFile(t, filepath.Join(dir, "k8s/prod/web.yaml"), deploymentYAML(3, "1.0"))
	git("add", "-A")
	git("commit", "--quiet", "-m", "Add web")
	git("checkout", "--quiet", "-b", "scale")
	writeFile(t, filepath.Join(dir, "k8s/prod/web.yaml"), deploymentYAML(5, "1.0"))
	git("commit", "--quiet", "-am", "Scale web\n\nIntent: performance\n")
	git("checkout", "--quiet", "main")
	for i := range 3 { // main moves on: the branch is behind
		writeFile(t, filepath.Join(dir, "k8s/prod/web.yaml"), deploymentYAML(3, "1."+strings.Repeat("1", i+1)))
		git("commit", "--quiet", "-am", "Bump web")
	}
	shallow := filepath.Join(t.TempDir(), "shallow")
	git("clone", "--quiet", "--depth", "1", "--no-single-branch", "file://"+dir, shallow)

	code, out, stderr := runIn(t, "", "review", "--repo", shallow, "--head", "origin/scale", "--base", "origin/main", "--at", "2026-03-02T10:00:00Z")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stderr, "shallow clone: git fetch --deepen=50 origin") {
		t.Errorf("stderr does not say it deepened: %q", stderr)
	}
	if !strings.Contains(out, "1 field") || !strings.Contains(out, "#/spec/replicas") || strings.Contains(out, "#/spec/template") {
		t.Errorf("want the branch's one field (replicas), not main's image bumps:\n%s", out)
	}
}
