// Package gitwrite lands Parley's edits in Git: it fetches a branch into a local clone, applies an
// edit function to the files, commits only if something changed, and pushes with optimistic
// concurrency: the push names the remote commit it built on (go-git's RequireRemoteRefs), so a
// branch that moved meanwhile is refused instead of overwritten, and the edit is re-applied on
// top of the new tip. Edits are functions of the current files, so re-applying is always sound, and
// running the same edit twice writes nothing the second time.
package gitwrite

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"time"

	"github.com/go-git/go-billy/v5"
	"github.com/go-git/go-billy/v5/memfs"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/storage/memory"
)

// Files is the part of a tree an edit reads and writes: repository-relative paths to contents.
type Files interface {
	Read(path string) ([]byte, bool, error)
}

// Edit returns the files to write (path -> new content) given the branch's current files; an
// empty map means nothing to do.
type Edit func(Files) (map[string][]byte, error)

// Outcome says what Write did.
type Outcome struct {
	Committed bool   // false: the edit changed nothing, no commit was made
	Commit    string // the pushed commit
	Branch    string
	Attempts  int // 1 unless the branch moved and the edit was re-applied
	// Ahead is true when the work branch (Branch differs from Base) has commits Base does not: an
	// earlier write's commits still waiting to be merged, whether or not this write committed.
	Ahead bool
	// SameAsBase is true when the work branch's files are now exactly the base's: its pull request
	// would change nothing (a yield resumed before its gate was merged).
	SameAsBase bool
}

// Request is one write.
type Request struct {
	URL    string // remote repository URL or path
	Auth   transport.AuthMethod
	Base   string // branch to build on, e.g. "main"
	Branch string // branch to push to: Base (direct) or e.g. "parley/yield-web-replicas"
	Edit   Edit
	// Message is the commit message (its trailers carry intent, motivation and the verdict).
	Message string
	Author  object.Signature
	// Retries bounds how often a moved branch is re-fetched and the edit re-applied. Default 3.
	Retries int
	// Empty commits the message even when the edit changes no file: a question recorded on a work
	// branch (a hold put to people), whose pull request needs a commit to exist. Only for a Branch
	// other than Base: an empty commit on the base branch would say nothing to anyone.
	Empty bool
}

// ErrMoved is returned when the branch kept moving through every retry.
var ErrMoved = errors.New("the branch moved during every attempt")

// Write applies the edit and pushes it. It works in memory: nothing is left on disk.
func Write(ctx context.Context, r Request) (Outcome, error) {
	if r.Retries <= 0 {
		r.Retries = 3
	}
	if r.Branch == "" {
		r.Branch = r.Base
	}
	if r.Empty && r.Branch == r.Base {
		return Outcome{Branch: r.Branch}, fmt.Errorf("an empty commit goes on a work branch, not on %s", r.Base)
	}
	for attempt := 1; attempt <= r.Retries+1; attempt++ {
		out, err := once(ctx, r)
		out.Attempts = attempt
		if errors.Is(err, errStale) {
			continue
		}
		return out, err
	}
	return Outcome{Branch: r.Branch, Attempts: r.Retries + 1}, fmt.Errorf("push to %s: %w", r.Branch, ErrMoved)
}

var errStale = errors.New("remote ref moved")

