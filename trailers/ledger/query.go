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
		b := &Branch{l: l, name: c}
		_, err := b.branchID(context.Background())
		if err == nil {
			return b, nil
		}
		if !errors.Is(err, ErrNotIndexed) {
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
	cur, ok := currentOf(es)
	return cur, ok, nil
}

func currentOf(es []Entry) (core.Claim, bool) {
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
	return cur, ok
}

// Entries is History with each commit's details.
func (b *Branch) Entries(f core.Field) ([]Entry, error) {
	return b.EntriesContext(context.Background(), f)
}

// EntriesContext is Entries, stopping when ctx is done.
func (b *Branch) EntriesContext(ctx context.Context, f core.Field) ([]Entry, error) {
	id, err := b.branchID(ctx)
	if err != nil {
		return nil, err
	}
	addr := f.String()
	yields, err := b.yieldPatterns(ctx, id)
	if err != nil {
		return nil, err
	}
	rows, err := b.l.query(ctx, `SELECT `+entryColumns+`
		FROM fields f JOIN claims c ON c.branch = ? AND c.field = f.id
		JOIN commits m ON m.branch = c.branch AND m.seq = c.seq
		LEFT JOIN credits k ON k.hash = m.hash
		WHERE f.addr = ? ORDER BY c.seq, c.kind`, id, addr)
	if err != nil {
		return nil, fmt.Errorf("ledger %s: history of %s: %w", b.l.path, addr, err)
	}
	defer rows.Close()
	var own []storedEntry
	for rows.Next() {
		var se storedEntry
		if err := se.scan(rows, nil); err != nil {
			return nil, fmt.Errorf("ledger %s: history of %s: %w", b.l.path, addr, err)
		}
		own = append(own, se)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger %s: history of %s: %w", b.l.path, addr, err)
	}
	return assemble(f, own, yields.matching(f))
}

// FieldHistory is one field's claims, oldest first, as EachField hands them out.
type FieldHistory struct {
	Field   core.Field
	Entries []Entry
}

// Current is the claim Git holds at the end of the history; see Branch.Current.
func (h FieldHistory) Current() (core.Claim, bool) { return currentOf(h.Entries) }

// CountFields returns how many fields EachField would hand to fn for p, reading only addresses.
func (b *Branch) CountFields(ctx context.Context, p core.FieldPattern) (int, error) {
	n := 0
	err := b.eachAddress(ctx, p, func(core.Field) error { n++; return nil })
	return n, err
}

