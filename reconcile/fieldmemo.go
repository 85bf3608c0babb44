package reconcile

import (
	"container/list"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/reconcile/driftstate"
)

// FieldMemo keeps in memory what judging a proposal reads of the drift state for each field: the
// field's version, its open claims and its history back to an oscillation window. An admission
// webhook judges the same Deployments' replicas hundreds of times a second; with the memo a
// review reads the drift state only for a field it has not seen at its current version.
//
// The memo never decides alone. An entry is labelled with the version it was read at (read before
// the claims, as ProposeIf always did), and every answer judged on an entry is checked against
// the drift state before it stands: a recorded one by the compare-and-swap on the fields'
// versions (driftstate.Batch.Expect), which fails if any writer (this process's drift events and
// timers, another replica) moved a field on since; an answer that records nothing by reading the
// versions again. A moved field's entry is dropped and the review judged again on a fresh read.
// What ProposeIf records itself it writes through: the entry moves to the version the record
// made, with the claims the record added (when the record took its event in: Batch.Taken).
//
// Memory is bounded: at most Max fields (least recently used dropped first), and a field whose
// window holds more than maxMemoClaims claims is not kept (it is read each time). Safe for
// concurrent use; entries are never changed in place, so a judgement holds its inputs unlocked.
type FieldMemo struct {
	// Max is how many fields are kept; 0: DefaultMemoFields.
	Max int

	mu      sync.Mutex
	entries map[core.Field]*list.Element // of *memoEntry
	lru     list.List                    // most recently used first

	hits, misses atomic.Int64
}

// DefaultMemoFields is FieldMemo's default size: a busy cluster's scaled Deployments, each entry a
// few claims (a few KiB with their values), so a few tens of MiB at most per repository.
const DefaultMemoFields = 8192

// maxMemoClaims bounds one entry: a field argued over at machine speed within its window is read
// each time rather than held.
const maxMemoClaims = 256

// memoEntry is one field as read (or written through) at a version. open holds the field's open
// claims in the drift state's order (by time, then record); history the claims at or after since,
// open or closed, and the latest one before since, in the same order: what driftstate.History
// returns for since, from which it is derived for any later since.
//
// An entry is never changed once made, but its lists may share a backing array with its
// predecessor's and successor's (wrote appends in place; see insertShared): openEnd and
// historyEnd mark how much of that array some entry holds, nil when the array may be shared with
// anything else (a read's result) and must be copied before anything is added.
type memoEntry struct {
	field               core.Field
	version             int64
	open                []core.Claim
	history             []core.Claim
	openEnd, historyEnd *arrayEnd
	since               time.Time
	// fieldStored: field reads back as itself from its text form, so a claim on it needs no
	// round trip for its field (asStored). Worked out once per read of the drift state, not per
	// review.
	fieldStored bool
}

// claimLister is what the memo reads on a miss beyond State: the open claims themselves, which
// Standing reduces to the latest per actor; a write through needs them to stay exact.
type claimLister interface {
	Claims(ctx context.Context, f core.Field, all bool) ([]driftstate.Claim, error)
}

// Stats reports the memo's hits and misses so far.
func (m *FieldMemo) Stats() (hits, misses int64) { return m.hits.Load(), m.misses.Load() }

func (m *FieldMemo) max() int {
	if m.Max > 0 {
		return m.Max
	}
	return DefaultMemoFields
}

// get returns f's entry if it holds the history back to since.
func (m *FieldMemo) get(f core.Field, since time.Time) *memoEntry {
	m.mu.Lock()
	defer m.mu.Unlock()
	el, ok := m.entries[f]
	if !ok {
		return nil
	}
	e := el.Value.(*memoEntry)
	if since.Before(e.since) {
		return nil // an earlier window (a longer oscillation window since): read it
	}
	m.lru.MoveToFront(el)
	return e
}

// put keeps e, replacing what was kept for its field, unless it is too large to keep.
func (m *FieldMemo) put(e *memoEntry) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.entries == nil {
		m.entries = map[core.Field]*list.Element{}
	}
	if el, ok := m.entries[e.field]; ok {
		m.lru.Remove(el)
		delete(m.entries, e.field)
	}
	if len(e.open)+len(e.history) > maxMemoClaims {
		return
	}
	m.entries[e.field] = m.lru.PushFront(e)
	for len(m.entries) > m.max() {
		old := m.lru.Back()
		m.lru.Remove(old)
		delete(m.entries, old.Value.(*memoEntry).field)
	}
}