func once(ctx context.Context, r Request) (Outcome, error) {
	out := Outcome{Branch: r.Branch}
	repo, err := git.Init(memory.NewStorage(), memfs.New())
	if err != nil {
		return out, err
	}
	if _, err := repo.CreateRemote(&config.RemoteConfig{Name: "origin", URLs: []string{r.URL}}); err != nil {
		return out, err
	}
	refs := []config.RefSpec{config.RefSpec(fmt.Sprintf("+refs/heads/%s:refs/remotes/origin/%s", r.Base, r.Base))}
	if r.Branch != r.Base {
		refs = append(refs, config.RefSpec(fmt.Sprintf("+refs/heads/%s:refs/remotes/origin/%s", r.Branch, r.Branch)))
	}
	// Writing straight to the base needs only its tip's tree: a shallow fetch keeps the cost of a
	// write independent of the repository's history. A work branch needs history, to tell whether
	// it is merged (Outcome.Ahead).
	depth := 0
	if r.Branch == r.Base {
		depth = 1
	}
	err = repo.FetchContext(ctx, &git.FetchOptions{RemoteName: "origin", RefSpecs: refs, Auth: r.Auth, Tags: git.NoTags, Depth: depth})
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		// The work branch may not exist yet: fetch the base alone.
		err = repo.FetchContext(ctx, &git.FetchOptions{RemoteName: "origin", RefSpecs: refs[:1], Auth: r.Auth, Tags: git.NoTags})
		if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
			return out, fmt.Errorf("fetch %s from %s: %w", r.Base, r.URL, err)
		}
	}
	// Build on the work branch if it exists (an earlier gate commit), else on the base.
	var remoteTip plumbing.Hash // what the push expects the remote branch to be; zero: absent
	start, err := repo.Reference(plumbing.NewRemoteReferenceName("origin", r.Branch), true)
	if err == nil {
		remoteTip = start.Hash()
	} else if start, err = repo.Reference(plumbing.NewRemoteReferenceName("origin", r.Base), true); err != nil {
		return out, fmt.Errorf("branch %s not found in %s: %w", r.Base, r.URL, err)
	}
	wt, err := repo.Worktree()
	if err != nil {
		return out, err
	}
	if err := wt.Checkout(&git.CheckoutOptions{Hash: start.Hash(), Branch: plumbing.NewBranchReferenceName(r.Branch), Create: true, Force: true}); err != nil {
		return out, fmt.Errorf("check out %s: %w", start.Hash(), err)
	}
	writes, err := r.Edit(fsFiles{wt.Filesystem})
	if err != nil {
		return out, err
	}
	paths := make([]string, 0, len(writes))
	for p := range writes {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		if err := writeFile(wt.Filesystem, p, writes[p]); err != nil {
			return out, err
		}
		if _, err := wt.Add(p); err != nil {
			return out, fmt.Errorf("stage %s: %w", p, err)
		}
	}
	status, err := wt.Status()
	if err != nil {
		return out, err
	}
	if status.IsClean() && !r.Empty {
		out.Commit = start.Hash().String()
		if !remoteTip.IsZero() && r.Branch != r.Base {
			out.Ahead, err = aheadOf(repo, remoteTip, plumbing.NewRemoteReferenceName("origin", r.Base))
		}
		return out, err // the files already say what the edit says
	}
	author := r.Author
	if author.When.IsZero() {
		author.When = time.Now()
	}
	hash, err := wt.Commit(r.Message, &git.CommitOptions{Author: &author, Committer: &author, AllowEmptyCommits: r.Empty})
	if err != nil {
		return out, fmt.Errorf("commit: %w", err)
	}
	spec := config.RefSpec(fmt.Sprintf("refs/heads/%s:refs/heads/%s", r.Branch, r.Branch))
	// The lease: the remote branch must still be where this commit was built on. A branch that did
	// not exist has no lease; if it appears meanwhile, the push is not a fast-forward and is refused.
	opts := &git.PushOptions{RemoteName: "origin", RefSpecs: []config.RefSpec{spec}, Auth: r.Auth}
	if !remoteTip.IsZero() {
		opts.RequireRemoteRefs = []config.RefSpec{config.RefSpec(fmt.Sprintf("%s:refs/heads/%s", remoteTip, r.Branch))}
	}
	err = repo.PushContext(ctx, opts)
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		if isStale(err) {
			return out, errStale
		}
		return out, fmt.Errorf("push %s to %s: %w", r.Branch, r.URL, err)
	}
	out.Committed, out.Commit, out.Ahead = true, hash.String(), r.Branch != r.Base
	if r.Branch != r.Base {
		out.SameAsBase, err = sameTree(repo, hash, plumbing.NewRemoteReferenceName("origin", r.Base))
	}
	return out, err
}

// Branch is what Compare found.
type Branch struct {
	Exists bool // the work branch is in the repository
	Ahead  bool // it has commits the base does not
	// SameAsBase is true when its files are exactly the base's: a pull request from it changes
	// nothing, whatever commits it carries.
	SameAsBase bool
}

