// Package ghclient is the HTTP layer under Parley's go-github clients: conditional GETs with ETags
// (a 304 answer is free against GitHub's primary rate limit), waiting out 403/429 rate limiting as
// GitHub asks (Retry-After, X-RateLimit-Reset), a bound on concurrent requests per installation,
// and a count of calls by route and status for metrics. Each concern is one http.RoundTripper;
// Chain stacks them.
package ghclient

import (
	"bytes"
	"container/list"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// maxCachedBody bounds what the ETag cache keeps per response.
const maxCachedBody = 4 << 20

// ETagCache revalidates GET responses with If-None-Match and serves the cached body on 304. Entries
// are keyed by URL and by a hash of the Authorization header, so installations never see each
// other's answers; the least recently used entry is evicted past Max entries.
type ETagCache struct {
	Base http.RoundTripper
	Max  int // entries; default 1024

	mu      sync.Mutex
	entries map[string]*list.Element
	order   *list.List
	hits    int
}

type cached struct {
	key    string
	etag   string
	status int
	header http.Header
	body   []byte
}

// Hits is the number of requests answered from the cache after a 304.
func (c *ETagCache) Hits() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hits
}

func cacheKey(req *http.Request) string {
	auth := sha256.Sum256([]byte(req.Header.Get("Authorization")))
	return fmt.Sprintf("%x %s", auth[:8], req.URL.String())
}

// RoundTrip implements http.RoundTripper.
func (c *ETagCache) RoundTrip(req *http.Request) (*http.Response, error) {
	base := c.Base
	if base == nil {
		base = http.DefaultTransport
	}
	if req.Method != http.MethodGet {
		return base.RoundTrip(req)
	}
	key := cacheKey(req)
	c.mu.Lock()
	if c.entries == nil {
		c.entries, c.order = map[string]*list.Element{}, list.New()
	}
	var hit *cached
	if el, ok := c.entries[key]; ok {
		hit = el.Value.(*cached)
		c.order.MoveToFront(el)
	}
	c.mu.Unlock()
	if hit != nil {
		req = req.Clone(req.Context())
		req.Header.Set("If-None-Match", hit.etag)
	}
	resp, err := base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusNotModified && hit != nil {
		resp.Body.Close()
		c.mu.Lock()
		c.hits++
		c.mu.Unlock()
		h := hit.header.Clone()
		for k, v := range resp.Header { // fresh rate-limit headers
			h[k] = v
		}
		return &http.Response{Status: http.StatusText(hit.status), StatusCode: hit.status, Proto: resp.Proto, ProtoMajor: resp.ProtoMajor,
			ProtoMinor: resp.ProtoMinor, Header: h, Body: io.NopCloser(bytes.NewReader(hit.body)), ContentLength: int64(len(hit.body)), Request: req}, nil
	}
	etag := resp.Header.Get("ETag")
	if resp.StatusCode != http.StatusOK || etag == "" || resp.ContentLength > maxCachedBody {
		return resp, nil
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxCachedBody+1))
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if len(body) > maxCachedBody {
		return resp, nil
	}
	c.store(&cached{key: key, etag: etag, status: resp.StatusCode, header: resp.Header.Clone(), body: body})
	return resp, nil
}

func (c *ETagCache) store(e *cached) {
	max := c.Max
	if max <= 0 {
		max = 1024
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[e.key]; ok {
		el.Value = e
		c.order.MoveToFront(el)
		return
	}
	c.entries[e.key] = c.order.PushFront(e)
	for c.order.Len() > max {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.entries, last.Value.(*cached).key)
	}
}

// RateLimit waits and retries when GitHub answers 403 or 429 with Retry-After, or with
// X-RateLimit-Remaining: 0 and X-RateLimit-Reset. It retries only requests it can replay (no body,
// or a body with GetBody), at most Retries times, and never waits longer than MaxWait at once: a
// longer wait is GitHub's answer returned to the caller, whose delivery is retried later.
type RateLimit struct {
	Base    http.RoundTripper
	MaxWait time.Duration // default 60s
	Retries int           // default 3
	// Sleep waits for d or until ctx ends; tests replace it.
	Sleep func(ctx context.Context, d time.Duration) error
	Now   func() time.Time
	// OnRecord, if set, is told the remaining primary limit after each answer that reports it.
	OnRecord func(remaining int)

	mu        sync.Mutex
	remaining int
	reset     time.Time
}

