package app

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/go-github/v60/github"

	"github.com/parleyhq/parley/app/review"
	"github.com/parleyhq/parley/policy"
)

// policyGate is what Parley says of a pull request that changes the policy file itself: such a
// change decides every later verdict, so it passes only with the approval of one of the base
// policy's policy_owners (without any, a repository admin) given at the head commit, and it shows
// what it would change.
type policyGate struct {
	path       string
	owners     []string // the base policy's policy_owners; nil: repository admins
	approvedBy string   // who approved at the head commit; "" until someone did
	invalid    string   // the new policy's errors, when it does not parse
	// diff is what the new policy changes in the base's ledger, now and as its changes were made;
	// nil when there is no base policy or no new one to compare.
	diff *review.PolicyDiff
}

func (g *policyGate) passes() bool { return g.invalid == "" && g.approvedBy != "" }

// conclusion is the check's conclusion given the fields' (review.PolicyChangeConclusion): failure
// for an invalid new policy, action_required until a policy owner approves at the head, then the
// fields' own.
func (g *policyGate) conclusion(fields string) string {
	return review.PolicyChangeConclusion(fields, g.invalid != "", g.approvedBy != "")
}

// maxDiffFields is how many fields the comment and the check run list in each view of the diff,
// counting the rest, so a policy change that touches every field still fits GitHub's limits;
// parley policy diff lists them all.
const maxDiffFields = 30

// text is the gate's note for the check run and the comment.
func (g *policyGate) text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "This pull request changes the policy (%s). ", g.path)
	who := "a repository admin (the base policy names no policy_owners)"
	if len(g.owners) > 0 {
		who = "one of the policy owners (" + strings.Join(g.owners, ", ") + ")"
	}
	switch {
	case g.invalid != "":
		fmt.Fprintf(&b, "The new policy is invalid:\n\n```\n%s\n```\n", g.invalid)
	case g.approvedBy != "":
		fmt.Fprintf(&b, "Approved at the head commit by %s, %s.\n", g.approvedBy, who)
	default:
		fmt.Fprintf(&b, "It needs the approval of %s at its head commit before it passes.\n", who)
	}
	if g.diff != nil {
		b.WriteString("\n" + review.MarkdownPolicyDiff(*g.diff, maxDiffFields))
	}
	return b.String()
}

// changesPolicy reports whether the pull request's files include the policy file.
func changesPolicy(files []review.FileChange, path string) bool {
	return slices.ContainsFunc(files, func(f review.FileChange) bool { return f.Path == path || f.PreviousPath == path })
}

// policyGateFor builds the gate of a pull request that changes the policy at path: who approved,
// whether the new policy parses, and the verdicts that flip under it (when the base has a policy
// and a ledger: git may be nil), judged now.
func (h *PullRequests) policyGateFor(ctx context.Context, gh *github.Client, t Target, src *review.GitSource, path string,
	base *policy.Policy, git review.GitState, now time.Time) (*policyGate, error) {
	g := &policyGate{path: path}
	if base != nil {
		g.owners = base.PolicyOwners
	}
	headSHA := t.PR.GetHead().GetSHA()
	var next *policy.Policy
	data, ok, err := src.Content(ctx, headSHA, path)
	if err != nil {
		return nil, err
	}
	if ok {
		if next, err = policy.Parse(data, "head:"+path); err != nil {
			g.invalid = err.Error()
		}
	} else {
		g.invalid = path + " is removed: without a policy nothing is judged"
	}
	if next != nil && base != nil && git != nil {
		d, err := review.DiffPolicy(ctx, base, next, git, now)
		if err != nil {
			return nil, err
		}
		g.diff = &d
	}
	if g.approvedBy, err = h.policyApprover(ctx, gh, t, g.owners, headSHA); err != nil {
		return nil, err
	}
	return g, nil
}

// policyApprover returns the first (by login) reviewer whose latest review approves the pull
// request at head and who may approve a policy change; "" when nobody has. An approval of an
// earlier head does not count: the policy may have changed since.
func (h *PullRequests) policyApprover(ctx context.Context, gh *github.Client, t Target, owners []string, head string) (string, error) {
	latest := map[string]*github.PullRequestReview{}
	opts := &github.ListOptions{PerPage: 100}
	for {
		rs, resp, err := gh.PullRequests.ListReviews(ctx, t.Owner, t.Repo, t.PR.GetNumber(), opts)
		if err != nil {
			return "", fmt.Errorf("list reviews: %w", err)
		}
		for _, r := range rs {
			if r.GetState() == "COMMENTED" || r.GetUser().GetLogin() == "" {
				continue // a comment leaves the reviewer's approval (or its absence) as it was
			}
			latest[strings.ToLower(r.GetUser().GetLogin())] = r
		}
		if resp == nil || resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	var approvers []string
	for login, r := range latest {
		if r.GetState() == "APPROVED" && r.GetCommitID() == head {
			approvers = append(approvers, login)
		}
	}
	slices.Sort(approvers)
	for _, login := range approvers {
		ok, err := mayApprovePolicy(ctx, gh, t, owners, login)
		if err != nil {
			return "", err
		}
		if ok {
			return login, nil
		}
	}
	return "", nil
}

// mayApprovePolicy reports whether login is one of owners (a login, or a member of an org/team),
// or, when there are none, an admin of the repository.
func mayApprovePolicy(ctx context.Context, gh *github.Client, t Target, owners []string, login string) (bool, error) {
	if len(owners) == 0 {
		perm, resp, err := gh.Repositories.GetPermissionLevel(ctx, t.Owner, t.Repo, login)
		if resp != nil && resp.StatusCode == 404 {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("%s's permission: %w", login, err)
		}
		return perm.GetPermission() == "admin", nil
	}
	return namedAmong(ctx, gh, login, owners)
}
