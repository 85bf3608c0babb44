package app

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/google/go-github/v60/github"

	"github.com/parleyhq/parley/app/internal/chatops"
	"github.com/parleyhq/parley/app/internal/livestate"
	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/internal/ghmarkdown"
	"github.com/parleyhq/parley/policy/arbiter"
	"github.com/parleyhq/parley/webhooks"
	"github.com/parleyhq/parley/webhooks/store"
)

// Comments runs /parley commands from pull request comments (issue_comment created, edited and
// deleted). A command runs only as the person who wrote it: its author's permission on the
// repository, read from GitHub, decides (write for claim, yield and recheck, maintain or admin for
// override, hold and unhold), and an edit by anyone else - GitHub lets every writer edit anyone's
// comment - is ignored, with a reply saying so. A comment's commands are those it shows now:
// editing a command away withdraws it, and so does deleting the comment (by its author, or by
// someone with the permission each command needs). Every command is bound to the pull request's
// head commit when its comment was written (a new push is judged without it), or refused when the
// head has moved since (headWhenWritten), and applies in the order of GitHub's timestamps,
// whatever order deliveries arrive in. Commands on a closed or merged pull
// request are refused. Accepted commands are acknowledged with a reaction; refused or malformed
// ones are answered with the reason. Comments by bots, Parley's own included, are never read.
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
	if (act != "created" && act != "edited" && act != "deleted") || ev.Issue == nil || !ev.Issue.IsPullRequest() || ev.Comment == nil {
		return nil
	}
	if ev.GetComment().GetUser().GetType() == "Bot" || (act != "deleted" && ev.GetSender().GetType() == "Bot") {
		return nil
	}
	if h.Live == nil {
		return webhooks.Permanent(fmt.Errorf("issue_comment delivery %s: no live state to keep commands in", d.ID))
	}
	var cmds []chatops.Command
	var perrs []*chatops.Error
	if act != "deleted" {
		cmds, perrs = chatops.Parse(ev.GetComment().GetBody())
	}
	if act == "created" && len(cmds) == 0 && len(perrs) == 0 {
		return nil
	}
	repo, inst := ev.GetRepo(), ev.GetInstallation().GetID()
	if repo == nil || inst == 0 {
		return webhooks.Permanent(fmt.Errorf("issue_comment delivery %s lacks the repository or installation", d.ID))
	}
	author, sender := ev.GetComment().GetUser(), ev.GetSender()
	if act == "edited" && !sameUser(author, sender) {
		return h.foreignEdit(ctx, ev, len(cmds)+len(perrs) > 0)
	}
	version := livestate.Comment{Repo: repo.GetFullName(), PR: ev.GetIssue().GetNumber(), ID: ev.GetComment().GetID(), At: commentTime(ev), Deleted: act == "deleted"}
	if act == "deleted" {
		return h.deleted(ctx, ev, version)
	}
	if act == "edited" && len(cmds) == 0 && len(perrs) == 0 {
		// An edit that leaves no command still withdraws those it had, and must be remembered
		// even if it had none, so that the first version, delivered late, is not applied.
		had, err := h.Live.CommentCommands(ctx, version)
		if err != nil {
			return err
		}
		if len(had) == 0 {
			_, err := h.Live.ApplyComment(ctx, version, nil)
			return err
		}
	}
	return h.commands(ctx, d, ev, version, cmds, perrs)
}

// sameUser reports whether a and b are the same GitHub account (by ID when both carry one).
func sameUser(a, b *github.User) bool {
	if a.GetID() != 0 && b.GetID() != 0 {
		return a.GetID() == b.GetID()
	}
	return a.GetLogin() != "" && strings.EqualFold(a.GetLogin(), b.GetLogin())
}

// commentTime is when GitHub says this version of the comment was written: its updated_at (equal
// to created_at until it is edited).
func commentTime(ev github.IssueCommentEvent) time.Time {
	c := ev.GetComment()
	if t := c.GetUpdatedAt(); !t.IsZero() {
		return t.Time
	}
	return c.GetCreatedAt().Time
}

