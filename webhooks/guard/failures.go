package guard

import (
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
type Failures struct {
	every   rate.Limit
	burst   int
	metrics *Metrics
	now     func() time.Time
	proxies *Proxies

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
}

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
	return &Failures{every: every, burst: burst, metrics: cfg.Metrics, now: now, proxies: cfg.Proxies,
		clients: map[string]*rate.Limiter{}, paces: map[string]*rate.Limiter{}, overflow: rate.NewLimiter(every, burst)}
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
