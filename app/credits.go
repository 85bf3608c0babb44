package app

import (
	"context"
	"fmt"

	"github.com/google/go-github/v60/github"

	"github.com/parleyhq/parley/app/review"
	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/trailers/ledger"
)

// crediting is the base branch's ledger as a pull request is judged against it, with each commit
// whose signature proves nothing credited, once, to whom GitHub vouches for (commitVoucher). The
// credit is kept in the ledger, so every later judgement reads it without asking GitHub again.
type crediting struct {
	*ledger.Ledger
	ctx   context.Context
	vouch func(ctx context.Context, commit string) (core.Identity, string, error)
	teams *teamsOf // a credited GitHub user matches github_teams too
}

func (c *crediting) Current(f core.Field) (core.Claim, bool, error) {
	cur, ok, err := c.Ledger.Current(f)
	if err != nil || !ok {
		return cur, ok, err
	}
	credited, err := c.ensure(cur)
	if err != nil {
		return cur, ok, err
	}
	if credited {
		if cur, ok, err = c.Ledger.Current(f); err != nil || !ok {
			return cur, ok, err
		}
	}
	cur.Actor.Identity, err = c.teams.withTeams(c.ctx, cur.Actor.Identity)
	return cur, ok, err
}

func (c *crediting) History(f core.Field) ([]core.Claim, error) {
	hist, err := c.Ledger.History(f)
	if err != nil {
		return nil, err
	}
	again := false
	for _, cl := range hist {
		credited, err := c.ensure(cl)
		if err != nil {
			return nil, err
		}
		again = again || credited
	}
	if again {
		if hist, err = c.Ledger.History(f); err != nil {
			return nil, err
		}
	}
	for i := range hist {
		if hist[i].Actor.Identity, err = c.teams.withTeams(c.ctx, hist[i].Actor.Identity); err != nil {
			return nil, err
		}
	}
	return hist, nil
}

// ensure looks up the commit behind cl when its author is a git identity nothing proves and nobody
// looked it up before; it reports whether the commit is now credited to someone.
func (c *crediting) ensure(cl core.Claim) (bool, error) {
	id, sha := cl.Actor.Identity, cl.Evidence.Commit
	if id.Source != core.SourceGitAuthor || id.Proof.Proven() || sha == "" {
		return false, nil
	}
	if _, _, found, err := c.Credited(c.ctx, sha); err != nil || found {
		return false, err
	}
	who, how, err := c.vouch(c.ctx, sha)
	if err != nil {
		return false, err
	}
	if err := c.Credit(c.ctx, sha, who, how); err != nil {
		return false, err
	}
	return who.ID != "", nil
}

// recordMerge credits the commit a merged pull request put on the default branch (its merge or
// squash commit, or the last commit of a rebase) to the pull request's author, whom GitHub
// authenticated: the ledger counts that commit's claims as theirs whatever its author email says,
// unless its own signature verified. The other commits of a rebase are looked up when first judged
// (commitVoucher).
func (h *PullRequests) recordMerge(ctx context.Context, ev github.PullRequestEvent) error {
	pr, repo := ev.GetPullRequest(), ev.GetRepo()
	sha, login := pr.GetMergeCommitSHA(), pr.GetUser().GetLogin()
	if repo == nil || pr.GetBase().GetRef() != repo.GetDefaultBranch() || sha == "" || login == "" {
		return nil
	}
	id := fmt.Sprintf("%s#%d", repo.GetFullName(), pr.GetNumber())
	token, err := h.Installations.Token(ctx, ev.GetInstallation().GetID())
	if err != nil {
		return fmt.Errorf("%s: installation token: %w", id, err)
	}
	dir, unlock, err := h.Repos.Sync(ctx, repo.GetFullName(), repo.GetCloneURL(), token)
	if err != nil {
		return fmt.Errorf("%s: %w", id, err)
	}
	defer unlock()
	led, err := ledger.Open(dir, ledger.Options{})
	if err != nil {
		return fmt.Errorf("%s: open ledger: %w", id, err)
	}
	defer led.Close()
	how := fmt.Sprintf("GitHub: merged to %s in pull request #%d, opened by %s", repo.GetDefaultBranch(), pr.GetNumber(), login)
	if err := led.Credit(ctx, sha, core.Identity{Source: core.SourceGitHubUser, ID: login}, how); err != nil {
		return fmt.Errorf("%s: %w", id, err)
	}
	return nil
}

