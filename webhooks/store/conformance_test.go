package store

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/pgtest"
)

// testStore is what the conformance tests need of an engine: the contract, and the methods
// both implementations add to it.
type testStore interface {
	Deliveries
	Close() error
	MaxAttempts() int
}

// opener opens a new, empty store of one engine, closed when the test ends. maxAttempts 0
// means the engine's default.
type opener func(t *testing.T, maxAttempts int) testStore

type conformanceEngine struct {
	name string
	open opener
}

func conformanceEngines() []conformanceEngine {
	return []conformanceEngine{
		{"sqlite", func(t *testing.T, maxAttempts int) testStore {
			// SyncNormal for speed: the semantics tested here do not depend on fsync.
			return openTest(t, Options{MaxAttempts: maxAttempts, Sync: SyncNormal})
		}},
		{"postgres", func(t *testing.T, maxAttempts int) testStore {
			return openPostgresTest(t, pgtest.DSN(t), PostgresOptions{MaxAttempts: maxAttempts})
		}},
	}
}

// openPostgresTest opens a Postgres store on dsn, closed when the test ends.
func openPostgresTest(t *testing.T, dsn string, opts PostgresOptions) *Postgres {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := OpenPostgres(ctx, dsn, opts)
	if err != nil {
		t.Fatalf("OpenPostgres: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// TestConformance runs the Deliveries contract's tests against every engine: each engine must
// pass every test, with the same expectations.
func TestConformance(t *testing.T) {
	tests := []struct {
		name string
		run  func(t *testing.T, engine string, open opener)
	}{
		{"PutDedupe", conformPutDedupe},
		{"PutDedupesBodies", conformPutDedupesBodies},
		{"PutDedupesBodiesPerScope", conformPutDedupesBodiesPerScope},
		{"PutRefusesIncompleteDelivery", conformPutRefusesIncompleteDelivery},
		{"PutRefusesInvalidScope", conformPutRefusesInvalidScope},
		{"BodyAndTimesRoundTrip", conformBodyAndTimesRoundTrip},
		{"ScopeRoundTrip", conformScopeRoundTrip},
		{"ClaimRefusesBadArguments", conformClaimRefusesBadArguments},
		{"ClaimOldestFirstAndOnlyWhenDue", conformClaimOldestFirstAndOnlyWhenDue},
		{"LeaseExclusiveUntilExpiry", conformLeaseExclusiveUntilExpiry},
		{"RetriesThenDeadLetterAndReplay", conformRetriesThenDeadLetterAndReplay},
		{"PermanentDeadLetterAndRelease", conformPermanentDeadLetterAndRelease},
		{"ExpiredLeaseOnLastAttemptDeadLetters", conformExpiredLeaseOnLastAttemptDeadLetters},
		{"Stats", conformStats},
		{"PruneForgetsOnlyOldDoneDeliveries", conformPruneForgetsOnlyOldDoneDeliveries},
		{"ConcurrentPutLosesNothing", conformConcurrentPutLosesNothing},
		{"GaveUpPutsDoNotAbortOthers", conformGaveUpPutsDoNotAbortOthers},
		{"ConcurrentClaimsNeverShareADelivery", conformConcurrentClaimsNeverShareADelivery},
		{"CallsAfterCloseReturnErrClosed", conformCallsAfterCloseReturnErrClosed},
	}
	for _, e := range conformanceEngines() {
		t.Run(e.name, func(t *testing.T) {
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) { tc.run(t, e.name, e.open) })
			}
		})
	}
}

func delivery(id string, at time.Time) Delivery {
	return Delivery{Source: SourceGitHub, ID: id, Event: "pull_request", Body: []byte(`{"id":"` + id + `"}`), ReceivedAt: at}
}

func mustPut(t *testing.T, s Deliveries, d Delivery) {
	t.Helper()
	ok, err := s.Put(context.Background(), d)
	if err != nil || !ok {
		t.Fatalf("Put(%s) = %v, %v; want inserted", d.Key(), ok, err)
	}
}

func mustClaim(t *testing.T, s Deliveries, worker string, lease time.Duration, now time.Time) Delivery {
	t.Helper()
	d, ok, err := s.Claim(context.Background(), worker, lease, now)
	if err != nil || !ok {
		t.Fatalf("Claim(%s at %v) = %v, %v; want a delivery", worker, now, ok, err)
	}
	return d
}

func mustNotClaim(t *testing.T, s Deliveries, worker string, now time.Time) {
	t.Helper()
	d, ok, err := s.Claim(context.Background(), worker, time.Minute, now)
	if err != nil || ok {
		t.Fatalf("Claim(%s at %v) = %s, %v, %v; want nothing due", worker, now, d.Key(), ok, err)
	}
}

