package webhooks

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/npmdata"
	"github.com/parleyhq/parley/webhooks/guard"
	"github.com/parleyhq/parley/webhooks/store"
)

// TestValidDeliveriesHeardThroughAWrongSignatureFlood is issue 34 problem 4: GitHub's example
// deliveries (@octokit/webhooks-examples), each sent once signed wrong and once signed right from
// the same address, under serve's default failure budget (30 a minute). Before, the address was
// refused after its 30th failure and 15 valid deliveries were heard; now every valid one is
// stored, while the wrong ones past the budget are answered 429 with Retry-After.
//
// The same runs through a reverse proxy (httputil.ReverseProxy appends X-Forwarded-For) with
// GitHub and the attacker behind it at addresses of their own: with the proxy trusted, the
// attacker's failures count against its own address, and GitHub's one wrong signature (a secret
// being rotated) is a 401, not a 429 earned by the attacker.
func TestValidDeliveriesHeardThroughAWrongSignatureFlood(t *testing.T) {
	examples, err := npmdata.WebhookExamples()
	if err != nil {
		npmdata.FatalOrSkip(t, err)
	}
	secret, wrong := mustSecret(t, "it's a secret to everybody"), mustSecret(t, "not the secret")
	github, attacker := net.ParseIP("127.0.0.2"), net.ParseIP("127.0.0.3")
	for _, proxied := range []bool{false, true} {
		t.Run(map[bool]string{false: "direct", true: "through a proxy"}[proxied], func(t *testing.T) {
			st := openStore(t, store.Options{})
			var proxies *guard.Proxies
			if proxied {
				if proxies, err = guard.ParseProxies([]string{"127.0.0.1/32"}); err != nil {
					t.Fatal(err)
				}
			}
			// Every throttled failure is held before its 429 (guard.Failures.Hold); the holds are
			// counted here instead of slept, and no valid delivery may be held.
			var holds atomic.Int64
			failures := guard.NewFailures(guard.FailuresConfig{PerMinute: 30, Burst: 30, Proxies: proxies,
				Sleep: func(_ context.Context, d time.Duration) {
					holds.Add(1)
					if d <= 0 || d > guard.DefaultHold {
						t.Errorf("a failure held %s, want (0, %s]", d, guard.DefaultHold)
					}
				}})
			rcv, err := NewReceiver(ReceiverConfig{Store: st, Secrets: []Secret{secret}, Failures: failures})
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(rcv)
			t.Cleanup(srv.Close)
			target := srv.URL
			if proxied {
				// The proxy connects to parley from 127.0.0.1; its clients from their own addresses.
				u, _ := url.Parse(srv.URL)
				proxy := httptest.NewServer(httputil.NewSingleHostReverseProxy(u))
				t.Cleanup(proxy.Close)
				target = proxy.URL
			}
			client := func(from net.IP) *http.Client {
				d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: from}, Timeout: 10 * time.Second}
				return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
					DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
						return d.DialContext(ctx, network, addr)
					}}}
			}
			// Direct, both come from one address (as behind an untrusted proxy); proxied, each
			// from its own.
			ghClient, attackClient := client(github), client(github)
			if proxied {
				attackClient = client(attacker)
			}
			post := func(c *http.Client, event, id string, body []byte, sig string) *http.Response {
				t.Helper()
				req, _ := http.NewRequest(http.MethodPost, target+GitHubPath, bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set(HeaderEvent, event)
				req.Header.Set(HeaderDelivery, id)
				req.Header.Set(HeaderSignature, sig)
				resp, err := c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				return resp
			}
			seen := map[string]bool{}
			answers := map[int]int{}
			for i, ex := range examples {
				id := fmt.Sprintf("%08d-0000-4000-8000-000000000000", i)
				resp := post(attackClient, ex.Event, id, ex.Payload, Sign(wrong, ex.Payload))
				answers[resp.StatusCode]++
				if resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") == "" {
					t.Fatalf("a 429 without Retry-After")
				}
				if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusTooManyRequests {
					t.Fatalf("%s example %d signed wrong: %d, want 401 or 429", ex.Event, i, resp.StatusCode)
				}
				want := http.StatusAccepted
				if seen[string(ex.Payload)] {
					want = http.StatusOK // byte for byte an earlier example's body: a duplicate
				}
				seen[string(ex.Payload)] = true
				if got := post(ghClient, ex.Event, id, ex.Payload, Sign(secret, ex.Payload)).StatusCode; got != want {
					t.Fatalf("%s example %d signed right, after %v to the wrong ones: %d, want %d", ex.Event, i, answers, got, want)
				}
			}
			if answers[http.StatusTooManyRequests] == 0 {
				t.Errorf("the wrong signatures were never throttled: %v", answers)
			}
			if got := holds.Load(); got != int64(answers[http.StatusTooManyRequests]) {
				t.Errorf("%d requests held, want one for each of the %d answered 429 and none else", got, answers[http.StatusTooManyRequests])
			}
			stats, err := st.Stats(t.Context(), time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if stats.Pending != len(seen) {
				t.Errorf("%d deliveries stored, want every distinct example (%d)", stats.Pending, len(seen))
			}
			// GitHub's own wrong signature: through the trusted proxy its address has failed
			// nothing, so it is told 401; directly it shares the attacker's address and is throttled.
			resp := post(ghClient, "ping", "rotation", []byte(`{"zen":"x"}`), Sign(wrong, []byte(`{"zen":"x"}`)))
			if want := map[bool]int{false: http.StatusTooManyRequests, true: http.StatusUnauthorized}[proxied]; resp.StatusCode != want {
				t.Errorf("GitHub's one wrong signature: %d, want %d", resp.StatusCode, want)
			}
			t.Logf("%d examples; the wrong ones answered %v", len(examples), answers)
		})
	}
}
