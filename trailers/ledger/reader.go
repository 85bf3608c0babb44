package ledger

import (
	"bytes"
	"fmt"
	"io"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/core/fielddiff"
)

// rawCommit is a commit with the contents of the supported files it changed: the reading stage's
// output.
type rawCommit struct {
	c        *object.Commit
	proof    core.Proof // what the commit's signature proves (VerifyCommit)
	files    []rawFile
	problems []Problem
}

// rawFile is one changed file. A zero hash means the file is absent on that side. The old side is
// usually the previous commit's new side: its blob is read again (go-git's object cache usually
// has it) but parsed again only when the parse cache has let it go, so that no stage holds the
// parsed state of every file of the repository.
type rawFile struct {
	path             string
	oldHash, newHash plumbing.Hash
	old, new         *version // the versions' parses; nil when absent
	ownOld, ownNew   bool     // this commit's worker parses that version (its reader claimed it first)
	oldData, newData []byte   // the owned versions' blobs (an empty file is nil too); nil once parsed
	newUnread        bool     // the new version could not be read (a problem says why)

	// Filled by the parse workers.
	oldSnap *fielddiff.Snapshot // the old version parsed; nil when absent or unparseable
	newSnap *fielddiff.Snapshot // newData parsed
	newErr  error               // why newData could not be parsed
}

// parseFiles parses the file versions a raw commit owns (claimed first by its reader), lets their
// bytes go, then waits for the versions other commits parse. Parsing is pure, so the parse workers
// parse several commits at once. A version is always claimed by an earlier commit than the ones
// waiting for it, and a worker parses what it owns before it waits: no worker waits for a commit
// no worker has taken.
func parseFiles(rc *rawCommit, cache *snapCache) {
	for i := range rc.files {
		f := &rc.files[i]
		if f.ownOld {
			cache.finish(f.path, f.oldHash, f.old, f.oldData)
		}
		if f.ownNew {
			cache.finish(f.path, f.newHash, f.new, f.newData)
		}
		f.oldData, f.newData, f.ownOld, f.ownNew = nil, nil, false, false
	}
	for i := range rc.files {
		f := &rc.files[i]
		if f.old != nil {
			<-f.old.done
			f.oldSnap = f.old.val.snap // an unparseable old side was reported when it was new
		}
		if f.new != nil {
			<-f.new.done
			f.newSnap, f.newErr = f.new.val.snap, f.new.val.err
		}
	}
}

// abandonFiles ends the versions a raw commit owns without parsing them, when the update stops.
func abandonFiles(rc *rawCommit, cache *snapCache, err error) {
	for i := range rc.files {
		f := &rc.files[i]
		if f.ownOld {
			cache.fail(f.path, f.oldHash, f.old, err)
		}
		if f.ownNew {
			cache.fail(f.path, f.newHash, f.new, err)
		}
		f.oldData, f.newData, f.ownOld, f.ownNew = nil, nil, false, false
	}
}

// reader compares each commit's tree with its first parent's, skipping identical subtrees by hash,
// and reads the changed blobs of supported files.
type reader struct {
	repo     *git.Repository
	cache    *snapCache
	paths    core.PathFilter
	maxBytes int64
	blobs    BlobSource                     // reads blobs when the update has one; nil: go-git does
	prev     map[plumbing.Hash]*object.Tree // trees decoded for the previous commit
	cur      map[plumbing.Hash]*object.Tree // trees decoded for this commit
}

// diff compares commit c with its first parent through go-git. prev is that parent when the
// caller has it at hand (the previous commit of the update), else nil.
func (r *reader) diff(c, prev *object.Commit) (rawCommit, error) {
	rc := rawCommit{c: c}
	var parentTree plumbing.Hash
	if len(c.ParentHashes) > 0 {
		p := prev
		if p == nil || p.Hash != c.ParentHashes[0] {
			var err error
			if p, err = r.repo.CommitObject(c.ParentHashes[0]); err != nil {
				return rc, fmt.Errorf("read first parent %s: %w", c.ParentHashes[0], err)
			}
		}
		parentTree = p.TreeHash
	}
	r.cur = make(map[plumbing.Hash]*object.Tree, len(r.prev)+4)
	if err := r.diffTrees(&rc, "", parentTree, c.TreeHash); err != nil {
		return rc, err
	}
	r.prev = r.cur
	return rc, nil
}

