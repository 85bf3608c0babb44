package app

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parleyhq/parley/internal/fakegithub"
	"github.com/parleyhq/parley/webhooks/store"
)

func pushEvent(t *testing.T, cloneURL, ref string) []byte {
	return example(t, "push", "", func(ev map[string]any) {
		pointAt(ev, cloneURL)
		ev["ref"], ev["deleted"] = ref, false
		ev["repository"].(map[string]any)["owner"].(map[string]any)["name"] = "acme"
	})
}

// TestPushReJudgesOpenPullRequests: raising max_size on the default branch turns the open pull
// request's veto into a pass, without anyone touching the pull request.
func TestPushReJudgesOpenPullRequests(t *testing.T) {
	dir, git := remote(t)
	h, gh := handler(t)
	p := &Pushes{PullRequests: h}
	base, head := git("rev-parse", "main"), git("rev-parse", "refs/pull/7/head")
	// The pull request's commit is the cost optimizer's own: GitHub verified its signature.
	gh.SetCommit("acme/infra", head, fakegithub.Commit{AuthorLogin: "cost-optimizer[bot]", CommitterLogin: "cost-optimizer[bot]", Verified: true})
	if err := h.Handle(context.Background(), store.Delivery{ID: "open", Event: "pull_request", Body: prEvent(t, dir, base, head, "opened")}); err != nil {
		t.Fatal(err)
	}
	if runs := gh.CheckRuns("acme/infra"); runs[0].Conclusion != "failure" {
		t.Fatalf("before: %+v", runs)
	}
	gh.SetPullRequest("acme/infra", 7, map[string]any{"number": 7, "state": "open", "title": "Right-size the consumers",
		"head": map[string]any{"sha": head, "ref": "rightsize"}, "base": map[string]any{"sha": base, "ref": "main"},
		"user": map[string]any{"login": "cost-optimizer[bot]"}})

	// A push to another branch changes nothing.
	writes := len(gh.Writes())
	if err := p.Handle(context.Background(), store.Delivery{ID: "p0", Event: "push", Body: pushEvent(t, dir, "refs/heads/feature")}); err != nil {
		t.Fatal(err)
	}
	if len(gh.Writes()) != writes {
		t.Error("a push to another branch wrote")
	}
	os.WriteFile(filepath.Join(dir, "infra/kafka/main.tf"), []byte(strings.Replace(kafkaTF, "max_size         = 16", "max_size         = 24", 1)), 0o644)
	git("commit", "-q", "-am", "More headroom for the consumers\n\nIntent: availability\nMotivation: launch\n")
	if err := p.Handle(context.Background(), store.Delivery{ID: "p1", Event: "push", Body: pushEvent(t, dir, "refs/heads/main")}); err != nil {
		t.Fatal(err)
	}
	runs := gh.CheckRuns("acme/infra")
	if len(runs) != 1 || runs[0].Conclusion == "failure" {
		t.Fatalf("after max_size rose to 24 the capacity 20 is within bounds: %+v", runs)
	}
	if len(gh.Comments("acme/infra#7")) != 1 {
		t.Error("the sticky comment must be edited, not re-posted")
	}
}
