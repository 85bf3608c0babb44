package app

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-github/v60/github"

	"github.com/parleyhq/parley/app/internal/livestate"
	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/internal/fakegithub"
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
			// The cost optimizer's commit is its own: GitHub verified its signature.
			gh.SetCommit("acme/infra", head, fakegithub.Commit{AuthorLogin: "cost-optimizer[bot]", CommitterLogin: "cost-optimizer[bot]", Verified: true})
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

// TestEachCommitAuthorIsJudgedOnTheFieldsItTouched: the cost optimizer opens a pull request and
// pushes every commit of it itself, but one commit is authored by someone else. The claim on a
// field is judged also as the author of each commit that touched the field's file, as far as
// GitHub's verification proves them (or the commit's own signature): an unverified author is an
// unverified identity (a veto: it may not write the capacity), named in the explanation; a commit
// that touched another file changes nothing for the capacity; a verified author counts as the
// actor their login names, directly or through one of the policy's github_teams (carol is on
// call through parleyhq/sre).
func TestEachCommitAuthorIsJudgedOnTheFieldsItTouched(t *testing.T) {
	bot := fakegithub.Commit{AuthorLogin: "cost-optimizer[bot]", CommitterLogin: "cost-optimizer[bot]", Verified: true}
	carol := fakegithub.Commit{AuthorLogin: "carol", CommitterLogin: "carol", Verified: true}
	for _, tc := range []struct {
		name         string
		file, change string // what carol's commit changes
		verified     *fakegithub.Commit
		team         bool // carol is in parleyhq/sre
		want         core.Decision
		names        string // in the capacity's explanation; "": carol is not named there
	}{
		{"unverified author of the field", "infra/kafka/main.tf", "desired_capacity = 8", nil, false, core.DecisionVeto, "carol@parley.example (authored commit "},
		{"unverified author of another file", "k8s/prod/web.yaml", "replicas: 4", nil, false, core.DecisionAdopt, ""},
		{"verified author, on call by team", "infra/kafka/main.tf", "desired_capacity = 8", &carol, true, core.DecisionAdopt, "carol (authored commit "},
		{"verified author in no team", "infra/kafka/main.tf", "desired_capacity = 8", &carol, false, core.DecisionVeto, "carol (authored commit "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, git := remote(t)
			git("checkout", "-q", "-b", "two", "main")
			edit(t, dir, "infra/kafka/main.tf", "desired_capacity = 6", "desired_capacity = 5")
			git("commit", "-q", "-am", "Right-size the consumers\n\nIntent: cost\nMotivation: budget\n")
			first := git("rev-parse", "HEAD")
			old := map[string]string{"infra/kafka/main.tf": "desired_capacity = 5", "k8s/prod/web.yaml": "replicas: 3"}[tc.file]
			edit(t, dir, tc.file, old, tc.change)
			git("commit", "-q", "-a", "--author=Carol <carol@parley.example>", "-m", "Adjust")
			head := git("rev-parse", "HEAD")
			git("update-ref", "refs/pull/7/head", head)
			git("checkout", "-q", "main")
			base := git("rev-parse", "main")

			h, gh := handler(t)
			gh.SetCommit("acme/infra", first, bot)
			if tc.verified != nil {
				gh.SetCommit("acme/infra", head, *tc.verified)
			}
			if tc.team {
				gh.SetTeamMember("parleyhq", "sre", "carol")
			}
			res := judgeEvent(t, h, dir, prEvent(t, dir, base, head, "opened"))
			var v *core.Verdict
			for i := range res.Verdicts {
				if res.Verdicts[i].Field.String() == capacity {
					v = &res.Verdicts[i]
				}
			}
			if v == nil {
				t.Fatalf("no verdict on %s in %+v", capacity, res.Verdicts)
			}
			text := strings.Join(stepDetails(*v), "\n")
			if v.Decision != tc.want {
				t.Errorf("capacity: %s, want %s:\n%s", v.Decision, tc.want, text)
			}
			if tc.names == "" && strings.Contains(text, "carol") {
				t.Errorf("carol's commit touched no capacity, yet the capacity names her:\n%s", text)
			}
			if tc.names != "" && !strings.Contains(text, tc.names) {
				t.Errorf("the explanation does not name %q:\n%s", tc.names, text)
			}
		})
	}
}

