package reconcile

import (
	"context"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/reconcile/driftstate"
)

const costOptimizer = "system:serviceaccount:finops:cost-optimizer"

// memoReplicas is two replicas of serve over one drift state: A judges with a FieldMemo (as serve
// does), B without, through its own connection to the same SQLite file (as another replica
// through the shared database), and oracle is A's state judged without a memo: what A must answer.
type memoReplicas struct {
	e            *env
	a, b, oracle *Reconciler
	memo         *FieldMemo
	dbA          *driftstate.DB
}

func newMemoReplicas(t *testing.T) *memoReplicas {
	t.Helper()
	e := newEnv(t)
	path := filepath.Join(t.TempDir(), "drift.db")
	open := func() *driftstate.DB {
		db, err := driftstate.Open(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	dbA, dbB := open(), open()
	now := func() time.Time { return e.now }
	m := &memoReplicas{e: e, memo: &FieldMemo{}, dbA: dbA}
	m.a = &Reconciler{State: dbA, Now: now, Memo: m.memo}
	m.oracle = &Reconciler{State: dbA, Now: now}
	m.b = &Reconciler{State: dbB, Now: now}
	return m
}

func claimBy(f core.Field, source core.IdentitySource, who, value string) core.Claim {
	return core.Claim{Field: f, Actor: core.Actor{Identity: core.Identity{Source: source, ID: who}}, Value: core.CanonicalJSONValue(value)}
}

// agrees checks that every field the memo holds at the drift state's current version holds what a
// read returns: the open claims, standing ones and the window's history as of now.
func (m *memoReplicas) agrees(t *testing.T, step string, snap Snapshot) {
	t.Helper()
	ctx := context.Background()
	m.memo.mu.Lock()
	var entries []*memoEntry
	for el := m.memo.lru.Front(); el != nil; el = el.Next() {
		entries = append(entries, el.Value.(*memoEntry))
	}
	m.memo.mu.Unlock()
	since := m.e.now.Add(-snap.Policy.Oscillation.Window)
	for _, en := range entries {
		v, err := m.dbA.Version(ctx, en.field)
		if err != nil {
			t.Fatal(err)
		}
		if v != en.version {
			continue // out of date: the versions keep it from being used
		}
		st, err := m.dbA.Standing(ctx, en.field)
		if err != nil {
			t.Fatal(err)
		}
		hist, err := m.dbA.History(ctx, en.field, since)
		if err != nil {
			t.Fatal(err)
		}
		if got := en.standing(); !reflect.DeepEqual(got, st) {
			t.Errorf("%s: %s at version %d: the memo's standing claims\n%+v\nthe drift state's\n%+v", step, en.field, v, got, st)
		}
		if got := en.historySince(since); !since.Before(en.since) && !reflect.DeepEqual(got, hist) {
			t.Errorf("%s: %s at version %d: the memo's history\n%+v\nthe drift state's\n%+v", step, en.field, v, got, hist)
		}
	}
}

// A sequence of proposals and judgements on replica A, with a memo, interleaved with writes by
// replica B on the same fields: every answer A gives is the one A gives without a memo (judged
// just before, on the same state), and every entry the memo holds at a field's current version is
// what a read of the drift state returns. B's writes reach A only through the database, so A
// answers rightly after them only because the fields' versions moved: the answer after B's
// proposal (the agent refused, the oncall engineer holding the field) is the one a memo without
// invalidation gets wrong, both where A records (the compare-and-swap fails and A judges again)
// and where it records nothing (A reads the versions again).
func TestFieldMemoAnswersAsTheDriftStateAcrossReplicas(t *testing.T) {
	ctx := context.Background()
	m := newMemoReplicas(t)
	snap := m.e.snapshot()
	agent := func(v string) core.Claim {
		c := claimBy(capacity, core.SourceAWSPrincipal, agentRole, v)
		c.Intent, c.Expires = "performance", t0.Add(3*time.Hour)
		return c
	}
	oncall := func(v string) core.Claim {
		c := claimBy(capacity, core.SourceAWSPrincipal, oncallARN, v)
		c.Intent, c.Expires = "performance", t0.Add(3*time.Hour)
		return c
	}
	hpa := func(n int) core.Claim { return claimBy(replicas, core.SourceKubeUser, hpaUser, strconv.Itoa(n)) }
	cost := func(n int) core.Claim { return claimBy(replicas, core.SourceKubeUser, costOptimizer, strconv.Itoa(n)) }

	steps := []struct {
		name    string
		replica string // "A" records with the memo, "A judge" records nothing, "B" records without
		claim   core.Claim
		advance time.Duration
		// accepted is what the judgement must say; checked on A's answers (the memo's) as well
		// as agreement with the oracle, so that a sequence that never exercises the memo's
		// mistakes does not pass unnoticed.
		accepted bool
	}{
		{"the agent asks first (a miss)", "A judge", agent("14"), 0, true},
		{"the agent asks again (a hit)", "A judge", agent("14"), time.Minute, true},
		{"another replica accepts the oncall engineer", "B", oncall("12"), time.Minute, true},
		{"the agent asks after it, recording nothing", "A judge", agent("14"), time.Minute, false},
		{"the agent asks again from memory", "A judge", agent("15"), time.Minute, false},
		{"the HPA scales (recorded, written through)", "A", hpa(4), time.Minute, true},
		{"the HPA scales again on the written-through entry", "A", hpa(5), time.Minute, true},
		{"the cost optimizer scales down (refused)", "A", cost(1), time.Minute, false},
		{"another replica's HPA scales", "B", hpa(7), time.Minute, true},
		{"the HPA scales after it (a failed compare-and-swap, judged again)", "A", hpa(6), time.Minute, true},
		{"the cost optimizer again", "A judge", cost(1), 10 * time.Minute, false},
		{"the HPA an hour later (the window moved on)", "A", hpa(3), time.Hour, true},
		{"the HPA once more", "A", hpa(4), 2 * time.Minute, true},
	}
	for i, s := range steps {
		m.e.now = m.e.now.Add(s.advance)
		id := "p" + strconv.Itoa(i)
		claims := []core.Claim{s.claim}
		if s.replica == "B" {
			out, err := m.b.Propose(ctx, snap, id, claims)
			if err != nil {
				t.Fatalf("%s: %v", s.name, err)
			}
			if out[0].Accepted != s.accepted {
				t.Fatalf("%s: replica B: accepted %v: %+v", s.name, out[0].Accepted, out[0].Verdict)
			}
			m.agrees(t, s.name, snap)
			continue
		}
		want, err := m.oracle.Judge(ctx, snap, id, claims)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		var got []Proposed
		if s.replica == "A judge" {
			got, err = m.a.Judge(ctx, snap, id, claims)
		} else {
			got, err = m.a.Propose(ctx, snap, id, claims)
		}
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: with the memo\n%+v\nwithout\n%+v", s.name, got, want)
		}
		if got[0].Accepted != s.accepted {
			t.Errorf("%s: accepted %v, want %v: %+v", s.name, got[0].Accepted, s.accepted, got[0].Verdict)
		}
		m.agrees(t, s.name, snap)
	}
	hits, misses := m.memo.Stats()
	// The misses: each field's first read, each field B moved, and the window's "before" claim when
	// the HPA's previous claim fell out of the window. Every other judgement came from memory.
	if hits < 6 || misses < 2 {
		t.Errorf("memo hits %d, misses %d: want both paths taken (at least 6 hits, 2 misses)", hits, misses)
	}
	t.Logf("memo hits %d, misses %d", hits, misses)
}

// A proposal sent again under its id moves the fields' versions but records no claim (its event
// was taken in before): the memo must not add the claim a second time.
func TestFieldMemoWritesThroughOnlyWhatWasRecorded(t *testing.T) {
	ctx := context.Background()
	m := newMemoReplicas(t)
	snap := m.e.snapshot()
	c := claimBy(replicas, core.SourceKubeUser, hpaUser, "4")
	for range 2 {
		m.e.now = m.e.now.Add(time.Minute)
		if _, err := m.a.Propose(ctx, snap, "same-id", []core.Claim{c}); err != nil {
			t.Fatal(err)
		}
		m.agrees(t, "the same proposal again", snap)
	}
	st, err := m.dbA.Claims(ctx, replicas, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(st) != 1 {
		t.Fatalf("claims recorded: %d, want 1", len(st))
	}
}

// The memo holds at most Max fields, the least recently used going first.
func TestFieldMemoIsBounded(t *testing.T) {
	m := &FieldMemo{Max: 2}
	f := func(i int) core.Field {
		return core.K8sField("apps", "Deployment", "prod", "svc-"+strconv.Itoa(i), "/spec/replicas")
	}
	for i := range 3 {
		m.put(&memoEntry{field: f(i), since: t0})
		if i == 1 {
			m.get(f(0), t0) // f(0) used again: f(1) is now the least recently used
		}
	}
	if len(m.entries) != 2 || m.get(f(1), t0) != nil || m.get(f(0), t0) == nil || m.get(f(2), t0) == nil {
		t.Fatalf("kept %d fields; want svc-0 and svc-2", len(m.entries))
	}
	big := &memoEntry{field: f(3), since: t0, history: make([]core.Claim, maxMemoClaims+1)}
	m.put(big)
	if m.get(f(3), t0) != nil {
		t.Fatal("an entry past maxMemoClaims was kept")
	}
}

// Writing through is exact: after each record (two actors taking turns on one field, one of them
// superseding its own claim, one claim dated at another's time, one before its actor's last),
// the entry the memo writes through holds what reading the field returns, at the version the
// record moved it to.
func TestFieldMemoWriteThroughMatchesARead(t *testing.T) {
	ctx := context.Background()
	db, err := driftstate.Open(ctx, ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	memo := &FieldMemo{}
	since := t0.Add(-time.Hour)
	steps := []struct {
		who string
		at  time.Duration
	}{{"a", 0}, {"b", time.Minute}, {"a", 2 * time.Minute}, {"b", 2 * time.Minute}, {"a", 90 * time.Second}, {"b", 5 * time.Minute}}
	for i, s := range steps {
		e := memo.get(replicas, since)
		if e == nil {
			if e, err = memo.load(ctx, db, db, replicas, since); err != nil {
				t.Fatal(err)
			}
		}
		c := claimBy(replicas, core.SourceKubeUser, s.who, strconv.Itoa(i))
		c.At = t0.Add(s.at)
		id := "w" + strconv.Itoa(i)
		c.Evidence = core.Evidence{Source: EvidenceProposal, EventIDs: []string{id}}
		var taken []string
		if err := db.Apply(ctx, driftstate.Batch{At: t0, Events: []string{eventKey(EvidenceProposal, id)}, Claims: []core.Claim{c},
			Expect: map[core.Field]int64{replicas: e.version}, Taken: &taken}); err != nil {
			t.Fatal(err)
		}
		memo.wroteThrough(map[core.Field]*memoEntry{replicas: e}, map[core.Field]int64{replicas: e.version},
			[]Proposed{{Claim: c, Accepted: true}}, len(taken) == 1, since)
		n := memo.get(replicas, since)
		if n == nil {
			t.Fatalf("step %d: nothing written through", i)
		}
		v, _ := db.Version(ctx, replicas)
		st, _ := db.Standing(ctx, replicas)
		hist, _ := db.History(ctx, replicas, since)
		if n.version != v || !reflect.DeepEqual(n.standing(), st) || !reflect.DeepEqual(n.historySince(since), hist) {
			t.Fatalf("step %d: written through at version %d:\n%+v\n%+v\nread at version %d:\n%+v\n%+v", i, n.version, n.standing(), n.historySince(since), v, st, hist)
		}
	}
}
