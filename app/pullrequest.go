package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/google/go-github/v60/github"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/parleyhq/parley/app/internal/ghclient"
	"github.com/parleyhq/parley/app/internal/livestate"
	"github.com/parleyhq/parley/app/internal/repocache"
	"github.com/parleyhq/parley/app/report"
	"github.com/parleyhq/parley/app/review"
	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/internal/ghmarkdown"
	"github.com/parleyhq/parley/internal/keymutex"
	"github.com/parleyhq/parley/policy"
	"github.com/parleyhq/parley/reconcile"
	"github.com/parleyhq/parley/trailers/ledger"
	"github.com/parleyhq/parley/webhooks"
	"github.com/parleyhq/parley/webhooks/store"
)

// CheckName is the name of Parley's check run.
const CheckName = "parley"

// Installations gives clients and tokens acting as an installation (ghauth.App satisfies it
// through InstallationAuth).
type Installations interface {
	Client(installation int64) (*github.Client, error)
	Token(ctx context.Context, installation int64) (string, error)
	// BotLogin is the App's own login on what it writes, "<app-slug>[bot]": only a comment by it
	// is Parley's sticky comment.
	BotLogin(ctx context.Context) (string, error)
}

// PullRequests judges pull requests: on pull_request opened, synchronize, reopened, edited and
// ready_for_review it fetches the repository and the pull request's head into the clone cache,
// brings the default branch's ledger up to date, judges the pull request under the default
// branch's policy and publishes the verdicts. Publishing is idempotent: the check run is found by
// head SHA and name and the comment by its marker, and nothing is written when nothing changed.
type PullRequests struct {
	Installations Installations
	Repos         *repocache.Cache
	PolicyPath    string // default .parley/policy.hcl
	// Live holds what /parley commands said (claims, overrides, holds); nil: no commands.
	Live *livestate.DB
	// CallsPerEvent, if set, observes how many GitHub calls each judgement made.
	CallsPerEvent prometheus.Observer
	Now           func() time.Time
	Log           *slog.Logger
	// Lock serialises the judging of one pull request across replicas (a PostgreSQL advisory
	// lock), so that two deliveries of it judged at once still find each other's check run and
	// comment rather than each creating one. nil: this process is the only one. Within a process
	// pull requests are always judged one at a time each.
	Lock func(ctx context.Context, name string) (unlock func(), err error)
	// DetailsURL, if set, is the address of a pull request's details page: the check run links
	// it, and each judgement is kept in Live for it.
	DetailsURL func(fullName string, number int) string
	// Budget bounds what a pull request may make the App read and judge (core.Budget); zero: the
	// defaults, as parley review's.
	Budget  core.Budget
	judging keymutex.Map
	// parsed remembers what each file's blob parsed to, and policies each policy's parse, from one
	// judgement to the next: a pull request is judged anew on every delivery, and most of it is
	// the same blobs as before (a refused Terraform file is not lexed again). Keyed by content,
	// bounded, and shared by concurrent judgements.
	parsed   review.Parsed
	policies policyMemo
	// ledgers remembers the ledger settings (paths, signing keys) of the default branch's policy
	// by its blob, so that opening the ledger again does not parse the policy again.
	ledgers reconcile.LedgerSettingsMemo
}

// judgedActions are the pull_request actions that can change a verdict.
var judgedActions = map[string]bool{"opened": true, "synchronize": true, "reopened": true, "edited": true, "ready_for_review": true,
	"labeled": true, "unlabeled": true}

// reviewActions are the pull_request_review actions that can change a verdict: an approval (or
// its dismissal) decides whether a change to the policy passes.
var reviewActions = map[string]bool{"submitted": true, "dismissed": true, "edited": true}

