package app

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/app/internal/repocache"
	"github.com/parleyhq/parley/webhooks/store"
)

// BenchmarkPullRequestOnRealRepository judges one pull request of a real repository through the
// pull_request handler, once the ledger of its default branch is indexed: the App's side of
// issue 27's "a pull request judged in under a second". PARLEY_BENCH_REPO names a clone whose
// main branch carries .parley/policy.hcl and an indexed ledger (.git/parley/ledger.db), and
// PARLEY_BENCH_HEAD the branch to judge; bench/realrepo -review prepares both. Skipped unless
// set. Each judgement is the pull request's first (a new fake GitHub: the check run and the
// comment are created), on a clone cache that already holds the repository and its index, as on
// a running App.
//
//	PARLEY_BENCH_REPO=/tmp/home-ops PARLEY_BENCH_HEAD=renovate/bump go test ./app -run '^$' -bench PullRequestOnRealRepository -benchtime 5x
func BenchmarkPullRequestOnRealRepository(b *testing.B) {
	src, branch := os.Getenv("PARLEY_BENCH_REPO"), os.Getenv("PARLEY_BENCH_HEAD")
	if src == "" || branch == "" {
		b.Skip("PARLEY_BENCH_REPO and PARLEY_BENCH_HEAD name a real repository's clone and the branch to judge (bench/realrepo -review prepares them)")
	}
	run := func(dir string, args ...string) string {
		b.Helper()
		out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).Output()
		if err != nil {
			b.Fatalf("git %s: %v", strings.Join(args, " "), err)
		}
		return strings.TrimSpace(string(out))
	}
	base, head := run(src, "rev-parse", "main"), run(src, "rev-parse", branch)
	run(src, "update-ref", "refs/pull/7/head", head)
	// The App's clone cache, as a running App holds it: the repository and its ledger index.
	cache := b.TempDir()
	clone := filepath.Join(cache, "acme", "infra.git")
	if out, err := exec.Command("git", "clone", "--quiet", "--bare", "--local", src, clone).CombinedOutput(); err != nil {
		b.Fatalf("clone: %v: %s", err, out)
	}
	// The App fetches branches and the pull request's head, never tags: its cache holds none.
	tags := exec.Command("git", "-C", clone, "for-each-ref", "--format=delete %(refname)", "refs/tags")
	del := exec.Command("git", "-C", clone, "update-ref", "--stdin")
	if list, err := tags.Output(); err != nil {
		b.Fatal(err)
	} else if del.Stdin = strings.NewReader(string(list)); del.Run() != nil {
		b.Fatal("delete the clone's tags")
	}
	index := filepath.Join(run(src, "rev-parse", "--absolute-git-dir"), "parley", "ledger.db")
	if err := os.MkdirAll(filepath.Join(clone, "parley"), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := copyFile(index, filepath.Join(clone, "parley", "ledger.db")); err != nil {
		b.Fatalf("copy the ledger index (run parley ledger in %s first): %v", src, err)
	}
	// SQLite's write-ahead log holds the last transactions until a checkpoint: without it the
	// index would be behind, and the first judgement would index the history again.
	if err := copyFile(index+"-wal", filepath.Join(clone, "parley", "ledger.db-wal")); err != nil && !os.IsNotExist(err) {
		b.Fatal(err)
	}
	repos := &repocache.Cache{Dir: cache}
	// Based on main by name too: the example payload's base ref would otherwise name a branch the
	// repository may also have (argo-cd's master, without the policy commit).
	body := example(b, "pull_request", "opened", func(ev map[string]any) {
		pointAt(ev, src)
		ev["number"] = 7
		pr := ev["pull_request"].(map[string]any)
		pr["number"], pr["title"], pr["body"] = 7, "fix(container): update image", ""
		pr["head"].(map[string]any)["sha"] = head
		pr["base"].(map[string]any)["sha"], pr["base"].(map[string]any)["ref"] = base, "main"
		pr["user"].(map[string]any)["login"] = "renovate[bot]"
	})
	judge := func(i int) {
		b.Helper()
		b.StopTimer()
		gh, app, _ := fakeApp(b)
		h := &PullRequests{Installations: InstallationAuth{App: app, Base: gh.Client().Transport}, Repos: repos,
			Now: func() time.Time { return time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC) }}
		b.StartTimer()
		if err := h.Handle(context.Background(), store.Delivery{ID: fmt.Sprint(i), Event: "pull_request", Body: body}); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if runs := gh.CheckRuns("acme/infra"); len(runs) != 1 {
			b.Fatalf("check runs %+v: want one", runs)
		}
		b.StartTimer()
	}
	judge(-1) // brings the cache's ledger to main's tip (the index came from the same commits)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		judge(i)
	}
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
