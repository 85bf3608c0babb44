package ledger

import (
	"fmt"
	"strings"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/core/fielddiff"
	"github.com/parleyhq/parley/trailers"
)

// change is a field's change in one commit, aggregated over all the files the commit touched, so
// that an object moved from one file to another is no change at all.
type change struct {
	addr     string
	old, new core.Value
}

// extract turns a raw commit into a record: trailers into a declaration, file versions into field
// changes. It keeps no state between commits: each file's old and new versions come parsed from
// the parse workers (which parse a version once while the parse cache holds it).
func extract(rc rawCommit) *record {
	c := rc.c
	ts := trailers.Parse(c.Message, trailers.Options{NoDivider: true})
	decl, tprobs := trailers.Interpret(ts, c.Committer.When)
	rec := &record{
		hash:        c.Hash.String(),
		authorName:  c.Author.Name,
		authorEmail: c.Author.Email,
		at:          c.Committer.When,
		subject:     subject(c.Message),
		intent:      decl.Intent,
		motivation:  decl.Motivation,
		expires:     decl.Expires,
		pr:          decl.PR,
		parents:     len(c.ParentHashes),
		proof:       rc.proof,
		problems:    rc.problems,
	}
	rec.intentDeclared = rec.intent != ""
	if !rec.intentDeclared {
		rec.intent = core.IntentBaseline
	}
	if rec.pr == 0 {
		if n, ok := trailers.PRNumber(c.Message, ts); ok {
			rec.pr = n
		}
	}
	for _, p := range tprobs {
		rec.problems = append(rec.problems, Problem{Line: p.Line, Key: p.Key, Value: p.Value, Message: p.Reason})
	}

	var changes []change
	var index map[string]int // address -> position in changes, once a second file's changes come
	files := 0
	for _, f := range rc.files {
		if f.newUnread {
			continue // the reader could not read this version and said so; nothing is known about it
		}
		if f.newErr != nil {
			// The next version is diffed against nothing (its old side does not parse either), in a
			// full replay as in an incremental update, so the ledger does not depend on when
			// updates ran.
			rec.problems = append(rec.problems, Problem{Path: f.path, Message: fmt.Sprintf("fields not read: %v", f.newErr)})
			continue
		}
		diff := fielddiff.DiffSnapshots(f.oldSnap, f.newSnap)
		if len(diff) == 0 {
			continue
		}
		// One file's changes have distinct addresses; only a second file's can meet them (an object
		// moved between files), so most commits need no map.
		if files++; files == 2 {
			index = make(map[string]int, len(changes)+len(diff))
			for i, ch := range changes {
				index[ch.addr] = i
			}
		}
		for _, ch := range diff {
			if index == nil {
				changes = append(changes, change{addr: ch.Addr, old: ch.Old, new: ch.New})
				continue
			}
			i, ok := index[ch.Addr]
			if !ok {
				index[ch.Addr] = len(changes)
				changes = append(changes, change{addr: ch.Addr, old: ch.Old, new: ch.New})
				continue
			}
			e := &changes[i]
			if e.old.Absent() {
				e.old = ch.Old
			}
			if e.new.Absent() {
				e.new = ch.New
			}
		}
	}

	for _, ch := range changes {
		if ch.old.Equal(ch.new) {
			continue
		}
		if rec.claims == nil {
			rec.claims = make([]claimRow, 0, len(changes)+len(decl.Claims))
		}
		rec.claims = append(rec.claims, claimRow{addr: ch.addr, kind: kindChange, hasValue: true, value: ch.new})
	}
	var claimed map[string]int // addr -> index in rec.claims; only Claim trailers look it up
	if len(decl.Claims) > 0 {
		claimed = make(map[string]int, len(rec.claims)+len(decl.Claims))
		for i, row := range rec.claims {
			claimed[row.addr] = i
		}
	}
	for _, st := range decl.Claims {
		addr := st.Field.String()
		if i, ok := claimed[addr]; ok {
			row := &rec.claims[i]
			switch row.kind {
			case kindChange:
				row.kind = kindChangeClaimed
				if st.HasValue && !st.Value.Equal(row.value) {
					rec.problems = append(rec.problems, Problem{Key: "Claim", Message: fmt.Sprintf(
						"Claim wants %s = %s but the commit sets it to %s; the ledger records what the commit set",
						addr, st.Value, row.value)})
				}
			default:
				rec.problems = append(rec.problems, Problem{Key: "Claim", Message: fmt.Sprintf("%s is claimed more than once; the last Claim counts", addr)})
				row.hasValue, row.value = st.HasValue, st.Value
			}
			continue
		}
		claimed[addr] = len(rec.claims)
		rec.claims = append(rec.claims, claimRow{addr: addr, kind: kindClaim, hasValue: st.HasValue, value: st.Value})
	}
	yielded := map[string]bool{}
	for _, p := range decl.Yields {
		addr, pattern := yieldAddr(p)
		if yielded[addr] {
			continue
		}
		yielded[addr] = true
		rec.claims = append(rec.claims, claimRow{addr: addr, pattern: pattern, kind: kindYield})
	}
	return rec
}

// yieldAddr returns the stored address of a Yield pattern: a pattern without wildcards that names a
// pointer is a plain field, stored under its canonical address so that History finds it with the
// field's other claims. Without "#" a pattern means every field of the objects it names.
func yieldAddr(p core.FieldPattern) (string, bool) {
	text := p.String()
	if strings.Contains(text, "*") || !strings.Contains(text, "#") {
		return text, true
	}
	if f, err := core.ParseField(text); err == nil {
		return f.String(), false
	}
	return text, true
}

// subject returns the first line of a commit message.
func subject(msg string) string {
	line, _, _ := strings.Cut(strings.TrimLeft(msg, "\n"), "\n")
	return strings.TrimSpace(line)
}