func conformPutDedupe(t *testing.T, _ string, open opener) {
	s := open(t, 0)
	ctx := context.Background()
	cases := []struct {
		name string
		d    Delivery
		want bool
	}{
		{"first", delivery("a", t0), true},
		{"same key again", delivery("a", t0.Add(time.Second)), false},
		{"same id other source", Delivery{Source: SourceFlux, ID: "a", Event: "kustomization", ReceivedAt: t0}, true},
		{"other id", delivery("b", t0), true},
	}
	for _, tc := range cases {
		got, err := s.Put(ctx, tc.d)
		if err != nil {
			t.Fatalf("%s: Put: %v", tc.name, err)
		}
		if got != tc.want {
			t.Errorf("%s: inserted = %v, want %v", tc.name, got, tc.want)
		}
	}
	// The duplicate changed nothing: the first ReceivedAt stands.
	d, err := s.Get(ctx, Key{SourceGitHub, "a"})
	if err != nil {
		t.Fatal(err)
	}
	if !d.ReceivedAt.Equal(t0) || string(d.Body) != `{"id":"a"}` || d.State != StatePending {
		t.Errorf("Get a = %+v, want the first put unchanged", d)
	}
	// An empty body is stored as empty, not refused.
	if _, err := s.Put(ctx, Delivery{Source: SourceGitHub, ID: "empty", Event: "ping", ReceivedAt: t0}); err != nil {
		t.Errorf("Put with nil body: %v", err)
	}
	if _, err := s.Get(ctx, Key{SourceGitHub, "nope"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get unknown: err = %v, want ErrNotFound", err)
	}
}

func conformPutRefusesIncompleteDelivery(t *testing.T, _ string, open opener) {
	s := open(t, 0)
	cases := []struct {
		name string
		d    Delivery
		want string
	}{
		{"no source", Delivery{ID: "x", Event: "e", ReceivedAt: t0}, "source"},
		{"no id", Delivery{Source: "github", Event: "e", ReceivedAt: t0}, "id"},
		{"no event", Delivery{Source: "github", ID: "x", ReceivedAt: t0}, "event"},
		{"no time", Delivery{Source: "github", ID: "x", Event: "e"}, "received-at"},
	}
	for _, tc := range cases {
		_, err := s.Put(context.Background(), tc.d)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Put err = %v, want one naming %q", tc.name, err, tc.want)
		}
	}
	if st, err := s.Stats(context.Background(), t0); err != nil || st.Pending != 0 {
		t.Errorf("Stats after refused puts = %+v, %v; want nothing stored", st, err)
	}
}

func conformPutRefusesInvalidScope(t *testing.T, _ string, open opener) {
	s := open(t, 0)
	d := delivery("a", t0)
	d.Scope = "-x"
	if _, err := s.Put(context.Background(), d); err == nil || !strings.Contains(err.Error(), `"-x"`) {
		t.Errorf("Put with scope -x: err = %v, want a refusal naming it", err)
	}
	if st, err := s.Stats(context.Background(), t0); err != nil || st.Pending != 0 {
		t.Errorf("Stats = %+v, %v; want nothing stored", st, err)
	}
}

// conformBodyAndTimesRoundTrip: every byte value survives in a body, and times come back to the
// nanosecond, in UTC, whatever the zone they were given in.
func conformBodyAndTimesRoundTrip(t *testing.T, _ string, open opener) {
	s := open(t, 0)
	ctx := context.Background()
	body := make([]byte, 0, 512)
	for i := range 512 {
		body = append(body, byte(i))
	}
	at := time.Date(2026, 11, 22, 13, 4, 5, 123456789, time.FixedZone("CET", 3600))
	mustPut(t, s, Delivery{Source: SourceCloudTrail, ID: "bin", Event: "AwsApiCall", Body: body, ReceivedAt: at})
	d, err := s.Get(ctx, Key{SourceCloudTrail, "bin"})
	if err != nil {
		t.Fatal(err)
	}
	if string(d.Body) != string(body) {
		t.Errorf("body came back as %d bytes %q..., want the 512 bytes put", len(d.Body), d.Body[:min(len(d.Body), 16)])
	}
	if !d.ReceivedAt.Equal(at) || d.ReceivedAt.Location() != time.UTC || !d.NextAttemptAt.Equal(at) {
		t.Errorf("ReceivedAt %v, NextAttemptAt %v; want both %v, in UTC", d.ReceivedAt, d.NextAttemptAt, at)
	}
	if d.Event != "AwsApiCall" || d.Attempts != 0 || d.LeaseOwner != "" || !d.LeaseUntil.IsZero() || d.LastError != "" {
		t.Errorf("fresh delivery = %+v", d)
	}
	now := at.Add(time.Second)
	c := mustClaim(t, s, "w", 1500*time.Millisecond, now)
	if !c.LeaseUntil.Equal(now.Add(1500*time.Millisecond)) || c.LeaseUntil.Location() != time.UTC {
		t.Errorf("LeaseUntil = %v, want %v in UTC", c.LeaseUntil, now.Add(1500*time.Millisecond))
	}
	mustPut(t, s, Delivery{Source: SourceCloudTrail, ID: "empty", Event: "ping", Body: []byte{}, ReceivedAt: at})
	if d, err := s.Get(ctx, Key{SourceCloudTrail, "empty"}); err != nil || len(d.Body) != 0 {
		t.Errorf("empty body: %q, %v", d.Body, err)
	}
}

