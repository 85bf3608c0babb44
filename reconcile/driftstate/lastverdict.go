package driftstate

import (
	"slices"
	"sync"
)

// lastVerdicts keeps, per field, what saveVerdict reads of the field's newest verdict record (its
// row, signature and evidence), as a committed write left it, labelled with the version that write
// moved the field to. An admission webhook records the HPA's scale of the same field under the
// same verdict hundreds of times a minute; each record's read of the row it is about to update
// (and the decoding of its evidence) was a third of the record's statements.
//
// The label is what makes a kept record safe to use: every write of a field's verdicts moves the
// field's version on (applyTx), versions only grow, and each version is made by exactly one
// committed transaction. So a batch whose compare-and-swap moved the field from version v
// (Batch.Expect) may use a record kept at v: it is the newest as of v, and nothing was written
// since, whoever wrote (another replica on PostgreSQL, another process on the SQLite file).
// Anything else (a field the batch did not swap, a record kept at another version) is read.
type lastVerdicts struct {
	mu sync.Mutex
	m  map[string]lastVerdict // by field
}

// lastVerdict is a field's newest verdict record at version.
type lastVerdict struct {
	version  int64
	seq      int64
	sig      string
	evidence []string // clipped, and never changed in place: appendEvidence copies
}

// maxLastVerdicts bounds the kept records: a busy cluster's rescaled fields, a few KiB each.
const maxLastVerdicts = 8192

// get returns field's record if it was kept at version.
func (l *lastVerdicts) get(field string, version int64) (lastVerdict, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	v, ok := l.m[field]
	if !ok || v.version != version {
		return lastVerdict{}, false
	}
	return v, true
}

// keep stores what a committed transaction wrote, unless a later version of a field is kept
// already (two transactions' callers may get here in either order).
func (l *lastVerdicts) keep(written map[string]lastVerdict) {
	if len(written) == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[string]lastVerdict{}
	}
	for f, v := range written {
		if had, ok := l.m[f]; ok && had.version >= v.version {
			continue
		}
		if _, ok := l.m[f]; !ok && len(l.m) >= maxLastVerdicts {
			for old := range l.m { // any one: a field dropped is read again next time
				delete(l.m, old)
				break
			}
		}
		v.evidence = slices.Clip(v.evidence)
		l.m[f] = v
	}
}

// txVerdicts is one batch's view for saveVerdict: the fields its compare-and-swap moved, from
// which version, and the newest verdict records it wrote on them (at that version plus one), to
// be kept once its transaction commits.
type txVerdicts struct {
	swapped map[string]int64
	written map[string]lastVerdict
}
