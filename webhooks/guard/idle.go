package guard

import (
	"net"
	"net/http"
	"slices"
	"sync"
)

// idleConns bounds the idle connections of each client address: connected and sending nothing
// yet, or kept alive between requests. Without it a client may keep MaxConnsPerClient
// connections idle for IdleTimeout, and MaxConns/MaxConnsPerClient addresses (16 by default)
// fill the whole listener with connections that cost them nothing. When a client has max idle
// connections and another goes idle, its oldest idle one is closed: the newest is the one about
// to carry a request, and a client that keeps a pool of idle connections loses only what it
// does not use.
type idleConns struct {
	max     int
	metrics *Metrics

	mu       sync.Mutex
	byClient map[string][]net.Conn // oldest first
}

func newIdleConns(max int, m *Metrics) *idleConns {
	return &idleConns{max: max, metrics: m, byClient: map[string][]net.Conn{}}
}

// state is the http.Server's ConnState hook.
func (t *idleConns) state(c net.Conn, s http.ConnState) {
	client := clientKey(c.RemoteAddr())
	var evict net.Conn
	t.mu.Lock()
	conns := t.byClient[client]
	if i := slices.Index(conns, c); i >= 0 {
		conns = slices.Delete(conns, i, i+1)
	}
	if s == http.StateNew || s == http.StateIdle {
		if len(conns) >= t.max {
			evict, conns = conns[0], conns[1:]
		}
		conns = append(conns, c)
	}
	if len(conns) == 0 {
		delete(t.byClient, client)
	} else {
		t.byClient[client] = conns
	}
	t.mu.Unlock()
	if evict != nil {
		t.metrics.idleClosed()
		// Its own goroutine sees the read fail and reports it closed, which finds it gone.
		_ = evict.Close()
	}
}
