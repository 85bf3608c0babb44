package app

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/internal/agentstore"
	"github.com/parleyhq/parley/webhooks"
	"github.com/parleyhq/parley/webhooks/guard"
	"github.com/parleyhq/parley/webhooks/store"
)

// serveIntake starts parley serve with a Flux secret, an operations listener and env on top.
func serveIntake(t *testing.T, env map[string]string) (srv *Server, addr string) {
	t.Helper()
	_, _, pemKey := fakeApp(t)
	base := map[string]string{"PARLEY_APP_ID": "99", "PARLEY_PRIVATE_KEY": string(pemKey), "PARLEY_WEBHOOK_SECRETS": "hook",
		"PARLEY_STORE": filepath.Join(t.TempDir(), "parley.db"), "PARLEY_LISTEN": "127.0.0.1:0",
		"PARLEY_METRICS_LISTEN": "127.0.0.1:0", "PARLEY_FLUX_HMAC_SECRET": "flux"}
	for k, v := range env {
		base[k] = v
	}
	srv, url, _ := runServe(t, base)
	return srv, strings.TrimPrefix(url, "http://")
}

// dial opens a raw connection to addr.
func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// closedByServer reads c until the server closes it, and fails the test if the server had not
// within wait (the server is meant to cut the connection off long before).
func closedByServer(t *testing.T, c net.Conn, wait time.Duration) string {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(wait))
	got, err := io.ReadAll(c)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the server still held the connection after %s (read so far: %q)", wait, got)
	}
	return string(got)
}

// TestServeCutsOffSlowBodies: a client that declares a body and sends a few bytes of it is cut
// off after body_timeout, answered 400, and the connection closed.
func TestServeCutsOffSlowBodies(t *testing.T) {
	_, addr := serveIntake(t, map[string]string{"PARLEY_BODY_TIMEOUT": "300ms"})
	c := dial(t, addr)
	fmt.Fprintf(c, "POST /events/flux HTTP/1.1\r\nHost: parley\r\nContent-Type: application/json\r\n"+
		"X-Signature: sha256=%s\r\nContent-Length: 1000000\r\n\r\n{\"involvedObject\":", strings.Repeat("0", 64))
	got := closedByServer(t, c, 10*time.Second)
	if !strings.HasPrefix(got, "HTTP/1.1 400") || !strings.Contains(got, "read body") {
		t.Fatalf("answer to a slow body:\n%s", got)
	}
}

// TestServeClosesIdleConnections: a keep-alive connection that sends no next request is closed
// after idle_timeout; one that never sends its headers after read_header_timeout.
func TestServeClosesIdleConnections(t *testing.T) {
	_, addr := serveIntake(t, map[string]string{"PARLEY_IDLE_TIMEOUT": "300ms", "PARLEY_READ_HEADER_TIMEOUT": "300ms"})
	idle := dial(t, addr)
	fmt.Fprint(idle, "GET /healthz HTTP/1.1\r\nHost: parley\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(idle), nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz: %v %v", resp, err)
	}
	closedByServer(t, idle, 10*time.Second)

	silent := dial(t, addr)
	fmt.Fprint(silent, "GET /healthz HTTP/1.1\r\n") // and never the rest of the headers
	closedByServer(t, silent, 10*time.Second)
}