// versionRead is a blob a commit reads: the version of one of its files (the old side or the new)
// that no earlier commit claimed.
type versionRead struct {
	file int
	old  bool
	hash plumbing.Hash
}

// claimVersions claims the versions of the files a commit changed and returns those no earlier
// commit has claimed: the blobs it reads, in file order, each file's old side first.
func (r *reader) claimVersions(rc *rawCommit) []versionRead {
	var reads []versionRead
	for i := range rc.files {
		f := &rc.files[i]
		// Usually the old side is the previous commit's new side, parsed or being parsed.
		if !f.oldHash.IsZero() {
			var own bool
			if f.old, own = r.cache.claim(f.path, f.oldHash); own {
				reads = append(reads, versionRead{file: i, old: true, hash: f.oldHash})
			}
		}
		if !f.newHash.IsZero() {
			var own bool
			if f.new, own = r.cache.claim(f.path, f.newHash); own {
				reads = append(reads, versionRead{file: i, hash: f.newHash})
			}
		}
	}
	return reads
}

// setVersion gives a file the blob read for one of its versions, or says why it could not be read.
func (r *reader) setVersion(rc *rawCommit, v versionRead, data []byte, err error) {
	f := &rc.files[v.file]
	switch {
	case v.old && err != nil:
		// Reported when it was the new side; without it the file is compared with nothing, as
		// after a version that did not parse.
		r.cache.fail(f.path, f.oldHash, f.old, err)
	case v.old:
		f.oldData, f.ownOld = data, true
	case err != nil:
		// Without the content nothing can be said about this file in this commit.
		rc.problems = append(rc.problems, Problem{Path: f.path, Message: err.Error()})
		r.cache.fail(f.path, f.newHash, f.new, err)
		f.new, f.newUnread = nil, true
	default:
		f.newData, f.ownNew = data, true
	}
}

// readVersions claims the versions of the files a commit changed and reads those no earlier
// commit has claimed, one blob at a time.
func (r *reader) readVersions(rc *rawCommit) {
	for _, v := range r.claimVersions(rc) {
		data, err := r.blob(v.hash)
		r.setVersion(rc, v, data, err)
	}
}

func (r *reader) tree(h plumbing.Hash) (*object.Tree, error) {
	if h.IsZero() {
		return nil, nil
	}
	t, ok := r.prev[h]
	if !ok {
		t, ok = r.cur[h]
	}
	if !ok {
		var err error
		if t, err = object.GetTree(r.repo.Storer, h); err != nil {
			return nil, fmt.Errorf("read tree %s: %w", h, err)
		}
	}
	r.cur[h] = t
	return t, nil
}

func isFile(m filemode.FileMode) bool {
	return m == filemode.Regular || m == filemode.Executable || m == filemode.Deprecated
}

// blobOf is the blob an entry of mode m holds as a file the ledger reads: zero for a directory, a
// symbolic link, a submodule, or an absent entry.
func blobOf(m filemode.FileMode, h plumbing.Hash) plumbing.Hash {
	if isFile(m) {
		return h
	}
	return plumbing.ZeroHash
}

// wants says whether a changed entry is one the ledger reads: a file whose content differs from
// one side to the other (a file that became a symbolic link or a submodule is deleted), of a kind
// fielddiff parses, in the policy's paths. Both history readers ask it.
func (r *reader) wants(name string, oldBlob, newBlob plumbing.Hash) bool {
	return oldBlob != newBlob && fielddiff.Supported(name) && r.paths.Match(name)
}