// foreignEdit answers an edit of someone else's comment that touches commands: it changes nothing.
func (h *Comments) foreignEdit(ctx context.Context, ev github.IssueCommentEvent, hasCommands bool) error {
	if !hasCommands {
		if from := ev.GetChanges().GetBody().GetFrom(); from != "" {
			c, e := chatops.Parse(from)
			hasCommands = len(c)+len(e) > 0
		}
	}
	if !hasCommands {
		return nil
	}
	repo := ev.GetRepo()
	gh, err := h.PullRequests.Installations.Client(ev.GetInstallation().GetID())
	if err != nil {
		return err
	}
	body := fmt.Sprintf("@%s edited a comment by @%s: Parley runs a comment's commands only as its author writes them, so this edit was ignored "+
		"and the commands @%s wrote stay as they were.", ev.GetSender().GetLogin(), ev.GetComment().GetUser().GetLogin(), ev.GetComment().GetUser().GetLogin())
	if _, _, err := gh.Issues.CreateComment(ctx, repo.GetOwner().GetLogin(), repo.GetName(), ev.GetIssue().GetNumber(), &github.IssueComment{Body: github.String(body)}); err != nil {
		return fmt.Errorf("%s#%d: reply: %w", repo.GetFullName(), ev.GetIssue().GetNumber(), err)
	}
	return nil
}

// authority decides what one person may do on one repository: their permission, read once, and
// whether the policy's escalation asks them (read once, when first needed).
type authority struct {
	h     *Comments
	gh    *github.Client
	inst  int64
	repo  *github.Repository
	login string
	perm  chatops.Permission
	asked *bool
}

func (h *Comments) authority(ctx context.Context, gh *github.Client, inst int64, repo *github.Repository, login string) (*authority, error) {
	perm, err := permission(ctx, gh, repo.GetOwner().GetLogin(), repo.GetName(), login)
	if err != nil {
		return nil, fmt.Errorf("%s: permission of %s: %w", repo.GetFullName(), login, err)
	}
	return &authority{h: h, gh: gh, inst: inst, repo: repo, login: login, perm: perm}, nil
}

// need is the permission v needs of this person: the people and teams the policy asks to decide
// escalations may also override and hold with write permission.
func (a *authority) need(ctx context.Context, v chatops.Verb) (chatops.Permission, error) {
	need := chatops.RequiredPermission(v)
	if a.perm < need && need == chatops.PermissionMaintain && a.perm >= chatops.PermissionWrite {
		if a.asked == nil {
			ok, err := a.h.askedByPolicy(ctx, a.gh, a.inst, a.repo, a.login)
			if err != nil {
				return need, err
			}
			a.asked = &ok
		}
		if *a.asked {
			need = a.perm
		}
	}
	return need, nil
}