// eachAddress calls fn for every field on the branch with claims that p matches, in address order.
func (b *Branch) eachAddress(ctx context.Context, p core.FieldPattern, fn func(core.Field) error) error {
	id, err := b.branchID(ctx)
	if err != nil {
		return err
	}
	rows, err := b.l.db.QueryContext(ctx, `SELECT f.addr FROM fields f
		WHERE f.pattern = 0 AND EXISTS (SELECT 1 FROM claims c WHERE c.branch = ? AND c.field = f.id) ORDER BY f.addr`, id)
	if err != nil {
		return fmt.Errorf("ledger %s: list fields: %w", b.l.path, err)
	}
	defer rows.Close()
	all := p.String() == ""
	for rows.Next() {
		var addr string
		if err := rows.Scan(&addr); err != nil {
			return fmt.Errorf("ledger %s: list fields: %w", b.l.path, err)
		}
		f, err := core.ParseField(addr)
		if err != nil {
			return fmt.Errorf("ledger %s: stored field %q: %w", b.l.path, addr, err)
		}
		if all || p.Match(f) {
			if err := fn(f); err != nil {
				return err
			}
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("ledger %s: list fields: %w", b.l.path, err)
	}
	return nil
}

// EachField calls fn with the history of every field on the branch that has claims and that p
// matches (the zero pattern matches all), in address order, and stops at fn's first error or when
// ctx is done. It reads the index in one pass, in the order of its indexes: memory holds one
// field's history at a time besides the branch's commits, so its cost is proportional to what it
// hands out, not to fields times claims.
func (b *Branch) EachField(ctx context.Context, p core.FieldPattern, fn func(FieldHistory) error) error {
	id, err := b.branchID(ctx)
	if err != nil {
		return err
	}
	yields, err := b.yieldPatterns(ctx, id)
	if err != nil {
		return err
	}
	// Each commit's details are read once, not joined to each of its claims: a branch has far
	// fewer commits than claims (onedr0p/home-ops: 27,559 and 315,446), and the join was most of
	// the time the read took.
	commits, err := b.commitTable(ctx, id)
	if err != nil {
		return err
	}
	// fields drives the loop through its address index, and each field's claims come from the
	// claims primary key (branch, field, seq, kind) already in order: SQLite sorts nothing.
	rows, err := b.l.db.QueryContext(ctx, `SELECT f.addr, c.seq, c.kind, c.has_value, c.vjson, c.vexpr
		FROM fields f CROSS JOIN claims c ON c.branch = ? AND c.field = f.id
		WHERE f.pattern = 0 ORDER BY f.addr, c.seq, c.kind`, id)
	if err != nil {
		return fmt.Errorf("ledger %s: read fields: %w", b.l.path, err)
	}
	defer rows.Close()
	all := p.String() == ""
	var (
		addr, prev, vjson, vexpr string
		seqV, kindV, hasV        any // integers come as int64 in an any: scanning them costs nothing
		field                    core.Field
		skip                     bool
		own                      []storedEntry
	)
	flush := func() error {
		if prev == "" || skip {
			return nil
		}
		es, err := assemble(field, own, yields.matching(field))
		if err != nil {
			return err
		}
		return fn(FieldHistory{Field: field, Entries: es})
	}
	for rows.Next() {
		if err := rows.Scan(&addr, &seqV, &kindV, &hasV, &vjson, &vexpr); err != nil {
			return fmt.Errorf("ledger %s: read fields: %w", b.l.path, err)
		}
		if addr != prev {
			if err := flush(); err != nil {
				return err
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			prev, own = addr, own[:0]
			if field, err = core.ParseField(addr); err != nil {
				return fmt.Errorf("ledger %s: stored field %q: %w", b.l.path, addr, err)
			}
			skip = !all && !p.Match(field)
		}
		if skip {
			continue
		}
		seq, kind, has, err := claimIntegers(seqV, kindV, hasV)
		if err != nil {
			return fmt.Errorf("ledger %s: stored claim on %s: %w", b.l.path, addr, err)
		}
		c, ok := commits.at(seq)
		if !ok {
			continue // as the join did: a claim is shown with its commit or not at all
		}
		v, err := storedValue(vjson, vexpr)
		if err != nil {
			return fmt.Errorf("ledger %s: value of %s at %s: %w", b.l.path, addr, c.Evidence.Commit, err)
		}
		se := storedEntry{seq: int(seq), kind: kind, hasV: has, value: v, e: *c}
		se.e.Evidence.Explicit = kind != kindChange
		own = append(own, se)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("ledger %s: read fields: %w", b.l.path, err)
	}
	return flush()
}

// claimIntegers reads a claim row's seq, kind and has_value as the driver hands them over.
func claimIntegers(seq, kind, has any) (int64, claimKind, bool, error) {
	s, ok1 := seq.(int64)
	k, ok2 := kind.(int64)
	h, ok3 := has.(int64)
	if !ok1 || !ok2 || !ok3 {
		return 0, 0, false, fmt.Errorf("seq %v, kind %v, has_value %v: not integers", seq, kind, has)
	}
	return s, claimKind(k), h != 0, nil
}

// commitTable holds the part of an Entry each commit of a branch gives all its claims, read once
// for a pass over the branch's fields.
type commitTable struct {
	entries []Entry
	bySeq   map[int64]int
}

func (t commitTable) at(seq int64) (*Entry, bool) {
	i, ok := t.bySeq[seq]
	if !ok {
		return nil, false
	}
	return &t.entries[i], true
}

// commitTable reads the branch's commits with the credits that vouch for them.
func (b *Branch) commitTable(ctx context.Context, branch int64) (commitTable, error) {
	rows, err := b.l.db.QueryContext(ctx, `SELECT m.seq, `+commitColumns+`
		FROM commits m LEFT JOIN credits k ON k.hash = m.hash
		WHERE m.branch = ? ORDER BY m.seq`, branch)
	if err != nil {
		return commitTable{}, fmt.Errorf("ledger %s: read commits: %w", b.l.path, err)
	}
	defer rows.Close()
	t := commitTable{bySeq: map[int64]int{}}
	var seq int64
	var cr commitRow
	dest := append([]any{&seq}, cr.dest()...)
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return commitTable{}, fmt.Errorf("ledger %s: read commits: %w", b.l.path, err)
		}
		t.bySeq[seq] = len(t.entries)
		t.entries = append(t.entries, cr.entry())
	}
	if err := rows.Err(); err != nil {
		return commitTable{}, fmt.Errorf("ledger %s: read commits: %w", b.l.path, err)
	}
	return t, nil
}

