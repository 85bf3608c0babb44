package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// renovatePreset is docs/recipes/renovate.json: the parts Parley relies on.
type renovatePreset struct {
	CommitBody          string   `json:"commitBody"`
	Labels              []string `json:"labels"`
	VulnerabilityAlerts struct {
		CommitBody string   `json:"commitBody"`
		Labels     []string `json:"labels"`
	} `json:"vulnerabilityAlerts"`
}

func readRenovatePreset(t *testing.T) renovatePreset {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "docs", "recipes", "renovate.json"))
	if err != nil {
		t.Fatal(err)
	}
	var p renovatePreset
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatalf("docs/recipes/renovate.json: %v", err)
	}
	return p
}

// renovateMessage is the commit message Renovate writes for an update: its subject, a blank line,
// then commitBody with its Handlebars variables filled in (Renovate appends the body so).
func renovateMessage(t *testing.T, subject, body string, vars map[string]string) string {
	t.Helper()
	body = regexp.MustCompile(`\{\{\{?\s*([A-Za-z]+)\s*\}?\}\}`).ReplaceAllStringFunc(body, func(m string) string {
		name := strings.Trim(m, "{} ")
		v, ok := vars[name]
		if !ok {
			t.Fatalf("the preset's commitBody uses {{%s}}, which the test does not fill", name)
		}
		return v
	})
	return subject + "\n\n" + body + "\n"
}

// TestRenovatePresetThroughReview: commits shaped as the Renovate preset makes them, a routine
// update and a vulnerability fix, by renovate[bot], pass `parley trailers check` and are read by
// `parley review` as the preset means: intent baseline, motivation maintenance; intent security,
// motivation cve. (The preset's labels are read by the App: app/review's TestRenovatePresetLabels.)
func TestRenovatePresetThroughReview(t *testing.T) {
	p := readRenovatePreset(t)
	vars := map[string]string{"depName": "registry.example.com/shop/web", "currentVersion": "1.41.0", "newVersion": "1.41.3"}
	for _, tc := range []struct {
		name, body, intent, motivation string
	}{
		{"routine update", p.CommitBody, "baseline", "maintenance"},
		{"vulnerability fix", p.VulnerabilityAlerts.CommitBody, "security", "cve"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, git := demoRepo(t)
			msg := renovateMessage(t, "chore(deps): update registry.example.com/shop/web to v1.41.3", tc.body, vars)
			msgFile := writeFile(t, filepath.Join(t.TempDir(), "msg"), msg)
			if code, out, stderr := runCLI(t, "trailers", "check", msgFile); code != 0 {
				t.Fatalf("parley trailers check on Renovate's message: exit %d: %s%s", code, out, stderr)
			}
			git.Run("checkout", "--quiet", "-b", "renovate/web-1.x")
			web := filepath.Join(dir, "k8s", "prod", "web.yaml")
			b, err := os.ReadFile(web)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(web, []byte(strings.Replace(string(b), "shop/web:1.41.0", "shop/web:1.41.3", 1)), 0o644); err != nil {
				t.Fatal(err)
			}
			git.As("renovate[bot]", "29139614+renovate[bot]@users.noreply.github.com").Commit(msg)
			git.Run("checkout", "--quiet", "main")
			code, out, stderr := runCLI(t, "review", "--repo", dir, "--head", "renovate/web-1.x", "--at", planAt)
			if code == exitUsage || !strings.Contains(out, "conclusion:") {
				t.Fatalf("review: exit %d: %s%s", code, stderr, out)
			}
			for _, want := range []string{"intent " + tc.intent + " from commit", "motivation " + tc.motivation + " from commit"} {
				if !strings.Contains(out, want) {
					t.Errorf("review's output lacks %q:\n%s", want, out)
				}
			}
		})
	}
}

// TestHooksInstallRefusesBadTrailers: `parley hooks install` in a real repository makes git refuse
// a commit whose Intent trailer is not one Parley knows (with the reason), accept a good one, and
// leave a commit-msg hook it did not write alone unless --force.
func TestHooksInstallRefusesBadTrailers(t *testing.T) {
	dir, git := demoRepo(t)
	bin := parleyBin(t)
	code, out, stderr := runCLI(t, "hooks", "install", "--repo", dir, "--binary", bin)
	hook := filepath.Join(dir, ".git", "hooks", "commit-msg")
	if code != 0 || !strings.Contains(out, "installed "+hook) {
		t.Fatalf("hooks install: exit %d: %s%s", code, out, stderr)
	}
	commit := func(msg string) (string, error) {
		cmd := exec.Command("git", "commit", "--allow-empty", "-m", msg)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME="+dir, runAsCLIEnv+"=1",
			"GIT_AUTHOR_NAME=Alice", "GIT_AUTHOR_EMAIL=alice@parley.example", "GIT_COMMITTER_NAME=Alice", "GIT_COMMITTER_EMAIL=alice@parley.example")
		b, err := cmd.CombinedOutput()
		return string(b), err
	}
	before := git.Run("rev-parse", "HEAD")
	if out, err := commit("Scale web\n\nIntent: speed\n"); err == nil || !strings.Contains(out, "Intent") || !strings.Contains(out, "speed") {
		t.Fatalf("a commit with Intent: speed: err %v, want it refused naming the trailer:\n%s", err, out)
	}
	if after := git.Run("rev-parse", "HEAD"); after != before {
		t.Fatalf("the refused commit exists: HEAD moved from %s to %s", before, after)
	}
	if out, err := commit("Scale web\n\nIntent: availability\nMotivation: launch LAUNCH-12\n"); err != nil {
		t.Fatalf("a commit with good trailers is refused: %v\n%s", err, out)
	}
	if out, err := commit("A commit without trailers"); err != nil {
		t.Fatalf("a commit without Parley trailers is refused: %v\n%s", err, out)
	}

	// Installing again replaces parley's own hook; someone else's is kept unless --force.
	if code, _, stderr := runCLI(t, "hooks", "install", "--repo", dir, "--binary", bin); code != 0 {
		t.Fatalf("reinstall: exit %d: %s", code, stderr)
	}
	if err := os.WriteFile(hook, []byte("#!/bin/sh\n./lint-commit \"$1\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runCLI(t, "hooks", "install", "--repo", dir, "--binary", bin); code != exitUsage || !strings.Contains(stderr, "parley did not write it") {
		t.Fatalf("over another hook: exit %d: %s", code, stderr)
	}
	if code, _, stderr := runCLI(t, "hooks", "install", "--repo", dir, "--binary", bin, "--force"); code != 0 {
		t.Fatalf("--force: exit %d: %s", code, stderr)
	}
	if code, _, stderr := runCLI(t, "hooks", "install", "--repo", t.TempDir()); code != exitUsage || !strings.Contains(stderr, "not a git repository") {
		t.Fatalf("outside a repository: exit %d: %s", code, stderr)
	}
}