// commands applies the commands of a comment as its author created or edited it.
func (h *Comments) commands(ctx context.Context, d store.Delivery, ev github.IssueCommentEvent, version livestate.Comment, cmds []chatops.Command, perrs []*chatops.Error) error {
	repo, inst := ev.GetRepo(), ev.GetInstallation().GetID()
	owner, name, number := repo.GetOwner().GetLogin(), repo.GetName(), ev.GetIssue().GetNumber()
	login, commentID := ev.GetComment().GetUser().GetLogin(), ev.GetComment().GetID()
	gh, err := h.PullRequests.Installations.Client(inst)
	if err != nil {
		return err
	}
	reply := func(reaction string, replies []string) error {
		if _, _, err := gh.Reactions.CreateIssueCommentReaction(ctx, owner, name, commentID, reaction); err != nil {
			return fmt.Errorf("%s#%d: react: %w", repo.GetFullName(), number, err)
		}
		if len(replies) == 0 {
			return nil
		}
		body := fmt.Sprintf("@%s\n\n%s", login, strings.Join(replies, "\n\n"))
		if _, _, err := gh.Issues.CreateComment(ctx, owner, name, number, &github.IssueComment{Body: github.String(body)}); err != nil {
			return fmt.Errorf("%s#%d: reply: %w", repo.GetFullName(), number, err)
		}
		return nil
	}
	// The pull request as it is now: its state, and the head commit the commands are bound to.
	pr, resp, err := gh.PullRequests.Get(ctx, owner, name, number)
	if err != nil {
		return fmt.Errorf("%s#%d: %w", repo.GetFullName(), number, err)
	}
	if pr.GetMerged() || pr.GetState() != "open" {
		state := "closed"
		if pr.GetMerged() {
			state = "merged"
		}
		return reply("confused", []string{fmt.Sprintf("refused: #%d is %s; Parley takes no commands on a closed or merged pull request.", number, state)})
	}
	head := pr.GetHead().GetSHA()
	if t, ok := responseDate(resp); ok && head != "" {
		// What GitHub just showed is itself a head observation, for comments written after it.
		if err := h.Live.RecordHead(ctx, repo.GetFullName(), number, livestate.Head{SHA: head, At: t}); err != nil {
			return err
		}
	}
	// A command is bound to the head its author saw: decided once, and only when some command
	// records anything (help, why and recheck read the pull request as it is now).
	var moved string
	for _, c := range cmds {
		if bindsHead(c.Verb) {
			if moved, err = h.headWhenWritten(ctx, gh, owner, name, repo.GetFullName(), number, version.At, head); err != nil {
				return fmt.Errorf("%s#%d: %w", repo.GetFullName(), number, err)
			}
			break
		}
	}
	var had []livestate.Command
	if moved != "" {
		if had, err = h.Live.CommentCommands(ctx, version); err != nil {
			return err
		}
	}
	who, err := h.authority(ctx, gh, inst, repo, login)
	if err != nil {
		return fmt.Errorf("%s#%d: %w", repo.GetFullName(), number, err)
	}
	var replies []string
	for _, e := range perrs {
		replies = append(replies, fmt.Sprintf("%s: %s", ghmarkdown.Code(e.Text), ghmarkdown.Text(e.Reason)))
	}
	at := version.At
	if at.IsZero() {
		at = h.PullRequests.now()
	}
	rejudge, refused := false, len(perrs) > 0
	var whys []core.Field
	var records []livestate.Command
	for _, c := range cmds {
		need, err := who.need(ctx, c.Verb)
		if err != nil {
			return err
		}
		if who.perm < need {
			replies = append(replies, fmt.Sprintf("%s: refused: @%s has %s permission on %s; this command needs %s.", ghmarkdown.Code(c.Text), login, who.perm, ghmarkdown.Text(repo.GetFullName()), need))
			refused = true
			continue
		}
		if moved != "" && bindsHead(c.Verb) {
			// Given for another head than the one now: refused, unless this very command was
			// recorded from the comment before (a redelivery or an edit that keeps it), which
			// stays bound to the commit it was given for.
			if i := slices.IndexFunc(had, func(o livestate.Command) bool { return o.Text == c.Text }); i >= 0 {
				records = append(records, had[i])
				had = slices.Delete(had, i, i+1)
				continue
			}
			replies = append(replies, fmt.Sprintf("%s: refused: %s", ghmarkdown.Code(c.Text), moved))
			refused = true
			continue
		}
		rec := livestate.Command{Repo: repo.GetFullName(), PR: number, Comment: commentID, Line: c.Line, Text: c.Text, Actor: login, Head: head, At: at}
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
				Value: c.Value, Yield: c.Verb == chatops.VerbYield, Intent: c.Intent, Motivation: c.Motivation, At: at,
				Evidence: core.Evidence{Source: "github-comment", PR: number, Explicit: true, EventIDs: []string{d.ID}}}
			if c.TTL > 0 {
				claim.Expires = at.Add(c.TTL)
			}
			rec.Kind, rec.Field, rec.Claim = livestate.KindClaim, c.Field, claim
		case chatops.VerbOverride:
			rec.Kind, rec.Field, rec.Reason = livestate.KindOverride, c.Field, c.Reason
		case chatops.VerbHold:
			rec.Kind, rec.Reason = livestate.KindHold, c.Reason
		case chatops.VerbUnhold:
			rec.Kind = livestate.KindUnhold
		}
		records = append(records, rec)
	}
	applied, err := h.Live.ApplyComment(ctx, version, records)
	if err != nil {
		return err
	}
	if applied.Stale {
		return nil // a newer version of this comment was applied already; this one says nothing now
	}
	for _, c := range applied.Added {
		replies = append(replies, fmt.Sprintf("`%s`: applies to commit %s, the head when it was written and now; a new push is judged without it.", c.Text, short(c.Head)))
	}
	for _, c := range applied.Withdrawn {
		replies = append(replies, fmt.Sprintf("`%s`: withdrawn: the comment no longer says it.", c.Text))
	}
	if applied.Changed() || rejudge {
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
	return reply(reaction, replies)
}

