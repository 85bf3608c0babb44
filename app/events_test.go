package app

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/parleyhq/parley/app/internal/repocache"
	"github.com/parleyhq/parley/internal/npmdata"
	"github.com/parleyhq/parley/webhooks/store"
)

// example returns GitHub's example payload of event with action, passed through patch. The test is
// skipped if npm is needed to fetch the examples and is not installed.
func example(t testing.TB, event, action string, patch func(map[string]any)) []byte {
	t.Helper()
	b, err := npmdata.PatchedWebhookExample(event, action, patch)
	if err != nil {
		npmdata.FatalOrSkip(t, err)
	}
	return b
}

func pointAt(ev map[string]any, cloneURL string) {
	ev["installation"] = map[string]any{"id": 77, "node_id": "x"}
	repo := ev["repository"].(map[string]any)
	repo["full_name"], repo["name"], repo["clone_url"], repo["default_branch"] = "acme/infra", "infra", cloneURL, "main"
	repo["owner"].(map[string]any)["login"] = "acme"
}

// TestRerequestJudgesAgain: pressing "Re-run" on Parley's check run (check_run rerequested) or on
// the suite judges the pull request again; other check runs and actions are ignored.
func TestRerequestJudgesAgain(t *testing.T) {
	dir, git := remote(t)
	h, gh := handler(t)
	base, head := git("rev-parse", "main"), git("rev-parse", "refs/pull/7/head")
	gh.SetPullRequest("acme/infra", 7, map[string]any{"number": 7, "state": "open", "title": "Right-size",
		"head": map[string]any{"sha": head, "ref": "rightsize"}, "base": map[string]any{"sha": base, "ref": "main"},
		"user": map[string]any{"login": "cost-optimizer[bot]"}})
	r := &Rerequests{PullRequests: h}
	prs := []any{map[string]any{"number": 7, "url": "https://api.github.com/repos/acme/infra/pulls/7", "id": 1,
		"head": map[string]any{"ref": "rightsize", "sha": head}, "base": map[string]any{"ref": "main", "sha": base}}}
	other := example(t, "check_run", "rerequested", func(ev map[string]any) {
		pointAt(ev, dir)
		ev["check_run"].(map[string]any)["name"] = "lint"
		ev["check_run"].(map[string]any)["pull_requests"] = prs
	})
	if err := r.Handle(context.Background(), store.Delivery{ID: "1", Event: "check_run", Body: other}); err != nil {
		t.Fatal(err)
	}
	if len(gh.CheckRuns("acme/infra")) != 0 {
		t.Fatal("another check's re-run judged the pull request")
	}
	run := example(t, "check_run", "rerequested", func(ev map[string]any) {
		pointAt(ev, dir)
		ev["check_run"].(map[string]any)["name"] = "parley"
		ev["check_run"].(map[string]any)["pull_requests"] = prs
	})
	if err := r.Handle(context.Background(), store.Delivery{ID: "2", Event: "check_run", Body: run}); err != nil {
		t.Fatal(err)
	}
	if runs := gh.CheckRuns("acme/infra"); len(runs) != 1 || runs[0].HeadSHA != head {
		t.Fatalf("check runs after a re-run: %+v", runs)
	}
	suite := example(t, "check_suite", "rerequested", func(ev map[string]any) {
		pointAt(ev, dir)
		ev["check_suite"].(map[string]any)["pull_requests"] = prs
	})
	if err := r.Handle(context.Background(), store.Delivery{ID: "3", Event: "check_suite", Body: suite}); err != nil {
		t.Fatal(err)
	}
	if len(gh.Comments("acme/infra#7")) != 1 {
		t.Errorf("a suite re-run must judge (and keep one comment): %d comments", len(gh.Comments("acme/infra#7")))
	}
}

// TestInstallationEventsForgetRepositories: removing a repository from the installation, or
// deleting the installation, deletes its clone and ledger.
func TestInstallationEventsForgetRepositories(t *testing.T) {
	cacheDir := t.TempDir()
	repos := &repocache.Cache{Dir: cacheDir}
	h := &InstallationEvents{Repos: repos}
	clone := filepath.Join(cacheDir, "octo-org", "octo-repo.git")
	mk := func() {
		os.MkdirAll(filepath.Join(clone, "parley"), 0o755)
		os.WriteFile(filepath.Join(clone, "parley", "ledger.db"), []byte("x"), 0o644)
	}
	mk()
	removed := example(t, "installation_repositories", "removed", func(ev map[string]any) {
		ev["repositories_removed"] = []any{map[string]any{"id": 1, "name": "octo-repo", "full_name": "octo-org/octo-repo", "private": false}}
	})
	if err := h.Handle(context.Background(), store.Delivery{ID: "r", Event: "installation_repositories", Body: removed}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(clone); !os.IsNotExist(err) {
		t.Fatalf("clone kept after the repository was removed: %v", err)
	}
	mk()
	deleted := example(t, "installation", "deleted", func(ev map[string]any) {
		ev["repositories"] = []any{map[string]any{"id": 1, "name": "octo-repo", "full_name": "octo-org/octo-repo", "private": false}}
	})
	if err := h.Handle(context.Background(), store.Delivery{ID: "d", Event: "installation", Body: deleted}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(clone); !os.IsNotExist(err) {
		t.Fatalf("clone kept after the installation was deleted: %v", err)
	}
	created := example(t, "installation", "created", func(map[string]any) {})
	if err := h.Handle(context.Background(), store.Delivery{ID: "c", Event: "installation", Body: created}); err != nil {
		t.Fatal(err)
	}
}