// conformScopeRoundTrip: the Scope given to Put comes back from every read: Get, Claim and
// DeadLetters; an unscoped delivery reads back with Scope "".
func conformScopeRoundTrip(t *testing.T, _ string, open opener) {
	s := open(t, 0)
	ctx := context.Background()
	scoped := Delivery{Source: SourceFlux, ID: "flux-1", Event: "event", Body: []byte(`{"n":1}`), ReceivedAt: t0, Scope: "prod-eu.1"}
	unscoped := Delivery{Source: SourceFlux, ID: "flux-2", Event: "event", Body: []byte(`{"n":2}`), ReceivedAt: t0.Add(time.Second)}
	mustPut(t, s, scoped)
	mustPut(t, s, unscoped)

	for _, want := range []Delivery{scoped, unscoped} {
		d, err := s.Get(ctx, want.Key())
		if err != nil {
			t.Fatal(err)
		}
		if d.Scope != want.Scope {
			t.Errorf("Get(%s).Scope = %q, want %q", want.Key(), d.Scope, want.Scope)
		}
	}

	// The same key under another scope is a duplicate: the first scope stands.
	again := scoped
	again.Scope = "staging"
	if ok, err := s.Put(ctx, again); err != nil || ok {
		t.Fatalf("Put same key, other scope = %v, %v; want a duplicate", ok, err)
	}

	now := t0.Add(time.Minute)
	for _, want := range []Delivery{scoped, unscoped} { // oldest first
		d := mustClaim(t, s, "w", time.Minute, now)
		if d.Key() != want.Key() || d.Scope != want.Scope {
			t.Fatalf("Claim = %s scope %q, want %s scope %q", d.Key(), d.Scope, want.Key(), want.Scope)
		}
		if err := s.DeadLetter(ctx, d.Key(), "w", errors.New("permanent")); err != nil {
			t.Fatal(err)
		}
	}
	dead, err := s.DeadLetters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(dead) != 2 || dead[0].Scope != scoped.Scope || dead[1].Scope != "" {
		t.Fatalf("DeadLetters = %+v, want %s (scope %q) then %s (no scope)", dead, scoped.Key(), scoped.Scope, unscoped.Key())
	}
}

func conformClaimRefusesBadArguments(t *testing.T, _ string, open opener) {
	s := open(t, 0)
	mustPut(t, s, delivery("a", t0))
	if _, ok, err := s.Claim(context.Background(), "", time.Minute, t0); err == nil || ok {
		t.Errorf("Claim by an unnamed worker = %v, %v; want an error", ok, err)
	}
	if _, ok, err := s.Claim(context.Background(), "w", 0, t0); err == nil || ok {
		t.Errorf("Claim with lease 0 = %v, %v; want an error", ok, err)
	}
	if got := s.MaxAttempts(); got != 8 {
		t.Errorf("default MaxAttempts = %d, want 8", got)
	}
	// Refused claims took nothing.
	if d := mustClaim(t, s, "w", time.Minute, t0); d.Attempts != 1 {
		t.Errorf("Attempts = %d after refused claims, want 1", d.Attempts)
	}
}

func conformClaimOldestFirstAndOnlyWhenDue(t *testing.T, _ string, open opener) {
	s := open(t, 0)
	ctx := context.Background()
	for i, id := range []string{"first", "second", "third"} {
		mustPut(t, s, delivery(id, t0.Add(time.Duration(i)*time.Second)))
	}
	// Deliveries become due at their ReceivedAt: nothing is due before the first arrived.
	mustNotClaim(t, s, "w", t0.Add(-time.Second))

	now := t0.Add(time.Minute)
	d := mustClaim(t, s, "w1", time.Minute, now)
	if d.ID != "first" || d.Attempts != 1 || d.LeaseOwner != "w1" || !d.LeaseUntil.Equal(now.Add(time.Minute)) {
		t.Fatalf("first claim = %+v", d)
	}
	// "first" fails and is scheduled ten minutes out: "second" and "third" go before it.
	if out, err := s.Fail(ctx, d.Key(), "w1", errors.New("boom"), now.Add(10*time.Minute)); err != nil || out != Retrying {
		t.Fatalf("Fail = %v, %v", out, err)
	}
	want := []string{"second", "third"}
	for _, id := range want {
		got := mustClaim(t, s, "w1", time.Minute, now)
		if got.ID != id {
			t.Fatalf("claim = %s, want %s", got.ID, id)
		}
		if err := s.Complete(ctx, got.Key(), "w1"); err != nil {
			t.Fatal(err)
		}
	}
	mustNotClaim(t, s, "w1", now.Add(10*time.Minute-time.Nanosecond))
	d = mustClaim(t, s, "w1", time.Minute, now.Add(10*time.Minute))
	if d.ID != "first" || d.Attempts != 2 || d.LastError != "boom" {
		t.Fatalf("retry claim = %+v, want first on attempt 2 with its last error", d)
	}
}

