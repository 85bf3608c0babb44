package webhooks

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/parleyhq/parley/webhooks/guard"
	"github.com/parleyhq/parley/webhooks/store"
)

// attackBody is the attack of issue 34: a 24 MiB body under a wrong signature.
const attackBody = 24 << 20

// heldRequest is a raw HTTP/1.1 request whose body is sent in two parts, so that a test can hold
// it half sent: the server has reserved it and is reading it.
type heldRequest struct {
	conn net.Conn
	br   *bufio.Reader
	rest []byte
}

// startHeld connects from local (nil: any), sends headers declaring len(body) bytes and the
// first 64 KiB of body.
func startHeld(t *testing.T, addr string, local net.IP, path string, header map[string]string, body []byte) *heldRequest {
	t.Helper()
	d := net.Dialer{Timeout: 10 * time.Second}
	if local != nil {
		d.LocalAddr = &net.TCPAddr{IP: local}
	}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	var b strings.Builder
	fmt.Fprintf(&b, "POST %s HTTP/1.1\r\nHost: parley\r\nContent-Length: %d\r\n", path, len(body))
	for k, v := range header {
		fmt.Fprintf(&b, "%s: %s\r\n", k, v)
	}
	b.WriteString("\r\n")
	first := body[:64<<10]
	if _, err := conn.Write(append([]byte(b.String()), first...)); err != nil {
		t.Fatal(err)
	}
	return &heldRequest{conn: conn, br: bufio.NewReader(conn), rest: body[len(first):]}
}

