package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReviewDeclaringNeverBeatsSilence is issue 33's attack on the demo repository: during the
// peak-sales freeze, an author no actor names raises the web Deployment's CPU request and writes
// Intent: availability, the one intent the freeze admits and one that outranks Git's
// performance claim. The declaration is not counted: the change is deferred by the freeze exactly
// as the same change without the trailer, and the explanation says why.
func TestReviewDeclaringNeverBeatsSilence(t *testing.T) {
	dir, git := demoRepo(t)
	mallory := git.As("Mallory", "mallory@evil.example")
	raise := func(branch, message string) {
		mallory.Run("checkout", "--quiet", "-b", branch, "main")
		web := filepath.Join(dir, "k8s/prod/web.yaml")
		b, err := os.ReadFile(web)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "cpu: 750m") {
			t.Fatalf("the demo's web Deployment no longer requests cpu: 750m:\n%s", b)
		}
		writeFile(t, web, strings.Replace(string(b), "cpu: 750m", "cpu: 1500m", 1))
		mallory.Run("commit", "--quiet", "-a", "-m", message)
		mallory.Run("checkout", "--quiet", "main")
	}
	raise("declared", "More CPU for the sale\n\nIntent: availability\n")
	raise("silent", "More CPU for the sale\n")

	const cpu = "k8s:apps/Deployment/prod/web#/spec/template/spec/containers/0/resources/requests/cpu"
	review := func(branch string) string {
		_, out, stderr := runIn(t, "", "review", "--repo", dir, "--head", branch, "--at", "2026-11-28T12:00:00Z")
		if !strings.Contains(out, cpu) {
			t.Fatalf("%s: the review does not judge the CPU request: %s\n%s", branch, stderr, out)
		}
		return out
	}
	declared, silent := review("declared"), review("silent")
	for name, out := range map[string]string{"declared": declared, "silent": silent} {
		for _, want := range []string{
			"decision: enforce-git (keep Git's value)", "rule:     freeze.peak-sales",
			`deferred until it ends: git-author:mallory@evil.example ("1500m")`,
		} {
			if !strings.Contains(out, want) {
				t.Errorf("%s: output lacks %q:\n%s", name, want, out)
			}
		}
		if strings.Contains(out, "decision: adopt") || strings.Contains(out, "intent availability is allowed") {
			t.Errorf("%s: a stranger's change passes the freeze:\n%s", name, out)
		}
	}
	for _, want := range []string{
		"git-author:mallory@evil.example declares intent availability, which is not one an unknown actor may declare (unknown_actors: none but baseline)",
		"the declaration is not counted: the claim counts as baseline, as if it declared none",
	} {
		if !strings.Contains(declared, want) {
			t.Errorf("declared: the explanation lacks %q:\n%s", want, declared)
		}
	}
}
