package app

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-github/v60/github"

	"github.com/parleyhq/parley/app/review"
	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/internal/fakegithub"
	"github.com/parleyhq/parley/webhooks/store"
)

// TestMergedCommitsAreCreditedToWhomGitHubVouchesFor: Git's value of the consumers' capacity comes
// from an unsigned commit whose author email is the cost optimizer's. The App asks GitHub once per
// commit who vouches for it and keeps the answer in the ledger: the author of the merged pull
// request that brought it (the claim becomes github-user:cost-optimizer[bot], the cost-optimizer
// actor), or the user whose signature GitHub verified when that user also committed it. A
// verified signature by a committer other than the author, or no answer, leaves the commit an
// unverified identity.
func TestMergedCommitsAreCreditedToWhomGitHubVouchesFor(t *testing.T) {
	dir, git := remote(t)
	base, head := git("rev-parse", "main"), git("rev-parse", "refs/pull/7/head")
	for _, tc := range []struct {
		name   string
		commit *fakegithub.Commit
		want   core.Identity
	}{
		{"merged pull request", &fakegithub.Commit{Pulls: []fakegithub.CommitPull{
			{Number: 2, OpenedBy: "mallory", BaseRef: "feature", Merged: true}, // not to the default branch
			{Number: 3, OpenedBy: "cost-optimizer[bot]", BaseRef: "main", Merged: true},
		}}, core.Identity{Source: core.SourceGitHubUser, ID: "cost-optimizer[bot]"}},
		{"verified by GitHub", &fakegithub.Commit{AuthorLogin: "cost-optimizer[bot]", CommitterLogin: "cost-optimizer[bot]", Verified: true},
			core.Identity{Source: core.SourceGitHubUser, ID: "cost-optimizer[bot]"}},
		{"verified, but signed by another committer", &fakegithub.Commit{AuthorLogin: "cost-optimizer[bot]", CommitterLogin: "mallory", Verified: true},
			core.Identity{Source: core.SourceGitAuthor, ID: "cost-optimizer@parley.example"}},
		{"unknown to GitHub", nil, core.Identity{Source: core.SourceGitAuthor, ID: "cost-optimizer@parley.example"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, gh := handler(t)
			if tc.commit != nil {
				gh.SetCommit("acme/infra", base, *tc.commit)
			}
			var ev github.PullRequestEvent
			if err := json.Unmarshal(prEvent(t, dir, base, head, "opened"), &ev); err != nil {
				t.Fatal(err)
			}
			target := Target{Installation: ev.GetInstallation().GetID(), Owner: "acme", Repo: "infra", FullName: "acme/infra",
				CloneURL: dir, DefaultBranch: "main", PR: ev.GetPullRequest()}
			var res review.Result
			for range 2 {
				var err error
				if res, err = h.Judge(context.Background(), target); err != nil {
					t.Fatal(err)
				}
			}
			if n := gh.Calls()["repos/list-pull-requests-associated-with-commit 200"]; n != 1 {
				t.Errorf("GitHub was asked %d times about the commit, want once (the ledger keeps the answer)", n)
			}
			if len(res.Verdicts) != 1 {
				t.Fatalf("verdicts: %+v", res.Verdicts)
			}
			var gitClaim *core.Claim
			v := res.Verdicts[0]
			for _, c := range append([]core.Claim{*v.Winner}, v.Losers...) {
				if c.Evidence.Commit == base {
					gitClaim = &c
				}
			}
			if gitClaim == nil {
				t.Fatalf("no claim from the base commit in %+v", v)
			}
			if got := gitClaim.Actor.Identity; got.Source != tc.want.Source || got.ID != tc.want.ID {
				t.Errorf("Git's claim is by %s, want %s", got, tc.want)
			}
			text := strings.Join(stepDetails(v), "\n")
			if unverified := strings.Contains(text, "unverified identity"); unverified != (tc.want.Source == core.SourceGitAuthor) {
				t.Errorf("explanation says unverified = %v:\n%s", unverified, text)
			}
		})
	}
}