// answer reads the response; code 0 when the connection broke first.
func (h *heldRequest) answer() (code int, retryAfter string) {
	_ = h.conn.SetReadDeadline(time.Now().Add(60 * time.Second))
	resp, err := http.ReadResponse(h.br, nil)
	if err != nil {
		return 0, ""
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Retry-After")
}

// TestUnauthenticatedBodiesHeldWithinBudget is the attack of issue 34 problem 3, on the GitHub
// receiver and Flux's signed endpoint: 64 connections each declaring 24 MiB under a wrong
// signature. Before, every one was read into a growing buffer (about 43 MiB held each, 2.5 GB in
// all); now only as many as fit the unauthenticated body budget (here 48 MiB: two) are read, the
// rest are answered 503 with Retry-After before a byte of their body is read, the bytes held never
// exceed the budget, the bodies read are answered 401 once complete, and the budget is whole
// again afterwards.
func TestUnauthenticatedBodiesHeldWithinBudget(t *testing.T) {
	const conns, budget = 64, 2 * attackBody
	wrongSig := "sha256=" + strings.Repeat("0", 64)
	body := bytes.Repeat([]byte{'x'}, attackBody)
	for _, c := range []struct {
		name, path string
		header     map[string]string
	}{
		{"github", GitHubPath, map[string]string{HeaderEvent: "push", HeaderDelivery: "d-1", HeaderSignature: wrongSig, "Content-Type": "application/json"}},
		{"flux", FluxPath, map[string]string{HeaderXSignature: wrongSig, "Content-Type": "application/json"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			spool := t.TempDir()
			bodies := guard.NewBodies(guard.BodiesConfig{Total: budget})
			h := budgetReceivers(t, bodies, spool, nil)
			srv := httptest.NewServer(h)
			t.Cleanup(srv.Close) // after the connections close (cleanups run last first)
			addr := strings.TrimPrefix(srv.URL, "http://")

			// Watch the budget while the attack runs: it is never over.
			var peak atomic.Int64
			stop := make(chan struct{})
			var watch sync.WaitGroup
			watch.Go(func() {
				for {
					peak.Store(max(peak.Load(), bodies.Held()))
					select {
					case <-stop:
						return
					case <-time.After(time.Millisecond):
					}
				}
			})
			stopWatch := sync.OnceFunc(func() { close(stop); watch.Wait() })
			defer stopWatch()

			held := make([]*heldRequest, conns)
			for i := range held {
				held[i] = startHeld(t, addr, nil, c.path, c.header, body)
			}
			type answer struct {
				i          int
				code       int
				retryAfter string
			}
			answers := make(chan answer, conns)
			for i, r := range held {
				go func() { code, ra := r.answer(); answers <- answer{i, code, ra} }()
			}
			// Every connection the budget has no room for is answered at once; the two it holds
			// wait for the rest of their body.
			refused := map[int]bool{}
			for n := range conns - budget/attackBody {
				var a answer
				select {
				case a = <-answers:
				case <-time.After(20 * time.Second):
					t.Fatalf("%d connections answered in 20 s while their bodies were held half sent, want %d refused at once (%d bytes held)",
						n, conns-budget/attackBody, bodies.Held())
				}
				if a.code != http.StatusServiceUnavailable || a.retryAfter == "" {
					t.Fatalf("connection %d answered %d (Retry-After %q) while the budget was full, want 503 with Retry-After", a.i, a.code, a.retryAfter)
				}
				refused[a.i] = true
			}
			if got := bodies.Held(); got != budget {
				t.Errorf("%d bytes held by the bodies being read, want the budget %d", got, budget)
			}
			select {
			case a := <-answers:
				t.Fatalf("connection %d answered %d before its body was sent", a.i, a.code)
			case <-time.After(100 * time.Millisecond):
			}
			for i, r := range held {
				if !refused[i] {
					if _, err := r.conn.Write(r.rest); err != nil {
						t.Fatal(err)
					}
				}
			}
			for range budget / attackBody {
				if a := <-answers; a.code != http.StatusUnauthorized {
					t.Errorf("a completed body with a wrong signature answered %d, want 401", a.code)
				}
			}
			stopWatch()
			if p := peak.Load(); p > budget {
				t.Errorf("the bodies held %d bytes at the peak, over the budget of %d", p, budget)
			}
			if got := bodies.Held(); got != 0 {
				t.Errorf("%d bytes still held after every request was answered", got)
			}
			if left, _ := os.ReadDir(spool); len(left) != 0 {
				t.Errorf("spool files left behind: %v", left)
			}
		})
	}
}

// TestBodyBudgetShareLeavesRoomForOthers: one client address holds at most its share of the
// budget, so while it floods big bodies under wrong signatures, a valid delivery from another
// address is stored.
func TestBodyBudgetShareLeavesRoomForOthers(t *testing.T) {
	wrongSig := "sha256=" + strings.Repeat("0", 64)
	body := bytes.Repeat([]byte{'x'}, attackBody)
	bodies := guard.NewBodies(guard.BodiesConfig{Total: 2 * attackBody, PerClient: attackBody})
	st := openStore(t, store.Options{})
	h := budgetReceivers(t, bodies, t.TempDir(), st)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	addr := strings.TrimPrefix(srv.URL, "http://")
	attacker := net.ParseIP("127.0.0.2")
	header := map[string]string{HeaderEvent: "push", HeaderDelivery: "d-1", HeaderSignature: wrongSig, "Content-Type": "application/json"}
	first := startHeld(t, addr, attacker, GitHubPath, header, body)
	// The attacker's first body is being read (its share is held) before the second is sent.
	deadline := time.Now().Add(30 * time.Second)
	for bodies.Held() != attackBody {
		if time.Now().After(deadline) {
			t.Fatalf("the first body never reserved its bytes (%d held)", bodies.Held())
		}
		time.Sleep(5 * time.Millisecond)
	}
	second := startHeld(t, addr, attacker, GitHubPath, header, body)
	if code, _ := second.answer(); code != http.StatusServiceUnavailable {
		t.Fatalf("the attacker's second body, over its share, answered %d, want 503", code)
	}
	valid := bytes.Repeat([]byte(" "), attackBody-2)
	valid = append(append([]byte("{"), valid...), '}')
	other := startHeld(t, addr, net.ParseIP("127.0.0.3"), GitHubPath, map[string]string{HeaderEvent: "push", HeaderDelivery: "d-valid",
		HeaderSignature: Sign(mustSecret(t, "hook"), valid), "Content-Type": "application/json"}, valid)
	if _, err := other.conn.Write(other.rest); err != nil {
		t.Fatal(err)
	}
	if code, _ := other.answer(); code != http.StatusAccepted {
		t.Fatalf("a valid 24 MiB delivery from another address answered %d, want 202", code)
	}
	if d, err := st.Get(t.Context(), store.Key{Source: store.SourceGitHub, ID: "d-valid"}); err != nil || !bytes.Equal(d.Body, valid) {
		t.Fatalf("the valid delivery was not stored whole: %v", err)
	}
	if _, err := first.conn.Write(first.rest); err != nil {
		t.Fatal(err)
	}
	if code, _ := first.answer(); code != http.StatusUnauthorized {
		t.Fatalf("the attacker's first body answered %d, want 401", code)
	}
}

// budgetReceivers serves the GitHub receiver (secret "hook") and Flux's (secret "flux") under one
// budget, spooling to spool; st nil: a fresh store.
func budgetReceivers(t *testing.T, bodies *guard.Bodies, spool string, st *store.SQLite) http.Handler {
	t.Helper()
	if st == nil {
		st = openStore(t, store.Options{})
	}
	gh, err := NewReceiver(ReceiverConfig{Store: st, Secrets: []Secret{mustSecret(t, "hook")}, Bodies: bodies, SpoolDir: spool})
	if err != nil {
		t.Fatal(err)
	}
	flux, err := NewEventReceiver(EventReceiverConfig{Source: store.SourceFlux, Secrets: []Secret{mustSecret(t, "flux")},
		ID: func([]byte) ([]string, map[string]int, error) { return []string{"x"}, nil, nil }, Store: st, Bodies: bodies, SpoolDir: spool})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(GitHubPath, gh)
	mux.Handle(FluxPath, flux)
	return mux
}

// TestPendingBodySpoolsPastThreshold: a body past SpoolThreshold, of declared or unknown length,
// is held in an unlinked file (nothing in the spool directory) and read back whole; one under it
// stays in memory, sized exactly when its length is declared.
func TestPendingBodySpoolsPastThreshold(t *testing.T) {
	for _, c := range []struct {
		name     string
		size     int
		declared bool
		spooled  bool
	}{
		{"small declared", 1000, true, false},
		{"small chunked", 1000, false, false},
		{"large declared", 3 << 20, true, true},
		{"large chunked", 3 << 20, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			body := bytes.Repeat([]byte("0123456789abcdef"), c.size/16)
			req := httptest.NewRequest(http.MethodPost, "/", io.MultiReader(bytes.NewReader(body)))
			if c.declared {
				req.ContentLength = int64(len(body))
			} else {
				req.ContentLength = -1
			}
			bodies := guard.NewBodies(guard.BodiesConfig{Total: 64 << 20})
			p, err := readPending(httptest.NewRecorder(), req, 25<<20, intake{budget: bodies, endpoint: "test", spoolDir: dir})
			if err != nil {
				t.Fatal(err)
			}
			if (p.file != nil) != c.spooled {
				t.Errorf("spooled = %v, want %v", p.file != nil, c.spooled)
			}
			if c.declared && !c.spooled && cap(p.mem) != len(body) {
				t.Errorf("buffer of %d bytes for a declared %d", cap(p.mem), len(body))
			}
			if left, _ := os.ReadDir(dir); len(left) != 0 {
				t.Errorf("the spool file is visible: %v", left)
			}
			got, err := p.Bytes()
			if err != nil || !bytes.Equal(got, body) {
				t.Fatalf("read back %d bytes (%v), want the %d sent", len(got), err, len(body))
			}
			if bodies.Held() == 0 || bodies.Held() > 2*int64(len(body))+4096 {
				t.Errorf("%d bytes reserved for a body of %d", bodies.Held(), len(body))
			}
			p.Close()
			p.Close()
			if bodies.Held() != 0 {
				t.Errorf("%d bytes reserved after Close", bodies.Held())
			}
		})
	}
}

// TestPacedBodyIsReadAtItsRate: the body of a client over its failed-authentication budget is
// read no faster than its pace, so a flood of 24 MiB bodies under wrong signatures is no longer
// spooled and hashed at the network's speed; when the request's time runs out first, the read
// stops there.
func TestPacedBodyIsReadAtItsRate(t *testing.T) {
	body := bytes.Repeat([]byte("x"), 1<<20)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body)).WithContext(ctx)
	counted := &countingWriter{}
	pace := rate.NewLimiter(64<<10, 32<<10) // 64 KiB a second: the 1 MiB would take 16 s
	p, err := readPending(httptest.NewRecorder(), req, 25<<20, intake{endpoint: "test", spoolDir: t.TempDir(), pace: pace}, counted)
	defer p.Close()
	if err == nil {
		t.Fatalf("the paced read of 1 MiB finished in 300 ms, having hashed %d bytes", counted.n)
	}
	if counted.n > 128<<10 {
		t.Errorf("%d bytes read and hashed in 300 ms at 64 KiB a second", counted.n)
	}
}

type countingWriter struct{ n int }

func (c *countingWriter) Write(b []byte) (int, error) { c.n += len(b); return len(b), nil }
