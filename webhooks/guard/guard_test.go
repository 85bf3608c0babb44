package guard

import (
	"fmt"
	"net"
	"net/http/httptest"
	"testing"
	"time"
)

// TestClientKey: an IPv4 client is its address; an IPv6 client its /64, since one host commonly
// holds the whole prefix and could otherwise open a fresh "client" per address.
func TestClientKey(t *testing.T) {
	for in, want := range map[string]string{
		"192.0.2.7:4000":             "192.0.2.7",
		"[2001:db8:1:2:3:4:5:6]:443": "2001:db8:1:2::/64",
		"[2001:db8:1:2:ffff::1]:80":  "2001:db8:1:2::/64",
		"[::ffff:192.0.2.7]:80":      "192.0.2.7",
		"not an address":             "not an address",
	} {
		req := httptest.NewRequest("GET", "/", nil)
		req.RemoteAddr = in
		if got := requestClient(req); got != want {
			t.Errorf("requestClient(%q) = %q, want %q", in, got, want)
		}
		if tcp, err := net.ResolveTCPAddr("tcp", in); err == nil {
			if got := clientKey(tcp); got != want {
				t.Errorf("clientKey(%q) = %q, want %q", in, got, want)
			}
		}
	}
}

// TestFailuresRememberBoundedClients: an attacker rotating addresses cannot grow the limiter's
// memory without bound: past maxClients, clients whose budget has refilled are forgotten, and
// while none has, new ones share one overflow budget (and are throttled together).
func TestFailuresRememberBoundedClients(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	f := NewFailures(FailuresConfig{PerMinute: 1, Burst: 1, Now: func() time.Time { return now }})
	fail := func(i int) {
		req := httptest.NewRequest("POST", "/", nil)
		req.RemoteAddr = fmt.Sprintf("10.%d.%d.%d:1", i>>16&255, i>>8&255, i&255)
		f.Failed(req, "test")
	}
	for i := range maxClients + 5 {
		fail(i)
	}
	if n := len(f.clients); n != maxClients {
		t.Fatalf("%d clients remembered, want the cap %d", n, maxClients)
	}
	req := httptest.NewRequest("POST", "/", nil)
	req.RemoteAddr = "203.0.113.1:1"
	if _, throttled := f.Failed(req, "test"); !throttled {
		t.Error("a new client while the map is full and the overflow budget spent is not throttled")
	}
	now = now.Add(2 * time.Minute) // every budget refilled
	fail(maxClients + 10)
	if n := len(f.clients); n != 1 {
		t.Errorf("%d clients remembered after every budget refilled, want 1 (the new one)", n)
	}
}

// TestBodiesReleaseMemoryAfterABurst: once the budget empties after holding a quarter of it or
// more, the memory is handed back (Release) at most every 10 s; a small body changes nothing.
func TestBodiesReleaseMemoryAfterABurst(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	released := 0
	b := NewBodies(BodiesConfig{Total: 100, Release: func() { released++ }, Now: func() time.Time { return now }})
	req := httptest.NewRequest("POST", "/", nil)
	hold := func(n int64) *Hold {
		h := b.Hold(req)
		if !h.Grow(n, "test") {
			t.Fatalf("%d bytes refused with %d held", n, b.Held())
		}
		return h
	}
	small := hold(10)
	small.Release()
	if released != 0 {
		t.Fatalf("released after a 10-byte body")
	}
	a, c := hold(20), hold(10)
	a.Release()
	if released != 0 {
		t.Fatalf("released while a body is still held")
	}
	c.Release()
	if released != 1 {
		t.Fatalf("released %d times after a burst of 30 of 100 bytes, want 1", released)
	}
	hold(40).Release()
	if released != 1 {
		t.Fatalf("released again within 10 s")
	}
	now = now.Add(11 * time.Second)
	hold(40).Release()
	if released != 2 {
		t.Fatalf("not released after another burst 11 s on")
	}
	if h := b.Hold(req); h.Grow(101, "test") {
		t.Fatal("101 bytes fit a budget of 100")
	}
}

// TestPaceOnlyOverTheBudget: a client's body is held to a read rate only once the client is over
// its failed-authentication budget, the rate is the client's own, and nothing is counted by
// asking.
func TestPaceOnlyOverTheBudget(t *testing.T) {
	now := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	f := NewFailures(FailuresConfig{PerMinute: 1, Burst: 2, Now: func() time.Time { return now }})
	flood, other := httptest.NewRequest("POST", "/", nil), httptest.NewRequest("POST", "/", nil)
	flood.RemoteAddr, other.RemoteAddr = "192.0.2.7:4000", "192.0.2.8:4000"
	for range 5 {
		if f.Pace(flood) != nil {
			t.Fatal("a client within its budget is paced")
		}
	}
	f.Failed(flood, "test")
	if f.Pace(flood) != nil {
		t.Fatal("a client with failures left in its burst is paced")
	}
	f.Failed(flood, "test") // its next failure would be answered 429
	p := f.Pace(flood)
	if p == nil || p != f.Pace(flood) || p.Limit() != PaceBytesPerSecond || p.Burst() != PaceBurst {
		t.Fatalf("an address over its budget: pace %v, want its own of %d bytes a second", p, PaceBytesPerSecond)
	}
	if f.Pace(other) != nil {
		t.Fatal("another address is paced for the flood's failures")
	}
	now = now.Add(5 * time.Minute) // the budget refills
	if f.Pace(flood) != nil {
		t.Fatal("an address whose budget refilled is still paced")
	}
	var none *Failures
	if none.Pace(flood) != nil {
		t.Fatal("a nil Failures paces")
	}
}
