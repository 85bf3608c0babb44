package events

import (
	"maps"
	"sync"
)

// Deduper remembers the most recently seen event IDs, up to a fixed number, and forgets the least
// recently seen first (an LRU). The server uses it as a fast pre-check before its durable store:
// a miss proves nothing (the ID may have been forgotten), so the store stays the authority; a hit
// saves the store a lookup for the redeliveries that come in bursts. Safe for concurrent use.
type Deduper struct {
	mu    sync.Mutex
	index map[string]int32 // id -> slot
	slots []dedupeSlot
	head  int32 // most recently seen; -1 when empty
	free  int32 // next never-used slot
}

// dedupeSlot is one entry of the recency list, kept in a slice so that a full Deduper allocates
// nothing per ID.
type dedupeSlot struct {
	id         string
	prev, next int32
}

// NewDeduper returns a Deduper remembering up to capacity IDs (at least 1).
func NewDeduper(capacity int) *Deduper {
	if capacity < 1 {
		capacity = 1
	}
	return &Deduper{index: make(map[string]int32, capacity), slots: make([]dedupeSlot, capacity), head: -1}
}

// Seen reports whether id was seen before, and records it as the most recently seen.
func (d *Deduper) Seen(id string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.seen(id)
}

func (d *Deduper) seen(id string) bool {
	if s, ok := d.index[id]; ok {
		d.moveToFront(s)
		return true
	}
	var s int32
	if int(d.free) < len(d.slots) {
		s = d.free
		d.free++
	} else {
		s = d.slots[d.head].prev // the tail: least recently seen
		delete(d.index, d.slots[s].id)
		d.unlink(s)
	}
	d.slots[s].id = id
	d.index[id] = s
	d.pushFront(s)
	return false
}

func (d *Deduper) unlink(s int32) {
	sl := &d.slots[s]
	if sl.next == s { // the only entry
		d.head = -1
		return
	}
	d.slots[sl.prev].next = sl.next
	d.slots[sl.next].prev = sl.prev
	if d.head == s {
		d.head = sl.next
	}
}

func (d *Deduper) pushFront(s int32) {
	if d.head < 0 {
		d.slots[s].prev, d.slots[s].next = s, s
		d.head = s
		return
	}
	h := d.head
	t := d.slots[h].prev
	d.slots[s].prev, d.slots[s].next = t, h
	d.slots[t].next = s
	d.slots[h].prev = s
	d.head = s
}

func (d *Deduper) moveToFront(s int32) {
	if d.head == s {
		return
	}
	d.unlink(s)
	d.pushFront(s)
}

// Len is the number of IDs remembered.
func (d *Deduper) Len() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.index)
}

// Filter drops from b everything that came from an event seen before (in an earlier batch), and
// records the batch's events as seen. Dropped events are counted in Ignored as "duplicate". Events
// are checked once each, however many observations they produced.
func (d *Deduper) Filter(b Batch) Batch {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(b.EventIDs) == 0 {
		return b
	}
	dup := map[string]bool{}
	ids := b.EventIDs[:0:0]
	for _, id := range b.EventIDs {
		if d.seen(id) {
			if len(dup) == 0 {
				b.Ignored = maps.Clone(b.Ignored) // the caller's batch keeps its counts
			}
			dup[id] = true
			b.ignore("duplicate")
			continue
		}
		ids = append(ids, id)
	}
	if len(dup) == 0 {
		return b
	}
	b.EventIDs = ids
	b.Observations = filterByID(b.Observations, dup, func(o Observation) string { return o.EventID })
	b.Reverts = filterByID(b.Reverts, dup, func(r Revert) string { return r.EventID })
	b.OutOfSync = filterByID(b.OutOfSync, dup, func(o OutOfSync) string { return o.EventID })
	return b
}

func filterByID[T any](xs []T, drop map[string]bool, id func(T) string) []T {
	var out []T
	for _, x := range xs {
		if !drop[id(x)] {
			out = append(out, x)
		}
	}
	return out
}
