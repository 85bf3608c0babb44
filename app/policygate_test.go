package app

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parleyhq/parley/internal/fakegithub"
	"github.com/parleyhq/parley/internal/gittest"
	"github.com/parleyhq/parley/webhooks/store"
)

// TestPolicyChangeNeedsAPolicyOwnersApprovalAtHead: a pull request that changes only
// .parley/policy.hcl (it lets anyone write the Kafka consumers' capacity) concludes
// action_required, never neutral, and shows the verdicts it flips; approvals by someone who is not
// a policy owner, or by an owner at an earlier head, do not count; an owner's approval at the head
// (pull_request_review submitted) makes it pass.
func TestPolicyChangeNeedsAPolicyOwnersApprovalAtHead(t *testing.T) {
	dir := t.TempDir()
	r := gittest.New(t, dir).As("Dana Okafor", "dana@parley.example")
	r.Env = append(r.Env, "GIT_AUTHOR_DATE=2026-11-20T10:00:00Z", "GIT_COMMITTER_DATE=2026-11-20T10:00:00Z")
	pol, err := os.ReadFile(filepath.Join("..", "internal", "demo", "policy.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	base := "policy_owners = [\"policy-lead\", \"acme/platform\"]\n" + string(pol)
	write := func(p, s string) {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755)
		if err := os.WriteFile(filepath.Join(dir, p), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r.Run("init", "-q", "-b", "main")
	write(".parley/policy.hcl", base)
	write("infra/kafka/main.tf", kafkaTF)
	r.Run("add", ".")
	r.Run("commit", "-q", "-m", "Baseline")
	r.Run("checkout", "-q", "-b", "policy")
	writers := `writers = ["kafka-agent", "oncall", "cost-optimizer"]`
	write(".parley/policy.hcl", strings.Replace(base, writers, `writers = ["kafka-agent", "oncall", "cost-optimizer", "platform"]`, 1))
	r.Run("commit", "-q", "-am", "Let the platform team write the consumers' capacity")
	first := r.Run("rev-parse", "HEAD")
	write(".parley/policy.hcl", strings.Replace(base, writers, "", 1))
	r.Run("commit", "-q", "-am", "Let anyone write the consumers' capacity")
	r.Run("update-ref", "refs/pull/7/head", "HEAD")
	r.Run("checkout", "-q", "main")
	baseSHA, head := r.Run("rev-parse", "main"), r.Run("rev-parse", "refs/pull/7/head")

	h, gh := handler(t)
	gh.SetTeamMember("acme", "platform", "dana")
	judge := func(event, action string) fakegithub.CheckRun {
		t.Helper()
		var body []byte
		if event == "pull_request" {
			body = prEvent(t, dir, baseSHA, head, action)
		} else {
			body = example(t, "pull_request_review", "submitted", func(ev map[string]any) {
				pointAt(ev, dir)
				ev["action"] = action
				pr := ev["pull_request"].(map[string]any)
				pr["number"] = 7
				pr["head"].(map[string]any)["sha"] = head
				pr["base"].(map[string]any)["sha"] = baseSHA
				pr["base"].(map[string]any)["ref"] = "main"
			})
		}
		if err := h.Handle(context.Background(), store.Delivery{ID: "d-" + event + action, Event: event, Body: body}); err != nil {
			t.Fatal(err)
		}
		runs := gh.CheckRuns("acme/infra")
		if len(runs) != 1 {
			t.Fatalf("check runs: %+v", runs)
		}
		return runs[0]
	}

	run := judge("pull_request", "opened")
	if run.Conclusion != "action_required" {
		t.Fatalf("opened: conclusion %q, want action_required (a policy change is never neutral): %s", run.Conclusion, run.Summary)
	}
	comments := gh.Comments("acme/infra#7")
	if len(comments) != 1 {
		t.Fatalf("comments: %+v", comments)
	}
	for _, want := range []string{
		"This pull request changes the policy (.parley/policy.hcl)",
		"approval of one of the policy owners (policy-lead, acme/platform) at its head commit",
		// Git's value stands under either policy now; the change that set it, by an unverified
		// author whom only the new policy lets write the capacity, would have been decided otherwise.
		"**What changes now**, each field's standing claims (Git's value and the field's history) judged under both policies: **0 of 3 fields** change their verdict.",
		"As each field's last change was judged when it was made: 1 of 3 changes would have been decided otherwise.\n" +
			"> - `tf:infra/kafka//aws_autoscaling_group.consumer#/desired_capacity`: `hold` (rule `no-claims`) → `adopt` (rule `uncontested`)",
	} {
		if !strings.Contains(comments[0].Body, want) {
			t.Errorf("comment lacks %q:\n%s", want, comments[0].Body)
		}
	}

	gh.AddReview("acme/infra", 7, fakegithub.Review{User: "mallory", State: "APPROVED", CommitID: head})
	gh.AddReview("acme/infra", 7, fakegithub.Review{User: "policy-lead", State: "APPROVED", CommitID: first})
	if run := judge("pull_request_review", "submitted"); run.Conclusion != "action_required" {
		t.Fatalf("approved by a non-owner and by an owner at an earlier head: %q, want action_required", run.Conclusion)
	}
	gh.AddReview("acme/infra", 7, fakegithub.Review{User: "dana", State: "APPROVED", CommitID: head})
	if run := judge("pull_request_review", "submitted"); run.Conclusion != "success" || !strings.Contains(run.Summary, "Approved at the head commit by dana") {
		t.Fatalf("approved at head by dana of acme/platform: %q, want success:\n%s", run.Conclusion, run.Summary)
	}
}

// TestThePolicyPathIsGatedHoweverItIsSpelled: parley serve's policy_path names the policy file as
// its operator wrote it ("./.parley/policy.hcl", "/.parley//policy.hcl"). A pull request that
// changes that file is a change to the policy all the same: it concludes action_required until a
// policy owner approves, never neutral (before, a path Git does not spell that way left the
// policy unread and such a pull request passed).
func TestThePolicyPathIsGatedHoweverItIsSpelled(t *testing.T) {
	dir, git := remote(t)
	git("checkout", "-q", "-b", "policy", "main")
	edit(t, dir, ".parley/policy.hcl", `writers = ["kafka-agent", "oncall", "cost-optimizer"]`, "")
	git("commit", "-q", "-am", "Let anyone write the consumers' capacity")
	head := git("rev-parse", "HEAD")
	git("update-ref", "refs/pull/7/head", head)
	git("checkout", "-q", "main")
	base := git("rev-parse", "main")
	for _, configured := range []string{"./.parley/policy.hcl", "/.parley//policy.hcl"} {
		t.Run(configured, func(t *testing.T) {
			h, gh := handler(t)
			h.PolicyPath = configured
			if err := h.Handle(context.Background(), store.Delivery{ID: "d", Event: "pull_request", Body: prEvent(t, dir, base, head, "opened")}); err != nil {
				t.Fatal(err)
			}
			runs := gh.CheckRuns("acme/infra")
			if len(runs) != 1 || runs[0].Conclusion != "action_required" || !strings.Contains(runs[0].Summary, "changes the policy (.parley/policy.hcl)") {
				t.Fatalf("check runs %+v: want action_required, the change to the policy named", runs)
			}
		})
	}
}

// TestPolicyChangeCommentShowsWhatChangesNow is issue 33's what-if on a pull request: one that
// removes the HPA's ownership of replicas said "0 of N fields in the ledger change their verdict"
// (each field's last change judged as it was made), while the verdict on replicas flips from yield
// to enforce-git the moment it merges. The comment and the check run now show what changes now,
// the field's address quoted as code, and the check waits for a policy owner (action_required).
// A new policy that does not parse fails the check.
func TestPolicyChangeCommentShowsWhatChangesNow(t *testing.T) {
	dir, git := remote(t)
	owner := `  owner      = "hpa"
  owner_when = contains(git_values("k8s:autoscaling/HorizontalPodAutoscaler/${field.namespace}/*#/spec/scaleTargetRef/name"), field.name)
`
	git("checkout", "-q", "-b", "no-hpa", "main")
	edit(t, dir, ".parley/policy.hcl", owner, "")
	git("commit", "-q", "-am", "Stop giving replicas to the HPA")
	head := git("rev-parse", "HEAD")
	git("checkout", "-q", "-b", "broken", "main")
	edit(t, dir, ".parley/policy.hcl", owner, "  owner = \n")
	git("commit", "-q", "-am", "Break the policy")
	broken := git("rev-parse", "HEAD")
	git("checkout", "-q", "main")
	base := git("rev-parse", "main")
	if head == base {
		t.Fatal("the demo policy no longer gives replicas to the HPA as this test expects")
	}

	judge := func(head string) (fakegithub.CheckRun, string) {
		t.Helper()
		h, gh := handler(t)
		git("update-ref", "refs/pull/7/head", head)
		if err := h.Handle(context.Background(), store.Delivery{ID: "d-" + head[:7], Event: "pull_request", Body: prEvent(t, dir, base, head, "opened")}); err != nil {
			t.Fatal(err)
		}
		runs, comments := gh.CheckRuns("acme/infra"), gh.Comments("acme/infra#7")
		if len(runs) != 1 || len(comments) != 1 {
			t.Fatalf("check runs %+v, comments %+v", runs, comments)
		}
		return runs[0], comments[0].Body
	}
	run, body := judge(head)
	if run.Conclusion != "action_required" {
		t.Errorf("conclusion %q, want action_required", run.Conclusion)
	}
	want := "**What changes now**, each field's standing claims (Git's value and the field's history) judged under both policies: " +
		"**1 of "
	line := "> - `k8s:apps/Deployment/prod/web#/spec/replicas`: `yield` (rule `owner.replicas`) → `enforce-git` (rule `no-contest`)\n"
	for _, text := range []string{body, run.Summary} {
		if !strings.Contains(text, want) || !strings.Contains(text, line) {
			t.Errorf("lacks %q and %q:\n%s", want, line, text)
		}
	}

	run, body = judge(broken)
	if run.Conclusion != "failure" || !strings.Contains(body, "The new policy is invalid") {
		t.Errorf("broken policy: conclusion %q, want failure:\n%s", run.Conclusion, body)
	}
}

// edit replaces from with to in the file p of the repository at dir.
func edit(t *testing.T, dir, p, from, to string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, p))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, p), []byte(strings.Replace(string(data), from, to, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}
