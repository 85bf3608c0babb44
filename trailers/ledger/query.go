package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/parleyhq/parley/core"
)

// Entry is a claim with what the ledger knows about the commit that made it.
type Entry struct {
	core.Claim
	// Changed is true when the commit changed the field: the claim's value is what the commit wrote
	// (absent for a removal). False for a Claim trailer on a field the commit left alone, and for
	// yields.
	Changed bool
	// IntentDeclared is false when the commit had no Intent trailer and the intent is the default,
	// baseline.
	IntentDeclared bool
	Subject        string // the commit's first line
	Parents        int    // the commit's parent count: 2 or more for a merge
}

// Problem is something the ledger could not take in as it stands, recorded against a commit.
type Problem struct {
	Commit  string // full commit hash
	Path    string // the file, for a problem reading a file; "" for a trailer problem
	Line    int    // 1-based line in the commit message, when known; 0 otherwise
	Key     string // the trailer key, for a trailer problem
	Value   string // the trailer value, for a trailer problem
	Message string
}

func (p Problem) String() string {
	var b strings.Builder
	if len(p.Commit) >= 12 {
		b.WriteString(p.Commit[:12])
	} else {
		b.WriteString(p.Commit)
	}
	if p.Path != "" {
		b.WriteString(" " + p.Path)
	}
	if p.Line > 0 {
		fmt.Fprintf(&b, " line %d", p.Line)
	}
	if p.Key != "" {
		b.WriteString(" " + p.Key)
	}
	if p.Value != "" {
		fmt.Fprintf(&b, " %q", p.Value)
	}
	return b.String() + ": " + p.Message
}

// Branch answers queries about one indexed branch.
type Branch struct {
	l    *Ledger
	name string
}

// Branch returns the queries for an indexed branch, named as Update accepts it. It fails with
// ErrNotIndexed when no Update has indexed the branch.
func (l *Ledger) Branch(name string) (*Branch, error) {
	var candidates []string
	if strings.HasPrefix(name, "refs/") {
		candidates = []string{name}
	} else {
		candidates = []string{"refs/heads/" + name, "refs/remotes/" + name}
	}
	for _, c := range candidates {
		var id int64
		err := l.db.QueryRow(`SELECT id FROM branches WHERE name = ?`, c).Scan(&id)
		if err == nil {
			return &Branch{l: l, name: c}, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("ledger %s: find branch %s: %w", l.path, name, err)
		}
	}
	return nil, fmt.Errorf("ledger %s: %s: %w", l.path, name, ErrNotIndexed)
}

// Name returns the branch's full ref name.
func (b *Branch) Name() string { return b.name }

// current returns the branch the Ledger's query methods answer for: the last one updated, or else
// the repository's HEAD branch.
func (l *Ledger) current() (*Branch, error) {
	l.mu.Lock()
	name := l.branch
	l.mu.Unlock()
	if name == "" {
		def, err := l.DefaultBranch()
		if err != nil {
			return nil, err
		}
		name = def
	}
	return l.Branch(name)
}

// History returns every claim on f, oldest first, on the branch last updated (or HEAD's branch).
func (l *Ledger) History(f core.Field) ([]core.Claim, error) {
	b, err := l.current()
	if err != nil {
		return nil, err
	}
	return b.History(f)
}

// Current returns the claim Git holds now for f; see Branch.Current.
func (l *Ledger) Current(f core.Field) (core.Claim, bool, error) {
	b, err := l.current()
	if err != nil {
		return core.Claim{}, false, err
	}
	return b.Current(f)
}

// Fields returns the fields with claims that p matches; see Branch.Fields.
func (l *Ledger) Fields(p core.FieldPattern) ([]core.Field, error) {
	b, err := l.current()
	if err != nil {
		return nil, err
	}
	return b.Fields(p)
}

// Entries returns the claims on f with their commits' details; see Branch.Entries.
func (l *Ledger) Entries(f core.Field) ([]Entry, error) {
	b, err := l.current()
	if err != nil {
		return nil, err
	}
	return b.Entries(f)
}

// Problems returns the problems recorded on the branch; see Branch.Problems.
func (l *Ledger) Problems() ([]Problem, error) {
	b, err := l.current()
	if err != nil {
		return nil, err
	}
	return b.Problems()
}

