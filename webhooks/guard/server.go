package guard

import (
	"io"
	"net/http"
	"sync"
	"time"
)

// Limits are the bounds serve's intake listener is held to. A zero duration or count turns that
// bound off.
type Limits struct {
	// ReadHeaderTimeout bounds the reading of a request's headers.
	ReadHeaderTimeout time.Duration
	// BodyTimeout bounds the reading of a request's body, counted from the end of its headers.
	BodyTimeout time.Duration
	// WriteTimeout bounds a request's handling and the writing of its answer.
	WriteTimeout time.Duration
	// IdleTimeout is how long a keep-alive connection may wait for its next request.
	IdleTimeout time.Duration
	// MaxConns caps open connections in total; MaxConnsPerClient per client address.
	MaxConns          int
	MaxConnsPerClient int
}

// DefaultLimits are serve's defaults: generous for GitHub (which gives up on a delivery after
// 10 s) and for the drift sources inside a cluster, tight enough that a client holding
// connections open gains nothing.
var DefaultLimits = Limits{
	ReadHeaderTimeout: 10 * time.Second,
	BodyTimeout:       30 * time.Second,
	WriteTimeout:      2 * time.Minute,
	IdleTimeout:       60 * time.Second,
	MaxConns:          1024,
	MaxConnsPerClient: 64,
}

// Server returns an http.Server for h held to l's timeouts. Serve it on a listener from Listen
// to cap its connections as well, or take both from Intake.
//
// The body deadline is set per request (BodyDeadline) rather than through ReadTimeout: once a
// handler has read its body, net/http keeps reading the connection in the background to notice
// a client that went away, and a ReadTimeout expiring during a long handler (a proposal judged
// against a fresh fetch) would cancel that handler's context.
func Server(h http.Handler, l Limits) *http.Server {
	if l.BodyTimeout > 0 {
		h = BodyDeadline(h, l.BodyTimeout)
	}
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: l.ReadHeaderTimeout,
		WriteTimeout:      l.WriteTimeout,
		IdleTimeout:       l.IdleTimeout,
	}
}

// BodyDeadline sets a read deadline of d on each request's body before h runs, and lifts it
// once the body has been read to its end, so that a client sending its body slowly (or not at
// all) is cut off after d, whatever the handler does, while the handler itself may run longer.
func BodyDeadline(h http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody {
			rc := http.NewResponseController(w)
			// Fails only where the connection cannot take deadlines (a test recorder): the
			// request is then served without one.
			if err := rc.SetReadDeadline(time.Now().Add(d)); err == nil {
				r.Body = &deadlineBody{ReadCloser: r.Body, lift: sync.OnceFunc(func() { _ = rc.SetReadDeadline(time.Time{}) })}
			}
		}
		h.ServeHTTP(w, r)
	})
}

// deadlineBody lifts the body's read deadline at the body's end.
type deadlineBody struct {
	io.ReadCloser
	lift func()
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.lift()
	}
	return n, err
}
