// Package lru keeps values by key within a number of entries and a total cost (the bytes the
// caller says each value holds), dropping the least recently used first. Written here because the
// ecosystem's LRU caches (hashicorp/golang-lru) bound the number of entries only, and what Parley
// keeps by blob (parsed files, policies) must be bounded in bytes too.
package lru

import (
	"container/list"
	"sync"
)

// Cache is safe for concurrent use; its zero value is an empty cache.
type Cache[K comparable, V any] struct {
	mu      sync.Mutex
	entries map[K]*list.Element // of *entry[K, V]
	order   list.List           // most recently used first
	cost    int
}

type entry[K comparable, V any] struct {
	key  K
	val  V
	cost int
}

// Get returns the value kept under k, and makes it the most recently used.
func (c *Cache[K, V]) Get(k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[k]
	if !ok {
		var zero V
		return zero, false
	}
	c.order.MoveToFront(el)
	return el.Value.(*entry[K, V]).val, true
}

// Add keeps v under k at cost, then drops the least recently used entries while more than
// maxEntries are kept or they cost more than maxCost together. A key kept already keeps its
// value and is only made the most recently used: two callers that computed the same value at
// once keep one. The bounds are given with each Add so that a cache's owner can take them from
// its own configuration, defaults included, and keep a zero value ready.
func (c *Cache[K, V]) Add(k K, v V, cost, maxEntries, maxCost int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = map[K]*list.Element{}
	}
	if el, ok := c.entries[k]; ok {
		c.order.MoveToFront(el)
		return
	}
	c.entries[k] = c.order.PushFront(&entry[K, V]{key: k, val: v, cost: cost})
	c.cost += cost
	for len(c.entries) > maxEntries || c.cost > maxCost {
		old := c.order.Back()
		oe := old.Value.(*entry[K, V])
		c.order.Remove(old)
		delete(c.entries, oe.key)
		c.cost -= oe.cost
	}
}

// Len is how many entries are kept and what they cost together.
func (c *Cache[K, V]) Len() (entries, cost int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries), c.cost
}
