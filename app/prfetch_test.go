package app

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"

	"github.com/parleyhq/parley/webhooks/store"
)

// TestJudgingFetchesOnlyTheBranchesItReads: a pull request is judged from its default and base
// branches and its head; the repository's other branches are not fetched (go-git checks and
// updates each fetched branch in turn, most of a judgement on a repository with hundreds).
func TestJudgingFetchesOnlyTheBranchesItReads(t *testing.T) {
	dir, git := remote(t)
	h, _ := handler(t)
	base, head := git("rev-parse", "main"), git("rev-parse", "refs/pull/7/head")
	body := example(t, "pull_request", "opened", func(ev map[string]any) {
		pointAt(ev, dir)
		ev["number"] = 7
		pr := ev["pull_request"].(map[string]any)
		pr["number"] = 7
		pr["head"].(map[string]any)["sha"] = head
		pr["base"].(map[string]any)["sha"], pr["base"].(map[string]any)["ref"] = base, "main"
	})
	if err := h.Handle(context.Background(), store.Delivery{ID: "d1", Event: "pull_request", Body: body}); err != nil {
		t.Fatal(err)
	}
	clone, err := gogitOpen(filepath.Join(h.Repos.Dir, "acme", "infra.git"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := clone.Reference(plumbing.NewBranchReferenceName("main"), true); err != nil {
		t.Errorf("main was not fetched: %v", err)
	}
	if _, err := clone.Reference("refs/parley/pull/7", true); err != nil {
		t.Errorf("the pull request's head was not fetched: %v", err)
	}
	if _, err := clone.Reference(plumbing.NewBranchReferenceName("rightsize"), true); err == nil {
		t.Error("branch rightsize was fetched; judging pull request #7 reads main and its head only")
	}
}

func gogitOpen(dir string) (*git.Repository, error) { return git.PlainOpen(dir) }
