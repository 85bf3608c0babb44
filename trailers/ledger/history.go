package ledger

import (
	"context"
	"fmt"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// HistorySource reads a branch's first-parent history for one Update in place of go-git: the CLI
// gives one that runs git rev-list, cat-file and diff-tree (internal/gitlog), which walk and
// compare a long history's trees at a fraction of go-git's CPU. The update owns it: its walk
// calls FirstParents, then its reader goroutine ReadCommits and NextCommit; it closes it at the
// end.
type HistorySource interface {
	// FirstParents lists the commits from tip back along first parents, newest first: up to stop
	// (not listed; met is then true), or to the root, or to a shallow clone's boundary commit. An
	// error leaves the walk to go-git.
	FirstParents(ctx context.Context, tip, stop plumbing.Hash) (commits []plumbing.Hash, met bool, err error)
	// ReadCommits starts reading commits, in this order, each compared with parents[i] (with the
	// empty tree when zero). ctx bounds the reading.
	ReadCommits(ctx context.Context, commits, parents []plumbing.Hash) error
	// NextCommit returns the next commit ReadCommits asked for: its hash and its object as stored,
	// and through change every entry (file, symbolic link, submodule) that differs between its
	// tree and its parent's, recursively and in git's tree order, a mode being 0 where the entry is
	// absent; path is only valid during the call. An error names the commit and ends the update.
	NextCommit(change func(path []byte, oldMode, newMode filemode.FileMode, oldHash, newHash plumbing.Hash)) (hash plumbing.Hash, raw []byte, err error)
	Close() error
}

// history is the first-parent commits an update replays, oldest first, read either through go-git
// or through a HistorySource. Both give the same rawCommits.
type history interface {
	len() int
	// start begins the reading; ctx is the pipeline's.
	start(ctx context.Context) error
	// next returns the next commit as the ledger replays it (a shallow boundary commit has no
	// parents) with the supported files it changed, their blobs not read yet, and the commit as
	// stored, which its signature covers. An error names the commit.
	next(rd *reader) (rc rawCommit, signed *object.Commit, err error)
	// readsGoGit reports whether next reads go-git's object storage, which another goroutine
	// must not read at the same time.
	readsGoGit() bool
	close()
}

// walk finds the commits an update of branch name replays: from tip back along first parents to
// the checkpoint cpTip (not replayed), or to the root when cpTip is "" or no longer on that
// history (rebuilt). In a shallow clone the commits at the shallow boundary are roots: their
// parents are not in the repository.
//
// With Options.OpenHistory the walk goes through that source, however short the update: go-git's
// first read of an object loads the pack's index (checksummed, with an offset map of every object),
// 90-100 ms on onedr0p/home-ops, where git starts its three processes in a few milliseconds. A
// source that cannot start, or fails before the first commit is read, leaves the walk to go-git.
func (l *Ledger) walk(ctx context.Context, name string, tip plumbing.Hash, cpTip string) (h history, rebuilt bool, err error) {
	shallow := map[plumbing.Hash]bool{}
	if hs, err := l.repo.Storer.Shallow(); err == nil {
		for _, h := range hs {
			shallow[h] = true
		}
	}
	if l.opts.OpenHistory != nil {
		if gh, rebuilt, ok := l.walkGit(ctx, tip, cpTip, shallow); ok {
			return gh, rebuilt, nil
		}
	}
	gw := &goGitHistory{stored: map[plumbing.Hash]*object.Commit{}}
	if err := l.walkGoGit(ctx, name, gw, tip, cpTip, shallow); err != nil {
		return nil, false, err
	}
	for i, j := 0, len(gw.todo)-1; i < j; i, j = i+1, j-1 {
		gw.todo[i], gw.todo[j] = gw.todo[j], gw.todo[i]
	}
	return gw, gw.rebuilt, nil
}

// walkGoGit walks from tip with go-git to the checkpoint or a root.
func (l *Ledger) walkGoGit(ctx context.Context, name string, gw *goGitHistory, tip plumbing.Hash, cpTip string, shallow map[plumbing.Hash]bool) error {
	for h := tip; ; {
		if h.String() == cpTip {
			return nil
		}
		if len(gw.todo)%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("ledger: update %s: %w", name, err)
			}
		}
		l.goGitCommitReads.Add(1)
		c, err := l.repo.CommitObject(h)
		if err != nil {
			return fmt.Errorf("ledger: update %s: read commit %s: %w", name, h, err)
		}
		if shallow[h] {
			// A shallow boundary commit is replayed without its parents, but its signature
			// covers them: it is verified as it is stored.
			gw.stored[h] = c
			root := *c
			root.ParentHashes = nil
			c = &root
		}
		gw.todo = append(gw.todo, c)
		if len(c.ParentHashes) == 0 {
			gw.rebuilt = cpTip != ""
			return nil
		}
		h = c.ParentHashes[0]
	}
}

