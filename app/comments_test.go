package app

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parleyhq/parley/app/internal/livestate"
	"github.com/parleyhq/parley/app/report"
	"github.com/parleyhq/parley/internal/fakegithub"
	"github.com/parleyhq/parley/webhooks/store"
)

const capacity = "tf:infra/kafka//aws_autoscaling_group.consumer#/desired_capacity"

// commentEvent is GitHub's own issue_comment "created" example, made a comment on pull request 7.
func commentEvent(t *testing.T, cloneURL string, id int64, user, userType, body string) []byte {
	return example(t, "issue_comment", "created", func(ev map[string]any) {
		pointAt(ev, cloneURL)
		issue := ev["issue"].(map[string]any)
		issue["number"] = 7
		issue["pull_request"] = map[string]any{"url": "https://api.github.com/repos/acme/infra/pulls/7"}
		c := ev["comment"].(map[string]any)
		c["id"], c["body"] = id, body
		c["user"].(map[string]any)["login"], c["user"].(map[string]any)["type"] = user, userType
		ev["sender"].(map[string]any)["login"], ev["sender"].(map[string]any)["type"] = user, userType
	})
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
	if st, _ := live.ForPR(context.Background(), "acme/infra", 7); !st.Held || st.HeldBy != "erin" {
		t.Errorf("erin's hold was not recorded: %+v", st)
	}
	comment(508, "erin", "User", "/parley unhold")

	// A commenter's claim becomes a claim with the commenter as actor.
	comment(505, "dana", "User", "/parley claim "+capacity+"=10 intent=availability motivation=incident ref=INC-9 ttl=2h")
	st, err := live.ForPR(context.Background(), "acme/infra", 7)
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
