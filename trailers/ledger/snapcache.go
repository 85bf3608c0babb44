package ledger

import (
	"container/list"
	"sync"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/parleyhq/parley/core/fielddiff"
)

// snapCache keeps parsed file versions by path and blob hash, so that a version seen again (a value
// flipped back, a file reverted) is not parsed again. The path is part of the key because it decides
// how a blob is read (YAML or Terraform) and a Terraform file's module. It is safe for concurrent use
// by the parse workers; a failed parse is kept too, so the same broken template is not re-read.
type snapCache struct {
	mu    sync.Mutex
	max   int
	order *list.List // most recently used first; values are *snapEntry
	items map[snapKey]*list.Element
}

type snapKey struct {
	path string
	blob plumbing.Hash
}

type snapEntry struct {
	key  snapKey
	snap *fielddiff.Snapshot
	err  error
}

func newSnapCache(max int) *snapCache {
	return &snapCache{max: max, order: list.New(), items: map[snapKey]*list.Element{}}
}

// parse returns the parsed version of blob at path, parsing data only when the cache lacks it.
func (c *snapCache) parse(path string, blob plumbing.Hash, data []byte) (*fielddiff.Snapshot, error) {
	k := snapKey{path, blob}
	c.mu.Lock()
	if e, ok := c.items[k]; ok {
		c.order.MoveToFront(e)
		v := e.Value.(*snapEntry)
		c.mu.Unlock()
		return v.snap, v.err
	}
	c.mu.Unlock()
	snap, err := fielddiff.Parse(path, data)
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.items[k]; !ok {
		c.items[k] = c.order.PushFront(&snapEntry{key: k, snap: snap, err: err})
		for c.order.Len() > c.max {
			last := c.order.Back()
			delete(c.items, last.Value.(*snapEntry).key)
			c.order.Remove(last)
		}
	}
	return snap, err
}
