package guard

import (
	"context"
	"net/http"
	"sync"
	"time"
)

// Bodies caps the bytes held at once by request bodies whose credentials are not verified yet
// (a signed body must be read whole before its HMAC says whether it may be looked at): at most
// Total in all, and at most PerClient by one client address, so that one address flooding big
// bodies with wrong signatures leaves the rest of the budget to everyone else. A receiver
// reserves a body's bytes before it reads them (Hold.Grow: the declared Content-Length at once,
// a body of unknown length as it arrives) and gives them back once the credentials are checked
// (Hold.Release); a request that would go over is answered 503 with Retry-After, before its
// body is read where its length is declared. Bytes spooled to a temporary file count as well as
// bytes in memory: both are held on the attacker's behalf. A nil *Bodies caps nothing.
type Bodies struct {
	total, perClient int64
	proxies          *Proxies
	metrics          *Metrics
	release          func()
	now              func() time.Time

	mu       sync.Mutex
	held     int64
	byClient map[string]int64
	// freed is closed (and replaced) whenever bytes are given back, waking GrowWait's waiters.
	freed chan struct{}
	// peak is the most held since the budget last emptied; released when Release last ran.
	peak     int64
	released time.Time
}

// releaseEvery is how often at most Release hands memory back after a burst.
const releaseEvery = 10 * time.Second

// BodiesConfig configures NewBodies.
type BodiesConfig struct {
	// Total bytes held at once by unauthenticated bodies; <= 0: no cap (NewBodies returns nil).
	Total int64
	// PerClient bytes held at once by one client address's unauthenticated bodies; <= 0 or more
	// than Total: Total.
	PerClient int64
	// Proxies name the client behind a trusted proxy; nil trusts none. Metrics may be nil.
	Proxies *Proxies
	Metrics *Metrics
	// Release, when set, is called (serve: debug.FreeOSMemory) once the budget empties after
	// a burst that held a quarter of it or more, at most every 10 s: Go gives freed memory
	// back to the operating system lazily, and after an attack the server's heap goal stays
	// where the attack left it until the next collection, which an idle server may not run
	// for minutes. It runs on the goroutine of the request that emptied the budget, after
	// its bytes were given back. Now defaults to time.Now.
	Release func()
	Now     func() time.Time
}

// NewBodies returns the budget cfg describes, or nil (no cap) when cfg.Total <= 0.
func NewBodies(cfg BodiesConfig) *Bodies {
	if cfg.Total <= 0 {
		return nil
	}
	per := cfg.PerClient
	if per <= 0 || per > cfg.Total {
		per = cfg.Total
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	return &Bodies{total: cfg.Total, perClient: per, proxies: cfg.Proxies, metrics: cfg.Metrics, release: cfg.Release, now: now,
		byClient: map[string]int64{}, freed: make(chan struct{})}
}

// Held is how many bytes unauthenticated bodies hold now.
func (b *Bodies) Held() int64 {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.held
}

// Hold starts the reservation of r's body. A Hold is used by one goroutine.
func (b *Bodies) Hold(r *http.Request) *Hold {
	h := &Hold{b: b}
	if b != nil {
		h.client = b.proxies.Client(r)
	}
	return h
}

// Hold is what one request's body has reserved of a Bodies budget.
type Hold struct {
	b      *Bodies
	client string
	n      int64
}

// Grow reserves n more bytes, or reports false (reserving nothing) when that would take the
// budget or the client's share of it over its cap. endpoint names the endpoint in the metric.
func (h *Hold) Grow(n int64, endpoint string) bool {
	b := h.b
	if b == nil || n <= 0 {
		return true
	}
	b.mu.Lock()
	ok := h.reserveLocked(n)
	b.mu.Unlock()
	if !ok {
		b.metrics.bodyRefused(endpoint)
	}
	return ok
}

// reserveLocked reserves n bytes for h when the budget and the client's share have room, and
// reports whether it did. Called with h.b.mu held; the gauge is set under the lock so that it
// never shows an older total than the last.
func (h *Hold) reserveLocked(n int64) bool {
	b := h.b
	ok := b.held+n <= b.total && b.byClient[h.client]+n <= b.perClient
	if ok {
		b.held += n
		b.byClient[h.client] += n
		h.n += n
		b.peak = max(b.peak, b.held)
	}
	b.metrics.bodyBytes(b.held)
	return ok
}

// WaitForRoom is the longest GrowWait waits for room before a declared body is refused 503.
// Refused at once, a client sending big bodies as fast as it can reconnects at once: 64
// connections sending 24 MiB bodies from 4 addresses (issue 34's bigbody), one body per
// address fitting its share, had some 700 connections a second accepted, refused and closed
// with megabytes unread, the kernel's work charged to parley serve. Waiting, a request that
// does not fit holds its connection and goroutine (no memory: nothing is read) for at most
// this long, which the connection caps bound (max_connections_per_client, 64 by default), and
// a valid delivery from an address whose share is taken gets in as soon as there is room
// instead of being refused.
const WaitForRoom = time.Second

// GrowWait is Grow for a body's declared length, waiting up to within (or until ctx ends) for
// room when there is none, since bodies held by other requests are given back as soon as their
// signatures are checked. It reports false when there was no room in time.
func (h *Hold) GrowWait(ctx context.Context, n int64, endpoint string, within time.Duration) bool {
	b := h.b
	if b == nil || n <= 0 || within <= 0 {
		return h.Grow(n, endpoint)
	}
	timer := time.NewTimer(within)
	defer timer.Stop()
	for {
		b.mu.Lock()
		freed := b.freed
		ok := h.reserveLocked(n)
		b.mu.Unlock()
		if ok {
			return true
		}
		if n > b.perClient || n > b.total {
			break // never fits
		}
		select {
		case <-freed:
			continue
		case <-ctx.Done():
		case <-timer.C:
		}
		break
	}
	b.metrics.bodyRefused(endpoint)
	return false
}

// Held is how many bytes h has reserved.
func (h *Hold) Held() int64 { return h.n }

// Release gives back everything h holds; it may be called more than once.
func (h *Hold) Release() {
	b := h.b
	if b == nil || h.n == 0 {
		return
	}
	b.mu.Lock()
	b.held -= h.n
	if b.byClient[h.client] -= h.n; b.byClient[h.client] <= 0 {
		delete(b.byClient, h.client)
	}
	b.metrics.bodyBytes(b.held)
	close(b.freed) // wake the waiters: there may be room for them now
	b.freed = make(chan struct{})
	burst := false
	if b.held == 0 {
		if now := b.now(); b.release != nil && b.peak >= b.total/4 && now.Sub(b.released) >= releaseEvery {
			burst, b.released = true, now
		}
		b.peak = 0
	}
	b.mu.Unlock()
	h.n = 0
	if burst {
		b.release()
	}
}