// walkGit walks with the Options' history source; ok is false when it cannot (go-git walks).
func (l *Ledger) walkGit(ctx context.Context, tip plumbing.Hash, cpTip string, shallow map[plumbing.Hash]bool) (h *gitHistory, rebuilt, ok bool) {
	src, err := l.opts.OpenHistory(ctx, l.gitDir)
	if err != nil {
		l.opts.Logger.Debug("ledger: history read with go-git", "reason", err)
		return nil, false, false
	}
	var stop plumbing.Hash
	if cpTip != "" {
		stop = plumbing.NewHash(cpTip)
	}
	commits, met, err := src.FirstParents(ctx, tip, stop)
	if err != nil {
		_ = src.Close()
		l.opts.Logger.Debug("ledger: history read with go-git", "reason", err)
		return nil, false, false
	}
	// Oldest first, each compared with the one before it; the first with the checkpoint, or with
	// nothing when the walk ended at a root.
	parents := make([]plumbing.Hash, len(commits))
	for i, j := 0, len(commits)-1; i < j; i, j = i+1, j-1 {
		commits[i], commits[j] = commits[j], commits[i]
	}
	for i := range commits {
		if i > 0 {
			parents[i] = commits[i-1]
		} else if met {
			parents[i] = stop
		}
	}
	return &gitHistory{src: src, commits: commits, parents: parents, shallow: shallow}, cpTip != "" && !met, true
}

// goGitHistory reads the commits and their tree differences through go-git.
type goGitHistory struct {
	todo    []*object.Commit                 // oldest first once walked
	stored  map[plumbing.Hash]*object.Commit // shallow boundary commits as stored
	rebuilt bool
	i       int
}

func (g *goGitHistory) len() int                    { return len(g.todo) }
func (g *goGitHistory) readsGoGit() bool            { return true }
func (g *goGitHistory) start(context.Context) error { return nil }
func (g *goGitHistory) close()                      {}

func (g *goGitHistory) next(rd *reader) (rawCommit, *object.Commit, error) {
	c := g.todo[g.i]
	var prev *object.Commit
	if g.i > 0 {
		prev = g.todo[g.i-1]
	}
	g.i++
	rc, err := rd.diff(c, prev)
	if err != nil {
		return rc, nil, fmt.Errorf("commit %s: %w", c.Hash, err)
	}
	signed := c
	if s, ok := g.stored[c.Hash]; ok {
		signed = s
	}
	return rc, signed, nil
}

// gitHistory reads the commits and their tree differences through a HistorySource.
type gitHistory struct {
	src              HistorySource
	commits, parents []plumbing.Hash
	shallow          map[plumbing.Hash]bool
	i                int
}

func (g *gitHistory) len() int         { return len(g.commits) }
func (g *gitHistory) readsGoGit() bool { return false }

func (g *gitHistory) start(ctx context.Context) error {
	if err := g.src.ReadCommits(ctx, g.commits, g.parents); err != nil {
		return fmt.Errorf("read history: %w", err)
	}
	return nil
}

func (g *gitHistory) close() { _ = g.src.Close() }

func (g *gitHistory) next(rd *reader) (rawCommit, *object.Commit, error) {
	want, parent := g.commits[g.i], g.parents[g.i]
	g.i++
	var rc rawCommit
	h, raw, err := g.src.NextCommit(func(path []byte, oldMode, newMode filemode.FileMode, oldHash, newHash plumbing.Hash) {
		oldBlob, newBlob := blobOf(oldMode, oldHash), blobOf(newMode, newHash)
		if oldBlob == newBlob {
			return
		}
		if name := string(path); rd.wants(name, oldBlob, newBlob) {
			rc.files = append(rc.files, rawFile{path: name, oldHash: oldBlob, newHash: newBlob})
		}
	})
	if err != nil {
		return rc, nil, err // it names the commit
	}
	// The object is decoded as go-git decodes it from its own storage, so that everything
	// downstream (the signature, the trailers) reads the same commit.
	obj := &plumbing.MemoryObject{}
	obj.SetType(plumbing.CommitObject)
	if _, err := obj.Write(raw); err != nil {
		return rc, nil, fmt.Errorf("commit %s: %w", want, err)
	}
	stored := &object.Commit{}
	if err := stored.Decode(obj); err != nil {
		return rc, nil, fmt.Errorf("commit %s: decode: %w", want, err)
	}
	if h != want || stored.Hash != want {
		return rc, nil, fmt.Errorf("commit %s: the history source returned commit %s (object %s)", want, h, stored.Hash)
	}
	// The source's walk must be go-git's: each commit follows its first parent, and the walk ends
	// at a root or a shallow boundary commit only.
	c := stored
	switch {
	case g.shallow[want]:
		if !parent.IsZero() {
			return rc, nil, fmt.Errorf("commit %s: the history source walked past this shallow boundary commit", want)
		}
		root := *stored
		root.ParentHashes = nil
		c = &root
	case parent.IsZero():
		if len(stored.ParentHashes) > 0 {
			return rc, nil, fmt.Errorf("commit %s: the history source ended the walk here, but the commit has parents", want)
		}
	default:
		if len(stored.ParentHashes) == 0 || stored.ParentHashes[0] != parent {
			return rc, nil, fmt.Errorf("commit %s: the history source walked to %s, which is not its first parent", want, parent)
		}
	}
	rc.c = c
	return rc, stored, nil
}
