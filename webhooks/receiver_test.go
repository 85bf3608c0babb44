package webhooks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/parleyhq/parley/internal/schematest"
	"github.com/parleyhq/parley/webhooks/store"
)

const testSecretValue = "s3cr3t-for-tests"

type receiverFixture struct {
	store    *store.SQLite
	rcv      *Receiver
	srv      *httptest.Server
	metrics  *Metrics
	logs     *lockedBuffer
	notified atomic.Int64
	secret   Secret
}

func newReceiverFixture(t *testing.T, cfg ReceiverConfig) *receiverFixture {
	t.Helper()
	f := &receiverFixture{store: openStore(t, store.Options{}), secret: mustSecret(t, testSecretValue)}
	f.metrics, _ = testMetrics(t, f.store)
	var log = cfg.Logger
	if log == nil {
		log, f.logs = testLogger(t)
	}
	cfg.Store = f.store
	if cfg.Secrets == nil {
		cfg.Secrets = []Secret{f.secret}
	}
	cfg.Logger = log
	cfg.Metrics = f.metrics
	cfg.Notify = func() { f.notified.Add(1) }
	rcv, err := NewReceiver(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.rcv = rcv
	f.srv = newServer(t, rcv)
	return f
}

func newServer(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle(GitHubPath, h)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// request describes one webhook request; zero fields get valid defaults.
type request struct {
	method      string
	event       *string
	delivery    *string
	signature   *string // nil: sign body with signWith
	signWith    Secret
	contentType *string
	body        io.Reader
	bodyBytes   []byte
	chunked     bool
}

func ptr(s string) *string { return &s }

func (f *receiverFixture) do(t *testing.T, r request) (int, reply, http.Header) {
	t.Helper()
	if r.method == "" {
		r.method = http.MethodPost
	}
	if r.bodyBytes == nil && r.body == nil {
		r.bodyBytes = []byte(`{"action":"opened","number":1}`)
	}
	if r.signWith.IsZero() {
		r.signWith = f.secret
	}
	var body io.Reader = bytes.NewReader(r.bodyBytes)
	if r.body != nil {
		body = r.body
	}
	if r.chunked {
		body = io.MultiReader(body) // hides the length: the client sends it chunked
	}
	req, err := http.NewRequest(r.method, f.srv.URL+GitHubPath, body)
	if err != nil {
		t.Fatal(err)
	}
	set := func(name string, v *string, def string) {
		switch {
		case v == nil:
			req.Header.Set(name, def)
		case *v != "":
			req.Header.Set(name, *v)
		}
	}
	set(HeaderEvent, r.event, "pull_request")
	set(HeaderDelivery, r.delivery, "72d3162e-cc78-11e3-81ab-4c9367dc0958")
	set(HeaderSignature, r.signature, Sign(r.signWith, r.bodyBytes))
	set("Content-Type", r.contentType, "application/json")
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		t.Fatalf("request: %v", err)
	}
	defer resp.Body.Close()
	var rep reply
	raw, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatalf("reply %d is not JSON: %q", resp.StatusCode, raw)
	}
	schematest.Validate(t, "webhook-reply.schema.json", raw)
	return resp.StatusCode, rep, resp.Header
}

