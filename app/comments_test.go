package app

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/app/internal/livestate"
	"github.com/parleyhq/parley/app/report"
	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/internal/fakegithub"
	"github.com/parleyhq/parley/webhooks/store"
)

const capacity = "tf:infra/kafka//aws_autoscaling_group.consumer#/desired_capacity"

// commentEvent is GitHub's own issue_comment "created" example, made a comment on pull request 7.
func commentEvent(t *testing.T, cloneURL string, id int64, user, userType, body string) []byte {
	return commentPayload(t, cloneURL, "created", id, user, user, userType, body, time.Date(2026, 11, 20, 10, 1, 0, 0, time.UTC))
}

// commentPayload is GitHub's own issue_comment example of action (created, edited or deleted),
// made comment id on pull request 7, written by author, sent by sender (who differs from the
// author when someone edits or deletes another's comment), with the comment's updated_at at (and
// its created_at, unless the comment was edited).
func commentPayload(t *testing.T, cloneURL, action string, id int64, author, sender, userType, body string, at time.Time) []byte {
	return example(t, "issue_comment", action, func(ev map[string]any) {
		pointAt(ev, cloneURL)
		issue := ev["issue"].(map[string]any)
		issue["number"] = 7
		issue["pull_request"] = map[string]any{"url": "https://api.github.com/repos/acme/infra/pulls/7"}
		c := ev["comment"].(map[string]any)
		c["id"], c["body"] = id, body
		c["updated_at"] = at.Format(time.RFC3339)
		if action == "created" {
			c["created_at"] = at.Format(time.RFC3339)
		}
		c["user"].(map[string]any)["login"], c["user"].(map[string]any)["type"] = author, userType
		c["user"].(map[string]any)["id"] = userID(author)
		ev["sender"].(map[string]any)["login"], ev["sender"].(map[string]any)["type"] = sender, userType
		ev["sender"].(map[string]any)["id"] = userID(sender)
	})
}

// userID gives each test login its own account ID, as GitHub would.
func userID(login string) int64 {
	var id int64 = 1000
	for _, c := range login {
		id = id*31 + int64(c)
	}
	return id
}