// bindsHead reports whether a command of verb v is recorded for the head commit it was given for;
// help, why and recheck record nothing.
func bindsHead(v chatops.Verb) bool {
	switch v {
	case chatops.VerbClaim, chatops.VerbYield, chatops.VerbOverride, chatops.VerbHold, chatops.VerbUnhold:
		return true
	}
	return false
}

// maxTimelinePages bounds the timeline read per comment (100 events a page): a pull request with a
// longer one has its commands refused rather than bound on a partial read.
const maxTimelinePages = 20

// headWhenWritten decides whether a comment written at t (GitHub's time, to the second) was written
// for head, the pull request's head now. It returns "" when it was, or the reason it was not, for
// the refusal. What shows the head at a time is what GitHub showed: the heads recorded from
// pull_request deliveries and reads of the pull request (livestate.RecordHead), and the
// pull request timeline's force pushes (head_ref_force_pushed, with the commit and the time).
//
// Why that suffices: the latest such head before t was the head at that moment, and from then on
// the head moves only by pushes. A push that is not forced only ever moves it to a descendant, so
// the head can be that commit again now, after moving, only through a force push, which the
// timeline lists whether or not its delivery was ever received. So the comment was written for
// head when the latest head seen before t is head and no force push since then made anything else
// the head, or happened after t.
func (h *Comments) headWhenWritten(ctx context.Context, gh *github.Client, owner, name, fullName string, number int, t time.Time, head string) (string, error) {
	if t.IsZero() {
		return "GitHub gave no time for this comment, so which commit it was written for is unknown: comment again.", nil
	}
	seen, ok, err := h.Live.HeadBefore(ctx, fullName, number, t)
	if err != nil {
		return "", err
	}
	type push struct {
		sha string
		at  time.Time
	}
	var forced []push
	opts := &github.ListOptions{PerPage: 100}
	for page := 0; ; page++ {
		if page == maxTimelinePages {
			return fmt.Sprintf("the pull request's timeline is longer than the %d events Parley reads, so it cannot tell whether the head moved since this comment was written.",
				maxTimelinePages*opts.PerPage), nil
		}
		evs, resp, err := gh.Issues.ListIssueTimeline(ctx, owner, name, number, opts)
		if err != nil {
			return "", fmt.Errorf("timeline: %w", err)
		}
		for _, e := range evs {
			if e.GetEvent() == "head_ref_force_pushed" {
				forced = append(forced, push{e.GetCommitID(), e.GetCreatedAt().Time})
			}
		}
		if resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	ambiguous := false
	for _, f := range forced {
		if f.sha == "" || !f.at.Before(t) {
			continue
		}
		switch {
		case !ok || f.at.After(seen.At):
			seen, ok, ambiguous = livestate.Head{SHA: f.sha, At: f.at}, true, false
		case f.at.Equal(seen.At) && f.sha != seen.SHA:
			ambiguous = true
		}
	}
	when := t.UTC().Format(time.RFC3339)
	if !ok || ambiguous {
		return fmt.Sprintf("Parley has no record of which commit was the head of #%d when this comment was written (%s); the head is now %s: comment again to give it for %s.",
			number, when, short(head), short(head)), nil
	}
	if seen.SHA != head {
		return fmt.Sprintf("written at %s, the head is now %s: this comment was written (%s) when the head was %s, and the pull request has moved since; comment again to give it for %s.",
			short(seen.SHA), short(head), when, short(seen.SHA), short(head)), nil
	}
	for _, f := range forced {
		if !f.at.Before(seen.At) && (f.sha != head || !f.at.Before(t)) {
			return fmt.Sprintf("the head was force-pushed at %s, after the head %s Parley last saw before this comment was written (%s); the head is now %s: comment again to give it for %s.",
				f.at.UTC().Format(time.RFC3339), short(seen.SHA), when, short(head), short(head)), nil
		}
	}
	return "", nil
}

// responseDate is the time GitHub answered resp (its Date header, GitHub's clock, to the second).
func responseDate(resp *github.Response) (time.Time, bool) {
	if resp == nil || resp.Response == nil {
		return time.Time{}, false
	}
	t, err := http.ParseTime(resp.Header.Get("Date"))
	return t, err == nil
}

// verbOf is the verb that records a command of kind k, for the permission withdrawing it needs.
func verbOf(k livestate.Kind) chatops.Verb {
	switch k {
	case livestate.KindClaim:
		return chatops.VerbClaim
	case livestate.KindOverride:
		return chatops.VerbOverride
	case livestate.KindHold:
		return chatops.VerbHold
	case livestate.KindUnhold:
		return chatops.VerbUnhold
	}
	return chatops.Verb(k)
}

// deleted withdraws the commands of a deleted comment. Its author may always withdraw them; anyone
// else who deletes it withdraws only those they could have given themselves (a writer deleting a
// maintainer's hold does not lift it), and the reply names the ones still in force.
func (h *Comments) deleted(ctx context.Context, ev github.IssueCommentEvent, version livestate.Comment) error {
	had, err := h.Live.CommentCommands(ctx, version)
	if err != nil {
		return err
	}
	if len(had) == 0 {
		_, err := h.Live.ApplyComment(ctx, version, nil)
		return err
	}
	repo, inst := ev.GetRepo(), ev.GetInstallation().GetID()
	owner, name, number := repo.GetOwner().GetLogin(), repo.GetName(), ev.GetIssue().GetNumber()
	author, sender := ev.GetComment().GetUser(), ev.GetSender()
	gh, err := h.PullRequests.Installations.Client(inst)
	if err != nil {
		return err
	}
	var keep []livestate.Command
	if !sameUser(author, sender) {
		who, err := h.authority(ctx, gh, inst, repo, sender.GetLogin())
		if err != nil {
			return fmt.Errorf("%s#%d: %w", repo.GetFullName(), number, err)
		}
		for _, c := range had {
			need, err := who.need(ctx, verbOf(c.Kind))
			if err != nil {
				return err
			}
			if who.perm < need {
				keep = append(keep, c)
			}
		}
	}
	applied, err := h.Live.ApplyComment(ctx, version, keep)
	if err != nil || applied.Stale {
		return err
	}
	var replies []string
	for _, c := range applied.Withdrawn {
		replies = append(replies, fmt.Sprintf("`%s`: withdrawn: @%s deleted the comment that gave it.", c.Text, sender.GetLogin()))
	}
	for _, c := range keep {
		replies = append(replies, fmt.Sprintf("`%s`: still in force for commit %s: @%s deleted @%s's comment but lacks the permission to withdraw it; it lapses with the next push.",
			c.Text, short(c.Head), sender.GetLogin(), author.GetLogin()))
	}
	if applied.Changed() {
		pr, _, err := gh.PullRequests.Get(ctx, owner, name, number)
		if err != nil {
			return fmt.Errorf("%s#%d: %w", repo.GetFullName(), number, err)
		}
		if pr.GetState() == "open" && !pr.GetMerged() {
			if _, err := h.PullRequests.Judge(ctx, Target{Installation: inst, Owner: owner, Repo: name, FullName: repo.GetFullName(),
				CloneURL: repo.GetCloneURL(), DefaultBranch: repo.GetDefaultBranch(), PR: pr}); err != nil {
				return err
			}
		}
	}
	body := fmt.Sprintf("@%s\n\n%s", sender.GetLogin(), strings.Join(replies, "\n\n"))
	if _, _, err := gh.Issues.CreateComment(ctx, owner, name, number, &github.IssueComment{Body: github.String(body)}); err != nil {
		return fmt.Errorf("%s#%d: reply: %w", repo.GetFullName(), number, err)
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
	return namedAmong(ctx, gh, login, pol.Escalation.Ask)
}

// namedAmong reports whether login is one of people: a login ("dana" or "@dana") or an active
// member of an org/team ("acme/platform" or "@acme/platform"), asked of GitHub's team API.
func namedAmong(ctx context.Context, gh *github.Client, login string, people []string) (bool, error) {
	for _, who := range people {
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