func stepDetails(v core.Verdict) []string {
	var out []string
	for _, s := range v.Explanation {
		out = append(out, "["+s.Rule+": "+s.Outcome+"] "+s.Detail)
	}
	return out
}

// TestMergeRecordsWhoMergedACommit: when GitHub says a pull request was merged into the default
// branch (pull_request closed, merged), the commit it put there is credited to its author at once:
// judging later asks GitHub nothing about it. A pull request merged into another branch credits
// nothing.
func TestMergeRecordsWhoMergedACommit(t *testing.T) {
	dir, git := remote(t)
	base, head := git("rev-parse", "main"), git("rev-parse", "refs/pull/7/head")
	for _, into := range []string{"main", "release"} {
		t.Run(into, func(t *testing.T) {
			h, gh := handler(t)
			closed := example(t, "pull_request", "closed", func(ev map[string]any) {
				pointAt(ev, dir)
				pr := ev["pull_request"].(map[string]any)
				pr["number"], pr["merged"], pr["merge_commit_sha"] = 3, true, base
				pr["base"].(map[string]any)["ref"] = into
				pr["user"].(map[string]any)["login"] = "cost-optimizer[bot]"
			})
			if err := h.Handle(context.Background(), store.Delivery{ID: "merged", Event: "pull_request", Body: closed}); err != nil {
				t.Fatal(err)
			}
			res := judgeEvent(t, h, dir, prEvent(t, dir, base, head, "opened"))
			lookups := gh.Calls()["repos/list-pull-requests-associated-with-commit 200"]
			var by core.Identity
			for _, c := range append([]core.Claim{*res.Verdicts[0].Winner}, res.Verdicts[0].Losers...) {
				if c.Evidence.Commit == base {
					by = c.Actor.Identity
				}
			}
			switch into {
			case "main":
				if by.Source != core.SourceGitHubUser || by.ID != "cost-optimizer[bot]" || lookups != 0 {
					t.Errorf("merged into main: Git's claim by %s after %d lookups; want github-user:cost-optimizer[bot], none", by, lookups)
				}
			default:
				if by.Source != core.SourceGitAuthor || lookups != 1 {
					t.Errorf("merged into %s: Git's claim by %s after %d lookups; want the unverified author, looked up", into, by, lookups)
				}
			}
		})
	}
}

// TestCreditedCommitsMatchGitHubTeams: Git's value of the consumers' capacity comes from an
// unsigned commit that declares an incident; GitHub verified its signature as carol's, who is on
// call only through the policy's github_teams (parleyhq/sre). Credited to carol, the commit
// carries on-call's trust, so its incident motivation stands; carol outside the team may not
// assert it.
func TestCreditedCommitsMatchGitHubTeams(t *testing.T) {
	for _, inTeam := range []bool{true, false} {
		t.Run(map[bool]string{true: "in parleyhq/sre", false: "in no team"}[inTeam], func(t *testing.T) {
			dir, git := remote(t)
			git("checkout", "-q", "main")
			edit(t, dir, "infra/kafka/main.tf", "desired_capacity = 6", "desired_capacity = 10")
			git("commit", "-q", "-a", "--author=Carol <carol@parley.example>", "-m", "Absorb the lag\n\nIntent: stability\nMotivation: incident INC-1 severity=high\n")
			base := git("rev-parse", "main")
			git("checkout", "-q", "-b", "two")
			edit(t, dir, "infra/kafka/main.tf", "desired_capacity = 10", "desired_capacity = 8")
			git("commit", "-q", "-am", "Right-size the consumers\n\nIntent: cost\nMotivation: budget\n")
			head := git("rev-parse", "HEAD")
			git("update-ref", "refs/pull/7/head", head)
			git("checkout", "-q", "main")

			h, gh := handler(t)
			gh.SetCommit("acme/infra", base, fakegithub.Commit{AuthorLogin: "carol", CommitterLogin: "carol", Verified: true})
			gh.SetCommit("acme/infra", head, fakegithub.Commit{AuthorLogin: "cost-optimizer[bot]", CommitterLogin: "cost-optimizer[bot]", Verified: true})
			if inTeam {
				gh.SetTeamMember("parleyhq", "sre", "carol")
			}
			res := judgeEvent(t, h, dir, prEvent(t, dir, base, head, "opened"))
			if len(res.Verdicts) != 1 {
				t.Fatalf("verdicts: %+v", res.Verdicts)
			}
			text := strings.Join(stepDetails(res.Verdicts[0]), "\n")
			if downgraded := strings.Contains(text, "the commit by carol asserts motivation incident"); downgraded == inTeam {
				t.Errorf("carol in the team: %v, yet her commit's incident downgraded: %v:\n%s", inTeam, downgraded, text)
			}
		})
	}
}

