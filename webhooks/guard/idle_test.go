package guard

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestIdleConnectionsCannotFillTheCap is issue 34 problem 6: with the total cap at MaxConns and
// MaxConnsPerClient from each address, MaxConns/MaxConnsPerClient addresses (16 at serve's
// defaults, 4 here) holding idle connections filled the listener, and every other client was
// answered 503. With idle connections bounded per client, each keeps only its newest two idle
// (its oldest are closed), and another client is served.
func TestIdleConnectionsCannotFillTheCap(t *testing.T) {
	limits := Limits{MaxConns: 16, MaxConnsPerClient: 4, MaxIdleConnsPerClient: 2, IdleTimeout: time.Minute}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := Server(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }), limits, nil)
	go srv.Serve(Listen(ln, limits, nil))
	t.Cleanup(func() { srv.Close() })
	addr := ln.Addr().String()
	dial := func(from string) net.Conn {
		t.Helper()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	var idle [][]net.Conn
	for i := range limits.MaxConns / limits.MaxConnsPerClient {
		var conns []net.Conn
		for range limits.MaxConnsPerClient {
			conns = append(conns, dial(fmt.Sprintf("127.0.0.%d", 10+i)))
		}
		idle = append(idle, conns)
	}
	// Another client: served, not refused for a listener full of idle connections.
	c := dial("127.0.0.99")
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: parley\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	reply, _ := io.ReadAll(c)
	if len(reply) < 12 || string(reply[9:12]) != "200" {
		t.Fatalf("another client was answered %q, want 200", reply)
	}
	// Each idle client kept its newest MaxIdleConnsPerClient; its older ones were closed.
	for i, conns := range idle {
		for j, c := range conns {
			_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
			_, err := c.Read(make([]byte, 1))
			closed := err == io.EOF
			if want := j < len(conns)-limits.MaxIdleConnsPerClient; closed != want {
				t.Errorf("client %d's idle connection %d: closed %v, want %v (%v)", i, j, closed, want, err)
			}
		}
	}
}
