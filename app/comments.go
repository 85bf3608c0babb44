package app

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/go-github/v60/github"

	"github.com/parleyhq/parley/app/internal/chatops"
	"github.com/parleyhq/parley/app/internal/livestate"
	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/internal/ghmarkdown"
	"github.com/parleyhq/parley/policy/arbiter"
	"github.com/parleyhq/parley/webhooks"
	"github.com/parleyhq/parley/webhooks/store"
)

// Comments runs /parley commands from pull request comments (issue_comment created and edited).
// Who may run a command comes from the commenter's permission on the repository, read from GitHub:
// write for claim, yield and recheck, maintain or admin for override, hold and unhold. Every
// accepted command is recorded once, as a claim with the commenter as actor where it is one, and
// acknowledged with a reaction; a refused or malformed one is answered with the reason. Comments by
// bots, Parley's own included, are never read.
type Comments struct {
	PullRequests *PullRequests
	Live         *livestate.DB
}

// Handle implements webhooks.Handler for issue_comment deliveries.
func (h *Comments) Handle(ctx context.Context, d store.Delivery) error {
	var ev github.IssueCommentEvent
	if err := json.Unmarshal(d.Body, &ev); err != nil {
		return webhooks.Permanent(fmt.Errorf("decode issue_comment delivery %s: %w", d.ID, err))
	}
	act := ev.GetAction()
	// go-github's IsPullRequest is not nil-safe: a payload without an issue is no pull request.
	if (act != "created" && act != "edited") || ev.Issue == nil || !ev.Issue.IsPullRequest() {
		return nil
	}
	if ev.GetSender().GetType() == "Bot" || ev.GetComment().GetUser().GetType() == "Bot" {
		return nil
	}
	cmds, perrs := chatops.Parse(ev.GetComment().GetBody())
	if len(cmds) == 0 && len(perrs) == 0 {
		return nil
	}
	repo, inst := ev.GetRepo(), ev.GetInstallation().GetID()
	if repo == nil || inst == 0 {
		return webhooks.Permanent(fmt.Errorf("issue_comment delivery %s lacks the repository or installation", d.ID))
	}
	owner, name, number := repo.GetOwner().GetLogin(), repo.GetName(), ev.GetIssue().GetNumber()
	login, commentID := ev.GetComment().GetUser().GetLogin(), ev.GetComment().GetID()
	gh, err := h.PullRequests.Installations.Client(inst)
	if err != nil {
		return err
	}
	perm, err := permission(ctx, gh, owner, name, login)
	if err != nil {
		return fmt.Errorf("%s#%d: permission of %s: %w", repo.GetFullName(), number, login, err)
	}
	var replies []string
	for _, e := range perrs {
		replies = append(replies, fmt.Sprintf("%s: %s", ghmarkdown.Code(e.Text), ghmarkdown.Text(e.Reason)))
	}
	now := h.PullRequests.now()
	changed, rejudge, refused := false, false, len(perrs) > 0
	var whys []core.Field
	var asked *bool // whether the policy's escalation asks this commenter; read once, when needed
	for _, c := range cmds {
		need := chatops.RequiredPermission(c.Verb)
		if perm < need && need == chatops.PermissionMaintain && perm >= chatops.PermissionWrite {
			// The people and teams the policy asks to decide escalations may also override and hold.
			if asked == nil {
				ok, err := h.askedByPolicy(ctx, gh, inst, repo, login)
				if err != nil {
					return err
				}
				asked = &ok
			}
			if *asked {
				need = perm
			}
		}
		if perm < need {
			replies = append(replies, fmt.Sprintf("%s: refused: @%s has %s permission on %s; this command needs %s.", ghmarkdown.Code(c.Text), login, perm, ghmarkdown.Text(repo.GetFullName()), need))
			refused = true
			continue
		}
		rec := livestate.Command{Repo: repo.GetFullName(), PR: number, Comment: commentID, Line: c.Line, Text: c.Text, Actor: login, At: now}
		switch c.Verb {
		case chatops.VerbHelp:
			replies = append(replies, chatops.Help())
			continue
		case chatops.VerbWhy:
			whys = append(whys, c.Field)
			rejudge = true
			continue
		case chatops.VerbRecheck:
			rejudge = true
			continue
		case chatops.VerbClaim, chatops.VerbYield:
			claim := core.Claim{Field: c.Field, Actor: core.Actor{Identity: core.Identity{Source: core.SourceGitHubUser, ID: login}},
				Value: c.Value, Yield: c.Verb == chatops.VerbYield, Intent: c.Intent, Motivation: c.Motivation, At: now,
				Evidence: core.Evidence{Source: "github-comment", PR: number, Explicit: true, EventIDs: []string{d.ID}}}
			if c.TTL > 0 {
				claim.Expires = now.Add(c.TTL)
			}
			rec.Kind, rec.Field, rec.Claim = livestate.KindClaim, c.Field, claim
		case chatops.VerbOverride:
			rec.Kind, rec.Field, rec.Reason = livestate.KindOverride, c.Field, c.Reason
		case chatops.VerbHold:
			rec.Kind, rec.Reason = livestate.KindHold, c.Reason
		case chatops.VerbUnhold:
			rec.Kind = livestate.KindUnhold
		}
		added, err := h.Live.Record(ctx, rec)
		if err != nil {
			return err
		}
		changed = changed || added
	}
	if changed || rejudge {
		pr, _, err := gh.PullRequests.Get(ctx, owner, name, number)
		if err != nil {
			return fmt.Errorf("%s#%d: %w", repo.GetFullName(), number, err)
		}
		res, err := h.PullRequests.Judge(ctx, Target{Installation: inst, Owner: owner, Repo: name, FullName: repo.GetFullName(),
			CloneURL: repo.GetCloneURL(), DefaultBranch: repo.GetDefaultBranch(), PR: pr})
		if err != nil {
			return err
		}
		for _, f := range whys {
			replies = append(replies, why(res.Verdicts, f))
		}
	}
	reaction := "+1"
	if refused {
		reaction = "confused"
	}
	if _, _, err := gh.Reactions.CreateIssueCommentReaction(ctx, owner, name, commentID, reaction); err != nil {
		return fmt.Errorf("%s#%d: react: %w", repo.GetFullName(), number, err)
	}
	if len(replies) > 0 {
		body := fmt.Sprintf("@%s\n\n%s", login, strings.Join(replies, "\n\n"))
		if _, _, err := gh.Issues.CreateComment(ctx, owner, name, number, &github.IssueComment{Body: github.String(body)}); err != nil {
			return fmt.Errorf("%s#%d: reply: %w", repo.GetFullName(), number, err)
		}
	}
	return nil
}