// The opener of a pull request is a GitHub user GitHub authenticated: an actor the policy names only
// by team (the demo's oncall is parleyhq/sre) is that user when GitHub says the user is in the team.
// Before, only commit authors were matched by team, so an SRE's own incident pull request was judged
// as a stranger's.
func TestPullRequestOpenerMatchesGitHubTeams(t *testing.T) {
	for _, inTeam := range []bool{true, false} {
		t.Run(map[bool]string{true: "in parleyhq/sre", false: "in no team"}[inTeam], func(t *testing.T) {
			dir, git := remote(t)
			base := git("rev-parse", "main")
			git("checkout", "-q", "-b", "hotfix", "main")
			edit(t, dir, "k8s/prod/web.yaml", "replicas: 3", "replicas: 6")
			git("commit", "-q", "-a", "--author=Carol <carol@parley.example>", "-m", "Absorb the spike\n\nIntent: availability\nMotivation: incident INC-9 severity=high\n")
			head := git("rev-parse", "HEAD")
			git("update-ref", "refs/pull/7/head", head)
			git("checkout", "-q", "main")

			h, gh := handler(t)
			gh.SetCommit("acme/infra", head, fakegithub.Commit{AuthorLogin: "carol", CommitterLogin: "carol", Verified: true})
			if inTeam {
				gh.SetTeamMember("parleyhq", "sre", "carol")
			}
			body := example(t, "pull_request", "opened", func(ev map[string]any) {
				pointAt(ev, dir)
				ev["action"], ev["number"] = "opened", 7
				pr := ev["pull_request"].(map[string]any)
				pr["number"], pr["title"], pr["body"] = 7, "Absorb the spike", ""
				pr["head"].(map[string]any)["sha"] = head
				pr["base"].(map[string]any)["sha"] = base
				pr["user"].(map[string]any)["login"] = "carol"
			})
			res := judgeEvent(t, h, dir, body)
			if len(res.Verdicts) != 1 {
				t.Fatalf("verdicts: %+v", res.Verdicts)
			}
			v := res.Verdicts[0]
			text := strings.Join(stepDetails(v), "\n")
			if downgraded := strings.Contains(text, "[trust: not counted] github-user:carol asserts motivation incident"); downgraded == inTeam {
				t.Errorf("carol in parleyhq/sre: %v, yet her incident downgraded: %v:\n%s", inTeam, downgraded, text)
			}
			if asOncall := strings.Contains(text, "oncall lose to the owner"); asOncall != inTeam {
				t.Errorf("carol in parleyhq/sre: %v, yet judged as oncall: %v:\n%s", inTeam, asOncall, text)
			}
		})
	}
}

// judgeEvent judges the pull request of a pull_request delivery body on the repository at dir, as
// the App does for acme/infra.
func judgeEvent(t *testing.T, h *PullRequests, dir string, body []byte) review.Result {
	t.Helper()
	var ev github.PullRequestEvent
	if err := json.Unmarshal(body, &ev); err != nil {
		t.Fatal(err)
	}
	res, err := h.Judge(context.Background(), Target{Installation: ev.GetInstallation().GetID(), Owner: "acme", Repo: "infra",
		FullName: "acme/infra", CloneURL: dir, DefaultBranch: "main", PR: ev.GetPullRequest()})
	if err != nil {
		t.Fatal(err)
	}
	return res
}