// Handle implements webhooks.Handler for pull_request and pull_request_review deliveries (both
// carry the pull request, the repository and the installation).
func (h *PullRequests) Handle(ctx context.Context, d store.Delivery) error {
	var ev github.PullRequestEvent
	if err := json.Unmarshal(d.Body, &ev); err != nil {
		return webhooks.Permanent(fmt.Errorf("decode %s delivery %s: %w", d.Event, d.ID, err))
	}
	if err := h.recordHead(ctx, ev); err != nil {
		return err
	}
	if d.Event == "pull_request" && ev.GetAction() == "closed" {
		if ev.GetPullRequest().GetMerged() {
			return h.recordMerge(ctx, ev) // a merged proposal needs no word: the value is Git's
		}
		return h.proposalClosed(ctx, d.ID, &ev)
	}
	actions := judgedActions
	if d.Event == "pull_request_review" {
		actions = reviewActions
	}
	if !actions[ev.GetAction()] {
		return nil
	}
	pr, repo := ev.GetPullRequest(), ev.GetRepo()
	if pr == nil || repo == nil || ev.GetInstallation().GetID() == 0 {
		return webhooks.Permanent(fmt.Errorf("pull_request delivery %s lacks the pull request, repository or installation", d.ID))
	}
	if d.Event == "pull_request" {
		if err := h.recordContribution(ctx, ev); err != nil {
			return err
		}
	}
	_, err := h.Judge(ctx, Target{
		Installation: ev.GetInstallation().GetID(), Owner: repo.GetOwner().GetLogin(), Repo: repo.GetName(),
		FullName: repo.GetFullName(), CloneURL: repo.GetCloneURL(), DefaultBranch: repo.GetDefaultBranch(), PR: pr,
	})
	return err
}

// recordHead keeps the head commit the delivery shows, at the time GitHub last updated the pull
// request (for synchronize, the push): what /parley commands are bound to is read from these
// (Comments.headWhenWritten), not from the head when a comment happens to be processed.
func (h *PullRequests) recordHead(ctx context.Context, ev github.PullRequestEvent) error {
	pr, repo := ev.GetPullRequest(), ev.GetRepo()
	if h.Live == nil || pr == nil || repo == nil || pr.GetHead().GetSHA() == "" || pr.GetUpdatedAt().IsZero() {
		return nil
	}
	return h.Live.RecordHead(ctx, repo.GetFullName(), pr.GetNumber(), livestate.Head{SHA: pr.GetHead().GetSHA(), At: pr.GetUpdatedAt().Time})
}

// proposalClosed tells a veto put to people, whose pull request was closed without merging, that
// the veto stands. Only Parley's own proposals (a bot's pull request from a proposal branch of the
// same repository) are answered; merged ones need no word: the value is Git's.
func (h *PullRequests) proposalClosed(ctx context.Context, delivery string, ev *github.PullRequestEvent) error {
	pr, repo := ev.GetPullRequest(), ev.GetRepo()
	if pr == nil || repo == nil || pr.GetMerged() || pr.GetUser().GetType() != "Bot" ||
		!strings.HasPrefix(pr.GetHead().GetRef(), reconcile.ProposalBranchPrefix) ||
		!strings.EqualFold(pr.GetHead().GetRepo().GetFullName(), repo.GetFullName()) {
		return nil
	}
	if ev.GetInstallation().GetID() == 0 {
		return webhooks.Permanent(fmt.Errorf("pull_request delivery %s lacks the installation", delivery))
	}
	gh, err := h.Installations.Client(ev.GetInstallation().GetID())
	if err != nil {
		return fmt.Errorf("%s#%d: client: %w", repo.GetFullName(), pr.GetNumber(), err)
	}
	body := "Closed without merging: **the veto stands**. Git's value of the field remains, and the next apply restores it " +
		"over the live change; Parley does not propose this value again. To change the field, make a reviewed change to Git."
	if _, _, err := gh.Issues.CreateComment(ctx, repo.GetOwner().GetLogin(), repo.GetName(), pr.GetNumber(), &github.IssueComment{Body: github.String(body)}); err != nil {
		return fmt.Errorf("%s#%d: say the veto stands: %w", repo.GetFullName(), pr.GetNumber(), err)
	}
	return nil
}

