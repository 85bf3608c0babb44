package review

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/filesystem"

	"github.com/parleyhq/parley/internal/gittest"
)

// countingStorage counts the commit objects read through it.
type countingStorage struct {
	*filesystem.Storage
	commits int
}

func (s *countingStorage) EncodedObject(t plumbing.ObjectType, h plumbing.Hash) (plumbing.EncodedObject, error) {
	o, err := s.Storage.EncodedObject(t, h)
	if err == nil && o.Type() == plumbing.CommitObject {
		s.commits++
	}
	return o, err
}

// countingRepo opens dir with a storage that counts the commits read.
func countingRepo(t *testing.T, dir string) (*git.Repository, *countingStorage) {
	t.Helper()
	plain, err := git.PlainOpen(dir)
	if err != nil {
		t.Fatal(err)
	}
	st := &countingStorage{Storage: plain.Storer.(*filesystem.Storage)}
	repo, err := git.Open(st, nil)
	if err != nil {
		t.Fatal(err)
	}
	return repo, st
}

// TestReviewReadsOnlyAboveTheMergeBase judges a one-commit branch of a long history, as a
// Renovate bump is judged: the merge base, the commits and the verdicts come from the history
// above the merge base, not from every commit of the repository (which made a review of a
// 30,000-commit repository take seconds).
func TestReviewReadsOnlyAboveTheMergeBase(t *testing.T) {
	r := staleBranch(t)
	for i := range 150 {
		r.Write("k8s/prod/notes.yaml", fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: notes, namespace: prod}\ndata: {n: %q}\n", fmt.Sprint(i)))
		r.Commit(fmt.Sprintf("Note %d", i))
	}
	r.Run("checkout", "-q", "-b", "bump")
	r.Write("k8s/prod/web.yaml", strings.Replace(web, "ghcr.io/acme/web:1.4.2", "ghcr.io/acme/web:1.4.4", 1))
	r.Commit("fix(container): update image web\n\nIntent: security\n")
	r.Run("checkout", "-q", "main")
	r.Commit("Another note")

	repo, st := countingRepo(t, r.Dir)
	src, err := openGitSource(repo, "main", "bump")
	if err != nil {
		t.Fatal(err)
	}
	led, pol := mainLedgerAndPolicy(t, r.Dir, src)
	before := st.commits
	commits, err := src.Commits(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	_, last := src.HeadCommit()
	pr := PullRequest{Number: 9, BaseSHA: src.BaseSHA(), MergeBaseSHA: src.MergeBaseSHA(), HeadSHA: src.HeadSHA(), Updated: last.Time}
	res, err := Evaluate(context.Background(), pr, src, pol, led, nil, last.Time)
	if err != nil {
		t.Fatal(err)
	}
	// An image bump has no dependents: the head's other manifests are neither read nor parsed.
	if src.treeReads != 0 {
		t.Errorf("the review read the head's whole tree %d times for the dependents of %s; nothing reads an image", src.treeReads, imageField)
	}
	if len(commits) != 1 || res.Declaration.Intent != "security" || len(res.Verdicts) != 1 || res.Verdicts[0].Field.String() != imageField {
		t.Fatalf("commits %v, declaration %+v, verdicts %v: want the one bump commit, intent security, a verdict on the image", commits, res.Declaration, res.Verdicts)
	}
	// The base tip, the branch's commit, the merge base and their parents, and each commit again
	// for every file read at it: a few dozen at most, not the 150 below the merge base.
	if st.commits > 30 {
		t.Errorf("a review of a one-commit branch read %d commit objects (%d to open the source); want the few above the merge base, not the whole history",
			st.commits, before)
	}
}

// TestHistoryWalkMatchesFullWalk compares the bounded walk with go-git's exhaustive merge base and
// a walk of the base's whole history, on a history with merges both ways, a criss-cross and a
// commit whose clock is a day late and one a year early.
func TestHistoryWalkMatchesFullWalk(t *testing.T) {
	r := gittest.Init(t, time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC), time.Hour)
	commit := func(branch, msg string) string {
		r.Run("checkout", "-q", branch)
		r.Write(branch+".txt", msg)
		return r.Commit(msg)
	}
	merge := func(into, from string) {
		r.Run("checkout", "-q", into)
		r.Run("merge", "-q", "--no-ff", "-m", "merge "+from+" into "+into, from)
		r.Clock.Tick()
	}
	r.Write("main.txt", "m1")
	r.Commit("m1")
	commit("main", "m2")
	r.Run("branch", "a")
	r.Run("branch", "b")
	commit("a", "a1")
	commit("main", "m3")
	merge("a", "main")
	commit("b", "b1")
	skewed := *r
	skewed.Env = []string{"GIT_COMMITTER_DATE=2025-01-01T00:00:00Z"} // a year early
	skewed.Run("checkout", "-q", "b")
	skewed.Write("b.txt", "b2")
	skewed.Commit("b2 (clock a year early)")
	commit("main", "m4")
	late := *r
	late.Env = []string{"GIT_COMMITTER_DATE=2026-06-01T00:00:00Z"} // months late
	late.Run("checkout", "-q", "main")
	late.Write("main.txt", "m5")
	late.Commit("m5 (clock late)")
	commit("main", "m6")
	// A criss-cross: x and y each merge the other's previous tip.
	r.Run("branch", "x", "main")
	r.Run("branch", "y", "main")
	commit("x", "x1")
	commit("y", "y1")
	xTip, yTip := r.Run("rev-parse", "x"), r.Run("rev-parse", "y")
	r.Run("checkout", "-q", "x")
	r.Run("merge", "-q", "--no-ff", "-m", "x merges y", yTip)
	r.Clock.Tick()
	r.Run("checkout", "-q", "y")
	r.Run("merge", "-q", "--no-ff", "-m", "y merges x", xTip)
	r.Clock.Tick()
	commit("a", "a2")
	merge("main", "b")
	commit("main", "m7")

	repo, err := git.PlainOpen(r.Dir)
	if err != nil {
		t.Fatal(err)
	}
	revs := []string{"main", "a", "b", "x", "y", "main~1", "main~3", "a~1", "b~1", "HEAD~4"}
	for _, base := range revs {
		for _, head := range revs {
			bc, hc := commitAt(t, repo, base), commitAt(t, repo, head)
			want, err := bc.MergeBase(hc)
			if err != nil {
				t.Fatal(err)
			}
			got, _, err := mergeBases(repo, bc, hc)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(sorted(hashes(got...)), sorted(hashes(want...))) {
				t.Errorf("merge base of %s and %s: got %v, want %v (go-git's)", base, head, hashes(got...), hashes(want...))
			}
			gotOnly, _, err := headOnly(repo, bc, hc)
			if err != nil {
				t.Fatal(err)
			}
			if w := fullHeadOnly(t, bc, hc); !slices.Equal(hashes(gotOnly...), hashes(w...)) {
				t.Errorf("commits of %s not in %s: got %v, want %v", head, base, hashes(gotOnly...), hashes(w...))
			}
		}
	}
}

func commitAt(t *testing.T, repo *git.Repository, rev string) *object.Commit {
	t.Helper()
	c, err := resolve(repo, rev)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// fullHeadOnly is the walk review did before: the base's whole history, then head's pre-order
// walk without it.
func fullHeadOnly(t *testing.T, base, head *object.Commit) []*object.Commit {
	t.Helper()
	inBase := map[plumbing.Hash]bool{}
	if err := object.NewCommitPreorderIter(base, nil, nil).ForEach(func(c *object.Commit) error {
		inBase[c.Hash] = true
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var out []*object.Commit
	if err := object.NewCommitPreorderIter(head, inBase, nil).ForEach(func(c *object.Commit) error {
		out = append(out, c)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	slices.Reverse(out)
	return out
}

func hashes(cs ...*object.Commit) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Hash.String()[:8]
	}
	return out
}

func sorted(s []string) []string {
	slices.Sort(s)
	return s
}
