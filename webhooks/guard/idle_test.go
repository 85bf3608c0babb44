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
// answered 503. Now a new client's connection takes the place of one idle connection (the oldest
// of a client holding the most) and is served; at its own per-client cap, a client's new
// connection replaces its own oldest idle one. No idle connection is closed while there is room.
func TestIdleConnectionsCannotFillTheCap(t *testing.T) {
	limits := Limits{MaxConns: 16, MaxConnsPerClient: 4, IdleTimeout: time.Minute}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, lis := Intake(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }), ln, limits, nil)
	go srv.Serve(lis)
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
	served := func(c net.Conn) bool {
		if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: parley\r\nConnection: close\r\n\r\n"); err != nil {
			return false
		}
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		reply, _ := io.ReadAll(c)
		return len(reply) >= 12 && string(reply[9:12]) == "200"
	}
	closed := func(c net.Conn) bool {
		_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		_, err := c.Read(make([]byte, 1))
		return err == io.EOF
	}
	var idle []net.Conn
	for i := range limits.MaxConns / limits.MaxConnsPerClient {
		for range limits.MaxConnsPerClient {
			idle = append(idle, dial(fmt.Sprintf("127.0.0.%d", 10+i)))
		}
	}
	// Let the server see every idle connection before the next arrives.
	time.Sleep(100 * time.Millisecond)
	if !served(dial("127.0.0.99")) {
		t.Fatal("another client was refused while the listener was full of idle connections")
	}
	var gone int
	for _, c := range idle {
		if closed(c) {
			gone++
		}
	}
	if gone != 1 {
		t.Errorf("%d idle connections closed for one new one, want 1", gone)
	}
	// A client at its own cap: its new connection replaces its oldest idle one.
	own := idle[len(idle)-limits.MaxConnsPerClient:]
	if !served(dial("127.0.0.13")) {
		t.Fatal("a client at its per-client cap with idle connections was refused")
	}
	if !closed(own[0]) {
		t.Error("the client's oldest idle connection was not the one closed")
	}
}
