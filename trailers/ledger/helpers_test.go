package ledger_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/internal/gittest"
	"github.com/parleyhq/parley/trailers/ledger"
)

// t0 is the first commit time of every test repository.
var t0 = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

// gitRepo is a repository driven by the git command line (internal/gittest), committing as Dana
// unless told otherwise, one hour apart from t0.
type gitRepo struct {
	*gittest.Runner
	dir string
}

func newGitRepo(t testing.TB) *gitRepo {
	t.Helper()
	r := gittest.Init(t, t0, time.Hour).As("Dana Okafor", "dana@parley.example")
	return &gitRepo{Runner: r, dir: r.Dir}
}

func (r *gitRepo) git(args ...string) string { r.T.Helper(); return r.Run(args...) }

func (r *gitRepo) gitAs(name, email string, args ...string) string {
	r.T.Helper()
	return r.As(name, email).Run(args...)
}

func (r *gitRepo) write(path, content string) { r.T.Helper(); r.Write(path, content) }

// commit stages everything and commits it with msg as the given author; it returns the hash.
func (r *gitRepo) commit(name, email, msg string) string {
	r.T.Helper()
	return r.As(name, email).Commit(msg)
}

// goGitRepo is a repository driven by go-git's work tree API.
type goGitRepo struct {
	t    testing.TB
	dir  string
	repo *git.Repository
	n    int
}

func newGoGitRepo(t testing.TB) *goGitRepo {
	t.Helper()
	dir := t.TempDir()
	repo, err := git.PlainInitWithOptions(dir, &git.PlainInitOptions{
		InitOptions: git.InitOptions{DefaultBranch: plumbing.NewBranchReferenceName("main")},
	})
	if err != nil {
		t.Fatal(err)
	}
	return &goGitRepo{t: t, dir: dir, repo: repo}
}

func (r *goGitRepo) write(path, content string) {
	r.t.Helper()
	(&gittest.Runner{T: r.t, Dir: r.dir}).Write(path, content)
}

func (r *goGitRepo) commit(name, email, msg string) string {
	r.t.Helper()
	wt, err := r.repo.Worktree()
	if err != nil {
		r.t.Fatal(err)
	}
	if err := wt.AddWithOptions(&git.AddOptions{All: true}); err != nil {
		r.t.Fatal(err)
	}
	sig := &object.Signature{Name: name, Email: email, When: t0.Add(time.Duration(r.n) * time.Hour)}
	h, err := wt.Commit(msg, &git.CommitOptions{Author: sig, Committer: sig, AllowEmptyCommits: true})
	if err != nil {
		r.t.Fatal(err)
	}
	r.n++
	return h.String()
}

func openLedger(t testing.TB, dir string) *ledger.Ledger {
	t.Helper()
	l, err := ledger.Open(dir, ledger.EveryUpdateUsesGit(ledger.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func update(t testing.TB, l *ledger.Ledger, branch string) ledger.UpdateStats {
	t.Helper()
	st, err := l.Update(context.Background(), branch)
	if err != nil {
		t.Fatalf("Update(%s): %v", branch, err)
	}
	return st
}

func mustField(t testing.TB, s string) core.Field {
	t.Helper()
	f, err := core.ParseField(s)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func jsonValue(t testing.TB, v any) core.Value {
	t.Helper()
	val, err := core.JSONValue(v)
	if err != nil {
		t.Fatal(err)
	}
	return val
}

// deployment is a Deployment manifest with the given replicas and image tag.
func deployment(ns, name string, replicas int, tag string) string {
	return "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: " + name + "\n  namespace: " + ns +
		"\nspec:\n  replicas: " + itoa(replicas) + "\n  template:\n    spec:\n      containers:\n        - name: app\n          image: example.com/" +
		name + ":" + tag + "\n"
}

func asg(desired int) string {
	return "resource \"aws_autoscaling_group\" \"consumer\" {\n  min_size         = 4\n  max_size         = 16\n  desired_capacity = " +
		itoa(desired) + "\n}\n"
}

func itoa(n int) string { return strconv.Itoa(n) }