// History returns every claim on f, oldest first: implicit claims from changes, Claim trailers, and
// yields (including yields of patterns that match f). A Claim trailer without a value claims the
// value Git held for f at that commit.
func (b *Branch) History(f core.Field) ([]core.Claim, error) {
	es, err := b.Entries(f)
	if err != nil {
		return nil, err
	}
	out := make([]core.Claim, len(es))
	for i, e := range es {
		out[i] = e.Claim
	}
	return out, nil
}

// Current returns the claim Git holds now for f: the latest claim whose value Git took. That is the
// latest change to f, or a later Claim trailer that claims the value Git already held (the actor
// takes the value over). Claims for values Git does not hold and yields do not change it. When the
// field was removed, the removal is returned (its Value is absent). ok is false when the ledger holds
// no change to f.
func (b *Branch) Current(f core.Field) (core.Claim, bool, error) {
	es, err := b.Entries(f)
	if err != nil {
		return core.Claim{}, false, err
	}
	var cur core.Claim
	ok := false
	for _, e := range es {
		switch {
		case e.Changed:
			cur, ok = e.Claim, true
		case ok && !e.Yield && e.Value.Equal(cur.Value):
			cur = e.Claim
		}
	}
	return cur, ok, nil
}

// Entries is History with each commit's details.
func (b *Branch) Entries(f core.Field) ([]Entry, error) {
	ctx := context.Background()
	id, err := b.branchID(ctx)
	if err != nil {
		return nil, err
	}
	addr := f.String()
	ids := []any{}
	var fid int64
	switch err := b.l.db.QueryRowContext(ctx, `SELECT id FROM fields WHERE addr = ?`, addr).Scan(&fid); {
	case err == nil:
		ids = append(ids, fid)
	case !errors.Is(err, sql.ErrNoRows):
		return nil, fmt.Errorf("ledger %s: find field %s: %w", b.l.path, addr, err)
	}
	patterns, err := b.matchingPatterns(ctx, f)
	if err != nil {
		return nil, err
	}
	ids = append(ids, patterns...)
	if len(ids) == 0 {
		return nil, nil
	}
	q := `SELECT c.kind, c.has_value, c.vjson, c.vexpr, m.hash, m.author_name, m.author_email, m.at, m.subject,
		m.intent, m.intent_declared, m.mot_kind, m.mot_ref, m.mot_severity, m.expires, m.pr, m.parents
		FROM claims c JOIN commits m ON m.branch = c.branch AND m.seq = c.seq
		WHERE c.branch = ? AND c.field IN (?` + strings.Repeat(", ?", len(ids)-1) + `)
		ORDER BY c.seq, c.kind`
	rows, err := b.l.db.QueryContext(ctx, q, append([]any{id}, ids...)...)
	if err != nil {
		return nil, fmt.Errorf("ledger %s: history of %s: %w", b.l.path, addr, err)
	}
	defer rows.Close()
	var out []Entry
	var gitValue core.Value // the value Git holds at the entry being read
	for rows.Next() {
		var kind claimKind
		var hasValue, declared bool
		var vjson, vexpr, hash, name, email, subj, intent, mkind, mref, msev string
		var at, expires int64
		var pr, parents int
		if err := rows.Scan(&kind, &hasValue, &vjson, &vexpr, &hash, &name, &email, &at, &subj, &intent, &declared,
			&mkind, &mref, &msev, &expires, &pr, &parents); err != nil {
			return nil, fmt.Errorf("ledger %s: history of %s: %w", b.l.path, addr, err)
		}
		v, err := storedValue(vjson, vexpr)
		if err != nil {
			return nil, fmt.Errorf("ledger %s: history of %s at %s: %w", b.l.path, addr, hash, err)
		}
		e := Entry{
			Claim: core.Claim{
				Field:      f,
				Actor:      core.Actor{Identity: core.Identity{Source: core.SourceGitAuthor, ID: email, Name: name}},
				Intent:     core.Intent(intent),
				Motivation: core.Motivation{Kind: mkind, Ref: mref, Severity: core.Severity(msev)},
				At:         time.Unix(at, 0).UTC(),
				Evidence:   core.Evidence{Source: "git", Commit: hash, PR: pr, Explicit: kind != kindChange},
			},
			IntentDeclared: declared,
			Subject:        subj,
			Parents:        parents,
		}
		if expires != 0 {
			e.Expires = time.Unix(expires, 0).UTC()
		}
		switch kind {
		case kindChange, kindChangeClaimed:
			e.Changed = true
			e.Value = v
			gitValue = v
		case kindClaim:
			e.Value = v
			if !hasValue {
				e.Value = gitValue
			}
		case kindYield:
			e.Yield = true
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger %s: history of %s: %w", b.l.path, addr, err)
	}
	return out, nil
}

// matchingPatterns returns the ids of the yield patterns that match f.
func (b *Branch) matchingPatterns(ctx context.Context, f core.Field) ([]any, error) {
	rows, err := b.l.db.QueryContext(ctx, `SELECT id, addr FROM fields WHERE pattern = 1`)
	if err != nil {
		return nil, fmt.Errorf("ledger %s: read yield patterns: %w", b.l.path, err)
	}
	defer rows.Close()
	var ids []any
	for rows.Next() {
		var id int64
		var text string
		if err := rows.Scan(&id, &text); err != nil {
			return nil, fmt.Errorf("ledger %s: read yield patterns: %w", b.l.path, err)
		}
		p, err := core.ParseFieldPattern(text)
		if err != nil {
			continue // stored from a parsed pattern; unreadable only if the grammar changed
		}
		if p.Match(f) {
			ids = append(ids, id)
		}
	}
	return ids, rows.Err()
}

func storedValue(vjson, vexpr string) (core.Value, error) {
	switch {
	case vexpr != "":
		return core.ExprValue(vexpr), nil
	case vjson != "":
		return core.ParseJSONValue([]byte(vjson))
	}
	return core.Value{}, nil
}

// Fields returns the fields on the branch that have claims and that p matches, sorted by address.
// The zero pattern matches every field.
func (b *Branch) Fields(p core.FieldPattern) ([]core.Field, error) {
	ctx := context.Background()
	id, err := b.branchID(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := b.l.db.QueryContext(ctx, `SELECT addr FROM fields
		WHERE pattern = 0 AND id IN (SELECT DISTINCT field FROM claims WHERE branch = ?) ORDER BY addr`, id)
	if err != nil {
		return nil, fmt.Errorf("ledger %s: list fields: %w", b.l.path, err)
	}
	defer rows.Close()
	all := p.String() == ""
	var out []core.Field
	for rows.Next() {
		var addr string
		if err := rows.Scan(&addr); err != nil {
			return nil, fmt.Errorf("ledger %s: list fields: %w", b.l.path, err)
		}
		f, err := core.ParseField(addr)
		if err != nil {
			return nil, fmt.Errorf("ledger %s: stored field %q: %w", b.l.path, addr, err)
		}
		if all || p.Match(f) {
			out = append(out, f)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger %s: list fields: %w", b.l.path, err)
	}
	slices.SortFunc(out, func(a, b core.Field) int { return strings.Compare(a.String(), b.String()) })
	return out, nil
}

// Problems returns the problems recorded on the branch, oldest commit first.
func (b *Branch) Problems() ([]Problem, error) {
	ctx := context.Background()
	id, err := b.branchID(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := b.l.db.QueryContext(ctx, `SELECT m.hash, p.path, p.line, p.key, p.value, p.message
		FROM problems p JOIN commits m ON m.branch = p.branch AND m.seq = p.seq
		WHERE p.branch = ? ORDER BY p.seq, p.rowid`, id)
	if err != nil {
		return nil, fmt.Errorf("ledger %s: list problems: %w", b.l.path, err)
	}
	defer rows.Close()
	var out []Problem
	for rows.Next() {
		var p Problem
		if err := rows.Scan(&p.Commit, &p.Path, &p.Line, &p.Key, &p.Value, &p.Message); err != nil {
			return nil, fmt.Errorf("ledger %s: list problems: %w", b.l.path, err)
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// Checkpoint returns the tip the branch was last updated to and how many commits are indexed.
func (b *Branch) Checkpoint() (tip string, commits int, err error) {
	err = b.l.db.QueryRow(`SELECT tip, commits FROM branches WHERE name = ?`, b.name).Scan(&tip, &commits)
	if err != nil {
		return "", 0, fmt.Errorf("ledger %s: checkpoint of %s: %w", b.l.path, b.name, err)
	}
	return tip, commits, nil
}

func (b *Branch) branchID(ctx context.Context) (int64, error) {
	var id int64
	err := b.l.db.QueryRowContext(ctx, `SELECT id FROM branches WHERE name = ?`, b.name).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("ledger %s: %s: %w", b.l.path, b.name, ErrNotIndexed)
	}
	if err != nil {
		return 0, fmt.Errorf("ledger %s: find branch %s: %w", b.l.path, b.name, err)
	}
	return id, nil
}
