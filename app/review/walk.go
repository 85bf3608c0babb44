package review

import (
	"bytes"
	"container/heap"
	"errors"
	"fmt"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// paint marks the sides of a walk a commit is reachable from.
type paint uint8

const (
	fromBase paint = 1 << iota // reachable from the base: not the pull request's
	fromHead                   // reachable from the head
	stale                      // below a common commit: can no longer be a best merge base
)

// historyWalk reads the history above a pull request's merge base only, newest first, the way git
// itself answers `git merge-base` and `git rev-list base..head`: commits are taken from a queue in
// committer time order and paint their parents with the sides that reach them, and the walk stops
// as soon as nothing left in the queue can change the answer. go-git's MergeBase, and a walk of
// the base's whole history to tell its commits from the branch's, read every commit of the
// repository instead: on a repository with 30,000 commits that was most of a review's time.
type historyWalk struct {
	repo  *git.Repository
	open  func(paint) bool // whether a commit so painted still decides the answer
	paint map[plumbing.Hash]paint
	seen  map[plumbing.Hash]*object.Commit
	queue commitQueue
	// opened counts the queued commits that were open when queued (paint only grows, so some may
	// have closed since: the walk then goes a little further, never less far).
	opened int
	// oldestOpen is the committer time of the oldest commit ever painted open.
	oldestOpen int64
	anyOpen    bool
	// read counts the commit objects read, for the test that keeps the walk above the merge base.
	read int
}

func newHistoryWalk(repo *git.Repository, open func(paint) bool) *historyWalk {
	return &historyWalk{repo: repo, open: open, paint: map[plumbing.Hash]paint{}, seen: map[plumbing.Hash]*object.Commit{}}
}

// add paints c with p and queues it when that adds a colour it did not have: what a commit is
// reachable from must reach its parents too, even when the commit was already walked.
func (w *historyWalk) add(c *object.Commit, p paint) {
	if w.paint[c.Hash]&p == p {
		return
	}
	w.paint[c.Hash] |= p
	w.seen[c.Hash] = c
	e := queued{c: c, open: w.open(w.paint[c.Hash])}
	if e.open {
		w.opened++
		if t := c.Committer.When.Unix(); !w.anyOpen || t < w.oldestOpen {
			w.oldestOpen, w.anyOpen = t, true
		}
	}
	heap.Push(&w.queue, e)
}

// next takes the newest queued commit and its paint now.
func (w *historyWalk) next() (*object.Commit, paint) {
	e := heap.Pop(&w.queue).(queued)
	if e.open {
		w.opened--
	}
	return e.c, w.paint[e.c.Hash]
}

// parents returns c's parents present in the repository: past a shallow clone's boundary there
// are none, as go-git's walks treat them.
func (w *historyWalk) parents(c *object.Commit) ([]*object.Commit, error) {
	out := make([]*object.Commit, 0, len(c.ParentHashes))
	for _, h := range c.ParentHashes {
		if p, ok := w.seen[h]; ok {
			out = append(out, p)
			continue
		}
		p, err := w.repo.CommitObject(h)
		if errors.Is(err, plumbing.ErrObjectNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read commit %s, parent of %s: %w", h, c.Hash, err)
		}
		w.read++
		w.seen[h] = p
		out = append(out, p)
	}
	return out, nil
}

// mergeBases returns the best common ancestors of base and head (git's paint_down_to_common):
// commits reachable from both that no other common commit descends from.
func mergeBases(repo *git.Repository, base, head *object.Commit) ([]*object.Commit, int, error) {
	if base.Hash == head.Hash {
		return []*object.Commit{base}, 0, nil
	}
	// As git's paint_down_to_common, the walk goes on while a commit that is not below a common
	// one is queued: every best common ancestor is then found, whatever the clocks say, and one
	// found before a descendant of it (a skewed clock) is set aside below.
	w := newHistoryWalk(repo, func(p paint) bool { return p&stale == 0 })
	w.add(base, fromBase)
	w.add(head, fromHead)
	var found []*object.Commit
	isFound := map[plumbing.Hash]bool{}
	for w.opened > 0 {
		c, p := w.next()
		if p&(fromBase|fromHead) == fromBase|fromHead && p&stale == 0 {
			if !isFound[c.Hash] {
				isFound[c.Hash] = true
				found = append(found, c)
			}
			p |= stale // its ancestors are common too, and none of them is best
		}
		ps, err := w.parents(c)
		if err != nil {
			return nil, w.read, err
		}
		for _, parent := range ps {
			w.add(parent, p&(fromBase|fromHead|stale))
		}
	}
	var bases []*object.Commit
	for _, c := range found {
		if w.paint[c.Hash]&stale == 0 { // a later common commit descends from it
			bases = append(bases, c)
		}
	}
	if len(bases) > 1 {
		// Criss-cross merges: keep those none of the others reaches (git's remove_redundant).
		var err error
		if bases, err = object.Independents(bases); err != nil {
			return nil, w.read, err
		}
	}
	return bases, w.read, nil
}

// headOnly returns the commits reachable from head and not from base, as go-git's pre-order walk
// from head lists them (first parents first), oldest first.
func headOnly(repo *git.Repository, base, head *object.Commit) ([]*object.Commit, int, error) {
	// As git's rev-list base..head: the walk goes on while a commit the base does not reach is
	// queued, and then while the queue holds a commit not older than every such commit walked (git
	// goes five commits further; this waits out any clock that is merely late). Only a parent
	// dated after its child, in history the walk did not reach, could still hide that a commit the
	// walk counts as the branch's is also the base's: its author would then be judged as well.
	w := newHistoryWalk(repo, func(p paint) bool { return p&fromBase == 0 })
	w.add(base, fromBase)
	w.add(head, fromHead)
	for w.queue.Len() > 0 && (w.opened > 0 || w.anyOpen && w.queue[0].c.Committer.When.Unix() >= w.oldestOpen) {
		c, p := w.next()
		if p&fromBase != 0 {
			p = fromBase // what the base reaches is not the pull request's, whatever else reaches it
		}
		ps, err := w.parents(c)
		if err != nil {
			return nil, w.read, err
		}
		for _, parent := range ps {
			w.add(parent, p)
		}
	}
	inBase := map[plumbing.Hash]bool{}
	for h, p := range w.paint {
		if p&fromBase != 0 {
			inBase[h] = true
		}
	}
	// The same order as before: the pre-order walk from head, which stops at every commit the
	// base reaches, and each of those was painted above since its child was walked.
	var out []*object.Commit
	err := object.NewCommitPreorderIter(head, inBase, nil).ForEach(func(c *object.Commit) error {
		out = append(out, c)
		return nil
	})
	if err != nil {
		return nil, w.read, fmt.Errorf("walk head %s: %w", head.Hash, err)
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, w.read, nil
}

// queued is a commit in the walk's queue, and whether it was open when queued.
type queued struct {
	c    *object.Commit
	open bool
}

// commitQueue is a max-heap of commits by committer time, then hash for a stable order.
type commitQueue []queued

func (q commitQueue) Len() int { return len(q) }
func (q commitQueue) Less(i, j int) bool {
	a, b := q[i].c.Committer.When, q[j].c.Committer.When
	if !a.Equal(b) {
		return a.After(b)
	}
	return bytes.Compare(q[i].c.Hash[:], q[j].c.Hash[:]) < 0
}
func (q commitQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *commitQueue) Push(x any)   { *q = append(*q, x.(queued)) }
func (q *commitQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}
