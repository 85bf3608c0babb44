package policy

import (
	"slices"
	"time"

	"github.com/parleyhq/parley/core"
)

// Freeze is a freeze window: while it is active, changes to the fields it covers are deferred
// unless their intent is in AllowIntents or AllowWhen holds for the claim.
//
// A window runs from Start to End. With Every set (daily or weekly), it recurs: the n-th occurrence
// runs from Start+n*Every to End+n*Every, for every n >= 0.
type Freeze struct {
	Name         string
	Description  string
	Start, End   time.Time
	Every        time.Duration // 0: once
	AllowIntents []core.Intent
	AllowWhen    *Expr               // over claim, field and now; nil: no exception besides AllowIntents
	Fields       []core.FieldPattern // nil: every field
}

// AppliesTo reports whether the freeze covers field f.
func (fz *Freeze) AppliesTo(f core.Field) bool { return patternsMatch(fz.Fields, f) }

// Window returns the occurrence active at t (active true), or else the next occurrence to start
// after t (active false; start and end are zero when no occurrence is left).
func (fz *Freeze) Window(t time.Time) (start, end time.Time, active bool) {
	if t.Before(fz.Start) {
		return fz.Start, fz.End, false
	}
	if fz.Every <= 0 {
		if t.Before(fz.End) {
			return fz.Start, fz.End, true
		}
		return time.Time{}, time.Time{}, false
	}
	n := t.Sub(fz.Start) / fz.Every
	s, e := fz.Start.Add(n*fz.Every), fz.End.Add(n*fz.Every)
	if t.Before(e) {
		return s, e, true
	}
	return s.Add(fz.Every), e.Add(fz.Every), false
}

// IntentAllowed reports whether intent i passes the freeze by its intent alone.
func (fz *Freeze) IntentAllowed(i core.Intent) bool { return slices.Contains(fz.AllowIntents, i) }
