package demo

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// history writes commits straight into a repository's object store, from whole-tree snapshots, so
// that every hash is a function of the fixed contents, authors and times: the demo is reproducible.
type history struct {
	repo *git.Repository
}

// person is a commit author at a fixed time offset.
type person struct {
	Name, Email string
	Zone        *time.Location
	// Unsigned marks a forged author: the commit carries the person's name and email but no
	// signature, as anyone who can push may write.
	Unsigned bool
}

func (p person) at(t time.Time) object.Signature {
	return object.Signature{Name: p.Name, Email: p.Email, When: t.In(p.Zone)}
}

// commit writes the tree holding files and a commit of it with the given parents.
func (h *history) commit(files map[string]string, parents []plumbing.Hash, author person, when time.Time, msg string) (plumbing.Hash, error) {
	tree, err := h.tree(files, "")
	if err != nil {
		return plumbing.ZeroHash, err
	}
	c := &object.Commit{
		Author:       author.at(when),
		Committer:    author.at(when),
		Message:      msg,
		TreeHash:     tree,
		ParentHashes: parents,
	}
	if !author.Unsigned {
		if err := sign(c, author); err != nil {
			return plumbing.ZeroHash, err
		}
	}
	obj := h.repo.Storer.NewEncodedObject()
	if err := c.Encode(obj); err != nil {
		return plumbing.ZeroHash, fmt.Errorf("encode commit %q: %w", subjectOf(msg), err)
	}
	hash, err := h.repo.Storer.SetEncodedObject(obj)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("store commit %q: %w", subjectOf(msg), err)
	}
	return hash, nil
}

// tree writes the tree of the files under dir (dir "" is the root) and returns its hash.
func (h *history) tree(files map[string]string, dir string) (plumbing.Hash, error) {
	prefix := dir
	if prefix != "" {
		prefix += "/"
	}
	subdirs := map[string]bool{}
	var entries []object.TreeEntry
	for _, p := range slices.Sorted(maps.Keys(files)) {
		rest, ok := strings.CutPrefix(p, prefix)
		if !ok {
			continue
		}
		if sub, _, nested := strings.Cut(rest, "/"); nested {
			if !subdirs[sub] {
				subdirs[sub] = true
				hash, err := h.tree(files, path.Join(dir, sub))
				if err != nil {
					return plumbing.ZeroHash, err
				}
				entries = append(entries, object.TreeEntry{Name: sub, Mode: filemode.Dir, Hash: hash})
			}
			continue
		}
		hash, err := h.blob(files[p])
		if err != nil {
			return plumbing.ZeroHash, fmt.Errorf("store %s: %w", p, err)
		}
		entries = append(entries, object.TreeEntry{Name: rest, Mode: filemode.Regular, Hash: hash})
	}
	// Git orders entries by name, a directory sorting as if its name ended in "/".
	key := func(e object.TreeEntry) string {
		if e.Mode == filemode.Dir {
			return e.Name + "/"
		}
		return e.Name
	}
	slices.SortFunc(entries, func(a, b object.TreeEntry) int { return strings.Compare(key(a), key(b)) })
	t := &object.Tree{Entries: entries}
	obj := h.repo.Storer.NewEncodedObject()
	if err := t.Encode(obj); err != nil {
		return plumbing.ZeroHash, fmt.Errorf("encode tree %q: %w", dir, err)
	}
	hash, err := h.repo.Storer.SetEncodedObject(obj)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("store tree %q: %w", dir, err)
	}
	return hash, nil
}

func (h *history) blob(content string) (plumbing.Hash, error) {
	obj := h.repo.Storer.NewEncodedObject()
	obj.SetType(plumbing.BlobObject)
	w, err := obj.Writer()
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if _, err := w.Write([]byte(content)); err != nil {
		return plumbing.ZeroHash, err
	}
	if err := w.Close(); err != nil {
		return plumbing.ZeroHash, err
	}
	return h.repo.Storer.SetEncodedObject(obj)
}

func subjectOf(msg string) string {
	line, _, _ := strings.Cut(msg, "\n")
	return line
}

// edit returns a copy of files with one file's content changed by replacing old with new, which
// must occur exactly once: a demo step that silently did nothing would make a misleading ledger.
func edit(files map[string]string, file, old, new string) (map[string]string, error) {
	content, ok := files[file]
	if !ok {
		return nil, fmt.Errorf("demo step edits %s, which does not exist", file)
	}
	if n := strings.Count(content, old); n != 1 {
		return nil, fmt.Errorf("demo step edits %s: %q occurs %d times, want once", file, old, n)
	}
	out := maps.Clone(files)
	out[file] = strings.Replace(content, old, new, 1)
	return out, nil
}