// recordContribution remembers who other than the opener shaped the pull request: the sender of a
// push (synchronize), of an intent/ or motivation/ label (labeled), of an edit to the body
// (edited). Only the delivery names them, so they are kept in the live state; the pull request's
// claims are judged as each of them (review.PullRequest.Contributors).
func (h *PullRequests) recordContribution(ctx context.Context, ev github.PullRequestEvent) error {
	sender, opener := ev.GetSender().GetLogin(), ev.GetPullRequest().GetUser().GetLogin()
	if h.Live == nil || sender == "" || strings.EqualFold(sender, opener) {
		return nil
	}
	var what string
	switch ev.GetAction() {
	case "synchronize":
		what = "pushed to the branch"
	case "labeled":
		name := ev.GetLabel().GetName()
		if !strings.HasPrefix(name, "intent/") && !strings.HasPrefix(name, "motivation/") {
			return nil
		}
		what = "added label " + name
	case "edited":
		if ev.GetChanges().GetBody() == nil {
			return nil // a title or base change declares nothing
		}
		what = "edited the body"
	default:
		return nil
	}
	repo, n := ev.GetRepo().GetFullName(), ev.GetPullRequest().GetNumber()
	if _, err := h.Live.RecordContribution(ctx, livestate.Command{Repo: repo, PR: n, Text: "contribution " + sender + " " + what,
		Kind: livestate.KindContribution, Actor: sender, Reason: what, At: h.now()}); err != nil {
		return fmt.Errorf("%s#%d: record %s's contribution: %w", repo, n, sender, err)
	}
	return nil
}

// Target is one pull request to judge.
type Target struct {
	Installation            int64
	Owner, Repo, FullName   string
	CloneURL, DefaultBranch string
	PR                      *github.PullRequest
}

func (h *PullRequests) now() time.Time {
	if h.Now != nil {
		return h.Now()
	}
	return time.Now()
}

// Judge evaluates and publishes one pull request, and returns what it decided.
func (h *PullRequests) Judge(ctx context.Context, t Target) (review.Result, error) {
	unlock, err := h.lock(ctx, t)
	if err != nil {
		return review.Result{}, err
	}
	defer unlock()
	ctx, calls := ghclient.WithCallCount(ctx)
	res, err := h.judge(ctx, t)
	if h.CallsPerEvent != nil {
		h.CallsPerEvent.Observe(float64(calls.Load()))
	}
	return res, err
}

// lock takes the pull request's lock, in this process and, if there is a Lock, across replicas.
func (h *PullRequests) lock(ctx context.Context, t Target) (func(), error) {
	name := fmt.Sprintf("parley/pr/%s#%d", strings.ToLower(t.FullName), t.PR.GetNumber())
	unlock, err := h.judging.Lock(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("%s#%d: wait to judge: %w", t.FullName, t.PR.GetNumber(), err)
	}
	if h.Lock == nil {
		return unlock, nil
	}
	shared, err := h.Lock(ctx, name)
	if err != nil {
		unlock()
		return nil, fmt.Errorf("%s#%d: %w", t.FullName, t.PR.GetNumber(), err)
	}
	return func() {
		shared()
		unlock()
	}, nil
}