func conformLeaseExclusiveUntilExpiry(t *testing.T, _ string, open opener) {
	s := open(t, 0)
	ctx := context.Background()
	mustPut(t, s, delivery("a", t0))

	a := mustClaim(t, s, "A", 30*time.Second, t0)
	mustNotClaim(t, s, "B", t0.Add(29*time.Second))

	// A stalls past its lease; B takes over (crash recovery works the same way).
	b := mustClaim(t, s, "B", 30*time.Second, t0.Add(30*time.Second))
	if b.ID != "a" || b.Attempts != 2 || b.LeaseOwner != "B" {
		t.Fatalf("reclaim = %+v", b)
	}
	for name, op := range map[string]func() error{
		"complete":    func() error { return s.Complete(ctx, a.Key(), "A") },
		"release":     func() error { return s.Release(ctx, a.Key(), "A") },
		"dead-letter": func() error { return s.DeadLetter(ctx, a.Key(), "A", errors.New("x")) },
		"fail": func() error {
			_, err := s.Fail(ctx, a.Key(), "A", errors.New("x"), t0)
			return err
		},
	} {
		if err := op(); !errors.Is(err, ErrLeaseLost) {
			t.Errorf("%s by stale owner: err = %v, want ErrLeaseLost", name, err)
		}
	}
	// The stale owner's attempts changed nothing.
	if got, err := s.Get(ctx, a.Key()); err != nil || got.LeaseOwner != "B" || got.Attempts != 2 || got.State != StatePending || got.LastError != "" {
		t.Errorf("after the stale owner's calls: %+v, %v", got, err)
	}
	if err := s.Complete(ctx, b.Key(), "B"); err != nil {
		t.Fatalf("Complete by owner: %v", err)
	}
	if err := s.Complete(ctx, b.Key(), "B"); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("second Complete: err = %v, want ErrLeaseLost", err)
	}
	unknown := Key{SourceGitHub, "nope"}
	if err := s.Complete(ctx, unknown, "B"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Complete unknown: err = %v, want ErrNotFound", err)
	}
	if _, err := s.Fail(ctx, unknown, "B", errors.New("x"), t0); !errors.Is(err, ErrNotFound) {
		t.Errorf("Fail unknown: err = %v, want ErrNotFound", err)
	}
	got, err := s.Get(ctx, a.Key())
	if err != nil || got.State != StateDone || got.LeaseOwner != "" {
		t.Errorf("after complete: %+v, %v", got, err)
	}
	mustNotClaim(t, s, "C", t0.Add(time.Hour))
}

func conformRetriesThenDeadLetterAndReplay(t *testing.T, _ string, open opener) {
	s := open(t, 3)
	ctx := context.Background()
	mustPut(t, s, delivery("a", t0))
	now := t0
	want := []FailOutcome{Retrying, Retrying, DeadLettered}
	for i, w := range want {
		d := mustClaim(t, s, "w", time.Minute, now)
		if d.Attempts != i+1 {
			t.Fatalf("attempt %d: Attempts = %d", i+1, d.Attempts)
		}
		now = now.Add(time.Duration(1<<i) * time.Second)
		out, err := s.Fail(ctx, d.Key(), "w", fmt.Errorf("failure %d", i+1), now)
		if err != nil || out != w {
			t.Fatalf("attempt %d: Fail = %v, %v; want %v", i+1, out, err, w)
		}
	}
	mustNotClaim(t, s, "w", now.Add(time.Hour))
	dead, err := s.DeadLetters(ctx)
	if err != nil || len(dead) != 1 || dead[0].ID != "a" || dead[0].LastError != "failure 3" || dead[0].State != StateDead {
		t.Fatalf("DeadLetters = %+v, %v", dead, err)
	}
	if st, err := s.Stats(ctx, now); err != nil || st.Dead != 1 || st.Pending != 0 {
		t.Fatalf("Stats = %+v, %v", st, err)
	}

	if err := s.Replay(ctx, Key{SourceGitHub, "a"}, now); err != nil {
		t.Fatalf("Replay: %v", err)
	}
	if dead, err := s.DeadLetters(ctx); err != nil || len(dead) != 0 {
		t.Errorf("DeadLetters after Replay = %+v, %v; want none", dead, err)
	}
	d := mustClaim(t, s, "w", time.Minute, now)
	if d.Attempts != 1 {
		t.Errorf("after replay Attempts = %d, want 1", d.Attempts)
	}
	if err := s.Replay(ctx, d.Key(), now); !errors.Is(err, ErrNotDead) {
		t.Errorf("Replay pending: err = %v, want ErrNotDead", err)
	}
	if err := s.Replay(ctx, Key{SourceGitHub, "nope"}, now); !errors.Is(err, ErrNotFound) {
		t.Errorf("Replay unknown: err = %v, want ErrNotFound", err)
	}
}

