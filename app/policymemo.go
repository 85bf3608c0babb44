package app

import (
	"sync/atomic"

	"github.com/parleyhq/parley/internal/lru"
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
	cache lru.Cache[policyKey, *policyEntry]
	hits  atomic.Int64
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
	e, ok := m.cache.Get(policyKey{name, blob})
	if !ok {
		return nil, "", false
	}
	m.hits.Add(1)
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
	m.cache.Add(e.key, e, e.cost, policyMemoEntries, policyMemoBytes)
}

// stats is how many policies m keeps and how often it answered.
func (m *policyMemo) stats() (entries, hits int) {
	entries, _ = m.cache.Len()
	return entries, int(m.hits.Load())
}
