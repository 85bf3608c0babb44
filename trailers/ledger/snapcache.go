package ledger

import (
	"container/list"
	"sync"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/parleyhq/parley/core/fielddiff"
)

// snapCache keeps parsed file versions by path and blob hash, so that a version seen again (the
// old side of the next commit, a value flipped back, a file reverted) is not parsed again, and the
// parsed documents of multi-document YAML files by content, so that a generated install.yaml that
// changed in one document parses that one (fielddiff.ParseCached). The path is part of a version's
// key because it decides how a blob is read (YAML or Terraform) and a Terraform file's module.
//
// Both are bounded in bytes, not entries: one version of a generated manifest holds as many
// fields as a thousand small files. The parse workers share it; a version several of them ask for
// at once is parsed once, and a failed parse is kept too, so the same broken template is not
// re-read.
type snapCache struct {
	versions *lru[snapKey, snapEntry]
	docs     *lru[fielddiff.DocKey, *fielddiff.Document]
}

type snapKey struct {
	path string
	blob plumbing.Hash
}

type snapEntry struct {
	snap *fielddiff.Snapshot
	err  error
}

// newSnapCache bounds the cache to about maxBytes: half for file versions, half for documents.
func newSnapCache(maxBytes int) *snapCache {
	return &snapCache{versions: newLRU[snapKey, snapEntry](maxBytes / 2), docs: newLRU[fielddiff.DocKey, *fielddiff.Document](maxBytes / 2)}
}

// version is a file version's parse: ready when done is closed.
type version = lruCall[snapEntry]

// claim returns the parse of blob at path, finished, under way, or (own is true) to be done by the
// caller with finish. The reader claims each version as it reads a commit, so that a version the
// next commit needs as its old side is parsed once and its blob is not read again.
func (c *snapCache) claim(path string, blob plumbing.Hash) (v *version, own bool) {
	return c.versions.claim(snapKey{path, blob})
}

// finish parses data as the version v of blob at path claimed by its owner, and keeps it.
func (c *snapCache) finish(path string, blob plumbing.Hash, v *version, data []byte) {
	snap, err := fielddiff.ParseCached(path, data, c)
	c.versions.complete(snapKey{path, blob}, v, snapEntry{snap, err}, snap.Bytes()+len(path)+64, true)
}

// fail ends a claimed version that could not be read, without keeping it.
func (c *snapCache) fail(path string, blob plumbing.Hash, v *version, err error) {
	c.versions.complete(snapKey{path, blob}, v, snapEntry{err: err}, 0, false)
}

// parse returns the parsed version of blob at path, parsing data only when the cache lacks it.
func (c *snapCache) parse(path string, blob plumbing.Hash, data []byte) (*fielddiff.Snapshot, error) {
	v, own := c.claim(path, blob)
	if own {
		c.finish(path, blob, v, data)
	}
	<-v.done
	return v.val.snap, v.val.err
}

// Document and AddDocument make the cache fielddiff's DocCache.
func (c *snapCache) Document(k fielddiff.DocKey) (*fielddiff.Document, bool) { return c.docs.peek(k) }

func (c *snapCache) AddDocument(k fielddiff.DocKey, d *fielddiff.Document) {
	c.docs.add(k, d, d.Bytes()+len(k.Dir)+64)
}

// lru is a least-recently-used cache bounded by the sizes its values are given.
type lru[K comparable, V any] struct {
	mu       sync.Mutex
	max      int
	used     int
	order    *list.List // most recently used first; values are *lruEntry
	items    map[K]*list.Element
	inflight map[K]*lruCall[V]
}

type lruEntry[K comparable, V any] struct {
	key  K
	val  V
	size int
}

// lruCall is a value being computed; done is closed when val is set.
type lruCall[V any] struct {
	done chan struct{}
	val  V
}

func newLRU[K comparable, V any](max int) *lru[K, V] {
	return &lru[K, V]{max: max, order: list.New(), items: map[K]*list.Element{}, inflight: map[K]*lruCall[V]{}}
}

// claim returns k's value as a call: finished when the cache holds it, under way when another
// caller computes it, or new (own is true) when the caller must compute it and end the call with
// complete, whatever happens.
func (c *lru[K, V]) claim(k K) (call *lruCall[V], own bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[k]; ok {
		c.order.MoveToFront(e)
		call = &lruCall[V]{done: make(chan struct{}), val: e.Value.(*lruEntry[K, V]).val}
		close(call.done)
		return call, false
	}
	if call, ok := c.inflight[k]; ok {
		return call, false
	}
	call = &lruCall[V]{done: make(chan struct{})}
	c.inflight[k] = call
	return call, true
}

// complete ends a call its caller owns, keeping the value (of the given size) when keep is true.
// The value is kept in the same critical section that ends the call: between the two, a caller
// would find k neither cached nor in flight and compute it again.
func (c *lru[K, V]) complete(k K, call *lruCall[V], v V, size int, keep bool) {
	call.val = v
	c.mu.Lock()
	delete(c.inflight, k)
	if keep {
		c.addLocked(k, v, size)
	}
	c.mu.Unlock()
	close(call.done)
}

// get returns the value of k, calling compute (which also gives the value's size) only when no
// one has it or is computing it.
func (c *lru[K, V]) get(k K, compute func() (V, int)) V {
	call, own := c.claim(k)
	if own {
		v, size := compute()
		c.complete(k, call, v, size, true)
	}
	<-call.done
	return call.val
}

// peek returns the value of k if the cache holds it.
func (c *lru[K, V]) peek(k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[k]; ok {
		c.order.MoveToFront(e)
		return e.Value.(*lruEntry[K, V]).val, true
	}
	var zero V
	return zero, false
}

// add keeps v under k, evicting the least recently used values beyond the bound. A value larger
// than the whole bound is not kept.
func (c *lru[K, V]) add(k K, v V, size int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.addLocked(k, v, size)
}

// addLocked is add with c.mu held.
func (c *lru[K, V]) addLocked(k K, v V, size int) {
	if _, ok := c.items[k]; ok || size > c.max {
		return
	}
	c.items[k] = c.order.PushFront(&lruEntry[K, V]{key: k, val: v, size: size})
	c.used += size
	for c.used > c.max {
		last := c.order.Back()
		e := last.Value.(*lruEntry[K, V])
		delete(c.items, e.key)
		c.order.Remove(last)
		c.used -= e.size
	}
}