func (h *PullRequests) judge(ctx context.Context, t Target) (review.Result, error) {
	log := h.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	n := t.PR.GetNumber()
	id := fmt.Sprintf("%s#%d", t.FullName, n)
	log = log.With("repo", t.FullName, "pr", n, "installation", t.Installation)
	token, err := h.Installations.Token(ctx, t.Installation)
	if err != nil {
		return review.Result{}, fmt.Errorf("%s: installation token: %w", id, err)
	}
	gh, err := h.Installations.Client(t.Installation)
	if err != nil {
		return review.Result{}, fmt.Errorf("%s: client: %w", id, err)
	}
	prRef := fmt.Sprintf("refs/parley/pull/%d", n)
	// The judgement reads the default branch (policy, ledger), the base branch and the head: only
	// those are fetched. A base branch the remote no longer has falls back to every branch.
	pullSpec := fmt.Sprintf("+refs/pull/%d/head:%s", n, prRef)
	branches := []string{t.DefaultBranch}
	if ref := t.PR.GetBase().GetRef(); ref != "" && ref != t.DefaultBranch {
		branches = append(branches, ref)
	}
	dir, unlock, err := h.Repos.SyncBranches(ctx, t.FullName, t.CloneURL, token, branches, pullSpec)
	var noMatch git.NoMatchingRefSpecError
	if errors.As(err, &noMatch) || t.DefaultBranch == "" {
		dir, unlock, err = h.Repos.Sync(ctx, t.FullName, t.CloneURL, token, pullSpec)
	}
	if err != nil {
		return review.Result{}, fmt.Errorf("%s: %w", id, err)
	}
	defer unlock()

	headSHA, baseSHA := t.PR.GetHead().GetSHA(), t.PR.GetBase().GetSHA()
	pol, policyNote, err := h.readPolicy(dir, t.DefaultBranch)
	if err != nil {
		return review.Result{}, fmt.Errorf("%s: %w", id, err)
	}
	var res review.Result
	var headTime time.Time
	var gate *policyGate // set when the pull request changes the policy itself
	policyPath := repoPath(h.PolicyPath)
	if pol == nil {
		// Nothing is judged without a policy on the base, but a pull request that adds or mends one
		// is a change to the policy all the same.
		base := baseSHA
		if ref := t.PR.GetBase().GetRef(); ref != "" && hasBranch(dir, ref) {
			base = "refs/heads/" + ref
		}
		src, err := review.OpenGitSource(dir, base, headSHA)
		if err != nil {
			return review.Result{}, webhooks.Permanent(fmt.Errorf("%s: %w", id, err))
		}
		files, err := src.Files(ctx)
		if err != nil {
			return review.Result{}, fmt.Errorf("%s: %w", id, err)
		}
		if changesPolicy(files, policyPath) {
			if gate, err = h.policyGateFor(ctx, gh, t, src, policyPath, nil, nil, h.now()); err != nil {
				return review.Result{}, fmt.Errorf("%s: policy change: %w", id, err)
			}
		}
	}
	if pol != nil {
		led, err := h.ledgers.OpenLedger(dir, t.DefaultBranch, policyPath, ledger.Options{})
		if err != nil {
			return review.Result{}, fmt.Errorf("%s: open ledger: %w", id, err)
		}
		defer led.Close()
		if _, err := led.Update(ctx, t.DefaultBranch); err != nil {
			return review.Result{}, fmt.Errorf("%s: update ledger of %s: %w", id, t.DefaultBranch, err)
		}
		// The pull request is measured from the merge base of its base branch as fetched now (the
		// base may have moved since the event was sent) and its head, as GitHub's Files changed.
		base := baseSHA
		if ref := t.PR.GetBase().GetRef(); ref != "" && hasBranch(dir, ref) {
			base = "refs/heads/" + ref
		}
		src, err := review.OpenGitSource(dir, base, headSHA)
		if err != nil {
			return review.Result{}, webhooks.Permanent(fmt.Errorf("%s: %w", id, err))
		}
		_, head := src.HeadCommit()
		headTime = head.Time
		var labels []string
		for _, l := range t.PR.Labels {
			labels = append(labels, l.GetName())
		}
		in := review.PullRequest{Number: n, BaseSHA: src.BaseSHA(), MergeBaseSHA: src.MergeBaseSHA(), HeadSHA: headSHA, Title: t.PR.GetTitle(), Body: t.PR.GetBody(),
			Labels: labels, Author: core.Identity{Source: core.SourceGitHubUser, ID: t.PR.GetUser().GetLogin()}, Updated: head.Time, Budget: h.Budget,
			Parsed: &h.parsed}
		// GitHub is asked about a commit once (the ledger keeps the answer) and about a user's
		// teams once per judgement, so judging the same commits again costs no lookups. Every
		// GitHub user behind the claim (opener, pushers, labelers, editors, commit authors GitHub
		// vouches for) matches github_teams: GitHub authenticated each of them, and an actor the
		// policy names only by team would otherwise never match the people in it.
		teams := newTeamsOf(gh, pol)
		if in.Author, err = teams.withTeams(ctx, in.Author); err != nil {
			return review.Result{}, fmt.Errorf("%s: pull request author: %w", id, err)
		}
		var live livestate.PR
		if h.Live != nil {
			if live, err = h.Live.ForPR(ctx, t.FullName, n, headSHA); err != nil {
				return review.Result{}, fmt.Errorf("%s: %w", id, err)
			}
			// A command's claim is its commenter's, matched by team as the opener is; copied, so
			// what the live state keeps is not changed.
			in.Commands = slices.Clone(live.Claims)
			for i := range in.Commands {
				if in.Commands[i].Actor.Identity, err = teams.withTeams(ctx, in.Commands[i].Actor.Identity); err != nil {
					return review.Result{}, fmt.Errorf("%s: command: %w", id, err)
				}
			}
			live.Claims = in.Commands
			for _, c := range live.Contributors {
				who, err := teams.withTeams(ctx, core.Identity{Source: core.SourceGitHubUser, ID: c.Actor})
				if err != nil {
					return review.Result{}, fmt.Errorf("%s: contributor: %w", id, err)
				}
				in.Contributors = append(in.Contributors, review.Contributor{Identity: who, What: c.Reason})
			}
		}
		// Each commit's author is judged on the fields its commit touched, as far as its
		// signature (the base policy's signing_keys) or GitHub's verification proves them.
		src.SetOpenPGPKeys(pol.OpenPGPKeyring())
		verified := &verifications{gh: gh, t: t, led: led}
		authors, err := src.CommitAuthors(ctx, "", commitAuthorVouch(verified, teams))
		if err != nil {
			return review.Result{}, fmt.Errorf("%s: %w", id, err)
		}
		in.Contributors = append(in.Contributors, authors...)
		git := &crediting{Ledger: led, ctx: ctx, vouch: commitVoucher(gh, t, verified), teams: teams}
		if res, err = review.Evaluate(ctx, in, src, pol, git, livestate.Live{Claims: live.Claims}, h.now()); err != nil {
			return review.Result{}, fmt.Errorf("%s: %w", id, err)
		}
		applyOverrides(&res, live.Overrides, live.OtherHeads, headSHA)
		files, err := src.Files(ctx)
		if err != nil {
			return review.Result{}, fmt.Errorf("%s: %w", id, err)
		}
		if changesPolicy(files, policyPath) {
			// The diff reads the default branch's index in one pass (the ledger's Branch), not
			// field by field.
			branch, err := led.Branch(t.DefaultBranch)
			if err != nil {
				return review.Result{}, fmt.Errorf("%s: policy change: %w", id, err)
			}
			if gate, err = h.policyGateFor(ctx, gh, t, src, policyPath, pol, branch, h.now()); err != nil {
				return review.Result{}, fmt.Errorf("%s: policy change: %w", id, err)
			}
		}
		if live.Held {
			log.Info("pull request is held: nothing published", "held_by", live.HeldBy, "fields", len(res.Verdicts))
			return res, nil
		}
	}
	details := ""
	if h.DetailsURL != nil {
		details = h.DetailsURL(t.FullName, n)
		if h.Live != nil && pol != nil {
			// Kept before publishing, so the page the check run links to is there when it is read.
			j := livestate.Judged{Repo: t.FullName, PR: n, Head: headSHA, Title: t.PR.GetTitle(), At: h.now(), Verdicts: res.Verdicts}
			if err := h.Live.SaveJudged(ctx, j); err != nil {
				return review.Result{}, fmt.Errorf("%s: %w", id, err)
			}
		}
	}
	login, err := h.Installations.BotLogin(ctx)
	if err != nil {
		return review.Result{}, fmt.Errorf("%s: %w", id, err)
	}
	wrote, err := publish(ctx, gh, login, t, headSHA, headTime, res, policyNote, gate, details)
	if err != nil {
		return review.Result{}, fmt.Errorf("%s: publish: %w", id, err)
	}
	log.Info("judged pull request", "head", headSHA, "fields", len(res.Verdicts), "conclusion", conclusion(res, policyNote, gate), "writes", wrote)
	return res, nil
}

