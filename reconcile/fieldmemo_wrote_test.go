package reconcile

import (
	"context"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/reconcile/driftstate"
)

// longWindow is how many of the HPA's claims the entries below hold in their window: a machine-
// speed actor restating its wish every few seconds fills a window with hundreds (the memo keeps
// up to maxMemoClaims).
const longWindow = 250

// hpaEvery is how often the HPA restates its wish in the entries below.
const hpaEvery = 5 * time.Second

// hpaClaim is the HPA's k-th claim on replicas, as an admission review proposes it: already in
// stored form (UTC, no monotonic reading, a canonical value).
func hpaClaim(k int) core.Claim {
	c := claimBy(replicas, core.SourceKubeUser, hpaUser, strconv.Itoa(3+k%5))
	c.At = t0.Add(time.Duration(k) * hpaEvery)
	c.Evidence = core.Evidence{Source: EvidenceProposal, EventIDs: []string{"hpa-" + strconv.Itoa(k)}}
	return c
}

// windowAt is the oscillation window's start when the HPA makes its k-th claim: longWindow claims
// back, so that the window stays that long as the HPA goes on.
func windowAt(k int) time.Time { return t0.Add(time.Duration(k-longWindow+1) * hpaEvery) }

// longEntry reads replicas into a memo entry after the cost optimizer's claim and the HPA's
// first longWindow claims, recorded in a real drift state, each one closing the HPA's last.
func longEntry(t testing.TB) *memoEntry {
	t.Helper()
	ctx := context.Background()
	db, err := driftstate.Open(ctx, ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	cost := claimBy(replicas, core.SourceKubeUser, costOptimizer, "1")
	cost.At = t0.Add(-time.Second)
	claims := []core.Claim{cost}
	for k := range longWindow {
		claims = append(claims, hpaClaim(k))
	}
	for _, c := range claims {
		var events []string // the claim's event, so that the batch takes it in
		for _, id := range c.Evidence.EventIDs {
			events = append(events, eventKey(c.Evidence.Source, id))
		}
		if err := db.Apply(ctx, driftstate.Batch{At: c.At, Events: events, Claims: []core.Claim{c}}); err != nil {
			t.Fatal(err)
		}
	}
	e, err := (&FieldMemo{}).load(ctx, db, db, replicas, windowAt(longWindow-1))
	if err != nil {
		t.Fatal(err)
	}
	if len(e.history) != longWindow+1 || len(e.open) != 2 {
		t.Fatalf("read %d claims of history, %d open; want %d and 2", len(e.history), len(e.open), longWindow+1)
	}
	return e
}

// writeOn records the HPA's k-th claim on e, as wroteThrough does after the review's record.
func writeOn(t testing.TB, e *memoEntry, k int) *memoEntry {
	n, err := e.wrote(e.version, []core.Claim{hpaClaim(k)}, windowAt(k))
	if err != nil || n == nil {
		t.Fatalf("claim %d: wrote %v, %v", k, n, err)
	}
	return n
}

// Recording a review into the memo costs the same however long the field's window: it used to
// copy the whole history (and the open claims) for each review, O(window) bytes, now it appends
// to the array its predecessor shares. The budget, a few claims' size per review, is the new
// entry, the open claims it copies (the HPA's new claim closes its last) and the history's copies
// amortised; one copy of a long window per review is many times that.
func TestFieldMemoWroteCostsNoCopyOfTheWindow(t *testing.T) {
	e := longEntry(t)
	const reviews = 200
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for k := longWindow; k < longWindow+reviews; k++ {
		e = writeOn(t, e, k)
	}
	runtime.ReadMemStats(&after)
	claimSize := reflect.TypeFor[core.Claim]().Size()
	perReview := (after.TotalAlloc - before.TotalAlloc) / reviews
	if budget := 16 * uint64(claimSize); perReview > budget {
		t.Errorf("wrote allocated %d bytes per review on a window of %d claims (%d bytes each); want at most %d",
			perReview, longWindow, claimSize, budget)
	}
	t.Logf("%d bytes per review (a claim is %d bytes; the window %d claims)", perReview, claimSize, longWindow)
	// Still the window a read returns: the HPA's last longWindow claims and the one before them.
	if got, want := len(e.historySince(e.since)), longWindow+1; got != want {
		t.Fatalf("history holds %d claims, want %d", got, want)
	}
	if last := e.history[len(e.history)-1]; !reflect.DeepEqual(last, hpaClaim(longWindow+reviews-1)) {
		t.Fatalf("last claim %+v", last)
	}
}

// The HPA restating its wish on a field with a long window, recorded into the memo.
func BenchmarkMemoWrote(b *testing.B) {
	e := longEntry(b)
	k := longWindow
	b.ReportAllocs()
	for b.Loop() {
		e = writeOn(b, e, k)
		k++
	}
}

// Entries are read by other reviews while successors are made from them, and two successors of
// one entry both try to append into the array they share: each successor holds exactly its own
// claims, and what every entry holds never changes (run with -race: no slot any entry sees is
// written).
func TestFieldMemoWroteConcurrentlyOnOneEntry(t *testing.T) {
	e := writeOn(t, longEntry(t), longWindow) // a written-through entry: its array has room
	wantHistory, wantOpen := slices.Clone(e.history), slices.Clone(e.open)
	const writers, each = 8, 20
	chains := make([][]*memoEntry, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			n := e
			for i := range each {
				// Each writer's claims come after e's and its own earlier ones: recorded last.
				c := hpaClaim(longWindow + 1 + w*each + i)
				var err error
				if n, err = n.wrote(n.version, []core.Claim{c}, e.since); err != nil || n == nil {
					t.Errorf("writer %d: %v, %v", w, n, err)
					return
				}
				chains[w] = append(chains[w], n)
			}
		})
		wg.Go(func() { // a reader of e meanwhile, as a review judging on it
			for range each {
				if h := e.historySince(e.since); len(h) != len(wantHistory) {
					t.Errorf("reader: history of %d claims, want %d", len(h), len(wantHistory))
				}
				_ = e.standing()
			}
		})
	}
	wg.Wait()
	if !reflect.DeepEqual(e.history, wantHistory) || !reflect.DeepEqual(e.open, wantOpen) {
		t.Fatal("an entry changed after successors were made from it")
	}
	for w, chain := range chains {
		for i, n := range chain {
			want := wantHistory
			for j := range i + 1 {
				want = append(slices.Clip(want), hpaClaim(longWindow+1+w*each+j))
			}
			if !reflect.DeepEqual(n.history, want) {
				t.Fatalf("writer %d, successor %d: history does not end in its own claims: last %+v", w, i, n.history[len(n.history)-1])
			}
			if last := n.open[len(n.open)-1]; !reflect.DeepEqual(last, want[len(want)-1]) || len(n.open) != 2 {
				t.Fatalf("writer %d, successor %d: open claims %+v", w, i, n.open)
			}
		}
	}
}

