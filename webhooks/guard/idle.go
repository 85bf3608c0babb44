package guard

import (
	"net"
	"net/http"
	"slices"
	"sync"
)

// idleConns knows which of the intake's connections are idle: opened and silent, or kept alive
// between requests. When the listener is at a cap, a new connection takes the place of the
// oldest idle one (of its own client at the per-client cap, of the client holding the most idle
// ones at the total cap) rather than being refused: otherwise MaxConns/MaxConnsPerClient
// addresses (16 by default) holding idle connections, which cost them nothing, would fill the
// listener. Idle connections are closed only then: closing one while there is room would race
// with its client's next request on it, and a keep-alive client (GitHub, a proxy's pool) would see
// its delivery fail.
type idleConns struct {
	mu       sync.Mutex
	byClient map[string][]net.Conn // oldest first
}

func newIdleConns() *idleConns { return &idleConns{byClient: map[string][]net.Conn{}} }

// state is the http.Server's ConnState hook.
func (t *idleConns) state(c net.Conn, s http.ConnState) {
	client := clientKey(c.RemoteAddr())
	t.mu.Lock()
	defer t.mu.Unlock()
	conns := t.byClient[client]
	if i := slices.Index(conns, c); i >= 0 {
		conns = slices.Delete(conns, i, i+1)
	}
	if s == http.StateNew || s == http.StateIdle {
		conns = append(conns, c)
	}
	if len(conns) == 0 {
		delete(t.byClient, client)
	} else {
		t.byClient[client] = conns
	}
}

// take removes and returns the oldest idle connection of client or, for client "", of the client
// holding the most; nil when there is none. The caller closes it.
func (t *idleConns) take(client string) net.Conn {
	t.mu.Lock()
	defer t.mu.Unlock()
	if client == "" {
		for k, conns := range t.byClient {
			if client == "" || len(conns) > len(t.byClient[client]) {
				client = k
			}
		}
	}
	conns := t.byClient[client]
	if len(conns) == 0 {
		return nil
	}
	c := conns[0]
	if len(conns) == 1 {
		delete(t.byClient, client)
	} else {
		t.byClient[client] = conns[1:]
	}
	return c
}

// Intake returns serve's intake: Server(h, l) served on Listen(ln, l, m), sharing which
// connections are idle, so that at a connection cap a new connection takes the place of an idle
// one instead of being refused.
func Intake(h http.Handler, ln net.Listener, l Limits, m *Metrics) (*http.Server, net.Listener) {
	idle := newIdleConns()
	srv := Server(h, l)
	srv.ConnState = idle.state
	lis := Listen(ln, l, m).(*listener)
	lis.idle = idle
	return srv, lis
}