// drop forgets fields (another writer moved them on).
func (m *FieldMemo) drop(fields ...core.Field) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, f := range fields {
		if el, ok := m.entries[f]; ok {
			m.lru.Remove(el)
			delete(m.entries, f)
		}
	}
}

// load reads f from the drift state: its version first, then its claims, so that a write between
// the reads labels the entry older than what it holds (a needless miss later, or a failed
// compare-and-swap now), never newer.
func (m *FieldMemo) load(ctx context.Context, st State, cl claimLister, f core.Field, since time.Time) (*memoEntry, error) {
	m.misses.Add(1)
	v, err := st.Version(ctx, f)
	if err != nil {
		return nil, err
	}
	cs, err := cl.Claims(ctx, f, false)
	if err != nil {
		return nil, err
	}
	e := &memoEntry{field: f, version: v, since: since, open: make([]core.Claim, len(cs)), fieldStored: fieldRoundTrips(f)}
	for i, c := range cs {
		e.open[i] = c.Claim
	}
	if e.history, err = st.History(ctx, f, since); err != nil {
		return nil, err
	}
	m.put(e)
	return e, nil
}

// standing is what driftstate.Standing would return at the entry's version.
func (e *memoEntry) standing() []core.Claim { return driftstate.StandingOf(e.open) }

// historySince is what driftstate.History(since) would return at the entry's version, for since
// not before e.since: the claims at or after since, and the last one before it.
func (e *memoEntry) historySince(since time.Time) []core.Claim {
	// Clipped: a caller's append never writes into the array the entry shares with its successors.
	return slices.Clip(e.history[e.windowStart(since):])
}

// windowStart is the index in e.history of the first claim historySince(since) returns. The
// scan stops at the window, so it passes only the claims that fell out of it since the entry was
// made: a few, not the window.
func (e *memoEntry) windowStart(since time.Time) int {
	first := len(e.history) // the first claim at or after since
	for i, c := range e.history {
		if c.At.UnixNano() >= since.UnixNano() {
			first = i
			break
		}
	}
	if first > 0 {
		first-- // the latest before since: what the first in the window changed from
	}
	return first
}

// wrote is the entry after a record this memo's caller made at version: the compare-and-swap
// moved the field to version+1, and recorded claims (when its event was taken in) on top of what
// the entry held. since is the judgement's window, to which the history is trimmed.
//
// It costs O(1) per review, not O(window): the history is trimmed by reslicing and a claim
// recorded last is appended into the array e shares (insertShared); only the open claims, one or
// two per actor, are copied when the claim closes one of them.
func (e *memoEntry) wrote(version int64, claims []core.Claim, since time.Time) (*memoEntry, error) {
	n := &memoEntry{field: e.field, version: version + 1, since: since, fieldStored: e.fieldStored,
		open: e.open, openEnd: e.openEnd}
	if since.Before(e.since) {
		n.since = e.since
	}
	n.history, n.historyEnd = e.history[e.windowStart(n.since):], e.historyEnd
	for _, c := range claims {
		// As stored and read back, so that a hit sees what a miss would.
		var err error
		if c, err = asStored(c, n.fieldStored && c.Field == n.field); err != nil {
			return nil, err
		}
		if c.At.UnixNano() < n.since.UnixNano() {
			return nil, nil // it would be the window's "before": keep nothing, read it next time
		}
		closes := func(o core.Claim) bool { return driftstate.Supersedes(c, o) }
		if i := slices.IndexFunc(n.open, closes); i >= 0 {
			// Deleting in place would change what e (and reviews judging on it) sees: copy.
			kept := append(make([]core.Claim, 0, len(n.open)+1), n.open[:i]...)
			for _, o := range n.open[i+1:] {
				if !closes(o) {
					kept = append(kept, o)
				}
			}
			n.open, n.openEnd = kept, newArrayEnd(kept)
		}
		// Recorded last: after every claim at or before its time, as ORDER BY at, seq puts it.
		n.open, n.openEnd = insertShared(n.open, n.openEnd, afterAt(n.open, c.At), c)
		n.history, n.historyEnd = insertShared(n.history, n.historyEnd, afterAt(n.history, c.At), c)
	}
	return n, nil
}

