package guard

import (
	"net"
	"sync"
	"time"
)

// Listen wraps ln so that at most l.MaxConns connections are open at once, and at most
// l.MaxConnsPerClient from one client address. A connection over either cap is answered
// "503 Service Unavailable" with Retry-After and closed: after its Retry-After (refusalHold)
// while fewer than maxHeldRefusals wait so, at once otherwise. It costs a file descriptor for
// at most a second, not for as long as its client likes. m may be nil.
//
// Written here rather than taken from golang.org/x/net/netutil: its LimitListener stops
// accepting at the cap, which leaves every further connection (the health checks' and
// GitHub's too) queued in the kernel's backlog behind the attacker's, and it has no
// per-client cap.
func Listen(ln net.Listener, l Limits, m *Metrics) net.Listener {
	return &listener{Listener: ln, max: l.MaxConns, perClient: l.MaxConnsPerClient, metrics: m, byClient: map[string]int{},
		refusals: newHeldRefusals(maxHeldRefusals, refusalHold)}
}

type listener struct {
	net.Listener
	max, perClient int
	metrics        *Metrics
	// idle, set by Intake, gives up an idle connection for a new one at a cap.
	idle *idleConns

	mu       sync.Mutex
	open     int
	byClient map[string]int

	refusals *heldRefusals
}

// Close stops accepting and answers, at once, the refused connections still held.
func (l *listener) Close() error {
	err := l.Listener.Close()
	l.refusals.close()
	return err
}

// Reasons a connection is refused, the label of parley_http_connections_refused_total.
const (
	refusedTotal     = "total"
	refusedPerClient = "per_client"
)

// overCap is what a refused connection reads: a complete answer, so that a client sees why
// rather than a reset.
const overCap = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n" +
	"Retry-After: 1\r\nConnection: close\r\nContent-Length: 25\r\n\r\ntoo many open connections"

func (l *listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		client := clientKey(c.RemoteAddr())
		reason := l.admit(client)
		if reason != "" && l.idle != nil {
			// At the per-client cap the client's own oldest idle connection makes room; at the
			// total cap, the oldest of the client holding the most idle ones.
			victim := client
			if reason == refusedTotal {
				victim = ""
			}
			if old := l.idle.take(victim); old != nil {
				l.metrics.idleClosed()
				_ = old.Close() // gives its slot back at once (conn.Close)
				reason = l.admit(client)
			}
		}
		if reason != "" {
			l.metrics.connectionRefused(reason)
			if !l.refusals.hold(c) {
				refuse(c)
			}
			continue
		}
		l.metrics.connectionOpened()
		return &conn{Conn: c, release: sync.OnceFunc(func() { l.release(client) })}, nil
	}
}

// admit counts a new connection of client, or returns why it is refused.
func (l *listener) admit(client string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.max > 0 && l.open >= l.max {
		return refusedTotal
	}
	if l.perClient > 0 && l.byClient[client] >= l.perClient {
		return refusedPerClient
	}
	l.open++
	l.byClient[client]++
	return ""
}

func (l *listener) release(client string) {
	l.mu.Lock()
	l.open--
	if l.byClient[client]--; l.byClient[client] <= 0 {
		delete(l.byClient, client)
	}
	l.mu.Unlock()
	l.metrics.connectionClosed()
}

// refuse answers a connection over a cap and closes it. A fresh socket's send buffer takes these
// bytes at once; the deadline only keeps a pathological peer from holding the caller.
func refuse(c net.Conn) {
	_ = c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	_, _ = c.Write([]byte(overCap))
	_ = c.Close()
}

// Refused connections are held for their Retry-After before they are answered. A client refused
// at once comes back at once: under bench/attack's flood of connections that hold requests open
// (declared bodies never sent, bodies at a byte a second), refused connections were reopened
// some 700 times a second, and accepting, answering and closing them was the largest share of
// what the flood cost serve (accept, write and close: 0.5 s of CPU in 14 s, issue 34). Held for
// the second its answer says to wait, a client that waits for its answer comes back a tenth as
// often. A held connection costs a file descriptor and a timer, no goroutine, and is neither
// read nor counted against the caps; past maxHeldRefusals the others are refused at once, as
// before, so the hold bounds what it keeps.
const (
	refusalHold     = time.Second // the Retry-After overCap gives
	maxHeldRefusals = 512
)

// heldRefusals are the refused connections waiting for their answer, each with the timer that
// answers it. Owned by its listener: close answers them all and stops the timers.
type heldRefusals struct {
	max  int
	wait time.Duration

	mu     sync.Mutex
	conns  map[net.Conn]*time.Timer
	closed bool
}

func newHeldRefusals(max int, wait time.Duration) *heldRefusals {
	return &heldRefusals{max: max, wait: wait, conns: map[net.Conn]*time.Timer{}}
}

// hold keeps c until its answer is due, reporting false (c untouched) when max are held already
// or the listener is closed: the caller refuses it at once.
func (h *heldRefusals) hold(c net.Conn) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed || len(h.conns) >= h.max {
		return false
	}
	h.conns[c] = time.AfterFunc(h.wait, func() { h.answer(c) })
	return true
}

// answer refuses c if it is still held (close may have answered it first).
func (h *heldRefusals) answer(c net.Conn) {
	h.mu.Lock()
	_, ok := h.conns[c]
	delete(h.conns, c)
	h.mu.Unlock()
	if ok {
		refuse(c)
	}
}

// close answers every held connection now and holds no more.
func (h *heldRefusals) close() {
	h.mu.Lock()
	h.closed = true
	conns := h.conns
	h.conns = map[net.Conn]*time.Timer{}
	h.mu.Unlock()
	for c, t := range conns {
		t.Stop()
		refuse(c)
	}
}

// held is how many connections wait for their answer.
func (h *heldRefusals) held() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.conns)
}

// conn gives its slot back when it is closed, however many times that is.
type conn struct {
	net.Conn
	release func()
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.release()
	return err
}

// clientKey is the client a remote address counts against: its IP, or for IPv6 its /64.
func clientKey(a net.Addr) string {
	var ip net.IP
	switch a := a.(type) {
	case *net.TCPAddr:
		ip = a.IP
	default:
		host, _, err := net.SplitHostPort(a.String())
		if err != nil {
			return a.String()
		}
		ip = net.ParseIP(host)
		if ip == nil {
			return host
		}
	}
	return ipKey(ip)
}

func ipKey(ip net.IP) string {
	if v4 := ip.To4(); v4 != nil {
		return v4.String()
	}
	return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
}
