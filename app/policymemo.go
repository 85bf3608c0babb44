package app

import (
	"container/list"
	"sync"

	"github.com/parleyhq/parley/policy"
)

// policyMemo remembers policies parsed from the default branch, by the policy blob's object ID and
// the name it is parsed under (branch:path, which its diagnostics and the note quote). Every pull
// request and every delivery of one is judged under the default branch's policy, which changes
// rarely: parsing it again each time was a tenth of a judgement's CPU.
//
// policy.Parse is a pure function of the bytes and the name (it reads no file, clock or
// environment), so what it answered once it answers always: a parsed policy, or an invalid
// policy's note. A *policy.Policy is immutable after Parse and safe for concurrent use (its doc
// says so, and the judge path only reads it), so one parse is shared by every judgement that
// finds the same blob. Nothing read from Git fails here: a read error is returned before put.
//
// Bounded in entries and in the policies' source bytes (a parsed policy is a small multiple of its
// source, and a policy is at most fielddiff.MaxHCLBytes), least recently used out; safe for
// concurrent use. The zero value is ready; a nil *policyMemo remembers nothing.
type policyMemo struct {
	mu      sync.Mutex
	entries map[policyKey]*list.Element // of *policyEntry
	order   list.List                   // most recently used first
	bytes   int
	hits    int
}

// policyMemoEntries and policyMemoBytes bound a policyMemo: a server judging many repositories
// keeps their policies, and no more than a few megabytes of them.
const (
	policyMemoEntries = 64
	policyMemoBytes   = 8 << 20
)

type policyKey struct{ name, blob string }

type policyEntry struct {
	key  policyKey
	pol  *policy.Policy // nil when the policy is invalid
	note string         // why, then
	cost int
}

// get returns the policy (or invalid policy's note) parsed before from blob under name.
func (m *policyMemo) get(name, blob string) (*policy.Policy, string, bool) {
	if m == nil || blob == "" {
		return nil, "", false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	el, ok := m.entries[policyKey{name, blob}]
	if !ok {
		return nil, "", false
	}
	m.hits++
	m.order.MoveToFront(el)
	e := el.Value.(*policyEntry)
	return e.pol, e.note, true
}

// put keeps what policy.Parse(source of blob, name) gave: pol, or note when it is invalid.
func (m *policyMemo) put(name, blob string, srcBytes int, pol *policy.Policy, note string) {
	if m == nil || blob == "" {
		return
	}
	e := &policyEntry{key: policyKey{name, blob}, pol: pol, note: note, cost: 256 + len(name) + len(blob) + len(note) + srcBytes}
	if e.cost > policyMemoBytes/4 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.entries == nil {
		m.entries = map[policyKey]*list.Element{}
	}
	if el, ok := m.entries[e.key]; ok {
		m.order.MoveToFront(el)
		return
	}
	m.entries[e.key] = m.order.PushFront(e)
	m.bytes += e.cost
	for len(m.entries) > policyMemoEntries || m.bytes > policyMemoBytes {
		old := m.order.Back()
		oe := old.Value.(*policyEntry)
		m.order.Remove(old)
		delete(m.entries, oe.key)
		m.bytes -= oe.cost
	}
}

// stats is how many policies m keeps and how often it answered.
func (m *policyMemo) stats() (entries, hits int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.entries), m.hits
}
