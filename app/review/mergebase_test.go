package review

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/gittest"
	"github.com/parleyhq/parley/policy"
	"github.com/parleyhq/parley/trailers/ledger"
)

// staleBranch builds the common case: a branch cut from main changes the web replicas, and main
// moves on afterwards, changing the Kafka consumers' desired_capacity. The branch never touched
// desired_capacity.
func staleBranch(t *testing.T) *gittest.Runner {
	t.Helper()
	pol, err := os.ReadFile(filepath.Join("..", "..", "internal", "demo", "policy.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	r := gittest.Init(t, time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC), time.Hour).As("Dana", "dana@parley.example")
	r.Write("k8s/prod/web.yaml", web)
	r.Write("infra/kafka/main.tf", kafka)
	r.Write(".parley/policy.hcl", string(pol))
	r.Commit("Baseline\n\nIntent: consistency\n")
	r.Run("checkout", "-q", "-b", "pr")
	r.Write("k8s/prod/web.yaml", strings.Replace(web, "image: \"ghcr.io/acme/web:1.4.2\"", "image: \"ghcr.io/acme/web:1.4.3\"", 1))
	r.Commit("Patch web\n\nIntent: security\n")
	r.Run("checkout", "-q", "main")
	r.Write("infra/kafka/main.tf", strings.Replace(kafka, "desired_capacity = 6", "desired_capacity = 8", 1))
	r.Commit("More consumers\n\nIntent: performance\n")
	return r
}

const imageField = "k8s:apps/Deployment/prod/web#/spec/template/spec/containers/0/image"

// mainLedgerAndPolicy returns main's ledger, brought up to date, and the policy at the source's
// base.
func mainLedgerAndPolicy(t *testing.T, dir string, src *GitSource) (*ledger.Ledger, *policy.Policy) {
	t.Helper()
	led, err := ledger.Open(dir, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { led.Close() })
	if _, err := led.Update(context.Background(), "main"); err != nil {
		t.Fatal(err)
	}
	polSrc, _, err := src.Content(context.Background(), src.BaseSHA(), ".parley/policy.hcl")
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policy.Parse(polSrc, ".parley/policy.hcl")
	if err != nil {
		t.Fatal(err)
	}
	return led, pol
}

// judged returns the fields a review of head against base judges, and the commits it reads.
func judged(t *testing.T, dir, base, head string) (fields, commits []string) {
	t.Helper()
	src, err := OpenGitSource(dir, base, head)
	if err != nil {
		t.Fatal(err)
	}
	led, pol := mainLedgerAndPolicy(t, dir, src)
	_, last := src.HeadCommit()
	pr := PullRequest{Number: 9, BaseSHA: src.BaseSHA(), MergeBaseSHA: src.MergeBaseSHA(), HeadSHA: src.HeadSHA(), Updated: last.Time}
	res, err := Evaluate(context.Background(), pr, src, pol, led, nil, last.Time)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range res.Verdicts {
		fields = append(fields, v.Field.String())
	}
	cs, err := src.Commits(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		commits = append(commits, strings.SplitN(c.Message, "\n", 2)[0])
	}
	return fields, commits
}

// TestReviewIsMergeBaseToHead: a pull request is what GitHub's Files changed shows; main's later
// changes are not the pull request's, however the branch caught up with main.
func TestReviewIsMergeBaseToHead(t *testing.T) {
	t.Run("behind its base", func(t *testing.T) {
		r := staleBranch(t)
		fields, commits := judged(t, r.Dir, "main", "pr")
		if !slices.Equal(fields, []string{imageField}) || !slices.Equal(commits, []string{"Patch web"}) {
			t.Errorf("judged %v from commits %v; want only the image, from the branch's commit", fields, commits)
		}
	})
	t.Run("base merged into the branch", func(t *testing.T) {
		r := staleBranch(t)
		r.Run("checkout", "-q", "pr")
		r.Run("merge", "-q", "--no-edit", "main")
		fields, commits := judged(t, r.Dir, "main", "pr")
		if !slices.Equal(fields, []string{imageField}) || !slices.Equal(commits, []string{"Patch web", "Merge branch 'main' into pr"}) {
			t.Errorf("judged %v from commits %v; want only the image, from the branch's commits", fields, commits)
		}
	})
	t.Run("rebased onto the base", func(t *testing.T) {
		r := staleBranch(t)
		r.Run("checkout", "-q", "pr")
		r.Run("rebase", "-q", "main")
		fields, commits := judged(t, r.Dir, "main", "pr")
		if !slices.Equal(fields, []string{imageField}) || !slices.Equal(commits, []string{"Patch web"}) {
			t.Errorf("judged %v from commits %v", fields, commits)
		}
	})
	t.Run("base moved after the branch merged it", func(t *testing.T) {
		// The branch merged main, and main moved again. Measured from the merge base with main as
		// it is now, nothing of main's counts. (From the event's older base.sha, main's changes the
		// branch merged would count: that is why the App measures from the fetched base branch.)
		r := staleBranch(t)
		r.Run("checkout", "-q", "pr")
		r.Run("merge", "-q", "--no-edit", "main")
		r.Run("checkout", "-q", "main")
		r.Write("k8s/prod/web.yaml", strings.Replace(web, "replicas: 3", "replicas: 4", 1))
		r.Commit("Scale web\n\nIntent: availability\n")
		if fields, _ := judged(t, r.Dir, "main", "pr"); !slices.Equal(fields, []string{imageField}) {
			t.Errorf("judged %v; want only the image", fields)
		}
	})
	t.Run("rename with a change", func(t *testing.T) {
		r := staleBranch(t)
		r.Run("checkout", "-q", "pr")
		r.Run("mv", "k8s/prod/web.yaml", "k8s/prod/web-deployment.yaml")
		r.Write("k8s/prod/web-deployment.yaml", strings.Replace(strings.Replace(web, "1.4.2", "1.4.3", 1), "maxReplicas: 20", "maxReplicas: 30", 1))
		r.Commit("Rename and raise the ceiling\n")
		fields, _ := judged(t, r.Dir, "main", "pr")
		want := []string{imageField, "k8s:autoscaling/HorizontalPodAutoscaler/prod/web#/spec/maxReplicas"}
		if !slices.Equal(fields, want) {
			t.Errorf("judged %v; want %v (a moved object is no change)", fields, want)
		}
	})
}

// TestShallowCloneHasNoMergeBase: a clone of one commit per branch cannot say where the branch
// left main; the error says so and how to fetch more.
func TestShallowCloneHasNoMergeBase(t *testing.T) {
	r := staleBranch(t)
	shallow := filepath.Join(t.TempDir(), "shallow")
	r.Run("clone", "-q", "--depth", "1", "--no-single-branch", "file://"+r.Dir, shallow)
	_, err := OpenGitSource(shallow, "origin/main", "origin/pr")
	if !errors.Is(err, ErrNoMergeBase) || !strings.Contains(err.Error(), "shallow") || !strings.Contains(err.Error(), "--deepen") {
		t.Errorf("shallow clone: %v; want ErrNoMergeBase saying it is shallow and how to deepen", err)
	}
	unrelated := gittest.Init(t, time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC), time.Hour)
	unrelated.Write("a.yaml", "a: 1\n")
	unrelated.Commit("One\n")
	unrelated.Run("checkout", "-q", "--orphan", "other")
	unrelated.Write("a.yaml", "a: 2\n")
	unrelated.Commit("Two\n")
	if _, err := OpenGitSource(unrelated.Dir, "main", "other"); !errors.Is(err, ErrNoMergeBase) || !strings.Contains(err.Error(), "share no history") {
		t.Errorf("unrelated histories: %v", err)
	}
}