// conformPermanentDeadLetterAndRelease: DeadLetter kills a delivery at once, Release gives the
// lease and the attempt back; a long error is stored cut short, a nil one as "unknown error".
func conformPermanentDeadLetterAndRelease(t *testing.T, _ string, open opener) {
	s := open(t, 5)
	ctx := context.Background()
	mustPut(t, s, delivery("perm", t0))
	mustPut(t, s, delivery("drained", t0.Add(time.Second)))
	mustPut(t, s, delivery("long", t0.Add(2*time.Second)))

	d := mustClaim(t, s, "w", time.Minute, t0.Add(time.Minute))
	if err := s.DeadLetter(ctx, d.Key(), "w", errors.New("malformed payload")); err != nil {
		t.Fatal(err)
	}
	got, _ := s.Get(ctx, d.Key())
	if got.State != StateDead || got.Attempts != 1 || got.LastError != "malformed payload" || got.LeaseOwner != "" {
		t.Errorf("after DeadLetter: %+v", got)
	}

	d = mustClaim(t, s, "w", time.Minute, t0.Add(time.Minute))
	if err := s.Release(ctx, d.Key(), "w"); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx, d.Key(), "w"); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("second Release: err = %v, want ErrLeaseLost", err)
	}
	// Released: claimable at once by anyone, and the attempt was given back.
	d = mustClaim(t, s, "other", time.Minute, t0.Add(time.Minute))
	if d.ID != "drained" || d.Attempts != 1 {
		t.Errorf("after Release: %+v, want drained on attempt 1", d)
	}

	d = mustClaim(t, s, "w", time.Minute, t0.Add(time.Minute))
	if err := s.DeadLetter(ctx, d.Key(), "w", errors.New(strings.Repeat("e", 3*maxErrorLen))); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Get(ctx, d.Key()); len(got.LastError) > maxErrorLen+8 || !strings.HasPrefix(got.LastError, "eee") {
		t.Errorf("a long error was stored as %d bytes, want at most about %d", len(got.LastError), maxErrorLen)
	}
	if err := s.Replay(ctx, d.Key(), t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	d = mustClaim(t, s, "w", time.Minute, t0.Add(time.Minute))
	if _, err := s.Fail(ctx, d.Key(), "w", nil, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Get(ctx, d.Key()); got.LastError != "unknown error" {
		t.Errorf("Fail with a nil cause stored %q, want \"unknown error\"", got.LastError)
	}
}

func conformExpiredLeaseOnLastAttemptDeadLetters(t *testing.T, _ string, open opener) {
	s := open(t, 2)
	mustPut(t, s, delivery("poison", t0))
	// The worker "dies" twice while holding the lease.
	mustClaim(t, s, "w1", time.Second, t0)
	d := mustClaim(t, s, "w2", time.Second, t0.Add(time.Second))
	if d.Attempts != 2 {
		t.Fatalf("Attempts = %d", d.Attempts)
	}
	// Not before the lease expired.
	mustNotClaim(t, s, "w3", t0.Add(time.Second+time.Second/2))
	if got, _ := s.Get(context.Background(), d.Key()); got.State != StatePending {
		t.Fatalf("poison dead-lettered while its lease was live: %+v", got)
	}
	mustNotClaim(t, s, "w3", t0.Add(time.Hour))
	got, err := s.Get(context.Background(), d.Key())
	if err != nil || got.State != StateDead || !strings.Contains(got.LastError, "lease of w2 expired on attempt 2 of 2") || got.LeaseOwner != "" {
		t.Errorf("poison after lease expiry = %+v, %v", got, err)
	}
	if dead, err := s.DeadLetters(context.Background()); err != nil || len(dead) != 1 {
		t.Errorf("DeadLetters = %+v, %v; want poison", dead, err)
	}
}

func conformStats(t *testing.T, _ string, open opener) {
	s := open(t, 1)
	ctx := context.Background()
	st, err := s.Stats(ctx, t0)
	if err != nil || st != (Stats{}) {
		t.Fatalf("empty Stats = %+v, %v", st, err)
	}
	for i := range 4 {
		mustPut(t, s, delivery(fmt.Sprint(i), t0.Add(time.Duration(i)*time.Second)))
	}
	now := t0.Add(time.Minute)
	d := mustClaim(t, s, "w", time.Minute, now) // 0: will be dead
	if _, err := s.Fail(ctx, d.Key(), "w", errors.New("x"), now); err != nil {
		t.Fatal(err)
	}
	d = mustClaim(t, s, "w", time.Minute, now) // 1: done
	if err := s.Complete(ctx, d.Key(), "w"); err != nil {
		t.Fatal(err)
	}
	mustClaim(t, s, "w", time.Minute, now) // 2: leased
	st, err = s.Stats(ctx, now)
	if err != nil {
		t.Fatal(err)
	}
	want := Stats{Pending: 2, Leased: 1, Dead: 1, OldestPending: t0.Add(2 * time.Second)}
	if st != want {
		t.Errorf("Stats = %+v, want %+v", st, want)
	}
	// Once the lease expires the delivery is still pending but no longer leased.
	if st, _ := s.Stats(ctx, now.Add(time.Hour)); st.Leased != 0 || st.Pending != 2 {
		t.Errorf("Stats after lease expiry = %+v", st)
	}
}

func conformPruneForgetsOnlyOldDoneDeliveries(t *testing.T, _ string, open opener) {
	s := open(t, 1)
	ctx := context.Background()
	for _, id := range []string{"done", "dead", "pending"} {
		mustPut(t, s, delivery(id, t0))
	}
	d := mustClaim(t, s, "w", time.Minute, t0)
	if err := s.Complete(ctx, d.Key(), "w"); err != nil {
		t.Fatal(err)
	}
	d = mustClaim(t, s, "w", time.Minute, t0)
	if _, err := s.Fail(ctx, d.Key(), "w", errors.New("x"), t0); err != nil {
		t.Fatal(err)
	}
	// Completed "now" (wall clock): a cut-off in the past keeps it.
	if n, err := s.Prune(ctx, time.Now().Add(-time.Hour), time.Now().Add(-time.Hour)); err != nil || n != 0 {
		t.Fatalf("Prune(an hour ago) = %d, %v; want 0", n, err)
	}
	// Dead letters are kept longer than done deliveries: a zero cut-off keeps them all.
	if n, err := s.Prune(ctx, time.Now().Add(time.Second), time.Time{}); err != nil || n != 1 {
		t.Fatalf("Prune(now, dead kept) = %d, %v; want 1", n, err)
	}
	cases := []struct {
		id   string
		want error
	}{{"done", ErrNotFound}, {"dead", nil}, {"pending", nil}}
	for _, tc := range cases {
		if _, err := s.Get(ctx, Key{SourceGitHub, tc.id}); !errors.Is(err, tc.want) {
			t.Errorf("Get %s after prune: err = %v, want %v", tc.id, err, tc.want)
		}
	}
	// Forgotten: a redelivery of the pruned ID is stored again.
	if ok, err := s.Put(ctx, delivery("done", t0)); err != nil || !ok {
		t.Errorf("Put pruned id = %v, %v; want inserted", ok, err)
	}
	// The dead letter goes once its own, longer, retention is over; the pending one never.
	if n, err := s.Prune(ctx, time.Time{}, time.Now().Add(time.Second)); err != nil || n != 1 {
		t.Fatalf("Prune(dead before now) = %d, %v; want 1", n, err)
	}
	if _, err := s.Get(ctx, Key{SourceGitHub, "dead"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get dead after its prune: err = %v, want ErrNotFound", err)
	}
	if _, err := s.Get(ctx, Key{SourceGitHub, "pending"}); err != nil {
		t.Errorf("Get pending after every prune: %v", err)
	}
}

// conformPutDedupesBodiesPerScope: the body digest of a scoped delivery covers its scope. The
// same body for two clusters, or for a cluster and no cluster, is stored each time (a cluster
// that posts another's body first must not make the rightful post a duplicate); the same body
// for the same cluster under another ID is still a duplicate naming the stored delivery.
func conformPutDedupesBodiesPerScope(t *testing.T, _ string, open opener) {
	s := open(t, 0)
	ctx := context.Background()
	body := []byte(`{"involvedObject":{"kind":"Deployment","name":"web"}}`)
	put := func(id, scope string) (bool, error) {
		return s.Put(ctx, Delivery{Source: SourceFlux, ID: id, Event: "event", Body: body, ReceivedAt: t0, Scope: scope})
	}
	for _, d := range []struct{ id, scope string }{{"a@staging", "staging"}, {"a@prod", "prod"}, {"a", ""}} {
		if ok, err := put(d.id, d.scope); !ok || err != nil {
			t.Fatalf("Put %s (scope %q) with a body stored under other scopes = %v, %v; want inserted", d.id, d.scope, ok, err)
		}
		got, err := s.Get(ctx, Key{SourceFlux, d.id})
		if err != nil || got.Scope != d.scope {
			t.Fatalf("Get %s = scope %q, %v; want scope %q", d.id, got.Scope, err, d.scope)
		}
	}
	ok, err := put("b@prod", "prod")
	var dup *DuplicateBodyError
	if ok || !errors.As(err, &dup) || dup.Stored != (Key{SourceFlux, "a@prod"}) {
		t.Fatalf("Put b@prod with a@prod's body and scope = %v, %v; want a duplicate of flux/a@prod", ok, err)
	}
	ok, err = put("b", "")
	if ok || !errors.As(err, &dup) || dup.Stored != (Key{SourceFlux, "a"}) {
		t.Fatalf("Put unscoped b with unscoped a's body = %v, %v; want a duplicate of flux/a", ok, err)
	}
}

// conformPutDedupesBodies: a body already stored under another ID of the same source is a
// duplicate naming the stored delivery (a replayed GitHub delivery under a new
// X-GitHub-Delivery, or relabelled with another X-GitHub-Event); the same body from another
// source, and empty bodies, are not compared.
func conformPutDedupesBodies(t *testing.T, _ string, open opener) {
	s := open(t, 0)
	ctx := context.Background()
	mustPut(t, s, delivery("original", t0))
	for _, d := range []Delivery{
		{Source: SourceGitHub, ID: "replayed", Event: "pull_request", Body: []byte(`{"id":"original"}`), ReceivedAt: t0.Add(time.Hour)},
		{Source: SourceGitHub, ID: "relabelled", Event: "push", Body: []byte(`{"id":"original"}`), ReceivedAt: t0.Add(time.Hour)},
	} {
		ok, err := s.Put(ctx, d)
		var dup *DuplicateBodyError
		if ok || !errors.As(err, &dup) || !errors.Is(err, ErrDuplicateBody) || dup.Stored != (Key{SourceGitHub, "original"}) {
			t.Fatalf("Put %s with the stored body = %v, %v; want a duplicate of github/original", d.ID, ok, err)
		}
		if !strings.Contains(err.Error(), "body already stored as original") {
			t.Errorf("error %q does not name the stored delivery", err)
		}
		if _, err := s.Get(ctx, d.Key()); !errors.Is(err, ErrNotFound) {
			t.Errorf("Get %s: %v; want nothing stored", d.ID, err)
		}
	}
	// A redelivery under the stored ID stays a plain duplicate.
	if ok, err := s.Put(ctx, delivery("original", t0)); ok || err != nil {
		t.Errorf("redelivery = %v, %v; want a plain duplicate", ok, err)
	}
	for _, d := range []Delivery{
		{Source: SourceFlux, ID: "original", Event: "event", Body: []byte(`{"id":"original"}`), ReceivedAt: t0},
		{Source: SourceGitHub, ID: "empty-1", Event: "ping", ReceivedAt: t0},
		{Source: SourceGitHub, ID: "empty-2", Event: "ping", Body: []byte{}, ReceivedAt: t0},
	} {
		if ok, err := s.Put(ctx, d); !ok || err != nil {
			t.Errorf("Put %s = %v, %v; want inserted", d.Key(), ok, err)
		}
	}
	// Two Puts of one body in one batch: the first is stored, the second is its duplicate.
	var wg sync.WaitGroup
	errs := make([]error, 8)
	stored := make([]bool, 8)
	for i := range 8 {
		wg.Go(func() {
			stored[i], errs[i] = s.Put(ctx, Delivery{Source: SourceGitHub, ID: fmt.Sprintf("burst-%d", i), Event: "push", Body: []byte(`{"burst":1}`), ReceivedAt: t0})
		})
	}
	wg.Wait()
	n := 0
	for i := range 8 {
		switch {
		case stored[i]:
			n++
		case !errors.Is(errs[i], ErrDuplicateBody):
			t.Errorf("burst-%d: %v; want stored or a body duplicate", i, errs[i])
		}
	}
	if n != 1 {
		t.Errorf("%d of 8 Puts of one body stored; want 1", n)
	}
}

func conformConcurrentPutLosesNothing(t *testing.T, _ string, open opener) {
	s := open(t, 0)
	ctx := context.Background()
	const goroutines, each = 32, 40
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		inserted = map[string]int{}
		errs     []error
	)
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				// Pairs of goroutines share IDs, so duplicates race each other, within one
				// batch as well as across batches.
				id := fmt.Sprintf("d-%d-%d", g/2, i)
				ok, err := s.Put(ctx, delivery(id, t0))
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				} else if ok {
					inserted[id]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d Put errors, first: %v", len(errs), errs[0])
	}
	unique := goroutines / 2 * each
	if len(inserted) != unique {
		t.Errorf("inserted %d distinct ids, want %d", len(inserted), unique)
	}
	for id, n := range inserted {
		if n != 1 {
			t.Errorf("%s inserted %d times", id, n)
		}
	}
	st, err := s.Stats(ctx, t0)
	if err != nil || st.Pending != unique {
		t.Errorf("Stats = %+v, %v; want %d pending", st, err, unique)
	}
}

