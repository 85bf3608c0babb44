package reconcile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"path/filepath"
	"sort"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"

	"github.com/parleyhq/parley/internal/ghmarkdown"
	"github.com/parleyhq/parley/reconcile/internal/gitwrite"
)

// Mode is how verdict commits reach the default branch.
type Mode string

// Modes.
const (
	// ModePullRequest pushes each field's commits to its own branch and opens (or reuses) a pull
	// request: people review what the machines agreed.
	ModePullRequest Mode = "pull-request"
	// ModeDirect pushes to the default branch: the GitOps tool acts on the verdict at its next sync.
	ModeDirect Mode = "direct"
)

// ParseMode reads a write mode; "" is the default, pull-request.
func ParseMode(s string) (Mode, error) {
	switch Mode(s) {
	case "", ModePullRequest:
		return ModePullRequest, nil
	case ModeDirect:
		return ModeDirect, nil
	}
	return "", fmt.Errorf("write mode %q: want %q or %q", s, ModePullRequest, ModeDirect)
}

// PullRequests opens pull requests for ModePullRequest; the GitHub App implements it.
type PullRequests interface {
	// Ensure returns the open pull request from head into base, opening one when there is none;
	// opened says it was opened now.
	Ensure(ctx context.Context, head, base, title, body string) (number int, opened bool, err error)
	// Comment comments on the open pull request from head into base; number is 0 when there is none.
	Comment(ctx context.Context, head, base, body string) (number int, err error)
	// Close closes the open pull request from head into base, if there is one, explaining why in a
	// comment; number is 0 when there was none.
	Close(ctx context.Context, head, base, comment string) (number int, err error)
}

// GitWriter lands changes in a remote repository through package gitwrite: optimistic
// concurrency (a moved branch is re-fetched and the edit re-applied), nothing on disk.
type GitWriter struct {
	URL    string
	Auth   func(ctx context.Context) (transport.AuthMethod, error) // may be nil: no authentication
	Base   string                                                  // the default branch
	Mode   Mode
	Author object.Signature // name and email of the bot; When is set per commit
	PRs    PullRequests     // required in ModePullRequest; in ModeDirect, Ask changes go through it when set
	Now    func() time.Time
}

// Write implements Writer.
func (w *GitWriter) Write(ctx context.Context, c Change) (Landed, error) {
	var auth transport.AuthMethod
	if w.Auth != nil {
		var err error
		if auth, err = w.Auth(ctx); err != nil {
			return Landed{}, fmt.Errorf("credentials for %s: %w", w.URL, err)
		}
	}
	mode := w.Mode
	if c.Ask && w.PRs != nil {
		mode = ModePullRequest // a question for people goes through a pull request
	}
	if (c.Action == ActionAsk || c.Action == ActionPropose) && mode != ModePullRequest {
		// Without pull requests there is no one to ask in Git, and a vetoed value never goes to the
		// base branch: the verdict is recorded.
		return Landed{}, nil
	}
	if c.BranchOnly && mode != ModePullRequest {
		return Landed{}, nil // nothing to do on the base branch, and no work branches are used
	}
	branch := w.Base
	if mode == ModePullRequest {
		if w.PRs == nil {
			return Landed{}, errors.New("pull-request mode needs a pull request opener")
		}
		branch = c.Branch
	}
	author := w.Author
	if w.Now != nil {
		author.When = w.Now()
	} else {
		author.When = time.Now()
	}
	out, err := gitwrite.Write(ctx, gitwrite.Request{URL: w.URL, Auth: auth, Base: w.Base, Branch: branch,
		Edit: c.Edit, Message: c.Message, Author: author, Empty: c.Action == ActionAsk})
	if err != nil {
		return Landed{}, err
	}
	l := Landed{Committed: out.Committed, Commit: out.Commit, Branch: out.Branch}
	if c.Action == ActionAsk {
		// The question changes no file: its pull request stays open until the field is decided.
		n, opened, err := w.PRs.Ensure(ctx, branch, w.Base, c.Title, c.Body)
		if err != nil {
			return l, fmt.Errorf("open pull request for %s: %w", branch, err)
		}
		l.PR = n
		if !opened {
			// The field's pull request was open already (a gate waiting to be merged): ask there.
			if _, err := w.PRs.Comment(ctx, branch, w.Base, "**"+ghmarkdown.Text(c.Title)+"**\n\n"+c.Body); err != nil {
				return l, fmt.Errorf("comment on the pull request of %s: %w", branch, err)
			}
		}
		return l, nil
	}
	if mode == ModePullRequest && out.Committed && out.SameAsBase {
		// The branch now changes nothing: its pull request has no reason left to be merged.
		n, err := w.PRs.Close(ctx, branch, w.Base, "Parley: "+c.Title+". This leaves the pull request without changes, so it is closed.")
		if err != nil {
			return l, fmt.Errorf("close the pull request of %s: %w", branch, err)
		}
		l.PR, l.ClosedPR = n, n != 0
		return l, nil
	}
	// Also when nothing was committed now but the branch carries unmerged commits: an earlier write
	// may have pushed and then died before opening its pull request.
	if mode == ModePullRequest && out.Ahead {
		n, _, err := w.PRs.Ensure(ctx, branch, w.Base, c.Title, c.Body)
		if err != nil {
			return l, fmt.Errorf("open pull request for %s: %w", branch, err)
		}
		l.PR = n
	}
	return l, nil
}