// arrayEnd belongs to one backing array of claims that successive entries' lists share: free is
// how many of its slots, counted from its end, no list holds yet. Every list in the array ends at
// or before the held part's end, and a slot is written only after it is taken from free, so no
// slot any entry (or a reader holding one) can see is ever written again.
type arrayEnd struct{ free atomic.Int64 }

// newArrayEnd marks s's array as held up to s's end: s is the only list in it.
func newArrayEnd(s []core.Claim) *arrayEnd {
	end := &arrayEnd{}
	end.free.Store(int64(cap(s) - len(s)))
	return end
}

// insertShared returns s with c inserted at i, and the end mark of the array the result is in.
//
// At s's end (a claim recorded last: the usual case) it appends in place when s ends where the
// array's held part ends and it takes the next slot (a compare-and-swap on free, which cap(s) -
// len(s) equals exactly then). So of two successors of one entry (two reviews that judged on it;
// the drift state's compare-and-swap lets only one record, but the memo does not rely on that)
// only one writes into the array; the other, like an insertion before the end, a full array or
// an array nothing marks (end nil), copies. A copy has room for half as many claims again, so it
// happens once per len(s)/2 claims recorded: O(1) per review amortised, at up to 1.5 times the
// list's memory (and the claims trimmed off the front until the next copy).
func insertShared(s []core.Claim, end *arrayEnd, i int, c core.Claim) ([]core.Claim, *arrayEnd) {
	if free := int64(cap(s) - len(s)); i == len(s) && end != nil && free > 0 && end.free.CompareAndSwap(free, free-1) {
		return append(s, c), end
	}
	n := make([]core.Claim, 0, len(s)+1+len(s)/2) // a short list gets little room: copying it is cheap
	n = append(append(append(n, s[:i]...), c), s[i:]...)
	return n, newArrayEnd(n)
}

// asStored is c as the drift state stores it and reads it back (json.Marshal, then
// core.DecodeStoredClaim), without the bytes between: the claim's JSON shape converted back
// (core.ClaimJSON.Claim), which normalises exactly what the round trip does (the value through
// core.ParseJSONValue, times to UTC, empty lists to nil, the field parsed again). The one thing
// the bytes add is encoding/json's replacement of invalid UTF-8 in strings; a claim holding
// such a string takes the round trip itself.
//
// fieldStored says the caller knows c.Field reads back as itself (fieldRoundTrips). Then a claim
// already in stored form (isStored: a claim the HPA restates, built from an admission review's
// decoded object) is returned as it is, skipping the conversion both ways; the fast path is what
// most reviews take.
func asStored(c core.Claim, fieldStored bool) (core.Claim, error) {
	if fieldStored && isStored(c) {
		return c, nil
	}
	cj := c.JSON()
	if !claimJSONValidUTF8(cj) {
		js, err := json.Marshal(c)
		if err != nil {
			return core.Claim{}, fmt.Errorf("memo: encode claim on %s: %w", c.Field, err)
		}
		if c, err = core.DecodeStoredClaim(js); err != nil {
			return core.Claim{}, fmt.Errorf("memo: decode claim on %s: %w", c.Field, err)
		}
		return c, nil
	}
	if len(cj.Value) > 0 && !json.Valid(cj.Value) {
		return core.Claim{}, fmt.Errorf("memo: encode claim on %s: value %q is not JSON", c.Field, cj.Value)
	}
	out, err := cj.Claim(core.Field{}, time.Time{})
	if err != nil {
		return core.Claim{}, fmt.Errorf("memo: decode claim on %s: %w", c.Field, err)
	}
	return out, nil
}

// fieldRoundTrips reports whether f reads back as itself from its text form, as the drift state
// stores it: not the zero field, canonical in every part (a clean module, no "core" group...).
func fieldRoundTrips(f core.Field) bool {
	g, err := core.ParseField(f.String())
	return err == nil && g == f
}