// conformGaveUpPutsDoNotAbortOthers: callers whose context ends while their Put waits (a client
// that hung up) do not fail the Puts batched with theirs, and whatever they were told is true.
func conformGaveUpPutsDoNotAbortOthers(t *testing.T, _ string, open opener) {
	s := open(t, 0)
	const n = 64
	type result struct {
		ok  bool
		err error
	}
	results := make([]result, n)
	var wg sync.WaitGroup
	for i := range n {
		ctx, cancel := context.Background(), context.CancelFunc(func() {})
		if i%2 == 1 {
			ctx, cancel = context.WithCancel(context.Background())
			wg.Go(func() {
				time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
				cancel()
			})
		}
		wg.Go(func() {
			defer cancel()
			ok, err := s.Put(ctx, delivery(fmt.Sprint(i), t0))
			results[i] = result{ok, err}
		})
	}
	wg.Wait()
	ctx := context.Background()
	for i, r := range results {
		_, getErr := s.Get(ctx, Key{SourceGitHub, fmt.Sprint(i)})
		switch {
		case i%2 == 0 && (r.err != nil || !r.ok):
			t.Errorf("Put %d (its caller waited) = %v, %v; want inserted", i, r.ok, r.err)
		case r.err != nil && !errors.Is(r.err, context.Canceled):
			t.Errorf("Put %d (its caller gave up) = %v; want no error but context.Canceled", i, r.err)
		case r.ok && getErr != nil:
			t.Errorf("Put %d reported inserted, but Get says %v", i, getErr)
		}
	}
	mustPut(t, s, delivery("after", t0))
}