// A successor that records nothing (a proposal sent again) shares its predecessor's array and
// ends where it ends: of the two, only the first extended may append in place, or each would
// write its claim into the same slot.
func TestFieldMemoWroteSharesOneSlotOnce(t *testing.T) {
	e := writeOn(t, longEntry(t), longWindow)
	again, err := e.wrote(e.version, nil, e.since) // the same proposal again: versions move, no claim
	if err != nil || again == nil {
		t.Fatal(err)
	}
	add := func(n *memoEntry, k int) *memoEntry { // within n's window: nothing trimmed
		m, err := n.wrote(n.version, []core.Claim{hpaClaim(k)}, n.since)
		if err != nil || m == nil {
			t.Fatal(err)
		}
		return m
	}
	a := add(again, longWindow+1)
	b := add(e, longWindow+2)
	for name, n := range map[string]*memoEntry{"after the repeat": a, "after the first": b} {
		if len(n.history) != len(e.history)+1 || !reflect.DeepEqual(n.history[:len(e.history)], e.history) {
			t.Fatalf("%s: history of %d claims does not extend the entry's %d", name, len(n.history), len(e.history))
		}
	}
	if a.history[len(a.history)-1].At != hpaClaim(longWindow+1).At || b.history[len(b.history)-1].At != hpaClaim(longWindow+2).At {
		t.Fatalf("successors' last claims at %v and %v: one wrote over the other", a.history[len(a.history)-1].At, b.history[len(b.history)-1].At)
	}
	if len(again.history) != len(e.history) {
		t.Fatalf("the repeat's history grew to %d claims", len(again.history))
	}
}