// repoPath is the configured policy path (policy.DefaultFile when empty) as Git names the file: a
// path spelled "./.parley/policy.hcl" or "/.parley//policy.hcl" is read as the policy, and a pull
// request changing it is gated as a change to the policy, instead of the policy going unread and
// such a pull request passing as neutral.
func repoPath(p string) string {
	p = path.Clean("/" + p)[1:]
	if p == "" {
		return policy.DefaultFile
	}
	return p
}

// hasBranch reports whether the clone at dir has the branch.
func hasBranch(dir, branch string) bool {
	repo, err := git.PlainOpen(dir)
	if err != nil {
		return false
	}
	_, err = repo.Reference(plumbing.NewBranchReferenceName(branch), true)
	return err == nil
}

// readPolicy reads the policy from the default branch of the clone; a missing policy is a note for
// the check run, not an error.
func (h *PullRequests) readPolicy(dir, branch string) (*policy.Policy, string, error) {
	return readPolicyAt(dir, branch, h.PolicyPath, &h.policies)
}

// readPolicyAt reads the policy at path (default .parley/policy.hcl) on branch of the clone at
// dir; a missing or invalid policy is a note saying so, not an error. A policy blob memo (nil:
// none) parsed before under the same name is not read or parsed again.
func readPolicyAt(dir, branch, path string, memo *policyMemo) (*policy.Policy, string, error) {
	path = repoPath(path)
	repo, err := git.PlainOpen(dir)
	if err != nil {
		return nil, "", err
	}
	ref, err := repo.Reference(plumbing.NewBranchReferenceName(branch), true)
	if err != nil {
		return nil, "", fmt.Errorf("default branch %s: %w", branch, err)
	}
	c, err := repo.CommitObject(ref.Hash())
	if err != nil {
		return nil, "", err
	}
	name := branch + ":" + path // the policy's file name, in its diagnostics and in the note
	var blob string
	if memo != nil {
		// The tree entry names the blob without reading it; a missing entry is read as before.
		if t, err := c.Tree(); err == nil {
			if e, err := t.FindEntry(path); err == nil && e.Mode.IsFile() {
				blob = e.Hash.String()
				if pol, note, ok := memo.get(name, blob); ok {
					return pol, note, nil
				}
			}
		}
	}
	f, err := c.File(path)
	if errors.Is(err, object.ErrFileNotFound) {
		return nil, noPolicy + fmt.Sprintf("%s does not exist on %s. Run `parley init` and commit it to judge claims.", ghmarkdown.Code(path), ghmarkdown.Text(branch)), nil
	}
	if err != nil {
		return nil, "", err
	}
	src, err := f.Contents()
	if err != nil {
		return nil, "", err
	}
	pol, err := policy.Parse([]byte(src), name)
	note := ""
	if err != nil {
		pol, note = nil, fmt.Sprintf("The policy on %s is invalid, so nothing was judged:\n\n%s", ghmarkdown.Text(branch), ghmarkdown.Fence(err.Error(), ""))
	}
	memo.put(name, blob, len(src), pol, note)
	return pol, note, nil
}