// commitVoucher asks GitHub who vouches for a commit on t's default branch: the author of the
// merged pull request that brought it there (GitHub authenticated them), else the GitHub user
// whose signature GitHub verified on it, when that user both authored and committed it (GitHub
// checks a signature against the committer's keys, so a verified commit proves nothing of an
// author who is someone else). Nobody: a zero identity.
func commitVoucher(gh *github.Client, t Target, v *verifications) func(context.Context, string) (core.Identity, string, error) {
	return func(ctx context.Context, sha string) (core.Identity, string, error) {
		prs, _, err := gh.PullRequests.ListPullRequestsWithCommit(ctx, t.Owner, t.Repo, sha, nil)
		if err != nil {
			return core.Identity{}, "", fmt.Errorf("pull requests of commit %s: %w", sha, err)
		}
		for _, pr := range prs {
			if pr.MergedAt != nil && pr.GetBase().GetRef() == t.DefaultBranch && pr.GetUser().GetLogin() != "" {
				login := pr.GetUser().GetLogin()
				return core.Identity{Source: core.SourceGitHubUser, ID: login},
					fmt.Sprintf("GitHub: merged to %s in pull request #%d, opened by %s", t.DefaultBranch, pr.GetNumber(), login), nil
			}
		}
		// A default-branch commit is credited once, so its lookup is not bounded.
		return v.lookup(ctx, sha, 0)
	}
}

// maxCommitLookups bounds the commits of a pull request whose verification one judgement asks
// GitHub for. Each commit is asked about once (the answer is kept in the ledger), so a pull
// request with more new commits than this is looked up over its next judgements; until then a
// commit not asked about is judged as its unverified author, and the explanation says so.
const maxCommitLookups = 50

// verifications is GitHub's verification of commits' signatures for one judgement: read from the
// ledger, else asked of GitHub once (GET /repos/{o}/{r}/commits/{sha}) and recorded there, so
// judging the same commits again costs no call.
type verifications struct {
	gh    *github.Client
	t     Target
	led   *ledger.Ledger
	asked int // commits this judgement asked GitHub about
}

// lookup returns the GitHub user whose signature GitHub verified on the commit, when that user
// both authored and committed it (GitHub checks a signature against the committer's keys); a zero
// identity otherwise. The ledger answers for a commit asked about before; GitHub is asked only if
// fewer than bound commits were asked about in this judgement (0: no bound), else the answer is a
// zero identity and how says the commit was not looked up. A commit GitHub does not know (404) is
// not recorded: it is asked about again when next judged.
func (v *verifications) lookup(ctx context.Context, sha string, bound int) (who core.Identity, how string, err error) {
	who, how, found, err := v.led.Verification(ctx, sha)
	if err != nil || found {
		return who, how, err
	}
	if bound > 0 && v.asked >= bound {
		return core.Identity{}, fmt.Sprintf("GitHub not asked about it yet: at most %d commits are looked up per judgement", bound), nil
	}
	v.asked++
	c, resp, err := v.gh.Repositories.GetCommit(ctx, v.t.Owner, v.t.Repo, sha, nil)
	if resp != nil && resp.StatusCode == 404 {
		return core.Identity{}, "", nil
	}
	if err != nil {
		return core.Identity{}, "", fmt.Errorf("commit %s: %w", sha, err)
	}
	author, committer := c.GetAuthor().GetLogin(), c.GetCommitter().GetLogin()
	if c.GetCommit().GetVerification().GetVerified() && author != "" && author == committer {
		who, how = core.Identity{Source: core.SourceGitHubUser, ID: author}, "GitHub verified the commit's signature as "+author+"'s"
	}
	return who, how, v.led.RecordVerification(ctx, sha, who, how)
}

// commitAuthorVouch is how the App proves the author of a pull request's commit whose own
// signature proves nothing: GitHub's verification of it (verifications, at most maxCommitLookups
// new commits per judgement), the user then matched through github_users and github_teams. Nobody
// else vouches for a commit not yet merged: who pushed it is judged on its own (a synchronize
// contribution), not as its author.
func commitAuthorVouch(v *verifications, teams *teamsOf) review.Vouch {
	return func(ctx context.Context, c review.Commit) (core.Identity, string, error) {
		who, how, err := v.lookup(ctx, c.SHA, maxCommitLookups)
		if err != nil || who.ID == "" {
			return who, how, err
		}
		who, err = teams.withTeams(ctx, who)
		return who, how, err
	}
}