// TestJudgingTheSameCommitsAgainAsksGitHubNothingNew: a pull request's commits are judged as
// their verified authors, which costs asking GitHub about each commit (GET .../commits/{sha}) and
// about each verified author's teams. A commit's verification is asked once, whichever delivery
// judges it: pushes and edits that bring no new commit add no commit lookups, and every judgement
// of the same commits costs the same number of calls, however often it is repeated. Asking again
// per judgement is what stalled two replicas' queue once GitHub answered some lookups 404.
func TestJudgingTheSameCommitsAgainAsksGitHubNothingNew(t *testing.T) {
	dir, git := remote(t)
	git("checkout", "-q", "-b", "two", "main")
	edit(t, dir, "infra/kafka/main.tf", "desired_capacity = 6", "desired_capacity = 5")
	git("commit", "-q", "-am", "Right-size the consumers\n\nIntent: cost\nMotivation: budget\n")
	first := git("rev-parse", "HEAD")
	edit(t, dir, "infra/kafka/main.tf", "desired_capacity = 5", "desired_capacity = 8")
	git("commit", "-q", "-a", "--author=Carol <carol@parley.example>", "-m", "Adjust")
	head := git("rev-parse", "HEAD")
	git("update-ref", "refs/pull/7/head", head)
	git("checkout", "-q", "main")
	base := git("rev-parse", "main")

	h, gh := handler(t)
	gh.SetCommit("acme/infra", first, fakegithub.Commit{AuthorLogin: "cost-optimizer[bot]", CommitterLogin: "cost-optimizer[bot]", Verified: true})
	gh.SetCommit("acme/infra", head, fakegithub.Commit{AuthorLogin: "carol", CommitterLogin: "carol", Verified: true})
	gh.SetTeamMember("parleyhq", "sre", "carol")
	judge := func(i int, action string) (calls, commitLookups int) {
		t.Helper()
		before, lookups := gh.TotalCalls(), gh.Calls()["repos/get-commit 200"]
		if err := h.Handle(context.Background(), store.Delivery{ID: fmt.Sprintf("d-%d", i), Event: "pull_request", Body: prEvent(t, dir, base, head, action)}); err != nil {
			t.Fatal(err)
		}
		return gh.TotalCalls() - before, gh.Calls()["repos/get-commit 200"] - lookups
	}
	if _, lookups := judge(0, "opened"); lookups != 2 {
		t.Fatalf("the first judgement looked up %d commits, want both of the pull request's (%v)", lookups, gh.Calls())
	}
	var again []int
	for i, action := range []string{"synchronize", "edited", "synchronize", "reopened"} {
		calls, lookups := judge(i+1, action)
		if lookups != 0 {
			t.Errorf("judgement %d (%s) of the same commits looked them up again: %d commit lookups (%v)", i+2, action, lookups, gh.Calls())
		}
		again = append(again, calls)
	}
	for i, n := range again[1:] {
		if n > again[0] {
			t.Errorf("the same commits judged again cost more each time: %v calls per judgement (judgement %d)", again, i+3)
		}
	}
	// Each judgement asks about each verified author's teams once: carol and the cost optimizer,
	// in the policy's one team.
	calls := gh.Calls()
	if members := calls["teams/get-membership-for-user-in-org 200"] + calls["teams/get-membership-for-user-in-org 404"]; members > 2*5 {
		t.Errorf("5 judgements asked %d team memberships, want at most one per verified author and judgement (%v)", members, calls)
	}
}

// TestCommitLookupsPerJudgementAreBounded: a push of more commits than one judgement looks up
// (maxCommitLookups) costs that many calls, not one per commit; the commits left over are judged
// as their unverified authors, which the explanation says, and the next judgement looks them up.
func TestCommitLookupsPerJudgementAreBounded(t *testing.T) {
	dir, git := remote(t)
	git("checkout", "-q", "-b", "many", "main")
	h, gh := handler(t)
	for i := range maxCommitLookups + 1 {
		edit(t, dir, "infra/kafka/main.tf", fmt.Sprintf("desired_capacity = %d", 6+i), fmt.Sprintf("desired_capacity = %d", 7+i))
		git("commit", "-q", "-a", "--author=Carol <carol@parley.example>", "-m", fmt.Sprintf("Step %d", i))
		gh.SetCommit("acme/infra", git("rev-parse", "HEAD"), fakegithub.Commit{AuthorLogin: "carol", CommitterLogin: "cost-optimizer[bot]"})
	}
	head := git("rev-parse", "HEAD")
	git("update-ref", "refs/pull/7/head", head)
	git("checkout", "-q", "main")
	base := git("rev-parse", "main")
	var ev github.PullRequestEvent
	if err := json.Unmarshal(prEvent(t, dir, base, head, "opened"), &ev); err != nil {
		t.Fatal(err)
	}
	target := Target{Installation: ev.GetInstallation().GetID(), Owner: "acme", Repo: "infra", FullName: "acme/infra", CloneURL: dir, DefaultBranch: "main", PR: ev.GetPullRequest()}
	for i, want := range []int{maxCommitLookups, 1, 0} {
		before := gh.Calls()["repos/get-commit 200"]
		res, err := h.Judge(context.Background(), target)
		if err != nil {
			t.Fatal(err)
		}
		if n := gh.Calls()["repos/get-commit 200"] - before; n != want {
			t.Errorf("judgement %d looked up %d commits, want %d", i+1, n, want)
		}
		var text string
		for _, v := range res.Verdicts {
			if v.Field.String() == capacity {
				text = strings.Join(stepDetails(v), "\n")
			}
		}
		if notAsked := strings.Contains(text, "GitHub not asked about it yet"); notAsked != (i == 0) {
			t.Errorf("judgement %d: the explanation says a commit was not looked up: %v, want %v:\n%s", i+1, notAsked, i == 0, text)
		}
	}
}