// Compare fetches a work branch and its base and says how they relate, changing nothing.
func Compare(ctx context.Context, url string, auth transport.AuthMethod, base, branch string) (Branch, error) {
	repo, err := git.Init(memory.NewStorage(), nil)
	if err != nil {
		return Branch{}, err
	}
	if _, err := repo.CreateRemote(&config.RemoteConfig{Name: "origin", URLs: []string{url}}); err != nil {
		return Branch{}, err
	}
	refs := []config.RefSpec{
		config.RefSpec(fmt.Sprintf("+refs/heads/%s:refs/remotes/origin/%s", base, base)),
		config.RefSpec(fmt.Sprintf("+refs/heads/%s:refs/remotes/origin/%s", branch, branch)),
	}
	err = repo.FetchContext(ctx, &git.FetchOptions{RemoteName: "origin", RefSpecs: refs, Auth: auth, Tags: git.NoTags})
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		// Fetching a branch that does not exist fails the whole fetch: try the base alone.
		err = repo.FetchContext(ctx, &git.FetchOptions{RemoteName: "origin", RefSpecs: refs[:1], Auth: auth, Tags: git.NoTags})
		if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
			return Branch{}, fmt.Errorf("fetch %s from %s: %w", base, url, err)
		}
		return Branch{}, nil
	}
	tip, err := repo.Reference(plumbing.NewRemoteReferenceName("origin", branch), true)
	if err != nil {
		return Branch{}, nil
	}
	baseRef := plumbing.NewRemoteReferenceName("origin", base)
	out := Branch{Exists: true}
	if out.Ahead, err = aheadOf(repo, tip.Hash(), baseRef); err != nil {
		return out, err
	}
	out.SameAsBase, err = sameTree(repo, tip.Hash(), baseRef)
	return out, err
}

// sameTree reports whether commit has the same tree as the tip of base.
func sameTree(repo *git.Repository, commit plumbing.Hash, base plumbing.ReferenceName) (bool, error) {
	b, err := repo.Reference(base, true)
	if err != nil {
		return false, err
	}
	c, err := repo.CommitObject(commit)
	if err != nil {
		return false, err
	}
	bc, err := repo.CommitObject(b.Hash())
	if err != nil {
		return false, err
	}
	return c.TreeHash == bc.TreeHash, nil
}

// aheadOf reports whether tip has commits that the base branch does not contain.
func aheadOf(repo *git.Repository, tip plumbing.Hash, base plumbing.ReferenceName) (bool, error) {
	b, err := repo.Reference(base, true)
	if err != nil {
		return false, err
	}
	if b.Hash() == tip {
		return false, nil
	}
	tc, err := repo.CommitObject(tip)
	if err != nil {
		return false, err
	}
	bc, err := repo.CommitObject(b.Hash())
	if err != nil {
		return false, err
	}
	merged, err := tc.IsAncestor(bc)
	return !merged, err
}

// isStale recognises the push refusals that mean "the remote branch moved": go-git's lease check,
// and a non-fast-forward from a branch that appeared or moved after the fetch.
func isStale(err error) bool {
	msg := err.Error()
	for _, s := range []string{"remote ref", "non-fast-forward", "failed to update ref", "reference has changed"} {
		if containsFold(msg, s) {
			return true
		}
	}
	return false
}

func containsFold(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		match := true
		for j := 0; j < len(sub); j++ {
			a, b := s[i+j], sub[j]
			if 'A' <= a && a <= 'Z' {
				a += 'a' - 'A'
			}
			if a != b {
				match = false
				break
			}
		}
		if match {
			return true
		}
	}
	return false
}

type fsFiles struct{ fs billy.Filesystem }

func (f fsFiles) Read(p string) ([]byte, bool, error) {
	file, err := f.fs.Open(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	defer file.Close()
	b, err := io.ReadAll(file)
	return b, err == nil, err
}

func writeFile(fs billy.Filesystem, p string, data []byte) error {
	if dir := path.Dir(p); dir != "." {
		if err := fs.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	f, err := fs.Create(p)
	if err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", p, err)
	}
	return f.Close()
}