// isStored reports whether c, its field aside (fieldRoundTrips), is already what storing it and
// reading it back gives, so asStored may return it unchanged. Each check is one thing the round
// trip would change or refuse; a claim failing any takes the round trip, which changes it or
// reports the error. FuzzAsStored holds it to the byte round trip both ways.
func isStored(c core.Claim) bool {
	id := c.Actor.Identity
	if !slices.Contains(core.KnownSources(), id.Source) || id.Proof != (core.Proof{}) ||
		(id.Groups != nil && len(id.Groups) == 0) {
		return false
	}
	switch v := c.Value; {
	case v.IsExpr(): // one form only: an expression, not also JSON or a yield
		if v.JSON() != "" || c.Yield || !utf8.ValidString(v.Expr()) {
			return false
		}
	case !v.Absent():
		if c.Yield {
			return false
		}
		// Canonical JSON reads back as itself; the common values (counts, images, flags) are
		// scalars that ParseJSONValue checks without decoding.
		if p, err := core.ParseJSONValue([]byte(v.JSON())); err != nil || p != v {
			return false
		}
	}
	if m := c.Motivation; !m.IsZero() && (m.Kind == "" || m.Severity.Rank() < 0) {
		return false
	}
	ev := c.Evidence
	if ev.PR < 0 || (ev.EventIDs != nil && len(ev.EventIDs) == 0) {
		return false
	}
	return storedTime(c.At) && storedTime(c.Expires) &&
		validUTF8(c.Actor.Name, id.ID, id.Name, string(c.Intent), c.Motivation.Kind, c.Motivation.Ref,
			string(c.Motivation.Severity), ev.Source, ev.Commit, ev.Proposal) &&
		validUTF8(id.Groups...) && validUTF8(ev.EventIDs...)
}

// storedTime reports whether t reads back as itself from RFC 3339 in UTC: t == t.UTC() compares
// the representation, not the instant, so a time in another zone or with a monotonic reading
// (time.Now) fails, as reflect.DeepEqual would tell a memo hit from a miss; and a year RFC 3339
// can write.
func storedTime(t time.Time) bool {
	return t == t.UTC() && (t.IsZero() || t.Year() >= 0 && t.Year() <= 9999)
}

// validUTF8 reports whether every s is valid UTF-8, which encoding/json writes unchanged (up to
// escapes that read back the same).
func validUTF8(ss ...string) bool {
	for _, s := range ss {
		if !utf8.ValidString(s) {
			return false
		}
	}
	return true
}

// claimJSONValidUTF8 reports whether every string of cj is valid UTF-8 (encoding/json writes it
// unchanged, up to escapes that read back the same).
func claimJSONValidUTF8(cj core.ClaimJSON) bool {
	if !validUTF8(cj.Field, cj.Actor.Source, cj.Actor.Name, cj.Actor.PolicyActor, cj.Expr, cj.Intent, cj.At, cj.Expires) ||
		!validUTF8(cj.Actor.Groups...) {
		return false
	}
	if cj.Actor.ID != nil && !utf8.ValidString(*cj.Actor.ID) {
		return false
	}
	if m := cj.Motivation; m != nil && !validUTF8(m.Kind, m.Ref, m.Severity) {
		return false
	}
	if e := cj.Evidence; e != nil && (!validUTF8(e.Source, e.Commit, e.Proposal) || !validUTF8(e.EventIDs...)) {
		return false
	}
	return true
}

// afterAt is the index after the last claim of cs made at or before at.
func afterAt(cs []core.Claim, at time.Time) int {
	i := len(cs)
	for i > 0 && cs[i-1].At.UnixNano() > at.UnixNano() {
		i--
	}
	return i
}

// wroteThrough keeps, after a record ProposeIf made at the versions expect holds, each field's
// entry at the version the record moved it to, with the accepted claims added when the record
// took its event in (taken): a proposal sent again under its id moves the versions and adds no
// claim.
func (m *FieldMemo) wroteThrough(entries map[core.Field]*memoEntry, expect map[core.Field]int64, judged []Proposed, taken bool, since time.Time) {
	added := map[core.Field][]core.Claim{}
	if taken {
		for _, p := range judged {
			if p.Accepted {
				added[p.Claim.Field] = append(added[p.Claim.Field], p.Claim)
			}
		}
	}
	for f, e := range entries {
		n, err := e.wrote(expect[f], added[f], since)
		if err != nil || n == nil {
			m.drop(f) // read it next time
			continue
		}
		m.put(n)
	}
}