// Settle tells the pull request of a field that was put to people how it was decided: it comments
// and, when the branch changes no file (only the question was on it), closes the pull request. A
// branch that carries a change waiting to be merged keeps its pull request open.
func (w *GitWriter) Settle(ctx context.Context, branch, comment string) (int, error) {
	if w.PRs == nil {
		return 0, nil
	}
	var auth transport.AuthMethod
	if w.Auth != nil {
		var err error
		if auth, err = w.Auth(ctx); err != nil {
			return 0, fmt.Errorf("credentials for %s: %w", w.URL, err)
		}
	}
	b, err := gitwrite.Compare(ctx, w.URL, auth, w.Base, branch)
	if err != nil {
		return 0, err
	}
	if !b.Exists || b.SameAsBase {
		return w.PRs.Close(ctx, branch, w.Base, comment+" This pull request changes no file, so it is closed.")
	}
	return w.PRs.Comment(ctx, branch, w.Base, comment)
}

// LocalWriter commits changes into a local repository's checked-out branch (`parley ingest
// --apply`). It refuses to touch a file with uncommitted changes, so a person's work is never
// mixed into a verdict commit.
type LocalWriter struct {
	Dir    string
	Author object.Signature
	Now    func() time.Time
}

// Write implements Writer.
func (w *LocalWriter) Write(ctx context.Context, c Change) (Landed, error) {
	if c.Action == ActionPropose {
		return w.propose(ctx, c)
	}
	if c.BranchOnly || c.Action == ActionAsk {
		// It writes to the checked-out branch only, and has no pull request to ask people on.
		return Landed{}, nil
	}
	repo, err := git.PlainOpen(w.Dir)
	if err != nil {
		return Landed{}, fmt.Errorf("open %s: %w", w.Dir, err)
	}
	wt, err := repo.Worktree()
	if err != nil {
		return Landed{}, fmt.Errorf("%s: %w", w.Dir, err)
	}
	head, err := repo.Head()
	if err != nil {
		return Landed{}, fmt.Errorf("%s: HEAD: %w", w.Dir, err)
	}
	status, err := wt.Status()
	if err != nil {
		return Landed{}, fmt.Errorf("%s: status: %w", w.Dir, err)
	}
	writes, err := c.Edit(headFiles{repo: repo})
	if err != nil {
		return Landed{}, err
	}
	if len(writes) == 0 {
		return Landed{Commit: head.Hash().String(), Branch: head.Name().Short()}, nil
	}
	paths := make([]string, 0, len(writes))
	for p := range writes {
		// status holds only files that differ from HEAD (status.File would invent an entry).
		if st, ok := status[p]; ok && (st.Worktree != git.Unmodified || st.Staging != git.Unmodified) {
			return Landed{}, fmt.Errorf("%s has uncommitted changes: commit or stash them first", p)
		}
		paths = append(paths, p)
	}
	sort.Strings(paths)
	fs := wt.Filesystem
	for _, p := range paths {
		if dir := path.Dir(p); dir != "." {
			if err := fs.MkdirAll(dir, 0o755); err != nil {
				return Landed{}, err
			}
		}
		f, err := fs.Create(p)
		if err != nil {
			return Landed{}, fmt.Errorf("write %s: %w", p, err)
		}
		_, werr := f.Write(writes[p])
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return Landed{}, fmt.Errorf("write %s: %w", p, werr)
		}
		if _, err := wt.Add(p); err != nil {
			return Landed{}, fmt.Errorf("stage %s: %w", p, err)
		}
	}
	author := w.Author
	author.When = time.Now()
	if w.Now != nil {
		author.When = w.Now()
	}
	hash, err := wt.Commit(c.Message, &git.CommitOptions{Author: &author, Committer: &author})
	if err != nil {
		return Landed{}, fmt.Errorf("commit: %w", err)
	}
	return Landed{Committed: true, Commit: hash.String(), Branch: head.Name().Short()}, nil
}

// propose commits a vetoed value put to people on its proposal branch of the local repository,
// from the checked-out branch, leaving that branch and the work tree alone: the branch is the pull
// request to push and open. A branch that has the change already gets no new commit.
func (w *LocalWriter) propose(ctx context.Context, c Change) (Landed, error) {
	repo, err := git.PlainOpen(w.Dir)
	if err != nil {
		return Landed{}, fmt.Errorf("open %s: %w", w.Dir, err)
	}
	head, err := repo.Head()
	if err != nil {
		return Landed{}, fmt.Errorf("%s: HEAD: %w", w.Dir, err)
	}
	dir, err := filepath.Abs(w.Dir)
	if err != nil {
		return Landed{}, err
	}
	author := w.Author
	author.When = time.Now()
	if w.Now != nil {
		author.When = w.Now()
	}
	out, err := gitwrite.Write(ctx, gitwrite.Request{URL: dir, Base: head.Name().Short(), Branch: c.Branch,
		Edit: c.Edit, Message: c.Message, Author: author})
	if err != nil {
		return Landed{}, fmt.Errorf("propose on %s of %s: %w", c.Branch, w.Dir, err)
	}
	return Landed{Committed: out.Committed, Commit: out.Commit, Branch: out.Branch}, nil
}

// headFiles reads files from HEAD's tree: edits build on what is committed.
type headFiles struct{ repo *git.Repository }

func (h headFiles) Read(p string) ([]byte, bool, error) {
	head, err := h.repo.Head()
	if err != nil {
		return nil, false, err
	}
	c, err := h.repo.CommitObject(head.Hash())
	if err != nil {
		return nil, false, err
	}
	f, err := c.File(p)
	if errors.Is(err, object.ErrFileNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	r, err := f.Reader()
	if err != nil {
		return nil, false, err
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	return b, err == nil, err
}