func TestChatOpsCommands(t *testing.T) {
	dir, git := remote(t)
	h, gh := handler(t)
	live, err := livestate.Open(context.Background(), filepath.Join(t.TempDir(), "live.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	h.Live = live
	c := &Comments{PullRequests: h, Live: live}
	base, head := git("rev-parse", "main"), git("rev-parse", "refs/pull/7/head")
	if err := h.Handle(context.Background(), store.Delivery{ID: "open", Event: "pull_request", Body: prEvent(t, dir, base, head, "opened")}); err != nil {
		t.Fatal(err)
	}
	gh.SetPullRequest("acme/infra", 7, map[string]any{"number": 7, "state": "open", "title": "Right-size the consumers",
		"head": map[string]any{"sha": head, "ref": "rightsize"}, "base": map[string]any{"sha": base, "ref": "main"},
		"user": map[string]any{"login": "cost-optimizer[bot]"}})
	gh.SetPermission("acme/infra", "dana", "maintain")
	gh.SetPermission("acme/infra", "mallory", "read")
	comment := func(id int64, user, userType, body string) {
		t.Helper()
		if err := c.Handle(context.Background(), store.Delivery{ID: fmt.Sprint("c", id), Event: "issue_comment",
			Body: commentEvent(t, dir, id, user, userType, body)}); err != nil {
			t.Fatal(err)
		}
	}
	verdict := func() string {
		doc, err := report.Extract(sticky(t, gh))
		if err != nil || len(doc.Verdicts) != 1 {
			t.Fatalf("sticky verdicts %+v %v", doc, err)
		}
		return string(doc.Verdicts[0].Decision) + " by " + doc.Verdicts[0].Rule
	}
	if v := verdict(); v != "veto by bounds" {
		t.Fatalf("before any command: %s", v)
	}

	// A reader may not hold the pull request; the refusal says why.
	comment(501, "mallory", "User", "please stop\n/parley hold")
	if r := lastReply(gh); !strings.Contains(r, "refused: @mallory has read permission") {
		t.Errorf("refusal reply: %q", r)
	}
	// A maintainer overrides the bound check, with a reason; the verdict and the check follow.
	comment(502, "dana", "User", "Capacity review approved this.\n/parley override "+capacity+` reason="capacity review CR-12"`)
	if v := verdict(); v != "enforce-git by override" {
		t.Errorf("after the override: %s", v)
	}
	runs := gh.CheckRuns("acme/infra")
	if runs[len(runs)-1].Conclusion != "success" {
		t.Errorf("check run after the override: %+v", runs[len(runs)-1])
	}
	// why explains, quoting the override.
	comment(503, "dana", "User", "/parley why "+capacity)
	if r := lastReply(gh); !strings.Contains(r, "capacity review CR-12") || !strings.Contains(r, "override") {
		t.Errorf("why reply: %q", r)
	}
	// The same comment delivered again (an edit that changes nothing) records nothing twice.
	writes := len(gh.Writes())
	comment(502, "dana", "User", "Capacity review approved this.\n/parley override "+capacity+` reason="capacity review CR-12"`)
	if n := len(gh.Writes()) - writes; n != 1 { // only the reaction
		t.Errorf("a repeated command wrote %d times, want only its reaction", n)
	}
	// Bots, Parley itself included, are never obeyed.
	writes = len(gh.Writes())
	comment(504, "parley[bot]", "Bot", "/parley hold")
	if len(gh.Writes()) != writes {
		t.Error("a bot's command was acted on")
	}
	// A writer in the team the policy's escalation asks (@parleyhq/sre) may hold; another writer may not.
	gh.SetPermission("acme/infra", "erin", "write")
	gh.SetPermission("acme/infra", "frank", "write")
	gh.SetTeamMember("parleyhq", "sre", "erin")
	comment(506, "frank", "User", "/parley hold")
	if r := lastReply(gh); !strings.Contains(r, "refused: @frank has write permission") {
		t.Errorf("frank's hold: %q", r)
	}
	comment(507, "erin", "User", `/parley hold reason="freeze for the incident"`)
	if st, _ := live.ForPR(context.Background(), "acme/infra", 7, head); !st.Held || st.HeldBy != "erin" {
		t.Errorf("erin's hold was not recorded: %+v", st)
	}
	comment(508, "erin", "User", "/parley unhold")

	// A commenter's claim becomes a claim with the commenter as actor.
	comment(505, "dana", "User", "/parley claim "+capacity+"=10 intent=availability motivation=incident ref=INC-9 ttl=2h")
	st, err := live.ForPR(context.Background(), "acme/infra", 7, head)
	if err != nil || len(st.Claims) != 1 || st.Claims[0].Actor.Identity.ID != "dana" || st.Claims[0].Value.JSON() != "10" || st.Claims[0].Expires.IsZero() {
		t.Errorf("recorded claims %+v, %v", st.Claims, err)
	}
}

func sticky(t *testing.T, gh *fakegithub.Server) string {
	t.Helper()
	for _, c := range gh.Comments("acme/infra#7") {
		if strings.HasPrefix(c.Body, report.Marker) {
			return c.Body
		}
	}
	t.Fatal("no sticky comment")
	return ""
}

// lastReply is the newest comment that is not the sticky one.
func lastReply(gh *fakegithub.Server) string {
	cs := gh.Comments("acme/infra#7")
	for i := len(cs) - 1; i >= 0; i-- {
		if !strings.HasPrefix(cs[i].Body, report.Marker) {
			return cs[i].Body
		}
	}
	return ""
}

// chatOpsRig is pull request 7 judged once (desired_capacity 20 is above max_size 16: veto by
// bounds), with a live state, and helpers to send GitHub's own issue_comment payloads.
type chatOpsRig struct {
	t        *testing.T
	dir      string
	git      func(args ...string) string
	h        *PullRequests
	c        *Comments
	gh       *fakegithub.Server
	live     *livestate.DB
	base     string
	head     string
	delivery int
}

func newChatOpsRig(t *testing.T) *chatOpsRig {
	dir, git := remote(t)
	h, gh := handler(t)
	live, err := livestate.Open(context.Background(), filepath.Join(t.TempDir(), "live.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { live.Close() })
	h.Live = live
	r := &chatOpsRig{t: t, dir: dir, git: git, h: h, c: &Comments{PullRequests: h, Live: live}, gh: gh, live: live,
		base: git("rev-parse", "main"), head: git("rev-parse", "refs/pull/7/head")}
	r.push(r.head, "opened")
	gh.SetPermission("acme/infra", "dana", "maintain")
	gh.SetPermission("acme/infra", "mallory", "write")
	return r
}

// push makes head the pull request's head and delivers pull_request action for it, as GitHub
// would at 10:00 (before t0, when the comments are written).
func (r *chatOpsRig) push(head, action string) {
	r.t.Helper()
	r.moveHead(head)
	r.deliver(head, action, time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC))
}

// moveHead makes head the pull request's head on GitHub, without any delivery (yet).
func (r *chatOpsRig) moveHead(head string) {
	r.head = head
	r.git("update-ref", "refs/pull/7/head", head)
	r.gh.SetPullRequest("acme/infra", 7, map[string]any{"number": 7, "state": "open", "merged": false, "title": "Right-size the consumers",
		"head": map[string]any{"sha": head, "ref": "rightsize"}, "base": map[string]any{"sha": r.base, "ref": "main"},
		"user": map[string]any{"login": "cost-optimizer[bot]"}})
}

// deliver delivers pull_request action for head, the pull request as GitHub updated it at at.
func (r *chatOpsRig) deliver(head, action string, at time.Time) {
	r.t.Helper()
	body := example(r.t, "pull_request", "opened", func(ev map[string]any) {
		pointAt(ev, r.dir)
		ev["action"], ev["number"] = action, 7
		pr := ev["pull_request"].(map[string]any)
		pr["number"], pr["title"], pr["body"] = 7, "Right-size the consumers", "Monthly budget review."
		pr["head"].(map[string]any)["sha"] = head
		pr["base"].(map[string]any)["sha"] = r.base
		pr["user"].(map[string]any)["login"] = "cost-optimizer[bot]"
		pr["updated_at"] = at.Format(time.RFC3339)
	})
	if err := r.h.Handle(context.Background(), store.Delivery{ID: "pr-" + action + head[:7], Event: "pull_request", Body: body}); err != nil {
		r.t.Fatal(err)
	}
}

// commit commits desired_capacity = capacity on the pull request's branch and returns the commit.
func (r *chatOpsRig) commit(capacity int) string {
	r.t.Helper()
	r.git("checkout", "-q", "rightsize")
	if err := os.WriteFile(filepath.Join(r.dir, "infra/kafka/main.tf"), []byte(strings.Replace(kafkaTF, "desired_capacity = 6", fmt.Sprint("desired_capacity = ", capacity), 1)), 0o644); err != nil {
		r.t.Fatal(err)
	}
	r.git("commit", "-q", "-am", fmt.Sprint("Capacity ", capacity, "\n\nIntent: cost\nMotivation: budget\n"))
	sha := r.git("rev-parse", "HEAD")
	r.git("checkout", "-q", "main")
	return sha
}

// send delivers one issue_comment payload.
func (r *chatOpsRig) send(action string, id int64, author, sender, body string, at time.Time) {
	r.t.Helper()
	r.delivery++
	if err := r.c.Handle(context.Background(), store.Delivery{ID: fmt.Sprint("ic-", r.delivery), Event: "issue_comment",
		Body: commentPayload(r.t, r.dir, action, id, author, sender, "User", body, at)}); err != nil {
		r.t.Fatal(err)
	}
}

func (r *chatOpsRig) verdict() string {
	r.t.Helper()
	doc, err := report.Extract(sticky(r.t, r.gh))
	if err != nil || len(doc.Verdicts) != 1 {
		r.t.Fatalf("sticky verdicts %+v %v", doc, err)
	}
	return string(doc.Verdicts[0].Decision) + " by " + doc.Verdicts[0].Rule
}

var t0 = time.Date(2026, 11, 20, 10, 1, 0, 0, time.UTC)

const overrideCapacity = "/parley override " + capacity + ` reason="capacity review CR-12"`

// TestChatOpsEditBySomeoneElseIsIgnored: GitHub lets every writer edit anyone's comment. A writer
// who adds an override to a maintainer's comment gets nothing, and the reply says why; nor can
// they edit the maintainer's own override away.
func TestChatOpsEditBySomeoneElseIsIgnored(t *testing.T) {
	r := newChatOpsRig(t)
	r.send("created", 601, "dana", "dana", "Looks fine to me.", t0)
	r.send("edited", 601, "dana", "mallory", "Looks fine to me.\n"+overrideCapacity, t0.Add(time.Minute))
	if v := r.verdict(); v != "veto by bounds" {
		t.Errorf("a writer's edit of a maintainer's comment overrode: %s", v)
	}
	if reply := lastReply(r.gh); !strings.Contains(reply, "@mallory edited a comment by @dana") || !strings.Contains(reply, "ignored") {
		t.Errorf("reply to the foreign edit: %q", reply)
	}
	r.send("created", 602, "dana", "dana", overrideCapacity, t0.Add(2*time.Minute))
	r.send("edited", 602, "dana", "mallory", "never mind", t0.Add(3*time.Minute))
	if v := r.verdict(); v != "enforce-git by override" {
		t.Errorf("a writer's edit withdrew a maintainer's override: %s", v)
	}
}

// TestChatOpsWithdrawal: editing a command away or deleting its comment withdraws it; someone
// else deleting the comment withdraws only what they could have given.
func TestChatOpsWithdrawal(t *testing.T) {
	r := newChatOpsRig(t)
	r.send("created", 701, "dana", "dana", "Approved in review.\n"+overrideCapacity, t0)
	if v := r.verdict(); v != "enforce-git by override" {
		t.Fatalf("after the override: %s", v)
	}
	r.send("edited", 701, "dana", "dana", "Approved in review.", t0.Add(time.Minute))
	if v := r.verdict(); v != "veto by bounds" {
		t.Errorf("after editing the override away: %s", v)
	}
	if reply := lastReply(r.gh); !strings.Contains(reply, "withdrawn") {
		t.Errorf("reply to the withdrawal: %q", reply)
	}
	// A writer deleting the maintainer's override comment does not lift it; its author deleting it does.
	r.send("created", 702, "dana", "dana", overrideCapacity, t0.Add(2*time.Minute))
	r.send("deleted", 702, "dana", "mallory", overrideCapacity, t0.Add(2*time.Minute))
	if v := r.verdict(); v != "enforce-git by override" {
		t.Errorf("a writer deleting a maintainer's comment withdrew its override: %s", v)
	}
	if reply := lastReply(r.gh); !strings.Contains(reply, "still in force") {
		t.Errorf("reply to the writer's deletion: %q", reply)
	}
	// Once deleted, a comment stays deleted: a late delivery of it changes nothing.
	r.send("created", 702, "dana", "dana", "/parley hold", t0.Add(2*time.Minute))
	r.send("created", 703, "dana", "dana", `/parley hold reason="incident"`+"\n"+overrideCapacity, t0.Add(3*time.Minute))
	r.send("deleted", 703, "dana", "dana", `/parley hold reason="incident"`+"\n"+overrideCapacity, t0.Add(3*time.Minute))
	st, err := r.live.ForPR(context.Background(), "acme/infra", 7, r.head)
	if err != nil || st.Held || st.Overrides[fieldOf(t, capacity)].Comment != 702 {
		t.Errorf("after the author deleted the comments: %+v %v", st, err)
	}
}

func fieldOf(t *testing.T, s string) core.Field {
	f, err := core.ParseField(s)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestChatOpsOverrideIsForItsCommit: an override decides the commit it was given for; a later
// push (here 5000, far above the maximum 16) is judged by the policy, and the comment says which
// commit the override was for.
func TestChatOpsOverrideIsForItsCommit(t *testing.T) {
	r := newChatOpsRig(t)
	first := r.head
	r.send("created", 801, "dana", "dana", overrideCapacity, t0)
	if v := r.verdict(); v != "enforce-git by override" {
		t.Fatalf("after the override: %s", v)
	}
	if reply := lastReply(r.gh); !strings.Contains(reply, "applies to commit "+first[:7]) {
		t.Errorf("the acknowledgement does not name the commit: %q", reply)
	}
	r.git("checkout", "-q", "rightsize")
	if err := os.WriteFile(filepath.Join(r.dir, "infra/kafka/main.tf"), []byte(strings.Replace(kafkaTF, "desired_capacity = 6", "desired_capacity = 5000", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	r.git("commit", "-q", "-am", "Much bigger\n\nIntent: cost\nMotivation: budget\n")
	second := r.git("rev-parse", "HEAD")
	r.git("update-ref", "refs/pull/7/head", second)
	r.git("checkout", "-q", "main")
	r.push(second, "synchronize")
	if v := r.verdict(); v != "veto by bounds" {
		t.Errorf("a new push kept the old commit's override: %s", v)
	}
	if body := sticky(t, r.gh); !strings.Contains(body, "was for commit "+first[:7]) {
		t.Errorf("the comment does not say which commit the override was for:\n%s", body)
	}
}

// TestChatOpsClosedPullRequest: commands on a closed or merged pull request are refused.
func TestChatOpsClosedPullRequest(t *testing.T) {
	r := newChatOpsRig(t)
	r.gh.SetPullRequest("acme/infra", 7, map[string]any{"number": 7, "state": "closed", "merged": true, "title": "Right-size the consumers",
		"head": map[string]any{"sha": r.head, "ref": "rightsize"}, "base": map[string]any{"sha": r.base, "ref": "main"},
		"user": map[string]any{"login": "cost-optimizer[bot]"}})
	r.send("created", 901, "dana", "dana", overrideCapacity, t0)
	if reply := lastReply(r.gh); !strings.Contains(reply, "refused: #7 is merged") {
		t.Errorf("reply on a merged pull request: %q", reply)
	}
	if st, err := r.live.ForPR(context.Background(), "acme/infra", 7, r.head); err != nil || len(st.Overrides) != 0 {
		t.Errorf("a command on a merged pull request was recorded: %+v %v", st, err)
	}
}

// TestChatOpsOrderIsGitHubs: the edit that removed an override, delivered before the comment as
// first written, wins: commands apply in the order GitHub timestamps them.
func TestChatOpsOrderIsGitHubs(t *testing.T) {
	r := newChatOpsRig(t)
	r.send("edited", 1001, "dana", "dana", "Approved in review.", t0.Add(time.Minute))
	r.send("created", 1001, "dana", "dana", "Approved in review.\n"+overrideCapacity, t0)
	if st, err := r.live.ForPR(context.Background(), "acme/infra", 7, r.head); err != nil || len(st.Overrides) != 0 {
		t.Errorf("the first version, delivered after the edit, was applied: %+v %v", st, err)
	}
	// Between comments too: a hold written after an unhold stands, whichever arrives first.
	r.send("created", 1003, "dana", "dana", "/parley hold", t0.Add(3*time.Minute))
	r.send("created", 1002, "dana", "dana", "/parley unhold", t0.Add(2*time.Minute))
	if st, err := r.live.ForPR(context.Background(), "acme/infra", 7, r.head); err != nil || !st.Held {
		t.Errorf("the unhold written before the hold lifted it: %+v %v", st, err)
	}
}

// TestChatOpsCommandIsBoundToTheHeadItWasWrittenAt: a maintainer writes an override at head A
// (10:01); the writer pushes B, 5000 (far above the maximum 16), before Parley handles the
// comment. The override is refused, naming both commits, whether the push's delivery came first,
// later or never, and when the comment is delivered again; given again after the push it applies
// to B. A push the delivery of which was lost, followed by a force push back after the comment
// was written, is caught on GitHub's timeline.
func TestChatOpsCommandIsBoundToTheHeadItWasWrittenAt(t *testing.T) {
	r := newChatOpsRig(t)
	a := r.head
	b := r.commit(5000)
	r.moveHead(b) // pushed at 10:02; its synchronize delivery is not handled yet
	r.send("created", 1101, "dana", "dana", overrideCapacity, t0)
	refusal := "refused: written at " + short(a) + ", the head is now " + short(b)
	if reply := lastReply(r.gh); !strings.Contains(reply, refusal) {
		t.Errorf("reply to the override written at A, handled at B: %q", reply)
	}
	if st, err := r.live.ForPR(context.Background(), "acme/infra", 7, b); err != nil || len(st.Overrides) != 0 {
		t.Fatalf("the override written at A was recorded for B: %+v %v", st, err)
	}
	r.deliver(b, "synchronize", t0.Add(time.Minute))
	if v := r.verdict(); v != "veto by bounds" {
		t.Errorf("B after the refused override: %s", v)
	}
	// Delivered again after the synchronize: refused again, nothing recorded.
	r.send("created", 1101, "dana", "dana", overrideCapacity, t0)
	if reply := lastReply(r.gh); !strings.Contains(reply, refusal) {
		t.Errorf("reply to the redelivered override: %q", reply)
	}
	if v := r.verdict(); v != "veto by bounds" {
		t.Errorf("B after the redelivered override: %s", v)
	}
	// Written after the push, the maintainer's override is for B.
	r.send("created", 1102, "dana", "dana", overrideCapacity, t0.Add(2*time.Minute))
	if v := r.verdict(); v != "enforce-git by override" {
		t.Errorf("the override written at B: %s", v)
	}
	if reply := lastReply(r.gh); !strings.Contains(reply, "applies to commit "+short(b)) {
		t.Errorf("acknowledgement of the override at B: %q", reply)
	}
	// C is pushed (10:04) and its delivery lost; the maintainer holds at C (10:05); the writer
	// force-pushes B back (10:06), its delivery lost too. The head now is B, as last seen before
	// the hold, but the hold was not written for B: only the timeline's force push shows it.
	c := r.commit(40)
	r.moveHead(c)
	r.moveHead(b)
	r.gh.AddTimelineEvent("acme/infra", 7, fakegithub.TimelineEvent{Event: "head_ref_force_pushed", Actor: "mallory", CommitID: b, CreatedAt: t0.Add(5 * time.Minute)})
	r.send("created", 1103, "dana", "dana", `/parley hold reason="looking at C"`, t0.Add(4*time.Minute))
	if reply := lastReply(r.gh); !strings.Contains(reply, "refused: the head was force-pushed at 2026-11-20T10:06:00Z") {
		t.Errorf("reply to the hold written before a force push back: %q", reply)
	}
	if st, err := r.live.ForPR(context.Background(), "acme/infra", 7, b); err != nil || st.Held {
		t.Errorf("the hold written at C was recorded for B: %+v %v", st, err)
	}
	// A pull request Parley never saw a head of before the comment: refused, and given again it
	// applies (the read of the pull request that refused it is itself a head seen).
	r.gh.SetClock(func() time.Time { return t0.Add(10 * time.Minute) })
	r.send("created", 1201, "dana", "dana", "/parley hold", t0.Add(-time.Hour))
	if reply := lastReply(r.gh); !strings.Contains(reply, "refused: Parley has no record of which commit was the head of #7") {
		t.Errorf("reply to a hold older than any head seen: %q", reply)
	}
	r.send("created", 1202, "dana", "dana", "/parley hold", t0.Add(11*time.Minute))
	if st, err := r.live.ForPR(context.Background(), "acme/infra", 7, b); err != nil || !st.Held {
		t.Errorf("the hold given again was not recorded: %+v %v", st, err)
	}
}

// TestChatOpsDelayedEditIsBoundToItsHead: an edit written at head A (10:02) and handled after B
// was pushed (10:03) adds nothing for B: its new hold is refused naming both commits, and the
// override it keeps stays for A, not withdrawn.
func TestChatOpsDelayedEditIsBoundToItsHead(t *testing.T) {
	r := newChatOpsRig(t)
	a := r.head
	r.send("created", 1301, "dana", "dana", overrideCapacity, t0)
	b := r.commit(5000)
	r.moveHead(b)
	r.deliver(b, "synchronize", t0.Add(2*time.Minute))
	r.send("edited", 1301, "dana", "dana", overrideCapacity+"\n/parley hold", t0.Add(time.Minute))
	reply := lastReply(r.gh)
	if !strings.Contains(reply, "`/parley hold`: refused: written at "+short(a)+", the head is now "+short(b)) || strings.Contains(reply, "withdrawn") {
		t.Errorf("reply to the delayed edit: %q", reply)
	}
	if st, err := r.live.ForPR(context.Background(), "acme/infra", 7, b); err != nil || st.Held || len(st.Overrides) != 0 {
		t.Errorf("the edit written at A changed B: %+v %v", st, err)
	}
	if st, err := r.live.ForPR(context.Background(), "acme/infra", 7, a); err != nil || len(st.Overrides) != 1 {
		t.Errorf("the override the edit kept is no longer for A: %+v %v", st, err)
	}
}