func (f *receiverFixture) stored(t *testing.T) int {
	t.Helper()
	st, err := f.store.Stats(context.Background(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return st.Pending
}

func TestReceiverRequests(t *testing.T) {
	other := mustSecret(t, "not-the-secret")
	cases := []struct {
		name      string
		req       request
		maxBody   int64
		wantCode  int
		wantInErr string
		wantStore int
		signFail  string // reason label expected to be counted
		rejected  string
	}{
		{name: "valid", req: request{}, wantCode: 202, wantStore: 1},
		{name: "ping is stored too", req: request{event: ptr("ping"), bodyBytes: []byte(`{"zen":"Design for failure."}`)}, wantCode: 202, wantStore: 1},
		{name: "GET", req: request{method: http.MethodGet}, wantCode: 405, wantInErr: "method GET", rejected: reasonMethod},
		{name: "missing event", req: request{event: ptr("")}, wantCode: 400, wantInErr: "missing X-GitHub-Event", rejected: reasonHeader},
		{name: "missing delivery", req: request{delivery: ptr("")}, wantCode: 400, wantInErr: "missing X-GitHub-Delivery", rejected: reasonHeader},
		{name: "malformed event", req: request{event: ptr("Pull Request")}, wantCode: 400, wantInErr: "malformed X-GitHub-Event", rejected: reasonHeader},
		{name: "malformed delivery", req: request{delivery: ptr("a b")}, wantCode: 400, wantInErr: "malformed X-GitHub-Delivery", rejected: reasonHeader},
		{name: "missing signature", req: request{signature: ptr("")}, wantCode: 401, wantInErr: "missing X-Hub-Signature-256", signFail: reasonMissing},
		{name: "sha1 signature", req: request{signature: ptr("sha1=" + strings.Repeat("0", 40))}, wantCode: 401, wantInErr: "malformed", signFail: reasonMalformed},
		{name: "wrong secret", req: request{signWith: other}, wantCode: 401, wantInErr: "does not match", signFail: reasonMismatch},
		{name: "signature of another body", req: request{signature: ptr(Sign(mustSecret(t, testSecretValue), []byte("{}")))}, wantCode: 401, signFail: reasonMismatch},
		{name: "content length over limit", maxBody: 1024, req: request{bodyBytes: bytes.Repeat([]byte(" "), 1025)}, wantCode: 413, wantInErr: "1025 bytes exceeds the 1024-byte limit", rejected: reasonTooLarge},
		{name: "chunked body over limit", maxBody: 1024, req: request{bodyBytes: bytes.Repeat([]byte(" "), 4096), chunked: true}, wantCode: 413, wantInErr: "exceeds the 1024-byte limit", rejected: reasonTooLarge},
		{name: "body at limit", maxBody: 1024, req: request{bodyBytes: append([]byte("{}"), bytes.Repeat([]byte(" "), 1022)...)}, wantCode: 202, wantStore: 1},
		{name: "body read error", req: request{body: iotest.ErrReader(errors.New("cut")), bodyBytes: []byte{}, chunked: true}, wantCode: -1},
		{name: "form encoded", req: request{contentType: ptr("application/x-www-form-urlencoded")}, wantCode: 415, wantInErr: "application/json", rejected: reasonContentType},
		{name: "json with charset", req: request{contentType: ptr("application/json; charset=utf-8")}, wantCode: 202, wantStore: 1},
		{name: "truncated json", req: request{bodyBytes: []byte(`{"action":`)}, wantCode: 400, wantInErr: "not a JSON object", rejected: reasonInvalidJSON},
		{name: "json array", req: request{bodyBytes: []byte(`[1]`)}, wantCode: 400, wantInErr: "not a JSON object", rejected: reasonInvalidJSON},
		{name: "empty body", req: request{bodyBytes: []byte{}}, wantCode: 400, wantInErr: "not a JSON object", rejected: reasonInvalidJSON},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newReceiverFixture(t, ReceiverConfig{MaxBodyBytes: tc.maxBody})
			if tc.wantCode == -1 {
				// The client itself fails to send: nothing may be stored.
				req, _ := http.NewRequest(http.MethodPost, f.srv.URL+GitHubPath, tc.req.body)
				req.Header.Set(HeaderEvent, "push")
				req.Header.Set(HeaderDelivery, "x")
				req.Header.Set(HeaderSignature, Sign(f.secret, nil))
				if resp, err := f.srv.Client().Do(req); err == nil {
					resp.Body.Close()
					if resp.StatusCode < 300 {
						t.Errorf("status %d for a body that failed to send", resp.StatusCode)
					}
				}
			} else {
				code, rep, hdr := f.do(t, tc.req)
				if code != tc.wantCode {
					t.Fatalf("status = %d (%+v), want %d", code, rep, tc.wantCode)
				}
				if !strings.Contains(rep.Error, tc.wantInErr) {
					t.Errorf("error %q does not contain %q", rep.Error, tc.wantInErr)
				}
				if code == 405 && hdr.Get("Allow") != "POST" {
					t.Errorf("405 without Allow: POST")
				}
			}
			if got := f.stored(t); got != tc.wantStore {
				t.Errorf("stored %d deliveries, want %d", got, tc.wantStore)
			}
			if got := f.notified.Load(); got != int64(tc.wantStore) {
				t.Errorf("notified %d times, want %d", got, tc.wantStore)
			}
			if tc.signFail != "" {
				if got := testutil.ToFloat64(f.metrics.signatureFailures.WithLabelValues("github", tc.signFail)); got != 1 {
					t.Errorf("signature failures{%s} = %v, want 1", tc.signFail, got)
				}
			}
			if tc.rejected != "" {
				if got := testutil.ToFloat64(f.metrics.rejected.WithLabelValues("github", tc.rejected)); got != 1 {
					t.Errorf("rejected{%s} = %v, want 1", tc.rejected, got)
				}
			}
			if strings.Contains(f.logs.String(), testSecretValue) {
				t.Errorf("secret in logs")
			}
		})
	}
}

func TestReceiverRefusesDefaultOversizedBody(t *testing.T) {
	f := newReceiverFixture(t, ReceiverConfig{})
	// One byte over GitHub's cap, sent chunked so only MaxBytesReader can stop it.
	big := io.LimitReader(neverEnding('x'), MaxBodyBytes+1)
	code, rep, _ := f.do(t, request{body: big, bodyBytes: []byte{}, chunked: true})
	if code != http.StatusRequestEntityTooLarge {
		t.Fatalf("status = %d (%+v), want 413", code, rep)
	}
}

type neverEnding byte

