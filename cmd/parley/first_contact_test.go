package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/gittest"
)

// TestFirstContactMessages: what a new user meets before Parley is set up says what to do next,
// never git's raw words: a repository without a policy names `parley init`; a directory that is no
// repository says so; and every command that reads a repository takes the current directory by
// default (explain, policy check and mcp included), as ledger and review do.
func TestFirstContactMessages(t *testing.T) {
	// A GitOps repository with history and a branch, but no .parley/policy.hcl yet.
	git := gittest.Init(t, time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC), time.Minute)
	git.Write("k8s/prod/web.yaml", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: prod}\nspec: {replicas: 3}\n")
	git.Commit("web\n")
	git.Run("checkout", "--quiet", "-b", "scale")
	git.Write("k8s/prod/web.yaml", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: prod}\nspec: {replicas: 6}\n")
	git.Commit("scale web\n\nIntent: availability\n")
	repo := git.Dir
	notGit := t.TempDir()
	noPolicy := "no .parley/policy.hcl on main: run `parley init` to write a starter policy, then commit it and push it to main"
	notRepo := notGit + " is not a git repository (nor is any directory above it): run parley in a checkout of your GitOps repository, or name one with --repo DIR"
	field := "k8s:apps/Deployment/prod/web#/spec/replicas"

	for _, tc := range []struct {
		name string
		dir  string // the working directory
		args []string
		want string
	}{
		{"review without a policy", repo, []string{"review", "--head", "scale"}, noPolicy},
		{"review --plan without a policy", repo, []string{"review", "--plan", planFixture("kafka-scale-12"), "--author", "github-user:alice"}, noPolicy},
		{"explain without a policy (--repo defaults to .)", repo, []string{"explain", field}, noPolicy},
		{"review outside a repository", notGit, []string{"review", "--head", "scale"}, notRepo},
		{"review --plan outside a repository", notGit, []string{"review", "--plan", planFixture("kafka-scale-12"), "--author", "github-user:alice"}, notRepo},
		{"explain outside a repository", notGit, []string{"explain", field}, notRepo},
		{"ledger outside a repository", notGit, []string{"ledger"}, notRepo},
		{"mcp outside a repository (--repo defaults to .)", notGit, []string{"mcp", "--as", "github-user:alice"}, notRepo},
		{"policy check without a policy", repo, []string{"policy", "check"}, "no .parley/policy.hcl in .: run `parley init` to write a starter policy"},
		{"policy check --repo without a policy", notGit, []string{"policy", "check", "--repo", repo}, "no .parley/policy.hcl in " + repo + ": run `parley init`"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if strings.Contains(tc.name, "plan") {
				// The plan fixture's path is relative to the package: make it absolute first.
				for i, a := range tc.args {
					if strings.HasSuffix(a, ".json") {
						tc.args[i], _ = filepath.Abs(a)
					}
				}
			}
			t.Chdir(tc.dir)
			code, stdout, stderr := runCLI(t, tc.args...)
			if code != exitUsage || !strings.Contains(stderr, tc.want) {
				t.Fatalf("exit %d, want %d; stderr does not say %q:\n%s%s", code, exitUsage, tc.want, stderr, stdout)
			}
			if strings.Contains(stderr, "fatal:") || strings.Contains(stderr, "no base branch") {
				t.Errorf("git's raw words reach the user:\n%s", stderr)
			}
		})
	}

	// Once `parley init` has written the policy and it is committed to main, the same commands run.
	t.Chdir(repo)
	git.Run("checkout", "--quiet", "main")
	if code, _, stderr := runCLI(t, "init"); code != 0 {
		t.Fatalf("init: exit %d: %s", code, stderr)
	}
	if code, stdout, stderr := runCLI(t, "policy", "check"); code != 0 || !strings.Contains(stdout, ".parley/policy.hcl: ok") {
		t.Fatalf("policy check: exit %d: %s%s", code, stderr, stdout)
	}
	t.Chdir(notGit)
	if code, stdout, stderr := runCLI(t, "policy", "check", "--repo", repo); code != 0 || !strings.Contains(stdout, filepath.Join(repo, ".parley/policy.hcl")+": ok") {
		t.Fatalf("policy check --repo: exit %d: %s%s", code, stderr, stdout)
	}
	t.Chdir(repo)
	git.Commit("parley: the starter policy\n")
	git.Run("rebase", "--quiet", "main", "scale")
	if code, stdout, stderr := runCLI(t, "review", "--head", "scale"); code == exitUsage || !strings.Contains(stdout, "conclusion:") {
		t.Fatalf("review after init: exit %d: %s%s", code, stderr, stdout)
	}
	if code, stdout, stderr := runCLI(t, "explain", field); code == exitUsage || !strings.Contains(stdout, "decision:") {
		t.Fatalf("explain after init, in the repository: exit %d: %s%s", code, stderr, stdout)
	}
	if _, err := os.Stat(filepath.Join(repo, ".parley", "policy.hcl")); err != nil {
		t.Fatal(err)
	}
}
