package webhooks

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/parleyhq/parley/webhooks/store"
)

// countingIntake is a real store that counts the deliveries it inserted and can be told to fail
// the next Puts, as a store that cannot commit does.
type countingIntake struct {
	st       *store.SQLite
	mu       sync.Mutex
	inserted []store.Delivery
	failNext int
}

func (c *countingIntake) Put(ctx context.Context, d store.Delivery) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failNext > 0 {
		c.failNext--
		return false, errors.New("disk full")
	}
	ok, err := c.st.Put(ctx, d)
	if ok {
		c.inserted = append(c.inserted, d)
	}
	return ok, err
}

const firehoseKey = "firehose-access-key-prod-eks-0001"

// fakeUnwrap reads a test body {"requestId", "parts":[{"source","body","ids"}], "error"}: the
// receiver's own checks are under test here; the app's tests feed real records.
func fakeUnwrap(_ string, body []byte) (string, []Part, map[string]int, error) {
	var b struct {
		RequestID string `json:"requestId"`
		Parts     []struct {
			Source string   `json:"source"`
			Body   string   `json:"body"`
			IDs    []string `json:"ids"`
		} `json:"parts"`
		Error string `json:"error"`
	}
	if err := json.Unmarshal(body, &b); err != nil {
		return "", nil, nil, fmt.Errorf("firehose: decode request: %w", err)
	}
	switch b.Error {
	case "stale":
		return "", nil, nil, fmt.Errorf("%w: old", ErrStale)
	case "scope":
		return "", nil, nil, fmt.Errorf("%w: account 222233334444", ErrWrongScope)
	case "":
	default:
		return "", nil, nil, errors.New(b.Error)
	}
	var parts []Part
	for _, p := range b.Parts {
		parts = append(parts, Part{Source: p.Source, Body: []byte(p.Body), IDs: p.IDs})
	}
	return b.RequestID, parts, map[string]int{"control-message": 1}, nil
}

