package webhooks

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/parleyhq/parley/webhooks/store"
)

// waitFor polls cond until it holds; the deadline only keeps a broken test from hanging.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

type poolFixture struct {
	store   *store.SQLite
	pool    *Pool
	metrics *Metrics
	logs    *lockedBuffer
	cancel  context.CancelFunc
	done    chan error
	stopped bool
}

func startPool(t *testing.T, sopts store.Options, cfg PoolConfig) *poolFixture {
	t.Helper()
	f := &poolFixture{store: openStore(t, sopts)}
	f.metrics, _ = testMetrics(t, f.store)
	var log = cfg.Logger
	if log == nil {
		log, f.logs = testLogger(t)
	}
	cfg.Queue = f.store
	cfg.Logger = log
	cfg.Metrics = f.metrics
	if cfg.Name == "" {
		cfg.Name = "test"
	}
	if cfg.Poll == 0 {
		cfg.Poll = 10 * time.Millisecond
	}
	if cfg.Backoff == (Backoff{}) {
		cfg.Backoff = Backoff{Base: time.Millisecond, Max: 4 * time.Millisecond, Jitter: 0.5}
	}
	p, err := NewPool(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.pool = p
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	f.done = make(chan error, 1)
	go func() { f.done <- p.Run(ctx) }()
	t.Cleanup(func() { f.stop(t) })
	return f
}

func (f *poolFixture) stop(t *testing.T) {
	t.Helper()
	if f.stopped {
		return
	}
	f.stopped = true
	f.cancel()
	select {
	case err := <-f.done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
}

func (f *poolFixture) put(t *testing.T, id, event string) store.Key {
	t.Helper()
	d := store.Delivery{Source: store.SourceGitHub, ID: id, Event: event, Body: []byte(`{"id":"` + id + `"}`), ReceivedAt: time.Now()}
	if ok, err := f.store.Put(context.Background(), d); err != nil || !ok {
		t.Fatalf("Put %s: %v %v", id, ok, err)
	}
	f.pool.Notify()
	return d.Key()
}

func (f *poolFixture) state(t *testing.T, k store.Key) store.Delivery {
	t.Helper()
	d, err := f.store.Get(context.Background(), k)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func route(event string) Route { return Route{Source: store.SourceGitHub, Event: event} }

func TestPoolRetriesThenSucceeds(t *testing.T) {
	var calls atomic.Int64
	h := HandlerFunc(func(ctx context.Context, d store.Delivery) error {
		if calls.Add(1) < 3 {
			return fmt.Errorf("github 502 for %s", d.ID)
		}
		return nil
	})
	f := startPool(t, store.Options{}, PoolConfig{Handlers: map[Route]Handler{route("push"): h}, Workers: 2})
	k := f.put(t, "r1", "push")
	// The metric is counted after the store recorded the outcome: wait for both.
	waitFor(t, "completion", func() bool {
		return testutil.ToFloat64(f.metrics.completed.WithLabelValues("github", "push")) == 1
	})
	d := f.state(t, k)
	if d.State != store.StateDone || d.Attempts != 3 || d.LastError != "github 502 for r1" {
		t.Errorf("done delivery = attempts %d, last error %q", d.Attempts, d.LastError)
	}
	if got := testutil.ToFloat64(f.metrics.failedAttempts.WithLabelValues("github", "push")); got != 2 {
		t.Errorf("failed attempts = %v, want 2", got)
	}
	if got := testutil.ToFloat64(f.metrics.completed.WithLabelValues("github", "push")); got != 1 {
		t.Errorf("completed = %v, want 1", got)
	}
	if got := testutil.CollectAndCount(f.metrics.handlerDuration); got != 1 {
		t.Errorf("handler duration series = %d, want 1", got)
	}
}

func TestPoolDeadLetters(t *testing.T) {
	cases := []struct {
		name         string
		handler      HandlerFunc
		maxAttempts  int
		wantAttempts int
		wantReason   string
		wantErr      string
	}{
		{
			name:         "permanent error dead-letters at once",
			handler:      func(context.Context, store.Delivery) error { return Permanent(errors.New("payload has no repository")) },
			maxAttempts:  5,
			wantAttempts: 1, wantReason: reasonPermanent, wantErr: "payload has no repository",
		},
		{
			name: "wrapped sentinel is permanent too",
			handler: func(context.Context, store.Delivery) error {
				return fmt.Errorf("decode push r: %w", ErrPermanent)
			},
			maxAttempts:  5,
			wantAttempts: 1, wantReason: reasonPermanent, wantErr: "permanent failure",
		},
		{
			name:         "panic dead-letters at once",
			handler:      func(context.Context, store.Delivery) error { panic("nil map") },
			maxAttempts:  5,
			wantAttempts: 1, wantReason: reasonPanic, wantErr: "handler panicked: nil map",
		},
		{
			name:         "retryable error until attempts run out",
			handler:      func(context.Context, store.Delivery) error { return errors.New("rate limited") },
			maxAttempts:  3,
			wantAttempts: 3, wantReason: reasonExhausted, wantErr: "rate limited",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := startPool(t, store.Options{MaxAttempts: tc.maxAttempts}, PoolConfig{Handlers: map[Route]Handler{route("push"): tc.handler}})
			k := f.put(t, "dl", "push")
			waitFor(t, "dead letter", func() bool {
				return testutil.ToFloat64(f.metrics.deadLettered.WithLabelValues("github", "push", tc.wantReason)) == 1
			})
			d := f.state(t, k)
			if d.State != store.StateDead {
				t.Fatalf("state %s, want dead", d.State)
			}
			if d.Attempts != tc.wantAttempts || !strings.Contains(d.LastError, tc.wantErr) {
				t.Errorf("dead delivery: attempts %d, error %q; want %d, %q", d.Attempts, d.LastError, tc.wantAttempts, tc.wantErr)
			}
			if got := testutil.ToFloat64(f.metrics.deadLettered.WithLabelValues("github", "push", tc.wantReason)); got != 1 {
				t.Errorf("dead-lettered{%s} = %v, want 1", tc.wantReason, got)
			}
			if got := testutil.ToFloat64(f.metrics.failedAttempts.WithLabelValues("github", "push")); got != float64(tc.wantAttempts) {
				t.Errorf("failed attempts = %v, want %d", got, tc.wantAttempts)
			}
			dead, err := f.store.DeadLetters(context.Background())
			if err != nil || len(dead) != 1 {
				t.Errorf("DeadLetters = %d, %v", len(dead), err)
			}
		})
	}
}

// TestPoolRecordsOutcomeOfLongHandler: the store call that records an outcome gets its own
// deadline, counted from when the handler returned, not from the claim.
func TestPoolRecordsOutcomeOfLongHandler(t *testing.T) {
	s := openStore(t, store.Options{})
	p, err := NewPool(PoolConfig{Queue: s, Name: "long", Poll: 5 * time.Millisecond, Handlers: map[Route]Handler{
		route("push"): HandlerFunc(func(context.Context, store.Delivery) error {
			time.Sleep(100 * time.Millisecond)
			return nil
		}),
	}})
	if err != nil {
		t.Fatal(err)
	}
	p.storeTimeout = 50 * time.Millisecond // shorter than the handler
	if _, err := s.Put(context.Background(), store.Delivery{Source: "github", ID: "long", Event: "push", Body: []byte("{}"), ReceivedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- p.Run(ctx) }()
	defer func() { cancel(); <-done }()
	waitFor(t, "completion", func() bool {
		d, err := s.Get(context.Background(), store.Key{Source: "github", ID: "long"})
		return err == nil && d.State == store.StateDone
	})
}

func TestPoolCompletesUnknownEvents(t *testing.T) {
	var called atomic.Bool
	f := startPool(t, store.Options{}, PoolConfig{Handlers: map[Route]Handler{
		route("push"): HandlerFunc(func(context.Context, store.Delivery) error { called.Store(true); return nil }),
	}})
	k := f.put(t, "u1", "watch")
	waitFor(t, "completion", func() bool { return f.state(t, k).State == store.StateDone })
	if called.Load() {
		t.Error("push handler called for a watch event")
	}
	if got := testutil.ToFloat64(f.metrics.unhandled.WithLabelValues("github", "watch")); got != 1 {
		t.Errorf("unhandled = %v, want 1", got)
	}
	if got := testutil.ToFloat64(f.metrics.failedAttempts.WithLabelValues("github", "watch")); got != 0 {
		t.Errorf("an unknown event counted as a failure")
	}
}

func TestPoolLogsCarryDeliveryIdentity(t *testing.T) {
	f := startPool(t, store.Options{MaxAttempts: 2}, PoolConfig{Handlers: map[Route]Handler{
		route("push"): HandlerFunc(func(context.Context, store.Delivery) error { return errors.New("nope") }),
	}})
	f.put(t, "log-id", "push")
	waitFor(t, "dead-letter log line", func() bool { return strings.Contains(f.logs.String(), "dead-lettered") })
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(f.logs.String()), "\n") {
		if strings.Contains(line, `"msg":"delivery pool `) {
			continue // the pool's own start line
		}
		n++
		for _, want := range []string{`"source":"github"`, `"delivery_id":"log-id"`, `"event":"push"`, `"worker":"test/w`, `"attempt":`} {
			if !strings.Contains(line, want) {
				t.Errorf("log line lacks %s: %s", want, line)
			}
		}
	}
	if n != 2 {
		t.Errorf("want a line per attempt, got %d:\n%s", n, f.logs.String())
	}
}

// TestPoolNotifyWakesWorkers wires a real Receiver to a Pool whose poll interval is an hour:
// only the receiver's Notify can get the delivery handled.
func TestPoolNotifyWakesWorkers(t *testing.T) {
	got := make(chan store.Delivery, 1)
	f := startPool(t, store.Options{}, PoolConfig{
		Poll: time.Hour,
		Handlers: map[Route]Handler{route("pull_request"): HandlerFunc(func(_ context.Context, d store.Delivery) error {
			got <- d
			return nil
		})},
	})
	// Let every worker find the queue empty and go idle first.
	time.Sleep(50 * time.Millisecond)
	secret := mustSecret(t, "s")
	rcv, err := NewReceiver(ReceiverConfig{Store: f.store, Secrets: []Secret{secret}, Notify: f.pool.Notify})
	if err != nil {
		t.Fatal(err)
	}
	rf := &receiverFixture{store: f.store, rcv: rcv, secret: secret}
	rf.srv = newServer(t, rcv)
	if code, rep, _ := rf.do(t, request{delivery: ptr("poke-1")}); code != 202 {
		t.Fatalf("status %d %+v", code, rep)
	}
	select {
	case d := <-got:
		if d.ID != "poke-1" || string(d.Body) != `{"action":"opened","number":1}` {
			t.Errorf("handled %+v", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("delivery not handled: Notify did not wake a worker")
	}
}

func TestPoolDrain(t *testing.T) {
	t.Run("in-flight handler finishes within grace", func(t *testing.T) {
		started, finish := make(chan struct{}), make(chan struct{})
		f := startPool(t, store.Options{}, PoolConfig{Grace: 10 * time.Second, Handlers: map[Route]Handler{
			route("push"): HandlerFunc(func(ctx context.Context, d store.Delivery) error {
				close(started)
				<-finish
				return ctx.Err() // nil: the handler context is not cancelled during grace
			}),
		}})
		k := f.put(t, "drain-ok", "push")
		<-started
		f.cancel()
		// Cancelled: no new claims, even for due work.
		f.put(t, "after-cancel", "push")
		close(finish)
		f.stop(t)
		if d := f.state(t, k); d.State != store.StateDone {
			t.Errorf("in-flight delivery state %s, want done", d.State)
		}
		if d := f.state(t, store.Key{Source: "github", ID: "after-cancel"}); d.State != store.StatePending || d.Attempts != 0 {
			t.Errorf("delivery stored after cancel: %+v, want untouched", d)
		}
	})
	t.Run("handler past grace is cancelled and released", func(t *testing.T) {
		started := make(chan struct{})
		f := startPool(t, store.Options{}, PoolConfig{Grace: 20 * time.Millisecond, Handlers: map[Route]Handler{
			route("push"): HandlerFunc(func(ctx context.Context, d store.Delivery) error {
				close(started)
				<-ctx.Done()
				return fmt.Errorf("sync %s: %w", d.ID, ctx.Err())
			}),
		}})
		k := f.put(t, "drain-late", "push")
		<-started
		f.stop(t)
		d := f.state(t, k)
		if d.State != store.StatePending || d.Attempts != 0 || d.LeaseOwner != "" {
			t.Errorf("after drain: %+v, want pending, attempt given back, no lease", d)
		}
		if got := testutil.ToFloat64(f.metrics.failedAttempts.WithLabelValues("github", "push")); got != 0 {
			t.Errorf("a drain counted as a failed attempt")
		}
		// The next process picks it up at once, without waiting for a lease to expire.
		claimed, ok, err := f.store.Claim(context.Background(), "next", time.Minute, time.Now())
		if err != nil || !ok || claimed.ID != "drain-late" {
			t.Errorf("claim after drain = %v %v %v", claimed.ID, ok, err)
		}
	})
}

func TestPoolConfig(t *testing.T) {
	s := openStore(t, store.Options{})
	cases := []struct {
		name string
		cfg  PoolConfig
		want string
	}{
		{"no queue", PoolConfig{}, "no queue"},
		{"nil handler", PoolConfig{Queue: s, Handlers: map[Route]Handler{route("push"): nil}}, "nil handler for github/push"},
		{"bad backoff", PoolConfig{Queue: s, Backoff: Backoff{Base: time.Minute, Max: time.Second}}, "backoff"},
	}
	for _, tc := range cases {
		if _, err := NewPool(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.want)
		}
	}
	p, err := NewPool(PoolConfig{Queue: s, Poll: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- p.Run(ctx) }()
	waitFor(t, "pool running", p.running.Load)
	if err := p.Run(ctx); err == nil {
		t.Error("second concurrent Run succeeded")
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
}

func TestBackoffDelay(t *testing.T) {
	b := Backoff{Base: time.Second, Max: 10 * time.Second, Jitter: 0.5}
	cases := []struct {
		attempt int
		r       float64
		want    time.Duration
	}{
		{1, 0, time.Second},
		{2, 0, 2 * time.Second},
		{3, 0, 4 * time.Second},
		{4, 0, 8 * time.Second},
		{5, 0, 10 * time.Second},
		{60, 0, 10 * time.Second}, // no overflow however many attempts
		{1, 0.999999, 500000500 * time.Nanosecond},
		{5, 0.5, 7500 * time.Millisecond},
	}
	for _, tc := range cases {
		if got := b.Delay(tc.attempt, tc.r); got.Round(time.Nanosecond) != tc.want {
			t.Errorf("Delay(%d, %v) = %v, want %v", tc.attempt, tc.r, got, tc.want)
		}
	}
	if got := (Backoff{Base: time.Second, Max: time.Second, Jitter: 7}).Delay(1, 0.5); got != 500*time.Millisecond {
		t.Errorf("jitter above 1 not clamped: %v", got)
	}
}
