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
// times at once and then PerMinute times a minute. A client over its budget is refused (429,
// Throttled) before its credentials are looked at, so a flood of wrong signatures or tokens
// costs neither an HMAC over a large body nor a query on the token store. A nil *Failures
// limits nothing.
type Failures struct {
	every   rate.Limit
	burst   int
	metrics *Metrics
	now     func() time.Time

	mu      sync.Mutex
	clients map[string]*rate.Limiter
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
	return &Failures{every: every, burst: burst, metrics: cfg.Metrics, now: now,
		clients: map[string]*rate.Limiter{}, overflow: rate.NewLimiter(every, burst)}
}

// Throttled reports whether r's client is out of failures, and how long until it may try
// again. endpoint names the endpoint in the metric (a fixed string).
func (f *Failures) Throttled(r *http.Request, endpoint string) (retryAfter time.Duration, throttled bool) {
	if f == nil {
		return 0, false
	}
	now := f.now()
	f.mu.Lock()
	lim := f.limiter(requestClient(r), now, false)
	var tokens float64
	if lim != nil {
		tokens = lim.TokensAt(now)
	}
	f.mu.Unlock()
	if lim == nil || tokens >= 1 {
		return 0, false
	}
	f.metrics.authThrottled(endpoint)
	return time.Duration(math.Ceil((1-tokens)/float64(f.every)) * float64(time.Second)), true
}

// Failed counts a failed authentication of r's client.
func (f *Failures) Failed(r *http.Request) {
	if f == nil {
		return
	}
	now := f.now()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.limiter(requestClient(r), now, true).AllowN(now, 1)
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
