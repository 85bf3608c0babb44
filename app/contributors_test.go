package app

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parleyhq/parley/app/internal/livestate"
	"github.com/parleyhq/parley/internal/gittest"
	"github.com/parleyhq/parley/webhooks/store"
)

// TestEveryContributorOfAPullRequestIsJudged: the cost optimizer's pull request lowers the
// consumers' capacity, which it may write: success. When someone else adds a motivation label to it,
// or pushes to it, its claim is judged as them too, and the least favourable verdict stands (they
// may not write the field: a veto), naming them; so when someone else edits its body. The
// opener's own label changes nothing.
func TestEveryContributorOfAPullRequestIsJudged(t *testing.T) {
	dir := t.TempDir()
	r := gittest.New(t, dir).As("Cost Bot", "cost-optimizer@parley.example")
	r.Env = append(r.Env, "GIT_AUTHOR_DATE=2026-11-20T10:00:00Z", "GIT_COMMITTER_DATE=2026-11-20T10:00:00Z")
	pol, err := os.ReadFile(filepath.Join("..", "internal", "demo", "policy.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	write := func(p, s string) {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755)
		if err := os.WriteFile(filepath.Join(dir, p), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r.Run("init", "-q", "-b", "main")
	write(".parley/policy.hcl", string(pol))
	write("infra/kafka/main.tf", kafkaTF)
	r.Run("add", ".")
	r.Run("commit", "-q", "-m", "Baseline")
	r.Run("checkout", "-q", "-b", "rightsize")
	write("infra/kafka/main.tf", strings.Replace(kafkaTF, "desired_capacity = 6", "desired_capacity = 5", 1))
	r.Run("commit", "-q", "-am", "Right-size the consumers\n\nIntent: cost\nMotivation: budget\n")
	r.Run("update-ref", "refs/pull/7/head", "HEAD")
	r.Run("checkout", "-q", "main")
	base, head := r.Run("rev-parse", "main"), r.Run("rev-parse", "refs/pull/7/head")

	for _, tc := range []struct {
		action, sender, label string
		want, names           string
	}{
		{"labeled", "cost-optimizer[bot]", "motivation/budget", "success", ""},
		{"labeled", "mallory", "motivation/incident", "failure", "mallory (added label motivation/incident)"},
		{"synchronize", "mallory", "", "failure", "mallory (pushed to the branch)"},
		{"edited", "mallory", "", "failure", "mallory (edited the body)"},
	} {
		t.Run(tc.action+" by "+tc.sender, func(t *testing.T) {
			h, gh := handler(t)
			live, err := livestate.Open(context.Background(), filepath.Join(t.TempDir(), "live.db"))
			if err != nil {
				t.Fatal(err)
			}
			defer live.Close()
			h.Live = live
			deliver := func(action, sender, label string) {
				t.Helper()
				body := prEvent(t, dir, base, head, "opened")
				if action != "opened" {
					body = example(t, "pull_request", "opened", func(ev map[string]any) {
						pointAt(ev, dir)
						ev["action"], ev["number"] = action, 7
						pr := ev["pull_request"].(map[string]any)
						pr["number"], pr["title"], pr["body"] = 7, "Right-size the consumers", "Monthly budget review."
						pr["head"].(map[string]any)["sha"] = head
						pr["base"].(map[string]any)["sha"] = base
						pr["user"].(map[string]any)["login"] = "cost-optimizer[bot]"
						ev["sender"].(map[string]any)["login"] = sender
						if action == "edited" {
							ev["changes"] = map[string]any{"body": map[string]any{"from": "Monthly budget review, draft."}}
						}
						if label != "" {
							ev["label"] = map[string]any{"id": 1, "node_id": "x", "url": "https://x", "name": label, "color": "fff", "default": false, "description": nil}
						}
					})
				}
				if err := h.Handle(context.Background(), store.Delivery{ID: "d-" + action, Event: "pull_request", Body: body}); err != nil {
					t.Fatal(err)
				}
			}
			deliver("opened", "cost-optimizer[bot]", "")
			if runs := gh.CheckRuns("acme/infra"); len(runs) != 1 || runs[0].Conclusion != "success" {
				t.Fatalf("opened by the cost optimizer: %+v, want success", runs)
			}
			deliver(tc.action, tc.sender, tc.label)
			runs := gh.CheckRuns("acme/infra")
			if len(runs) != 1 || runs[0].Conclusion != tc.want {
				t.Fatalf("after %s by %s: %+v, want %s", tc.action, tc.sender, runs, tc.want)
			}
			if tc.names != "" && !strings.Contains(runs[0].Summary, tc.names) {
				t.Errorf("the summary does not name %q:\n%s", tc.names, runs[0].Summary)
			}
		})
	}
}
