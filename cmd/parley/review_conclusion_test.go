package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReviewStarterPolicyPlainChangeWins: with the policy `parley init` writes, an ordinary
// change (no intent, no motivation) to a field Git holds by an equally ordinary commit is a win:
// the branch's value is the winner, nothing says "keep Git's value", and it passes (issue 33:
// before, it read "enforce-git (keep Git's value)" with the branch's own value as the loser, and
// passed all the same).
func TestReviewStarterPolicyPlainChangeWins(t *testing.T) {
	dir, git := cliRepo(t)
	if code, _, stderr := runIn(t, "", "init", "--file", filepath.Join(dir, ".parley/policy.hcl")); code != 0 {
		t.Fatalf("parley init: exit %d: %s", code, stderr)
	}
	writeFile(t, filepath.Join(dir, "k8s/prod/web.yaml"), deploymentYAML(3, "1.0"))
	git("add", "-A")
	git("commit", "--quiet", "-m", "Add web")
	git("checkout", "--quiet", "-b", "scale")
	writeFile(t, filepath.Join(dir, "k8s/prod/web.yaml"), deploymentYAML(4, "1.0"))
	git("commit", "--quiet", "-am", "Scale web")

	code, out, stderr := runIn(t, "", "review", "--repo", dir, "--head", "scale", "--at", "2026-03-02T10:00:00Z")
	if code != 0 {
		t.Fatalf("exit %d, want 0: %s\n%s", code, stderr, out)
	}
	for _, want := range []string{"branch:   wins", "decision: adopt", "winner:   git-author:alice@parley.example wants 4", "conclusion: success"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "keep Git's value") || strings.Contains(out, "loser:    git-author:alice@parley.example wants 4") {
		t.Errorf("a change that wins must not read as Git keeping its value:\n%s", out)
	}
}

// TestReviewConclusionFollowsTheBranchsOwnChange: on the demo repository, Git's claim on the web
// CPU request is performance's (pull request #12). A plain branch lowering it back is deferred
// during the peak-sales freeze (action_required, until the freeze ends) and, after it, loses to
// that standing claim (failure, naming it). Before issue 33 both concluded success.
func TestReviewConclusionFollowsTheBranchsOwnChange(t *testing.T) {
	dir, git := demoRepo(t)
	git.Run("checkout", "--quiet", "-b", "lower-cpu", "main")
	web := filepath.Join(dir, "k8s/prod/web.yaml")
	b, err := os.ReadFile(web)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "cpu: 750m") {
		t.Fatalf("the demo's web requests changed: %s", b)
	}
	writeFile(t, web, strings.Replace(string(b), "cpu: 750m", "cpu: 600m", 1))
	git.As("Mallory", "mallory@example.com").Run("commit", "--quiet", "-am", "Lower the web CPU request\n")
	git.Run("checkout", "--quiet", "main")

	cases := []struct {
		at, conclusion string
		want           []string
	}{
		{"2026-11-28T10:00:00Z", "action_required", []string{"branch:   deferred by freeze.peak-sales until 2026-12-01T00:00:00Z"}},
		{"2026-12-02T10:00:00Z", "failure", []string{"branch:   loses to ", "(performance", "by rank"}},
	}
	for _, c := range cases {
		code, out, stderr := runIn(t, "", "review", "--repo", dir, "--head", "lower-cpu", "--at", c.at)
		if code != exitFindings {
			t.Errorf("at %s: exit %d, want %d: %s\n%s", c.at, code, exitFindings, stderr, out)
		}
		for _, want := range append(c.want, "conclusion: "+c.conclusion) {
			if !strings.Contains(out, want) {
				t.Errorf("at %s: output lacks %q:\n%s", c.at, want, out)
			}
		}
	}
}

// TestReviewHiddenDocumentDoesNotHideAVeto: the attack of issue 33 offline. A branch changes a
// field the policy makes immutable and adds to the same file a second document nested 101 levels
// deep: the veto stands (failure, exit 1) and the document is named.
func TestReviewHiddenDocumentDoesNotHideAVeto(t *testing.T) {
	dir, git := cliRepo(t)
	writeFile(t, filepath.Join(dir, ".parley/policy.hcl"), "field \"fixed\" {\n  match     = [\"k8s:apps/Deployment/*/*#/spec/replicas\"]\n  immutable = true\n}\n")
	writeFile(t, filepath.Join(dir, "k8s/prod/web.yaml"), deploymentYAML(3, "1.0"))
	git("add", "-A")
	git("commit", "--quiet", "-m", "Add web")
	git("checkout", "--quiet", "-b", "hide")
	deep := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: deep, namespace: prod}\ndata: " + strings.Repeat("{a: ", 101) + "x" + strings.Repeat("}", 101) + "\n"
	writeFile(t, filepath.Join(dir, "k8s/prod/web.yaml"), deploymentYAML(5, "1.0")+"---\n"+deep)
	git("commit", "--quiet", "-am", "Scale web")

	code, out, stderr := runIn(t, "", "review", "--repo", dir, "--head", "hide", "--at", "2026-03-02T10:00:00Z")
	if code != exitFindings {
		t.Errorf("exit %d, want %d: %s", code, exitFindings, stderr)
	}
	for _, want := range []string{"decision: veto", "branch:   vetoed", "problem: k8s/prod/web.yaml: the document at line 13 is not judged: ConfigMap prod/deep: ",
		"nested deeper than 100 levels", "conclusion: failure"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