func newFirehoseTest(t *testing.T) (*FirehoseReceiver, *countingIntake, *http.ServeMux) {
	t.Helper()
	in := &countingIntake{st: openStore(t, store.Options{})}
	r, err := NewFirehoseReceiver(FirehoseReceiverConfig{Unwrap: fakeUnwrap, IntakeConfig: IntakeConfig{Store: in}, Sources: []FirehoseSource{
		{Name: "prod-eks", Keys: []Secret{mustSecret(t, "old-access-key-of-prod-eks"), mustSecret(t, firehoseKey)}, Cluster: true},
		{Name: "111122223333", Keys: []Secret{mustSecret(t, "access-key-of-the-aws-account")}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(FirehosePattern(), r)
	return r, in, mux
}

const firehoseRID = "7d2e0c8a-51f4-4b0e-9d0c-3c1f8a6b2e11"

func firehoseRequest(path, key, rid string, body []byte, mutate func(*http.Request)) *http.Request {
	req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(HeaderFirehoseProtocol, "1.0")
	if key != "" {
		req.Header.Set(HeaderFirehoseAccessKey, key)
	}
	if rid != "" {
		req.Header.Set(HeaderFirehoseRequestID, rid)
	}
	req.Header.Set(HeaderFirehoseSourceARN, "arn:aws:firehose:eu-west-1:111122223333:deliverystream/parley-prod-eks")
	if mutate != nil {
		mutate(req)
	}
	return req
}

func serveFirehose(t *testing.T, mux *http.ServeMux, req *http.Request) (int, firehoseReply) {
	t.Helper()
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, req)
	var rep firehoseReply
	if err := json.Unmarshal(rec.Body.Bytes(), &rep); err != nil {
		t.Fatalf("answer %d is not Firehose's JSON: %q", rec.Code, rec.Body.String())
	}
	if rep.Timestamp == 0 || rep.RequestID != req.Header.Get(HeaderFirehoseRequestID) {
		t.Fatalf("answer %+v lacks the request's ID or a timestamp", rep)
	}
	if (rec.Code == http.StatusOK) != (rep.ErrorMessage == "") {
		t.Fatalf("answer %d with errorMessage %q", rec.Code, rep.ErrorMessage)
	}
	return rec.Code, rep
}

const twoParts = `{"requestId":"` + firehoseRID + `","parts":[{"source":"k8s-audit","body":"{\"kind\":\"EventList\"}","ids":["a1","a2"]},` +
	`{"source":"k8s-audit","body":"{\"kind\":\"EventList\",\"items\":[]}"},{"source":"cloudtrail","body":"{\"Records\":[]}","ids":["c1"]}]}`

// A request is acknowledged with 200 only once every part with events is stored; its retry
// (same request ID) stores nothing new; a store that cannot commit is answered 503 and the retry
// stores what is missing, each part once.
func TestFirehoseAcknowledgesOnlyWhatIsStored(t *testing.T) {
	_, in, mux := newFirehoseTest(t)
	in.failNext = 1
	code, rep := serveFirehose(t, mux, firehoseRequest("/events/firehose/prod-eks", firehoseKey, firehoseRID, []byte(twoParts), nil))
	if code != http.StatusServiceUnavailable || len(in.inserted) != 0 {
		t.Fatalf("store down: %d %+v, %d stored", code, rep, len(in.inserted))
	}
	for range 2 { // Firehose retries; then retries again although the first retry succeeded (a lost answer)
		if code, rep := serveFirehose(t, mux, firehoseRequest("/events/firehose/prod-eks", firehoseKey, firehoseRID, []byte(twoParts), nil)); code != http.StatusOK {
			t.Fatalf("retry: %d %+v", code, rep)
		}
	}
	if len(in.inserted) != 2 {
		t.Fatalf("%d deliveries stored, want the 2 parts with events once each: %+v", len(in.inserted), in.inserted)
	}
	for _, d := range in.inserted {
		if d.Scope != "prod-eks" || !strings.HasPrefix(d.ID, "firehose-"+firehoseRID+"-") || !strings.HasSuffix(d.ID, "@prod-eks") {
			t.Fatalf("delivery %s/%s scope %q", d.Source, d.ID, d.Scope)
		}
	}
	if in.inserted[0].Source != store.SourceK8sAudit || in.inserted[1].Source != store.SourceCloudTrail {
		t.Fatalf("sources %s %s", in.inserted[0].Source, in.inserted[1].Source)
	}

	// A part stored, the next not: the retry stores only the missing one.
	_, in2, mux2 := newFirehoseTest(t)
	in2.failNext = 0
	gzipped := func(r *http.Request) {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		zw.Write([]byte(strings.ReplaceAll(twoParts, firehoseRID, "second-request")))
		zw.Close()
		r.Body = httpBody(buf.Bytes())
		r.ContentLength = int64(buf.Len())
		r.Header.Set("Content-Encoding", "gzip")
	}
	fail := &failAfter{countingIntake: in2, after: 1}
	r2, _ := NewFirehoseReceiver(FirehoseReceiverConfig{Unwrap: fakeUnwrap, IntakeConfig: IntakeConfig{Store: fail}, Sources: []FirehoseSource{{Name: "prod-eks", Keys: []Secret{mustSecret(t, firehoseKey)}, Cluster: true}}})
	mux2 = http.NewServeMux()
	mux2.Handle(FirehosePattern(), r2)
	if code, _ := serveFirehose(t, mux2, firehoseRequest("/events/firehose/prod-eks", firehoseKey, "second-request", nil, gzipped)); code != http.StatusServiceUnavailable || len(in2.inserted) != 1 {
		t.Fatalf("half stored: %d, %d stored", code, len(in2.inserted))
	}
	fail.after = 100
	if code, _ := serveFirehose(t, mux2, firehoseRequest("/events/firehose/prod-eks", firehoseKey, "second-request", nil, gzipped)); code != http.StatusOK || len(in2.inserted) != 2 {
		t.Fatalf("retry: %d, %d stored", code, len(in2.inserted))
	}
}

// failAfter fails every Put after the first after ones.
type failAfter struct {
	*countingIntake
	after int
	puts  int
}

func (f *failAfter) Put(ctx context.Context, d store.Delivery) (bool, error) {
	f.puts++
	if f.puts > f.after {
		return false, errors.New("disk full")
	}
	return f.countingIntake.Put(ctx, d)
}

// Every refusal is Firehose's JSON with the request's ID and a message naming what was wrong.
func TestFirehoseRefusals(t *testing.T) {
	body := []byte(twoParts)
	for _, tc := range []struct {
		name   string
		path   string
		key    string
		rid    string
		body   []byte
		mutate func(*http.Request)
		code   int
		want   string
	}{
		{"wrong key", "/events/firehose/prod-eks", "access-key-of-the-aws-account", firehoseRID, body, nil, 401, "does not match"},
		{"no key", "/events/firehose/prod-eks", "", firehoseRID, body, nil, 401, "missing X-Amz-Firehose-Access-Key"},
		{"unknown endpoint", "/events/firehose/staging", firehoseKey, firehoseRID, body, nil, 401, "does not match"},
		{"method", "/events/firehose/prod-eks", firehoseKey, firehoseRID, body, func(r *http.Request) { r.Method = http.MethodGet }, 405, "use POST"},
		{"no request ID", "/events/firehose/prod-eks", firehoseKey, "", body, nil, 400, "missing X-Amz-Firehose-Request-Id"},
		{"bad request ID", "/events/firehose/prod-eks", firehoseKey, "a b", body, nil, 400, "malformed X-Amz-Firehose-Request-Id"},
		{"protocol", "/events/firehose/prod-eks", firehoseKey, firehoseRID, body, func(r *http.Request) { r.Header.Set(HeaderFirehoseProtocol, "2.0") }, 400, "protocol 1.0"},
		{"encoding", "/events/firehose/prod-eks", firehoseKey, firehoseRID, body, func(r *http.Request) { r.Header.Set("Content-Encoding", "br") }, 415, "want gzip or none"},
		{"bad gzip", "/events/firehose/prod-eks", firehoseKey, firehoseRID, body, func(r *http.Request) { r.Header.Set("Content-Encoding", "gzip") }, 400, "Content-Encoding gzip"},
		{"bad body", "/events/firehose/prod-eks", firehoseKey, firehoseRID, []byte(`{"requestId":`), nil, 400, "firehose: decode request"},
		{"body of another request", "/events/firehose/prod-eks", firehoseKey, "other-request", body, nil, 400, "is not the X-Amz-Firehose-Request-Id header's"},
		{"stale", "/events/firehose/prod-eks", firehoseKey, firehoseRID, []byte(`{"error":"stale"}`), nil, 400, "freshness"},
		{"wrong account", "/events/firehose/111122223333", "access-key-of-the-aws-account", firehoseRID, []byte(`{"error":"scope"}`), nil, 403, "222233334444"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, in, mux := newFirehoseTest(t)
			code, rep := serveFirehose(t, mux, firehoseRequest(tc.path, tc.key, tc.rid, tc.body, tc.mutate))
			if code != tc.code || !strings.Contains(rep.ErrorMessage, tc.want) || len(in.inserted) != 0 {
				t.Fatalf("%d %q (%d stored), want %d with %q", code, rep.ErrorMessage, len(in.inserted), tc.code, tc.want)
			}
		})
	}
	// Not configured at all: 403 naming what to add.
	r, _ := NewFirehoseReceiver(FirehoseReceiverConfig{Unwrap: fakeUnwrap, IntakeConfig: IntakeConfig{Store: &countingIntake{st: openStore(t, store.Options{})}}})
	rec := httptest.NewRecorder()
	r.ServeHTTP(rec, firehoseRequest("/events/firehose/x", firehoseKey, firehoseRID, body, nil))
	if rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), "add a firehose block") {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
}

// The account's endpoint stores unscoped deliveries (CloudTrail routes by account), under IDs
// naming the account.
func TestFirehoseAccountEndpoint(t *testing.T) {
	_, in, mux := newFirehoseTest(t)
	b := `{"requestId":"` + firehoseRID + `","parts":[{"source":"cloudtrail","body":"{\"Records\":[]}","ids":["c1"]}]}`
	if code, rep := serveFirehose(t, mux, firehoseRequest("/events/firehose/111122223333", "access-key-of-the-aws-account", firehoseRID, []byte(b), nil)); code != 200 {
		t.Fatalf("%d %+v", code, rep)
	}
	if len(in.inserted) != 1 || in.inserted[0].Scope != "" || !strings.HasSuffix(in.inserted[0].ID, "@111122223333") {
		t.Fatalf("%+v", in.inserted)
	}
}

func httpBody(b []byte) *readCloser { return &readCloser{bytes.NewReader(b)} }

type readCloser struct{ *bytes.Reader }

func (readCloser) Close() error { return nil }