func conformConcurrentClaimsNeverShareADelivery(t *testing.T, _ string, open opener) {
	s := open(t, 0)
	ctx := context.Background()
	const n = 200
	for i := range n {
		mustPut(t, s, delivery(fmt.Sprint(i), t0))
	}
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		seen   = map[string]string{}
		failed []string
	)
	for w := range 8 {
		worker := fmt.Sprintf("w%d", w)
		wg.Go(func() {
			for {
				d, ok, err := s.Claim(ctx, worker, time.Minute, t0.Add(time.Second))
				if err != nil {
					mu.Lock()
					failed = append(failed, err.Error())
					mu.Unlock()
					return
				}
				if !ok {
					return
				}
				mu.Lock()
				if prev, dup := seen[d.ID]; dup {
					failed = append(failed, fmt.Sprintf("%s claimed by %s and %s", d.ID, prev, worker))
				}
				seen[d.ID] = worker
				mu.Unlock()
				if err := s.Complete(ctx, d.Key(), worker); err != nil {
					mu.Lock()
					failed = append(failed, err.Error())
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if len(failed) > 0 {
		t.Fatalf("%d problems, first: %s", len(failed), failed[0])
	}
	if len(seen) != n {
		t.Errorf("claimed %d deliveries, want %d", len(seen), n)
	}
}

func conformCallsAfterCloseReturnErrClosed(t *testing.T, _ string, open opener) {
	s := open(t, 0)
	ctx := context.Background()
	mustPut(t, s, delivery("a", t0))
	d := mustClaim(t, s, "w", time.Minute, t0)
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	k := d.Key()
	calls := map[string]func() error{
		"Put": func() error {
			_, err := s.Put(ctx, delivery("b", t0))
			return err
		},
		"Claim": func() error {
			_, _, err := s.Claim(ctx, "w", time.Minute, t0.Add(time.Hour))
			return err
		},
		"Complete":   func() error { return s.Complete(ctx, k, "w") },
		"DeadLetter": func() error { return s.DeadLetter(ctx, k, "w", errors.New("x")) },
		"Release":    func() error { return s.Release(ctx, k, "w") },
		"Fail": func() error {
			_, err := s.Fail(ctx, k, "w", errors.New("x"), t0)
			return err
		},
		"DeadLetters": func() error {
			_, err := s.DeadLetters(ctx)
			return err
		},
		"Replay": func() error { return s.Replay(ctx, k, t0) },
		"Get": func() error {
			_, err := s.Get(ctx, k)
			return err
		},
		"Stats": func() error {
			_, err := s.Stats(ctx, t0)
			return err
		},
		"Prune": func() error {
			_, err := s.Prune(ctx, t0, t0)
			return err
		},
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close: err = %v, want ErrClosed", name, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}
