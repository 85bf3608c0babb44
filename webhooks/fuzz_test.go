package webhooks

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/parleyhq/parley/webhooks/store"
)

// FuzzReceiver throws arbitrary methods, headers and bodies at a Receiver backed by a real
// store. Properties: no panic; a 2xx only for a POST whose body carries a valid signature, a
// well-formed event and delivery ID, and JSON; a 202 always leaves the delivery stored.
// When sign is true the body is signed with the receiver's secret (so the fuzzer reaches the
// code behind the signature check); otherwise the signature header is the fuzzer's.
func FuzzReceiver(f *testing.F) {
	sec := mustSecret(f, "fuzz-secret")
	for _, seed := range []struct {
		method, event, id, sig, ctype string
		body                          []byte
		sign                          bool
	}{
		{"POST", "push", "72d3162e-cc78-11e3-81ab-4c9367dc0958", "", "application/json", []byte(`{"ref":"refs/heads/main"}`), true},
		{"POST", "ping", "1", "", "application/json", []byte(`{"zen":"Approachable is better than simple."}`), true},
		{"POST", "push", "2", "sha256=" + string(bytes.Repeat([]byte("0"), 64)), "application/json", []byte(`{}`), false},
		{"POST", "push", "3", "sha1=0000", "application/json", []byte(`{}`), false},
		{"POST", "", "4", "", "application/json", []byte(`{}`), true},
		{"POST", "push", "", "", "application/json", []byte(`{}`), true},
		{"GET", "push", "5", "", "application/json", nil, true},
		{"POST", "push", "6", "", "application/x-www-form-urlencoded", []byte(`payload=%7B%7D`), true},
		{"POST", "push", "7", "", "application/json", []byte(`{"unterminated":`), true},
		{"POST", "Push\r\nX-Evil: 1", "8", "", "application/json", []byte(`{}`), true},
	} {
		f.Add(seed.method, seed.event, seed.id, seed.sig, seed.ctype, seed.body, seed.sign)
	}

	s := openStore(f, store.Options{})
	rcv, err := NewReceiver(ReceiverConfig{Store: s, Secrets: []Secret{sec}, MaxBodyBytes: 64 << 10, PutTimeout: time.Second})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, method, event, id, sig, ctype string, body []byte, sign bool) {
		req := httptest.NewRequest(http.MethodPost, GitHubPath, bytes.NewReader(body))
		req.Method = method // any string, as a raw request line could carry
		req.Header = http.Header{}
		if event != "" {
			req.Header[HeaderEvent] = []string{event}
		}
		if id != "" {
			req.Header[HeaderDelivery] = []string{id}
		}
		if sign {
			sig = Sign(sec, body)
		}
		if sig != "" {
			req.Header[HeaderSignature] = []string{sig}
		}
		if ctype != "" {
			req.Header["Content-Type"] = []string{ctype}
		}
		w := httptest.NewRecorder()
		rcv.ServeHTTP(w, req)
		code := w.Code
		if code < 200 || code >= 300 {
			return
		}
		if !sign && sig != Sign(sec, body) {
			t.Fatalf("status %d for a request whose signature %q is not valid", code, sig)
		}
		if method != http.MethodPost || !validEvent(event) || event == "" || !validDeliveryID(id) || id == "" {
			t.Fatalf("status %d for method %q event %q id %q", code, method, event, id)
		}
		if code == http.StatusAccepted {
			d, err := s.Get(context.Background(), store.Key{Source: store.SourceGitHub, ID: id})
			if err != nil {
				t.Fatalf("202 but not stored: %v", err)
			}
			if d.Event != event {
				t.Fatalf("stored event %q, request had %q", d.Event, event)
			}
		}
		_, _ = io.Copy(io.Discard, w.Body)
	})
}