// TestServeCapsConnectionsAndProbesStillAnswer: a connection over max_connections_per_client,
// or over max_connections, while none of the open ones is idle, is answered 503 and closed (after
// its Retry-After: guard's TestRefusedConnectionIsAnsweredAfterItsRetryAfter), counted by reason; /healthz, /readyz and /metrics answer on metrics_listen all the
// while. (An idle connection would give way to it instead: guard's
// TestIdleConnectionsCannotFillTheCap.)
func TestServeCapsConnectionsAndProbesStillAnswer(t *testing.T) {
	for _, c := range []struct{ reason, total, perClient string }{
		{"per_client", "100", "2"},
		{"total", "2", "0"},
	} {
		t.Run(c.reason, func(t *testing.T) {
			srv, addr := serveIntake(t, map[string]string{"PARLEY_MAX_CONNECTIONS": c.total, "PARLEY_MAX_CONNECTIONS_PER_CLIENT": c.perClient})
			for range 2 {
				// Held open mid-request: a signed body declared and not sent.
				fmt.Fprintf(dial(t, addr), "POST /events/flux HTTP/1.1\r\nHost: parley\r\nContent-Type: application/json\r\n"+
					"X-Signature: sha256=%s\r\nContent-Length: 1000\r\n\r\n{", strings.Repeat("0", 64))
			}
			// Until the server has read their headers they count as idle, and would give way:
			// wait until both bodies are being read (their bytes reserved in the body budget).
			ops := "http://" + srv.MetricsAddr()
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				resp, err := http.Get(ops + "/metrics")
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if strings.Contains(string(body), "\nparley_unauthenticated_body_bytes 2000\n") {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the two held requests were never read:\n%s", grepLines(string(body), "parley_unauthenticated"))
				}
			}
			if got := closedByServer(t, dial(t, addr), 10*time.Second); !strings.HasPrefix(got, "HTTP/1.1 503") {
				t.Fatalf("a third connection was answered %q, want 503", got)
			}
			for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
				resp, err := http.Get(ops + path)
				if err != nil {
					t.Fatalf("%s while the intake is full: %v", path, err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("%s while the intake is full: %d %s", path, resp.StatusCode, body)
				}
				if want := `parley_http_connections_refused_total{reason="` + c.reason + `"} 1`; path == "/metrics" && !strings.Contains(string(body), want) {
					t.Errorf("metrics do not count the refused connection as %s:\n%s", c.reason, grepLines(string(body), "parley_http_connections"))
				}
			}
		})
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestAgentTokenFailuresThrottledValidTokenHeard: once a client address has used its budget of
// wrong tokens, its further failures are answered 429 with Retry-After, while a valid token
// from the same address is still heard (401/429 would be its only answers if the address were
// refused before the token is checked, as it was).
func TestAgentTokenFailuresThrottledValidTokenHeard(t *testing.T) {
	agents, err := agentstore.Open(context.Background(), filepath.Join(t.TempDir(), "agents.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer agents.Close()
	valid, _, err := agents.Create(context.Background(), "oncall-bot", core.Identity{Source: core.SourceKubeUser, ID: "alice@parley.example"}, []string{"acme/infra"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	// The hold before a 429 is counted, not slept: a throttled token is held once, a valid one never.
	var holds int
	h := &Proposals{Agents: agents, Failures: guard.NewFailures(guard.FailuresConfig{PerMinute: 1, Burst: 1,
		Sleep: func(context.Context, time.Duration) { holds++ }})}
	post := func(token string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, ProposalsPath, strings.NewReader(`{"claims":[]}`))
		req.RemoteAddr = "192.0.2.1:5000"
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	if rec := post("parley_abc_wrong"); rec.Code != http.StatusUnauthorized {
		t.Fatalf("a wrong token: %d, want 401", rec.Code)
	}
	rec := post("parley_abc_wrongagain")
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") != "60" {
		t.Fatalf("after the budget: %d Retry-After %q, want 429 and 60: %s", rec.Code, rec.Header().Get("Retry-After"), rec.Body)
	}
	if rec := post(valid); rec.Code == http.StatusTooManyRequests || rec.Code == http.StatusUnauthorized {
		t.Fatalf("a valid token from the throttled address: %d, want it heard: %s", rec.Code, rec.Body)
	}
	if holds != 1 {
		t.Errorf("%d requests held, want 1 (the throttled wrong token, not the valid one)", holds)
	}
}

// TestServePrunesDeliveriesPastRetention: a handled delivery is deleted once delivery_retention
// has passed, counted in parley_deliveries_pruned_total; without retention the table grows
// with every delivery ever received.
func TestServePrunesDeliveriesPastRetention(t *testing.T) {
	srv, addr := serveIntake(t, map[string]string{"PARLEY_DELIVERY_RETENTION": "1s"})
	body := []byte(`{"zen":"Keep it logically awesome.","hook_id":1}`)
	secret, _ := webhooks.NewSecret("hook")
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+webhooks.GitHubPath, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(webhooks.HeaderEvent, "ping")
	req.Header.Set(webhooks.HeaderDelivery, "ping-1")
	req.Header.Set(webhooks.HeaderSignature, webhooks.Sign(secret, body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("ping: %d", resp.StatusCode)
	}
	key := store.Key{Source: store.SourceGitHub, ID: "ping-1"}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := srv.Store().Get(t.Context(), key)
		if errors.Is(err, store.ErrNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the handled ping was still stored 30 s on (retention 1s): %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	resp, err = http.Get("http://" + srv.MetricsAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	metrics, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(metrics), "parley_deliveries_pruned_total 1") {
		t.Errorf("the prune is not counted:\n%s", grepLines(string(metrics), "pruned"))
	}
}

// TestServeRefusesDriftEventsOutsideTheFreshnessWindow: a Flux event dated 2001 or 2099, even
// correctly signed, is refused 400 saying why (an old signed body replayed is not news); one
// dated now is stored.
func TestServeRefusesDriftEventsOutsideTheFreshnessWindow(t *testing.T) {
	_, addr := serveIntake(t, nil)
	flux, _ := webhooks.NewSecret("flux")
	example := readTestdataFile(t, "../examples/drift/flux.json")
	post := func(at time.Time) (int, string) {
		t.Helper()
		body := bytes.Replace(example, []byte("2026-11-20T12:10:00Z"), []byte(at.UTC().Format(time.RFC3339)), 1)
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+webhooks.FluxPath, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(webhooks.HeaderXSignature, webhooks.Sign(flux, body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		rep, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(rep)
	}
	for _, c := range []struct {
		at   time.Time
		want string
	}{
		{time.Date(2001, 9, 9, 1, 46, 40, 0, time.UTC), "an event at 2001-09-09T01:46:40Z is more than 24h0m0s old"},
		{time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC), "an event at 2099-01-01T00:00:00Z is more than 5m0s ahead of the server's time"},
	} {
		if code, rep := post(c.at); code != http.StatusBadRequest || !strings.Contains(rep, c.want) {
			t.Errorf("an event at %s: %d %s; want 400 saying %q", c.at, code, rep, c.want)
		}
	}
	if code, rep := post(time.Now().Add(-time.Minute)); code != http.StatusAccepted {
		t.Errorf("an event a minute old: %d %s; want 202", code, rep)
	}
}

// TestServeProfilesOnlyWhenAskedAndApart: with pprof_listen unset no listener serves Go's
// profiles (not listen, not metrics_listen); set, its own listener serves them, and listen still
// does not.
func TestServeProfilesOnlyWhenAskedAndApart(t *testing.T) {
	get := func(url string) int {
		t.Helper()
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode
	}
	off, addr := serveIntake(t, nil)
	if off.PprofAddr() != "" {
		t.Fatalf("pprof listening at %s with pprof_listen unset", off.PprofAddr())
	}
	for _, base := range []string{"http://" + addr, "http://" + off.MetricsAddr()} {
		if code := get(base + "/debug/pprof/goroutine?debug=1"); code != http.StatusNotFound {
			t.Errorf("%s/debug/pprof/goroutine with pprof_listen unset: %d, want 404", base, code)
		}
	}

	on, addr := serveIntake(t, map[string]string{"PARLEY_PPROF_LISTEN": "127.0.0.1:0"})
	if on.PprofAddr() == "" {
		t.Fatal("pprof_listen set and no listener")
	}
	if code := get("http://" + on.PprofAddr() + "/debug/pprof/goroutine?debug=1"); code != http.StatusOK {
		t.Errorf("goroutine profile on pprof_listen: %d, want 200", code)
	}
	if code := get("http://" + on.PprofAddr() + "/debug/pprof/profile?seconds=1"); code != http.StatusOK {
		t.Errorf("CPU profile on pprof_listen: %d, want 200", code)
	}
	if code := get("http://" + addr + "/debug/pprof/goroutine?debug=1"); code != http.StatusNotFound {
		t.Errorf("goroutine profile on listen with pprof_listen set: %d, want 404", code)
	}
}
