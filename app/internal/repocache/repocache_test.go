package repocache

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"

	"github.com/parleyhq/parley/internal/gittest"
)

func TestSyncFetchesBranchesAndPullRefs(t *testing.T) {
	remote := t.TempDir()
	run := gittest.New(t, remote).Run
	run("init", "-q", "-b", "main")
	os.WriteFile(filepath.Join(remote, "a.yaml"), []byte("a: 1\n"), 0o644)
	run("add", ".")
	run("commit", "-q", "-m", "one")
	run("update-ref", "refs/pull/3/head", "HEAD")
	c := &Cache{Dir: t.TempDir()}
	dir, unlock, err := c.Sync(context.Background(), "acme/infra", remote, "", "+refs/pull/3/head:refs/parley/pull/3")
	if err != nil {
		t.Fatal(err)
	}
	unlock()
	repo, err := git.PlainOpen(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"refs/heads/main", "refs/parley/pull/3"} {
		if r, err := repo.Reference(plumbing.ReferenceName(ref), true); err != nil || r.Hash().String() != run("rev-parse", "HEAD") {
			t.Errorf("%s: %v", ref, err)
		}
	}
	// A new commit arrives with the next fetch.
	os.WriteFile(filepath.Join(remote, "a.yaml"), []byte("a: 2\n"), 0o644)
	run("commit", "-q", "-am", "two")
	if _, unlock, err = c.Sync(context.Background(), "acme/infra", remote, ""); err != nil {
		t.Fatal(err)
	}
	unlock()
	if r, _ := repo.Reference("refs/heads/main", true); r.Hash().String() != run("rev-parse", "HEAD") {
		t.Error("fetch did not move main")
	}
	if err := c.Forget("acme/infra"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("clone still there after Forget: %v", err)
	}
	for _, bad := range []string{"../etc", "acme/..", "acme", "a/b/c", "acme/in fra"} {
		if _, _, err := c.Sync(context.Background(), bad, remote, ""); err == nil {
			t.Errorf("Sync accepted repository name %q", bad)
		}
	}
}

func TestSyncRepacksAScatteredClone(t *testing.T) {
	remote := t.TempDir()
	run := gittest.New(t, remote).Run
	run("init", "-q", "-b", "main")
	c := &Cache{Dir: t.TempDir()}
	var dir string
	for i := 0; i <= MaxPacks+1; i++ {
		os.WriteFile(filepath.Join(remote, "a.yaml"), []byte{byte('a' + i%26), '\n'}, 0o644)
		run("add", ".")
		run("commit", "-q", "-m", "change")
		d, unlock, err := c.Sync(context.Background(), "acme/infra", remote, "")
		if err != nil {
			t.Fatal(err)
		}
		unlock()
		dir = d
	}
	packs, _ := filepath.Glob(filepath.Join(dir, "objects", "pack", "*.pack"))
	if len(packs) > 32 {
		t.Fatalf("%d packs after %d fetches: the clone was never repacked", len(packs), MaxPacks+2)
	}
	// Every commit is still there.
	if got := gittest.New(t, dir).Run("rev-list", "--count", "main"); got != run("rev-list", "--count", "main") {
		t.Fatalf("commits in the clone: %s", got)
	}
	gittest.New(t, dir).Run("fsck", "--no-progress")
}

// TestSyncBranchesFetchesOnlyThoseBranches: judging a pull request fetches its base and default
// branches and its head, not every branch of the repository.
func TestSyncBranchesFetchesOnlyThoseBranches(t *testing.T) {
	remote := t.TempDir()
	run := gittest.New(t, remote).Run
	run("init", "-q", "-b", "main")
	os.WriteFile(filepath.Join(remote, "a.yaml"), []byte("a: 1\n"), 0o644)
	run("add", ".")
	run("commit", "-q", "-m", "one")
	run("branch", "release-1")
	run("branch", "feature")
	run("update-ref", "refs/pull/3/head", "HEAD")
	c := &Cache{Dir: t.TempDir()}
	dir, unlock, err := c.SyncBranches(context.Background(), "acme/infra", remote, "", []string{"main", "release-1"}, "+refs/pull/3/head:refs/parley/pull/3")
	if err != nil {
		t.Fatal(err)
	}
	unlock()
	repo, err := git.PlainOpen(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"refs/heads/main", "refs/heads/release-1", "refs/parley/pull/3"} {
		if _, err := repo.Reference(plumbing.ReferenceName(ref), true); err != nil {
			t.Errorf("%s: %v", ref, err)
		}
	}
	if _, err := repo.Reference("refs/heads/feature", true); err == nil {
		t.Error("refs/heads/feature was fetched; only main and release-1 were asked for")
	}
	for _, bad := range []string{"", "*", "a:b", "../../config", "x/../../../../hooks/pre-receive", "/etc", "a b"} {
		if _, _, err := c.SyncBranches(context.Background(), "acme/infra", remote, "", []string{bad}); err == nil {
			t.Errorf("SyncBranches accepted branch %q", bad)
		}
	}
}