// commitColumns are the columns commitRow reads, from commits m left-joined to credits k.
const commitColumns = `m.hash, m.author_name, m.author_email, m.at,
	m.subject, m.intent, m.intent_declared, m.mot_kind, m.mot_ref, m.mot_severity, m.expires, m.pr, m.parents, m.sig_key, m.sig_problem,
	coalesce(k.source, ''), coalesce(k.id, ''), coalesce(k.how, '')`

// entryColumns are the columns storedEntry.scan reads, from claims c joined to commits m.
const entryColumns = `c.seq, c.kind, c.has_value, c.vjson, c.vexpr, ` + commitColumns

// commitRow is one commit's row as the index holds it.
type commitRow struct {
	hash, name, email, subj, intent, mkind, mref, msev, sigKey, sigProblem, crSource, crID, crHow string
	at, expires                                                                                   int64
	declared                                                                                      bool
	pr, parents                                                                                   int
}

// dest returns where rows.Scan puts commitColumns.
func (r *commitRow) dest() []any {
	return []any{&r.hash, &r.name, &r.email, &r.at, &r.subj, &r.intent, &r.declared,
		&r.mkind, &r.mref, &r.msev, &r.expires, &r.pr, &r.parents, &r.sigKey, &r.sigProblem, &r.crSource, &r.crID, &r.crHow}
}

// entry is what the commit gives each of its claims: all but the field, the value and what the
// claim's kind says (Changed, Yield, Evidence.Explicit).
func (r *commitRow) entry() Entry {
	e := Entry{
		Claim: core.Claim{
			Actor: core.Actor{Identity: core.Identity{Source: core.SourceGitAuthor, ID: r.email, Name: r.name,
				Proof: core.Proof{Key: r.sigKey, Problem: r.sigProblem}}},
			Intent:     core.Intent(r.intent),
			Motivation: core.Motivation{Kind: r.mkind, Ref: r.mref, Severity: core.Severity(r.msev)},
			At:         time.Unix(r.at, 0).UTC(),
			Evidence:   core.Evidence{Source: "git", Commit: r.hash, PR: r.pr},
		},
		IntentDeclared: r.declared,
		Subject:        r.subj,
		Parents:        r.parents,
	}
	if r.expires != 0 {
		e.Expires = time.Unix(r.expires, 0).UTC()
	}
	if r.crID != "" && r.sigKey == "" {
		// Someone vouches for the commit whose signature proves nothing: it is credited to them.
		e.Actor.Identity = core.Identity{Source: core.IdentitySource(r.crSource), ID: r.crID, Name: r.name, Proof: core.Proof{Vouched: r.crHow}}
	}
	return e
}

// storedEntry is one claim row as the index holds it, before the history it belongs to gives a
// valueless Claim trailer the value Git held.
type storedEntry struct {
	seq   int
	kind  claimKind
	hasV  bool
	value core.Value
	e     Entry
}

func (se *storedEntry) scan(rows *sql.Rows, addr *string) error {
	var vjson, vexpr string
	var cr commitRow
	dest := append([]any{&se.seq, &se.kind, &se.hasV, &vjson, &vexpr}, cr.dest()...)
	if addr != nil {
		dest = append([]any{addr}, dest...)
	}
	if err := rows.Scan(dest...); err != nil {
		return err
	}
	v, err := storedValue(vjson, vexpr)
	if err != nil {
		return fmt.Errorf("value at %s: %w", cr.hash, err)
	}
	se.value = v
	se.e = cr.entry()
	se.e.Evidence.Explicit = se.kind != kindChange
	return nil
}