// noPolicy starts the note of a repository without a policy: it has not taken Parley up, so its
// pull requests are not Parley's to stop (neutral). Any other note means a policy is there and
// could not be read, so nothing was judged, and that cannot pass (conclusion).
const noPolicy = "No policy: "

// optional is nil for "": a field left out of a request.
func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// conclusion is the check run's conclusion. A change to the policy is never neutral: it waits for
// a policy owner's approval (gate.conclusion), and once approved its verdicts decide. Without a
// policy nothing is Parley's to judge (neutral); with a policy that does not parse nothing was
// judged, and unjudged never passes (action_required).
func conclusion(res review.Result, note string, gate *policyGate) string {
	fields := res.Conclusion()
	if note != "" {
		switch {
		case gate != nil:
			fields = "neutral" // the policy change's own gate decides below
		case strings.HasPrefix(note, noPolicy):
			return "neutral"
		default:
			return "action_required"
		}
	}
	if gate != nil {
		return gate.conclusion(fields)
	}
	return fields
}

// maxCheckText is GitHub's limit on a check run's output summary.
const maxCheckText = 65535

// publish writes the check run and the sticky comment if they differ from what GitHub shows; the
// sticky comment is the one by login, the App's bot login. It returns how many writes it made.
func publish(ctx context.Context, gh *github.Client, login string, t Target, headSHA string, headTime time.Time, res review.Result, note string, gate *policyGate, detailsURL string) (int, error) {
	writes := 0
	concl := conclusion(res, note, gate)
	title := strings.TrimPrefix(report.Headline(res.Verdicts, len(res.Problems)), "### ")
	runs, _, err := gh.Checks.ListCheckRunsForRef(ctx, t.Owner, t.Repo, headSHA, &github.ListCheckRunsOptions{CheckName: github.String(CheckName)})
	if err != nil {
		return writes, fmt.Errorf("list check runs: %w", err)
	}
	var existing *github.CheckRun
	if runs != nil && len(runs.CheckRuns) > 0 {
		existing = runs.CheckRuns[0]
	}
	// The comment is rendered for the head commit's time, not the wall clock, so the same head
	// always renders the same body and a redelivery writes nothing. It links the check run, which
	// holds the full verdicts when the comment must be shortened.
	notes := nonEmpty(note)
	if gate != nil {
		notes = append([]string{gate.text()}, notes...)
	}
	in := report.Input{Head: headSHA, Generated: headTime.UTC(), Verdicts: res.Verdicts, Outcomes: res.OutcomesByField(), Problems: res.Problems, Notes: notes}
	summary := report.Comment(in) // the check run's own summary needs no link to itself
	if existing != nil {
		in.DetailsURL = existing.GetHTMLURL()
	}
	body := report.Comment(in)
	if note != "" {
		title, summary = "Parley: nothing judged", note
		if gate != nil {
			summary = gate.text() + "\n" + note
		}
	}
	if gate != nil && !gate.passes() {
		title = "Parley: the policy change awaits a policy owner's approval"
		if gate.invalid != "" {
			title = "Parley: the new policy is invalid"
		}
	}
	if len(summary) > maxCheckText {
		summary = summary[:maxCheckText]
	}
	out := &github.CheckRunOutput{Title: github.String(title), Summary: github.String(summary)}
	switch {
	case existing == nil:
		var run *github.CheckRun
		run, _, err = gh.Checks.CreateCheckRun(ctx, t.Owner, t.Repo, github.CreateCheckRunOptions{Name: CheckName, HeadSHA: headSHA,
			DetailsURL: optional(detailsURL), Status: github.String("completed"), Conclusion: github.String(concl), Output: out})
		writes++
		if err == nil && run.GetHTMLURL() != "" {
			in.DetailsURL = run.GetHTMLURL() // as later evaluations will render it
			body = report.Comment(in)
		}
	case existing.GetConclusion() != concl || existing.GetOutput().GetTitle() != title || existing.GetOutput().GetSummary() != summary ||
		(detailsURL != "" && existing.GetDetailsURL() != detailsURL):
		_, _, err = gh.Checks.UpdateCheckRun(ctx, t.Owner, t.Repo, existing.GetID(), github.UpdateCheckRunOptions{Name: CheckName,
			DetailsURL: optional(detailsURL), Status: github.String("completed"), Conclusion: github.String(concl), Output: out})
		writes++
	}
	if err != nil {
		return writes, fmt.Errorf("write check run: %w", err)
	}
	if note != "" && len(res.Verdicts) == 0 && gate == nil {
		return writes, nil // nothing judged: the check run says why; no comment to add noise
	}

	sticky, err := findSticky(ctx, gh, login, t.Owner, t.Repo, t.PR.GetNumber())
	if err != nil {
		return writes, err
	}
	switch {
	case sticky == nil:
		_, _, err = gh.Issues.CreateComment(ctx, t.Owner, t.Repo, t.PR.GetNumber(), &github.IssueComment{Body: github.String(body)})
		writes++
	case sticky.Body != body:
		_, _, err = gh.Issues.EditComment(ctx, t.Owner, t.Repo, sticky.ID, &github.IssueComment{Body: github.String(body)})
		writes++
	}
	if err != nil {
		return writes, fmt.Errorf("write sticky comment: %w", err)
	}
	return writes, nil
}