func why(vs []core.Verdict, f core.Field) string {
	for _, v := range vs {
		if v.Field == f {
			return ghmarkdown.Fence(arbiter.Explain(v), "")
		}
	}
	return fmt.Sprintf("%s is not claimed in this pull request: it changes no such field and no command claims it.", ghmarkdown.Code(f.String()))
}

// permission reads the commenter's permission. GitHub's role_name distinguishes maintain and
// triage, which the legacy permission field folds into write and read; go-github v60 does not
// decode role_name, so the answer is decoded here.
func permission(ctx context.Context, gh *github.Client, owner, repo, user string) (chatops.Permission, error) {
	req, err := gh.NewRequest("GET", fmt.Sprintf("repos/%s/%s/collaborators/%s/permission", owner, repo, user), nil)
	if err != nil {
		return chatops.PermissionNone, err
	}
	var out struct {
		Permission string `json:"permission"`
		RoleName   string `json:"role_name"`
	}
	resp, err := gh.Do(ctx, req, &out)
	if resp != nil && resp.StatusCode == 404 {
		return chatops.PermissionNone, nil // not a collaborator
	}
	if err != nil {
		return chatops.PermissionNone, err
	}
	if p, err := chatops.ParsePermission(out.RoleName); err == nil && out.RoleName != "" {
		return p, nil
	}
	return chatops.ParsePermission(out.Permission)
}

// askedByPolicy reports whether the default branch's policy names the commenter in its escalation's
// ask list, directly ("@login") or through a team ("@org/team") they are an active member of.
func (h *Comments) askedByPolicy(ctx context.Context, gh *github.Client, inst int64, repo *github.Repository, login string) (bool, error) {
	token, err := h.PullRequests.Installations.Token(ctx, inst)
	if err != nil {
		return false, err
	}
	dir, unlock, err := h.PullRequests.Repos.Sync(ctx, repo.GetFullName(), repo.GetCloneURL(), token)
	if err != nil {
		return false, err
	}
	pol, _, err := h.PullRequests.readPolicy(dir, repo.GetDefaultBranch())
	unlock()
	if err != nil || pol == nil {
		return false, err
	}
	for _, who := range pol.Escalation.Ask {
		who = strings.TrimPrefix(who, "@")
		org, team, isTeam := strings.Cut(who, "/")
		if !isTeam {
			if strings.EqualFold(who, login) {
				return true, nil
			}
			continue
		}
		m, resp, err := gh.Teams.GetTeamMembershipBySlug(ctx, org, team, login)
		if resp != nil && resp.StatusCode == 404 {
			continue
		}
		if err != nil {
			return false, fmt.Errorf("membership of %s in %s: %w", login, who, err)
		}
		if m.GetState() == "active" {
			return true, nil
		}
	}
	return false, nil
}