// assemble merges a field's own claim rows with the yields of patterns that match it, in commit
// order (a pattern's yield sorts after the field's own claims of the same commit, as kinds do), and
// gives each Claim trailer without a value the value Git held at that commit.
func assemble(f core.Field, own, yields []storedEntry) ([]Entry, error) {
	if len(own) == 0 && len(yields) == 0 {
		return nil, nil
	}
	out := make([]Entry, 0, len(own)+len(yields))
	var gitValue core.Value // the value Git holds at the entry being read
	i, j := 0, 0
	for i < len(own) || j < len(yields) {
		var se storedEntry
		if j == len(yields) || (i < len(own) && (own[i].seq < yields[j].seq || own[i].seq == yields[j].seq && own[i].kind <= yields[j].kind)) {
			se = own[i]
			i++
		} else {
			se = yields[j]
			j++
		}
		e := se.e
		e.Field = f
		switch se.kind {
		case kindChange, kindChangeClaimed:
			e.Changed = true
			e.Value = se.value
			gitValue = se.value
		case kindClaim:
			e.Value = se.value
			if !se.hasV {
				e.Value = gitValue
			}
		case kindYield:
			e.Yield = true
		}
		out = append(out, e)
	}
	return out, nil
}

// yieldSet holds the branch's yields of field patterns: few in any real history, so they are read
// once per query and matched against each field in memory.
type yieldSet []struct {
	pattern core.FieldPattern
	rows    []storedEntry
}

// matching returns the yields whose pattern matches f, in commit order.
func (ys yieldSet) matching(f core.Field) []storedEntry {
	var out []storedEntry
	for _, y := range ys {
		if y.pattern.Match(f) {
			out = append(out, y.rows...)
		}
	}
	if len(ys) > 1 {
		slices.SortStableFunc(out, func(a, b storedEntry) int { return a.seq - b.seq })
	}
	return out
}

// yieldPatterns reads the branch's pattern yields through the partial index on patterns.
func (b *Branch) yieldPatterns(ctx context.Context, branch int64) (yieldSet, error) {
	rows, err := b.l.query(ctx, `SELECT f.addr, `+entryColumns+`
		FROM fields f INDEXED BY fields_patterns CROSS JOIN claims c ON c.branch = ? AND c.field = f.id
		JOIN commits m ON m.branch = c.branch AND m.seq = c.seq
		LEFT JOIN credits k ON k.hash = m.hash
		WHERE f.pattern = 1 ORDER BY f.addr, c.seq, c.kind`, branch)
	if err != nil {
		return nil, fmt.Errorf("ledger %s: read yield patterns: %w", b.l.path, err)
	}
	defer rows.Close()
	var out yieldSet
	var addr string
	for rows.Next() {
		var se storedEntry
		if err := se.scan(rows, &addr); err != nil {
			return nil, fmt.Errorf("ledger %s: read yield patterns: %w", b.l.path, err)
		}
		if n := len(out); n == 0 || out[n-1].pattern.String() != addr {
			p, err := core.ParseFieldPattern(addr)
			if err != nil {
				continue // stored from a parsed pattern; unreadable only if the grammar changed
			}
			out = append(out, struct {
				pattern core.FieldPattern
				rows    []storedEntry
			}{pattern: p})
		}
		out[len(out)-1].rows = append(out[len(out)-1].rows, se)
	}
	return out, rows.Err()
}

// Fields returns the fields on the branch that have claims and that p matches, sorted by address.
// The zero pattern matches every field.
func (b *Branch) Fields(p core.FieldPattern) ([]core.Field, error) {
	var out []core.Field
	err := b.eachAddress(context.Background(), p, func(f core.Field) error { out = append(out, f); return nil })
	return out, err
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
	rows, err := b.l.query(ctx, `SELECT id FROM branches WHERE name = ?`, b.name)
	if err != nil {
		return 0, fmt.Errorf("ledger %s: find branch %s: %w", b.l.path, b.name, err)
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return 0, fmt.Errorf("ledger %s: find branch %s: %w", b.l.path, b.name, err)
		}
		return 0, fmt.Errorf("ledger %s: %s: %w", b.l.path, b.name, ErrNotIndexed)
	}
	var id int64
	if err := rows.Scan(&id); err != nil {
		return 0, fmt.Errorf("ledger %s: find branch %s: %w", b.l.path, b.name, err)
	}
	return id, nil
}