// entryKey orders tree entries the way git does: a directory sorts as if its name ended in "/".
func entryKey(e *object.TreeEntry) string {
	if e.Mode == filemode.Dir {
		return e.Name + "/"
	}
	return e.Name
}

// diffTrees appends the supported files that differ between trees a and b (either may be zero).
// Both trees are in git order, so one merge pass finds the differing entries.
func (r *reader) diffTrees(rc *rawCommit, prefix string, a, b plumbing.Hash) error {
	if a == b {
		return nil
	}
	ta, err := r.tree(a)
	if err != nil {
		return err
	}
	tb, err := r.tree(b)
	if err != nil {
		return err
	}
	var ea, eb []object.TreeEntry
	if ta != nil {
		ea = ta.Entries
	}
	if tb != nil {
		eb = tb.Entries
	}
	i, j := 0, 0
	for i < len(ea) || j < len(eb) {
		var oe, ne *object.TreeEntry
		switch {
		case i == len(ea):
			ne = &eb[j]
			j++
		case j == len(eb):
			oe = &ea[i]
			i++
		default:
			ka, kb := entryKey(&ea[i]), entryKey(&eb[j])
			switch {
			case ka == kb:
				oe, ne = &ea[i], &eb[j]
				i++
				j++
				if oe.Hash == ne.Hash && oe.Mode == ne.Mode {
					continue
				}
			case ka < kb:
				oe = &ea[i]
				i++
			default:
				ne = &eb[j]
				j++
			}
		}
		name := prefix
		if oe != nil {
			name += oe.Name
		} else {
			name += ne.Name
		}
		var oldTree, newTree, oldBlob, newBlob plumbing.Hash
		if oe != nil {
			if oe.Mode == filemode.Dir {
				oldTree = oe.Hash
			} else {
				oldBlob = blobOf(oe.Mode, oe.Hash)
			}
		}
		if ne != nil {
			if ne.Mode == filemode.Dir {
				newTree = ne.Hash
			} else {
				newBlob = blobOf(ne.Mode, ne.Hash)
			}
		}
		if !oldTree.IsZero() || !newTree.IsZero() {
			if err := r.diffTrees(rc, name+"/", oldTree, newTree); err != nil {
				return err
			}
		}
		if r.wants(name, oldBlob, newBlob) {
			rc.files = append(rc.files, rawFile{path: name, oldHash: oldBlob, newHash: newBlob})
		}
	}
	return nil
}

// blob reads blob h from the update's blob source when it has one, else (and for what the source
// lacks) through go-git.
func (r *reader) blob(h plumbing.Hash) ([]byte, error) {
	if r.blobs != nil {
		data, size, found, err := r.blobs.Blob(h, r.maxBytes)
		switch {
		case err != nil:
			// The source failed (git killed, or refusing the repository): go-git reads the rest of
			// the update.
			_ = r.blobs.Close()
			r.blobs = nil
		case found && size > r.maxBytes:
			return nil, tooLargeError{h, size, r.maxBytes}
		case found:
			return data, nil
		}
	}
	return r.goGitBlob(h)
}

// goGitBlob reads blob h through go-git.
func (r *reader) goGitBlob(h plumbing.Hash) ([]byte, error) {
	o, err := r.repo.Storer.EncodedObject(plumbing.BlobObject, h)
	if err != nil {
		return nil, fmt.Errorf("read blob %s: %w", h, err)
	}
	if o.Size() > r.maxBytes {
		return nil, tooLargeError{h, o.Size(), r.maxBytes}
	}
	rd, err := o.Reader()
	if err != nil {
		return nil, fmt.Errorf("read blob %s: %w", h, err)
	}
	defer rd.Close()
	var buf bytes.Buffer
	buf.Grow(int(o.Size()))
	if _, err := io.Copy(&buf, rd); err != nil {
		return nil, fmt.Errorf("read blob %s: %w", h, err)
	}
	return buf.Bytes(), nil
}