func (b neverEnding) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(b)
	}
	return len(p), nil
}

func TestReceiverDuplicate(t *testing.T) {
	f := newReceiverFixture(t, ReceiverConfig{})
	code, rep, _ := f.do(t, request{})
	if code != 202 || rep.Status != "accepted" || rep.Delivery != "72d3162e-cc78-11e3-81ab-4c9367dc0958" {
		t.Fatalf("first = %d %+v", code, rep)
	}
	// A redelivery, even with another body, changes nothing.
	code, rep, _ = f.do(t, request{bodyBytes: []byte(`{"action":"closed"}`)})
	if code != 200 || rep.Status != "duplicate" {
		t.Fatalf("redelivery = %d %+v, want 200 duplicate", code, rep)
	}
	d, err := f.store.Get(context.Background(), store.Key{Source: "github", ID: "72d3162e-cc78-11e3-81ab-4c9367dc0958"})
	if err != nil || string(d.Body) != `{"action":"opened","number":1}` || d.Event != "pull_request" {
		t.Errorf("stored = %+v, %v; want the first body", d, err)
	}
	if f.notified.Load() != 1 || f.stored(t) != 1 {
		t.Errorf("notified %d, stored %d; want 1, 1", f.notified.Load(), f.stored(t))
	}
	if got := testutil.ToFloat64(f.metrics.duplicates.WithLabelValues("github", "pull_request")); got != 1 {
		t.Errorf("duplicates = %v", got)
	}
	if got := testutil.ToFloat64(f.metrics.received.WithLabelValues("github", "pull_request")); got != 1 {
		t.Errorf("received = %v", got)
	}
}

func TestReceiverSecretRotation(t *testing.T) {
	oldS, newS := mustSecret(t, "old-secret"), mustSecret(t, "new-secret")
	f := newReceiverFixture(t, ReceiverConfig{Secrets: []Secret{newS, oldS}})
	steps := []struct {
		name     string
		secrets  []Secret // applied before the request when not nil
		signWith Secret
		id       string
		want     int
	}{
		{"old secret during rotation", nil, oldS, "d1", 202},
		{"new secret during rotation", nil, newS, "d2", 202},
		{"old secret after rotation", []Secret{newS}, oldS, "d3", 401},
		{"new secret after rotation", nil, newS, "d4", 202},
	}
	for _, s := range steps {
		if s.secrets != nil {
			if err := f.rcv.SetSecrets(s.secrets...); err != nil {
				t.Fatal(err)
			}
		}
		body := []byte(`{"action":"opened","delivery":"` + s.id + `"}`)
		if code, rep, _ := f.do(t, request{signWith: s.signWith, delivery: ptr(s.id), bodyBytes: body}); code != s.want {
			t.Errorf("%s: status %d (%+v), want %d", s.name, code, rep, s.want)
		}
	}
	if err := f.rcv.SetSecrets(); err == nil {
		t.Error("SetSecrets() with no secret succeeded")
	}
	if _, err := NewReceiver(ReceiverConfig{Store: f.store}); err == nil {
		t.Error("NewReceiver without secrets succeeded")
	}
	if _, err := NewReceiver(ReceiverConfig{Secrets: []Secret{newS}}); err == nil {
		t.Error("NewReceiver without store succeeded")
	}
}

func TestReceiverAnswers503WhenStoreIsDown(t *testing.T) {
	f := newReceiverFixture(t, ReceiverConfig{})
	if err := f.store.Close(); err != nil {
		t.Fatal(err)
	}
	code, rep, hdr := f.do(t, request{})
	if code != http.StatusServiceUnavailable || rep.Status != "unavailable" {
		t.Fatalf("status = %d %+v, want 503", code, rep)
	}
	if hdr.Get("Retry-After") == "" {
		t.Error("503 without Retry-After")
	}
	if f.notified.Load() != 0 {
		t.Error("workers notified of a delivery that was not stored")
	}
	if got := testutil.ToFloat64(f.metrics.rejected.WithLabelValues("github", reasonStoreFailure)); got != 1 {
		t.Errorf("rejected{store_unavailable} = %v", got)
	}
}

func TestReceiverLogsCarryDeliveryIdentity(t *testing.T) {
	f := newReceiverFixture(t, ReceiverConfig{})
	f.do(t, request{delivery: ptr("log-1")})
	f.do(t, request{delivery: ptr("log-1")})
	f.do(t, request{delivery: ptr("log-2"), signWith: mustSecret(t, "wrong")})
	lines := strings.Split(strings.TrimSpace(f.logs.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("want 3 log lines, got %d:\n%s", len(lines), f.logs.String())
	}
	for _, line := range lines {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatal(err)
		}
		if rec[LogKeySource] != "github" || rec[LogKeyEvent] != "pull_request" || !strings.HasPrefix(rec[LogKeyDeliveryID].(string), "log-") {
			t.Errorf("log line without delivery identity: %s", line)
		}
	}
}
