package ledger

import (
	"bytes"
	"fmt"
	"io"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/parleyhq/parley/core/fielddiff"
)

// rawCommit is a commit with the contents of the supported files it changed: the reading stage's
// output.
type rawCommit struct {
	c        *object.Commit
	files    []rawFile
	problems []Problem
}

// rawFile is one changed file. A zero hash means the file is absent on that side. oldData is nil
// when the extracting stage already holds the old version: it received it as newData of an earlier
// commit of the same update.
type rawFile struct {
	path             string
	oldHash, newHash plumbing.Hash
	oldData, newData []byte

	// Filled by the parse workers.
	oldSnap *fielddiff.Snapshot // oldData parsed; nil when absent or unparseable
	newSnap *fielddiff.Snapshot // newData parsed
	newErr  error               // why newData could not be parsed
}

// parseFiles parses the file versions of a raw commit. Parsing is pure, so the parse workers parse
// several commits at once.
func parseFiles(rc *rawCommit, cache *snapCache) {
	for i := range rc.files {
		f := &rc.files[i]
		if f.oldData != nil {
			f.oldSnap, _ = cache.parse(f.path, f.oldHash, f.oldData) // reported when it was a new version
		}
		if f.newData != nil {
			f.newSnap, f.newErr = cache.parse(f.path, f.newHash, f.newData)
		}
	}
}

// reader compares each commit's tree with its first parent's, skipping identical subtrees by hash,
// and reads the changed blobs of supported files.
type reader struct {
	repo     *git.Repository
	maxBytes int64
	sent     map[string]plumbing.Hash       // path -> blob last handed on as a new version
	prev     map[plumbing.Hash]*object.Tree // trees decoded for the previous commit
	cur      map[plumbing.Hash]*object.Tree // trees decoded for this commit
}

// read diffs commit c against its first parent. prev is that parent when the caller has it at
// hand (the previous commit of the update), else nil.
func (r *reader) read(c, prev *object.Commit) (rawCommit, error) {
	if r.sent == nil {
		r.sent = map[string]plumbing.Hash{}
	}
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
	for i := range rc.files {
		f := &rc.files[i]
		if !f.oldHash.IsZero() && r.sent[f.path] != f.oldHash {
			data, err := r.blob(f.oldHash)
			if err != nil {
				rc.problems = append(rc.problems, Problem{Path: f.path, Message: err.Error()})
			}
			f.oldData = data
		}
		if f.newHash.IsZero() {
			delete(r.sent, f.path)
			continue
		}
		data, err := r.blob(f.newHash)
		if err != nil {
			rc.problems = append(rc.problems, Problem{Path: f.path, Message: err.Error()})
			// Without the content nothing can be said about this file in this commit.
			f.newData = nil
			delete(r.sent, f.path)
			continue
		}
		f.newData = data
		r.sent[f.path] = f.newHash
	}
	return rc, nil
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
			} else if isFile(oe.Mode) {
				oldBlob = oe.Hash
			}
		}
		if ne != nil {
			if ne.Mode == filemode.Dir {
				newTree = ne.Hash
			} else if isFile(ne.Mode) {
				newBlob = ne.Hash
			}
		}
		if !oldTree.IsZero() || !newTree.IsZero() {
			if err := r.diffTrees(rc, name+"/", oldTree, newTree); err != nil {
				return err
			}
		}
		if oldBlob != newBlob && fielddiff.Supported(name) {
			rc.files = append(rc.files, rawFile{path: name, oldHash: oldBlob, newHash: newBlob})
		}
	}
	return nil
}

func (r *reader) blob(h plumbing.Hash) ([]byte, error) {
	o, err := r.repo.Storer.EncodedObject(plumbing.BlobObject, h)
	if err != nil {
		return nil, fmt.Errorf("read blob %s: %w", h, err)
	}
	if o.Size() > r.maxBytes {
		return nil, fmt.Errorf("blob %s is %d bytes, more than the %d the ledger parses", h, o.Size(), r.maxBytes)
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