// Remaining is the primary rate limit left as GitHub last reported it (-1 before any answer).
func (r *RateLimit) Remaining() (int, time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.reset.IsZero() {
		return -1, time.Time{}
	}
	return r.remaining, r.reset
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// RoundTrip implements http.RoundTripper.
func (r *RateLimit) RoundTrip(req *http.Request) (*http.Response, error) {
	base, sleep, now := r.Base, r.Sleep, r.Now
	if base == nil {
		base = http.DefaultTransport
	}
	if sleep == nil {
		sleep = sleepCtx
	}
	if now == nil {
		now = time.Now
	}
	maxWait, retries := r.MaxWait, r.Retries
	if maxWait <= 0 {
		maxWait = time.Minute
	}
	if retries <= 0 {
		retries = 3
	}
	for attempt := 0; ; attempt++ {
		resp, err := base.RoundTrip(req)
		if err != nil {
			return nil, err
		}
		r.record(resp)
		wait, limited := waitFor(resp, now())
		if !limited || attempt >= retries || wait > maxWait || (req.Body != nil && req.GetBody == nil) {
			return resp, nil
		}
		resp.Body.Close()
		if err := sleep(req.Context(), wait); err != nil {
			return nil, err
		}
		if req.GetBody != nil {
			body, err := req.GetBody()
			if err != nil {
				return nil, err
			}
			req = req.Clone(req.Context())
			req.Body = body
		}
	}
}

func (r *RateLimit) record(resp *http.Response) {
	rem, err1 := strconv.Atoi(resp.Header.Get("X-RateLimit-Remaining"))
	reset, err2 := strconv.ParseInt(resp.Header.Get("X-RateLimit-Reset"), 10, 64)
	if err1 != nil || err2 != nil {
		return
	}
	r.mu.Lock()
	r.remaining, r.reset = rem, time.Unix(reset, 0)
	r.mu.Unlock()
	if r.OnRecord != nil {
		r.OnRecord(rem)
	}
}

// waitFor says how long GitHub asks to wait before trying again.
func waitFor(resp *http.Response, now time.Time) (time.Duration, bool) {
	if resp.StatusCode != http.StatusForbidden && resp.StatusCode != http.StatusTooManyRequests {
		return 0, false
	}
	if s := resp.Header.Get("Retry-After"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n >= 0 {
			return time.Duration(n) * time.Second, true
		}
		if t, err := http.ParseTime(s); err == nil {
			return max(t.Sub(now), 0), true
		}
	}
	if resp.Header.Get("X-RateLimit-Remaining") == "0" {
		if reset, err := strconv.ParseInt(resp.Header.Get("X-RateLimit-Reset"), 10, 64); err == nil {
			return max(time.Unix(reset, 0).Sub(now), 0) + time.Second, true
		}
	}
	return 0, false // a 403 for lack of permission: not rate limiting
}

// Limit allows at most N requests in flight through it: one Limit per installation keeps Parley
// inside GitHub's concurrency limits however many deliveries are being handled.
type Limit struct {
	Base http.RoundTripper
	sem  chan struct{}
}

// NewLimit returns a Limit of n concurrent requests over base.
func NewLimit(base http.RoundTripper, n int) *Limit {
	if n < 1 {
		n = 1
	}
	return &Limit{Base: base, sem: make(chan struct{}, n)}
}

// RoundTrip implements http.RoundTripper.
func (l *Limit) RoundTrip(req *http.Request) (*http.Response, error) {
	select {
	case l.sem <- struct{}{}:
	case <-req.Context().Done():
		return nil, req.Context().Err()
	}
	base := l.Base
	if base == nil {
		base = http.DefaultTransport
	}
	resp, err := base.RoundTrip(req)
	if err != nil || resp.Body == nil {
		<-l.sem
		return resp, err
	}
	// The slot is held until the body is read to its end or closed, whichever comes first: that is
	// when the request is done. Reading to the end must be enough, because go-github never closes
	// the body of an error answer (CheckResponse reads it and swaps in a copy, which is what Do
	// closes): waiting for Close alone leaked a slot per 404, so a team membership or commit
	// lookup answered "not found" a few times left every later call of the installation waiting.
	resp.Body = &releaseOnDone{ReadCloser: resp.Body, release: func() { <-l.sem }}
	return resp, nil
}

// releaseOnDone releases a Limit's slot once, when its body reports the end (or a read error) or
// is closed.
type releaseOnDone struct {
	io.ReadCloser
	once    sync.Once
	release func()
}

func (r *releaseOnDone) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	if err != nil {
		r.once.Do(r.release)
	}
	return n, err
}

