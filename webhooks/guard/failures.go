package guard

import (
	"context"
	"io"
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Failures rate limits failed authentications per client address: each client may fail Burst
// times at once and then PerMinute times a minute. A client over its budget has its failures
// answered 429 with Retry-After (Failed) rather than 401, telling a misconfigured sender to back
// off; its credentials are still checked first, and a request whose credentials verify is
// never refused, whatever its address did before: behind a proxy every client can be one
// address, and refusing that address would let anyone silence GitHub. The receivers make
// checking cheap (the body is hashed as it streams, under the Bodies budget). A nil *Failures
// limits nothing.
//
// A failure over the budget is answered only after a hold (Hold): an attacker sending wrong
// credentials as fast as its connections go then gets one answer a second per connection instead
// of thousands, so it cannot buy the server's CPU with its own (14,500 wrong signatures a second
// from 8 connections took a core of parley serve before). Only failures are held, once their
// credentials have been checked, so a valid request from the same address is never held.
type Failures struct {
	every   rate.Limit
	burst   int
	metrics *Metrics
	now     func() time.Time
	proxies *Proxies
	hold    time.Duration
	sleep   func(context.Context, time.Duration)
	// held is a semaphore of the requests being held at once (MaxHeld): past it a failure is
	// answered at once, as before holds, rather than holding another goroutine.
	held chan struct{}

	mu      sync.Mutex
	clients map[string]*rate.Limiter
	// paces are the read rates of the clients over their budget (Pace), forgotten with them.
	paces map[string]*rate.Limiter
	// overflow is shared by the clients that arrive while clients is full, so that an
	// attacker rotating addresses cannot grow the map without bound.
	overflow *rate.Limiter
}

// maxClients bounds the clients Failures remembers at once.
const maxClients = 10000

// FailuresConfig configures NewFailures.
type FailuresConfig struct {
	// PerMinute failures a minute per client, in bursts of Burst (at least 1). PerMinute <= 0
	// limits nothing.
	PerMinute float64
	Burst     int
	// Metrics may be nil; Now defaults to time.Now.
	Metrics *Metrics
	Now     func() time.Time
	// Proxies are the proxies whose forwarding headers name the client; nil trusts none.
	Proxies *Proxies
	// Hold is the longest a failure over the budget is held before its 429 (Failures.Hold);
	// 0 means DefaultHold, a negative value holds nothing. MaxHeld bounds the requests held at
	// once; 0 means DefaultMaxHeld.
	Hold    time.Duration
	MaxHeld int
	// Sleep waits d or until ctx ends; nil is a timer. Tests replace it to see the holds.
	Sleep func(ctx context.Context, d time.Duration)
}

// DefaultHold is how long a failed authentication over its client's budget is held before it is
// answered: the Retry-After it is answered with, at most a second. A sender that waits for each
// answer before the next request (every HTTP/1.1 connection, and a well-behaved client) then
// fails once a second per connection.
const DefaultHold = time.Second

// DefaultMaxHeld bounds the requests held at once. Each holds its goroutine and its connection
// (some 10 KiB together) and no body: a signed body has been read and released, a bearer token's
// is unread. The intake listener's connection caps (max_connections, 1,024 by default; 64 per
// client) bound its holds below this already, one request per HTTP/1.1 connection; the admission
// listener has no connection cap and HTTP/2 runs 250 requests per connection, so this is the
// bound there. Past it failures are answered at once, as they were before holds.
const DefaultMaxHeld = 2048

// NewFailures returns the limiter cfg describes, or nil (which limits nothing) when
// cfg.PerMinute <= 0.
func NewFailures(cfg FailuresConfig) *Failures {
	if cfg.PerMinute <= 0 {
		return nil
	}
	burst := max(cfg.Burst, 1)
	every := rate.Limit(cfg.PerMinute / 60)
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	hold := cfg.Hold
	if hold == 0 {
		hold = DefaultHold
	}
	maxHeld := cfg.MaxHeld
	if maxHeld <= 0 {
		maxHeld = DefaultMaxHeld
	}
	sleep := cfg.Sleep
	if sleep == nil {
		sleep = sleepContext
	}
	return &Failures{every: every, burst: burst, metrics: cfg.Metrics, now: now, proxies: cfg.Proxies, hold: hold, sleep: sleep,
		held: make(chan struct{}, maxHeld), clients: map[string]*rate.Limiter{}, paces: map[string]*rate.Limiter{}, overflow: rate.NewLimiter(every, burst)}
}

// Hold holds a request Failed answered over the budget before it is answered: for retryAfter
// (what Failed returned) but at most the configured hold, and no longer than r's context (a
// client that hangs up, a server that shuts down). It returns at once when MaxHeld requests are
// held already. Call it only for a request whose credentials failed and Failed throttled, just
// before writing its 429: the client then waits for that answer before it can send the next
// request on the connection.
func (f *Failures) Hold(r *http.Request, retryAfter time.Duration) {
	if f == nil || f.hold <= 0 || retryAfter <= 0 {
		return
	}
	select {
	case f.held <- struct{}{}:
	default:
		f.metrics.authHoldFull()
		return
	}
	defer func() { <-f.held }()
	f.sleep(r.Context(), min(retryAfter, f.hold))
}

// sleepContext waits d or until ctx ends.
func sleepContext(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// PaceBytesPerSecond is how fast the unsigned body of a client over its failed-authentication
// budget is read (PaceBurst at once). Its requests are still read and checked, so a valid
// signature from that address still gets through (a 25 kB GitHub delivery waits a few
// milliseconds behind the flood), but a client sending 24 MiB bodies under wrong signatures as
// fast as it can no longer has each read, spooled and hashed at the speed of the network: four
// such addresses held a core of parley serve's two before.
const (
	PaceBytesPerSecond = 4 << 20
	PaceBurst          = 256 << 10
)

// Pace returns the read rate r's body is held to, or nil when its client is within its
// failed-authentication budget (nothing is counted). The rate is the client's, shared by all
// its requests; the overflow's clients share one.
func (f *Failures) Pace(r *http.Request) *rate.Limiter {
	if f == nil {
		return nil
	}
	now := f.now()
	client := f.proxies.Client(r)
	f.mu.Lock()
	defer f.mu.Unlock()
	lim := f.limiter(client, now, false)
	if lim == nil || lim.TokensAt(now) >= 1 {
		return nil
	}
	if lim == f.overflow {
		client = "" // the clients that share the overflow budget share one rate
	}
	pace := f.paces[client]
	if pace == nil {
		pace = rate.NewLimiter(PaceBytesPerSecond, PaceBurst)
		f.paces[client] = pace
	}
	return pace
}

// PacedReader reads body no faster than pace allows, in pieces of at most PaceBurst, and stops
// with ctx's error when ctx ends while it waits: how a body of a client over its budget is read
// (Pace) by a handler that reads the body itself.
func PacedReader(ctx context.Context, body io.Reader, pace *rate.Limiter) io.Reader {
	return &pacedReader{ctx: ctx, body: body, pace: pace}
}

type pacedReader struct {
	ctx  context.Context
	body io.Reader
	pace *rate.Limiter
}

func (p *pacedReader) Read(b []byte) (int, error) {
	if len(b) > PaceBurst {
		b = b[:PaceBurst]
	}
	n, err := p.body.Read(b)
	if n > 0 {
		if werr := p.pace.WaitN(p.ctx, n); werr != nil {
			return 0, werr // the bytes are not handed over: io.ReadFull would keep them and drop the error
		}
	}
	return n, err
}

// Failed counts a failed authentication of r's client and reports whether the client is over
// its budget, and how long until it is not: the failure is then answered 429 with Retry-After
// instead of 401. endpoint names the endpoint in the metric (a fixed string).
func (f *Failures) Failed(r *http.Request, endpoint string) (retryAfter time.Duration, throttled bool) {
	if f == nil {
		return 0, false
	}
	now := f.now()
	f.mu.Lock()
	lim := f.limiter(f.proxies.Client(r), now, true)
	allowed := lim.AllowN(now, 1)
	tokens := lim.TokensAt(now)
	f.mu.Unlock()
	if allowed {
		return 0, false
	}
	f.metrics.authThrottled(endpoint)
	return time.Duration(math.Ceil((1-tokens)/float64(f.every)) * float64(time.Second)), true
}

// FailureBytes is how much of a body read under a wrong signature counts as one more failure
// (ChargeBody): a failure is one request, whatever its size, only up to this size. Without it,
// an address's first 30 failures could each be a 24 MiB body read, spooled and hashed at the
// speed of the network (issue 34's bigbody: 4 addresses had 2.3 GB hashed in 10 s, a core of
// parley serve's); with it, one such body spends most of the address's budget, and its next
// bodies are read at PaceBytesPerSecond. GitHub's deliveries are typically some 25 kB (the
// largest of @octokit/webhooks-examples is 27 kB), so a sender with a wrong secret is charged
// as before.
const FailureBytes = 1 << 20

// ChargeBody charges r's client for a body of n bytes it made the server read before its
// signature failed: one failure for each whole FailureBytes in it, at most the burst, on top of
// the one Failed counts. Call it before Failed, so that Failed sees the spent budget; a body
// under a signature that verifies is never charged.
func (f *Failures) ChargeBody(r *http.Request, n int64) {
	if f == nil || n < FailureBytes {
		return
	}
	cost := int(min(n/FailureBytes, int64(f.burst)))
	now := f.now()
	f.mu.Lock()
	defer f.mu.Unlock()
	// ReserveN takes the tokens even when the client has too few, so a big body spends the
	// budget ahead: the client's next failures are throttled until it has refilled.
	f.limiter(f.proxies.Client(r), now, true).ReserveN(now, cost)
}

// Client is the client address r counts against (see Proxies.Client).
func (f *Failures) Client(r *http.Request) string {
	if f == nil {
		return requestClient(r)
	}
	return f.proxies.Client(r)
}

// limiter returns client's limiter; a client not seen is created only when create is set.
// Called with mu held.
func (f *Failures) limiter(client string, now time.Time, create bool) *rate.Limiter {
	if lim, ok := f.clients[client]; ok {
		return lim
	}
	if !create {
		if len(f.clients) >= maxClients {
			return f.overflow
		}
		return nil
	}
	if len(f.clients) >= maxClients {
		// Forget the clients whose budget has refilled: they are as good as new.
		for k, lim := range f.clients {
			if lim.TokensAt(now) >= float64(f.burst) {
				delete(f.clients, k)
				delete(f.paces, k)
			}
		}
		if len(f.clients) >= maxClients {
			return f.overflow
		}
	}
	lim := rate.NewLimiter(f.every, f.burst)
	f.clients[client] = lim
	return lim
}

// RetryAfter is the value of a Retry-After header for d: whole seconds, at least 1.
func RetryAfter(d time.Duration) string {
	return strconv.Itoa(max(1, int(math.Ceil(d.Seconds()))))
}

// requestClient is the client address of r (see clientKey).
func requestClient(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	if ip := net.ParseIP(host); ip != nil {
		return ipKey(ip)
	}
	return host
}