// findSticky returns Parley's comment on the pull request (report.FindSticky): the first that
// starts with the marker and was written by login, the App's own bot login. A comment by any other
// author, bot or person, is never taken for it, nor edited; nil when there is none.
func findSticky(ctx context.Context, gh *github.Client, login, owner, repo string, number int) (*report.PRComment, error) {
	opts := &github.IssueListCommentsOptions{ListOptions: github.ListOptions{PerPage: 100}}
	for {
		cs, resp, err := gh.Issues.ListComments(ctx, owner, repo, number, opts)
		if err != nil {
			return nil, fmt.Errorf("list comments: %w", err)
		}
		page := make([]report.PRComment, 0, len(cs))
		for _, c := range cs {
			page = append(page, report.PRComment{ID: c.GetID(), Author: c.GetUser().GetLogin(), Body: c.GetBody()})
		}
		if c, ok := report.FindSticky(page, login); ok {
			return &c, nil
		}
		if resp == nil || resp.NextPage == 0 {
			return nil, nil
		}
		opts.Page = resp.NextPage
	}
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

// applyOverrides replaces the verdict of every field overridden for the head commit judged: the
// pull request's claim wins, and the explanation says who overrode the policy, why and for which
// commit. An override given for another commit does not apply (the policy decides), and the
// explanation says which commit it was for.
func applyOverrides(res *review.Result, overrides, otherHeads map[core.Field]livestate.Command, head string) {
	for i, v := range res.Verdicts {
		o, ok := overrides[v.Field]
		if !ok {
			if o, ok := otherHeads[v.Field]; ok {
				step := core.Step{Rule: "override", Outcome: "not applied",
					Detail: fmt.Sprintf("@%s's /parley override (%s) was for commit %s, not this head %s: the policy decides; override again to decide this commit", o.Actor, o.Reason, short(o.Head), short(head))}
				res.Verdicts[i].Explanation = append([]core.Step{step}, v.Explanation...)
			}
			continue
		}
		var own *core.Claim
		for j := range res.Claims {
			if res.Claims[j].Field == v.Field && res.Claims[j].Evidence.Source == "github-pull-request" {
				own = &res.Claims[j]
			}
		}
		step := core.Step{Rule: "override", Outcome: "decided",
			Detail: fmt.Sprintf("@%s overrode the policy with /parley override (%s) for commit %s; the policy had decided %s by %s", o.Actor, o.Reason, short(o.Head), v.Decision, v.Rule)}
		res.Verdicts[i] = core.Verdict{Field: v.Field, Decision: core.DecisionEnforceGit, Winner: own, Losers: v.Losers,
			Rule: "override", Recheck: v.Recheck, Explanation: append([]core.Step{step}, v.Explanation...)}
		if i < len(res.Outcomes) {
			res.Outcomes[i] = report.OutcomeOf(res.Verdicts[i], own)
		}
	}
}

// short is a commit's abbreviated name, as GitHub shows it.
func short(sha string) string {
	if len(sha) > 7 {
		return sha[:7]
	}
	if sha == "" {
		return "(none recorded)"
	}
	return sha
}