func (r *releaseOnDone) Close() error {
	err := r.ReadCloser.Close()
	r.once.Do(r.release)
	return err
}

// Counter counts calls by route template and status into a Prometheus counter.
type Counter struct {
	Base  http.RoundTripper
	calls *prometheus.CounterVec
}

// NewCounter registers parley_github_calls_total{route,status} on reg.
func NewCounter(base http.RoundTripper, reg prometheus.Registerer) (*Counter, error) {
	cv := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "parley_github_calls_total",
		Help: "GitHub REST calls by route template and status (304s are revalidations, free against the rate limit)."}, []string{"route", "status"})
	if err := reg.Register(cv); err != nil {
		return nil, fmt.Errorf("register GitHub call counter: %w", err)
	}
	return &Counter{Base: base, calls: cv}, nil
}

type callCountKey struct{}

// WithCallCount returns a context whose GitHub calls through a Counter are also counted in the
// returned counter: a handler reads it to report the calls one event cost.
func WithCallCount(ctx context.Context) (context.Context, *atomic.Int64) {
	n := new(atomic.Int64)
	return context.WithValue(ctx, callCountKey{}, n), n
}

// Wrap returns a Counter over base that counts into the same metric.
func (c *Counter) Wrap(base http.RoundTripper) *Counter { return &Counter{Base: base, calls: c.calls} }

// RoundTrip implements http.RoundTripper.
func (c *Counter) RoundTrip(req *http.Request) (*http.Response, error) {
	base := c.Base
	if base == nil {
		base = http.DefaultTransport
	}
	resp, err := base.RoundTrip(req)
	status := "error"
	if err == nil {
		status = strconv.Itoa(resp.StatusCode)
	}
	c.calls.WithLabelValues(req.Method+" "+Route(req.URL.Path), status).Inc()
	if n, ok := req.Context().Value(callCountKey{}).(*atomic.Int64); ok {
		n.Add(1)
	}
	return resp, err
}

var (
	hexSHA  = regexp.MustCompile(`^[0-9a-f]{40}$`)
	numeric = regexp.MustCompile(`^[0-9]+$`)
)

// Route turns a request path into a low-cardinality template: owner and repository names,
// numbers and commit hashes become placeholders (/repos/{owner}/{repo}/issues/{n}/comments).
func Route(path string) string {
	path = strings.TrimPrefix(path, "/api/v3")
	segs := strings.Split(strings.Trim(path, "/"), "/")
	for i, s := range segs {
		switch {
		case i > 0 && segs[0] == "repos" && i == 1:
			segs[i] = "{owner}"
		case i > 0 && segs[0] == "repos" && i == 2:
			segs[i] = "{repo}"
		case numeric.MatchString(s):
			segs[i] = "{n}"
		case hexSHA.MatchString(s):
			segs[i] = "{sha}"
		case i > 0 && segs[i-1] == "contents":
			segs = append(segs[:i], "{path}")
			return "/" + strings.Join(segs, "/")
		}
	}
	return "/" + strings.Join(segs, "/")
}

// Chain stacks the layers in the order they must see a request: count every attempt, wait out
// rate limits, revalidate with ETags, bound concurrency; base is the authenticated transport below.
func Chain(base http.RoundTripper, cache *ETagCache, limit *RateLimit, counter *Counter, concurrency int) http.RoundTripper {
	var rt http.RoundTripper = NewLimit(base, concurrency)
	counter.Base = rt
	cache.Base = counter
	limit.Base = cache
	return limit
}
