package guard

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestHoldBoundedAndCancelled: a hold lasts the Retry-After but at most the configured hold; at
// most MaxHeld requests are held at once, a failure past them answered at once (and counted),
// so an attacker with many streams cannot hold goroutines without bound; a client that hangs
// up ends its hold.
func TestHoldBoundedAndCancelled(t *testing.T) {
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	slept := make(chan time.Duration, 4)
	release := make(chan struct{})
	f := NewFailures(FailuresConfig{PerMinute: 1, Burst: 1, MaxHeld: 1, Metrics: m,
		Sleep: func(ctx context.Context, d time.Duration) {
			slept <- d
			select {
			case <-release:
			case <-ctx.Done():
			}
		}})
	req := httptest.NewRequest("POST", "/", nil)
	done := make(chan struct{})
	go func() { f.Hold(req, 30*time.Second); close(done) }()
	if d := <-slept; d != DefaultHold {
		t.Errorf("a Retry-After of 30 s held %s, want the hold %s", d, DefaultHold)
	}
	f.Hold(req, 30*time.Second) // MaxHeld 1 is held: answered at once, not slept
	if got := testutil.ToFloat64(m.holdFull); got != 1 {
		t.Errorf("parley_auth_hold_full_total = %g, want 1", got)
	}
	select {
	case d := <-slept:
		t.Fatalf("a second request held (%s) past MaxHeld 1", d)
	default:
	}
	close(release)
	<-done
	go func() { f.Hold(req, 200*time.Millisecond) }() // the slot is free again; shorter than the hold
	if d := <-slept; d != 200*time.Millisecond {
		t.Errorf("a Retry-After of 200 ms held %s, want 200 ms", d)
	}

	// The real sleep: a hold of an hour ends when the request's context does.
	f = NewFailures(FailuresConfig{PerMinute: 1, Burst: 1, Hold: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	held := make(chan struct{})
	go func() { f.Hold(req.WithContext(ctx), time.Hour); close(held) }()
	cancel()
	<-held // a test timeout here: the hold outlived its request

	// No hold configured, and no limiter: nothing held.
	(*Failures)(nil).Hold(req, time.Hour)
	NewFailures(FailuresConfig{PerMinute: 1, Hold: -1, Sleep: func(context.Context, time.Duration) { t.Error("held with Hold < 0") }}).Hold(req, time.Hour)
}

// TestGrowWaitGetsRoomWhenItIsFreed: a declared body that does not fit waits for the bytes held
// by another body of its address to be given back, instead of being refused at once (which made
// an attacker's refused connections reconnect some 700 times a second); it is refused when no
// room comes in time, when its client hangs up, and at once when it could never fit.
func TestGrowWaitGetsRoomWhenItIsFreed(t *testing.T) {
	b := NewBodies(BodiesConfig{Total: 100, PerClient: 10})
	req := httptest.NewRequest("POST", "/", nil)
	first := b.Hold(req)
	if !first.Grow(10, "test") {
		t.Fatal("the first body does not fit")
	}
	got := make(chan bool)
	second := b.Hold(req)
	go func() { got <- second.GrowWait(context.Background(), 5, "test", time.Hour) }()
	select {
	case ok := <-got:
		t.Fatalf("the second body of the address answered %v while the first held its share, want it waiting", ok)
	case <-time.After(50 * time.Millisecond): // a wrong early answer shows here; a late one is caught below
	}
	first.Release()
	if !<-got || second.Held() != 5 {
		t.Fatalf("the second body was not given the room the first freed (holds %d)", second.Held())
	}
	second.Release()

	first.Grow(10, "test")
	ctx, cancel := context.WithCancel(context.Background())
	go func() { got <- b.Hold(req).GrowWait(ctx, 5, "test", time.Hour) }()
	cancel()
	if <-got {
		t.Error("a body whose client hung up was given room")
	}
	if b.Hold(req).GrowWait(context.Background(), 5, "test", time.Millisecond) {
		t.Error("a body given room that was never freed")
	}
	first.Release()
	if b.Hold(req).GrowWait(context.Background(), 11, "test", time.Hour) {
		t.Error("a body larger than the client's share was given room")
	}
	if b.Held() != 0 {
		t.Errorf("%d bytes held after every body was refused or released", b.Held())
	}
}
