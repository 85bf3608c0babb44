package webhooks

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"hash"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/parleyhq/parley/internal/schematest"
	"github.com/parleyhq/parley/reconcile/events"
	"github.com/parleyhq/parley/webhooks/store"
)

const (
	testTokenValue = "t0ken-for-event-tests"
	// The IDs the events package derives for the sample payloads.
	fluxConfiguredID = "flux-bb072d56d659ca544e2c956b87e8a6d2"
	argoOutOfSyncID  = "argocd-a8bb56accd6f98d5da0c261ddf4ed6bc"
)

// eventSources lists the four sources with their paths, the setting that enables them, and a
// real sample body of each.
var eventSources = []struct {
	source, path, setting, sample string
}{
	{store.SourceFlux, FluxPath, "PARLEY_FLUX_HMAC_SECRET", "flux/configured.json"},
	{store.SourceArgoCD, ArgoCDPath, "PARLEY_ARGOCD_TOKEN", "argocd/out-of-sync.json"},
	{store.SourceK8sAudit, K8sAuditPath, "PARLEY_KUBE_AUDIT_TOKEN", "k8s-audit/mixed.json"},
	{store.SourceCloudTrail, CloudTrailPath, "PARLEY_CLOUDTRAIL_TOKEN", "cloudtrail/records.json"},
}

// sample reads a payload from the events package's testdata: the same files its decoders are
// tested with.
func sample(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "reconcile", "events", "testdata", filepath.FromSlash(name)))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type eventFixture struct {
	store    *store.SQLite
	srv      *httptest.Server
	metrics  *Metrics
	events   *EventMetrics
	logs     *lockedBuffer
	notified atomic.Int64
	rcv      map[string]*EventReceiver // by source
	secret   Secret
}

// newEventFixture serves the four receivers over one real store, as parley serve does, each at
// its path and at the path's ClusterPattern. Every source is enabled with secrets (default: the
// test token); cfg's limits and Clusters apply to all of them.
func newEventFixture(t *testing.T, cfg EventReceiverConfig, secrets ...Secret) *eventFixture {
	t.Helper()
	f := &eventFixture{store: openStore(t, store.Options{}), secret: mustSecret(t, testTokenValue), rcv: map[string]*EventReceiver{}}
	reg := prometheus.NewRegistry()
	var err error
	if f.metrics, err = NewMetrics(reg, f.store); err != nil {
		t.Fatal(err)
	}
	if f.events, err = NewEventMetrics(reg); err != nil {
		t.Fatal(err)
	}
	var log = cfg.Logger
	if log == nil {
		log, f.logs = testLogger(t)
	}
	if secrets == nil {
		secrets = []Secret{f.secret}
	}
	mux := http.NewServeMux()
	for _, s := range eventSources {
		c := cfg
		source := s.source
		c.Source, c.Setting, c.Secrets = source, s.setting, secrets
		c.ID = func(body []byte) ([]string, map[string]int, error) { return events.EventIDs(source, body) }
		c.Store, c.Logger, c.Metrics, c.EventMetrics = f.store, log, f.metrics, f.events
		c.Notify = func() { f.notified.Add(1) }
		rcv, err := NewEventReceiver(c)
		if err != nil {
			t.Fatal(err)
		}
		f.rcv[source] = rcv
		mux.Handle(s.path, rcv)
		mux.Handle(ClusterPattern(s.path), rcv)
	}
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

// eventRequest describes one request; zero fields get valid defaults: POST, application/json,
// and for Flux an X-Signature by f.secret, for the others Authorization: Bearer f.secret.
type eventRequest struct {
	method        string
	body          []byte
	stream        io.Reader // sent chunked instead of body
	contentType   *string
	authorization *string
	signature     *string
	signWith      Secret
	useSignature  bool   // sign with X-Signature instead of sending a bearer token
	cluster       string // POST to /events/<source>/<cluster> (as written: may be escaped)
}

func (f *eventFixture) do(t *testing.T, source string, r eventRequest) (int, eventReply, http.Header) {
	t.Helper()
	if r.method == "" {
		r.method = http.MethodPost
	}
	if r.signWith.IsZero() {
		r.signWith = f.secret
	}
	var body io.Reader = bytes.NewReader(r.body)
	if r.stream != nil {
		body = io.MultiReader(r.stream) // hides the length: the client sends it chunked
	}
	url := f.srv.URL + "/events/" + source
	if r.cluster != "" {
		url += "/" + r.cluster
	}
	req, err := http.NewRequest(r.method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	set := func(name string, v *string, def string) {
		switch {
		case v == nil && def != "":
			req.Header.Set(name, def)
		case v != nil && *v != "":
			req.Header.Set(name, *v)
		}
	}
	sig, bearer := "", ""
	if source == store.SourceFlux || r.useSignature {
		sig = Sign(r.signWith, r.body)
	} else {
		bearer = "Bearer " + string(r.signWith.value)
	}
	set(HeaderXSignature, r.signature, sig)
	set(HeaderAuthorization, r.authorization, bearer)
	set("Content-Type", r.contentType, "application/json")
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		t.Fatalf("request: %v", err)
	}
	defer resp.Body.Close()
	var rep eventReply
	raw, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatalf("reply %d is not JSON: %q", resp.StatusCode, raw)
	}
	schematest.Validate(t, "webhook-reply.schema.json", raw)
	return resp.StatusCode, rep, resp.Header
}

func (f *eventFixture) pending(t *testing.T) int {
	t.Helper()
	st, err := f.store.Stats(context.Background(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return st.Pending
}

func TestEventReceiverStoresRealPayloads(t *testing.T) {
	k8sIDs, _, err := events.EventIDs(store.SourceK8sAudit, sample(t, "k8s-audit/mixed.json"))
	if err != nil {
		t.Fatal(err)
	}
	ctIDs, _, err := events.EventIDs(store.SourceCloudTrail, sample(t, "cloudtrail/records.json"))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		source, file string
		hmac         bool // authenticate with X-Signature rather than a bearer token
		wantID       string
		wantEvents   int
	}{
		{store.SourceFlux, "flux/configured.json", true, fluxConfiguredID, 1},
		{store.SourceArgoCD, "argocd/out-of-sync.json", false, argoOutOfSyncID, 1},
		{store.SourceArgoCD, "argocd/sync-succeeded.json", true, "argocd-c3a4be18c85044184dbea65927ae6001", 1},
		{store.SourceK8sAudit, "k8s-audit/mixed.json", false, DeliveryID(k8sIDs), len(k8sIDs)},
		{store.SourceCloudTrail, "cloudtrail/records.json", false, DeliveryID(ctIDs), len(ctIDs)},
		{store.SourceCloudTrail, "cloudtrail/eventbridge-set-desired-capacity.json", true, "a1b2c3d4-0001-4b5c-9d8e-0f1a2b3c4d5e", 1},
		{store.SourceCloudTrail, "cloudtrail/raw-record.json", false, "a1b2c3d4-0116-4b5c-9d8e-0f1a2b3c4d5e", 1},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			f := newEventFixture(t, EventReceiverConfig{})
			body := sample(t, tc.file)
			code, rep, _ := f.do(t, tc.source, eventRequest{body: body, useSignature: tc.hmac})
			if code != http.StatusAccepted || rep.Status != "accepted" || rep.Delivery != tc.wantID || rep.Events != tc.wantEvents {
				t.Fatalf("first = %d %+v, want 202 accepted %s with %d events", code, rep, tc.wantID, tc.wantEvents)
			}
			if tc.wantEvents > 1 && !strings.HasPrefix(rep.Delivery, "batch-") {
				t.Errorf("delivery %s of a %d-event batch is not a batch ID", rep.Delivery, tc.wantEvents)
			}
			d, err := f.store.Get(context.Background(), store.Key{Source: tc.source, ID: tc.wantID})
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(d.Body, body) || d.Event != EventName || d.Source != tc.source || d.ReceivedAt.IsZero() {
				t.Errorf("stored %s/%s event %q, %d bytes; want the %d request bytes as they came, event %q",
					d.Source, d.ID, d.Event, len(d.Body), len(body), EventName)
			}
			// The sender retries (it timed out on the first answer): the same body is a duplicate.
			code, rep, _ = f.do(t, tc.source, eventRequest{body: body, useSignature: tc.hmac})
			if code != http.StatusOK || rep.Status != "duplicate" || rep.Delivery != tc.wantID {
				t.Fatalf("resend = %d %+v, want 200 duplicate %s", code, rep, tc.wantID)
			}
			if f.pending(t) != 1 || f.notified.Load() != 1 {
				t.Errorf("pending %d, notified %d; want 1, 1", f.pending(t), f.notified.Load())
			}
			if got := testutil.ToFloat64(f.metrics.received.WithLabelValues(tc.source, EventName)); got != 1 {
				t.Errorf("received{%s} = %v, want 1", tc.source, got)
			}
			if got := testutil.ToFloat64(f.metrics.duplicates.WithLabelValues(tc.source, EventName)); got != 1 {
				t.Errorf("duplicates{%s} = %v, want 1", tc.source, got)
			}
			logs := f.logs.String()
			if !strings.Contains(logs, `"`+LogKeyDeliveryID+`":"`+tc.wantID+`"`) || !strings.Contains(logs, `"`+LogKeySource+`":"`+tc.source+`"`) {
				t.Errorf("logs do not name the delivery %s/%s:\n%s", tc.source, tc.wantID, logs)
			}
			if strings.Contains(logs, testTokenValue) {
				t.Errorf("token in logs:\n%s", logs)
			}
		})
	}
}

func TestEventReceiverRefusals(t *testing.T) {
	other := mustSecret(t, "not-the-token")
	type tcase struct {
		name      string
		req       eventRequest
		maxBody   int64
		wantCode  int
		wantInErr string
		signFail  string
		rejected  string
	}
	for _, s := range eventSources {
		body := sample(t, s.sample)
		cases := []tcase{
			{name: "GET", req: eventRequest{method: http.MethodGet}, wantCode: 405, wantInErr: "method GET", rejected: reasonMethod},
			{name: "wrong secret", req: eventRequest{body: body, signWith: other}, wantCode: 401, wantInErr: "does not match", signFail: reasonMismatch},
			{name: "wrong HMAC key", req: eventRequest{body: body, signWith: other, useSignature: true}, wantCode: 401, wantInErr: "X-Signature does not match", signFail: reasonMismatch},
			{name: "signature of another body", req: eventRequest{body: body, signature: ptr(Sign(mustSecret(t, testTokenValue), []byte("{}"))), authorization: ptr("")}, wantCode: 401, wantInErr: "does not match", signFail: reasonMismatch},
			{name: "no credentials", req: eventRequest{body: body, signature: ptr(""), authorization: ptr("")}, wantCode: 401, wantInErr: "missing", signFail: reasonMissing},
			{name: "sha1 signature", req: eventRequest{body: body, signature: ptr("sha1=" + strings.Repeat("0", 40)), authorization: ptr("")}, wantCode: 401, wantInErr: "malformed X-Signature", signFail: reasonMalformed},
			{name: "form encoded", req: eventRequest{body: body, contentType: ptr("application/x-www-form-urlencoded")}, wantCode: 415, wantInErr: "application/json", rejected: reasonContentType},
			{name: "no content type", req: eventRequest{body: body, contentType: ptr("")}, wantCode: 415, wantInErr: "missing Content-Type", rejected: reasonContentType},
			{name: "not a JSON object", req: eventRequest{body: []byte(`["a"]`)}, wantCode: 400, wantInErr: "not a JSON object", rejected: reasonInvalidJSON},
			{name: "truncated body", req: eventRequest{body: body[:len(body)/2]}, wantCode: 400, wantInErr: "not a JSON object", rejected: reasonInvalidJSON},
			{name: "over the limit", maxBody: 256, req: eventRequest{body: body}, wantCode: 413, wantInErr: "exceeds the 256-byte limit", rejected: reasonTooLarge},
			{name: "chunked over the limit", maxBody: 256, req: eventRequest{body: body, stream: bytes.NewReader(body)}, wantCode: 413, wantInErr: "exceeds the 256-byte limit", rejected: reasonTooLarge},
		}
		if s.source == store.SourceFlux {
			cases = append(cases,
				// Flux's generic-hmac provider signs; a bearer token alone is not accepted.
				tcase{name: "bearer instead of signature", req: eventRequest{body: body, signature: ptr(""), authorization: ptr("Bearer " + testTokenValue)}, wantCode: 401, wantInErr: "missing X-Signature", signFail: reasonMissing},
			)
		} else {
			cases = append(cases,
				tcase{name: "basic auth", req: eventRequest{body: body, authorization: ptr("Basic dXNlcjpwYXNz")}, wantCode: 401, wantInErr: "want Bearer", signFail: reasonMalformed},
				tcase{name: "empty bearer", req: eventRequest{body: body, authorization: ptr("Bearer ")}, wantCode: 401, wantInErr: "want Bearer", signFail: reasonMalformed},
				// A wrong token is refused even when a valid signature comes with it: the
				// Authorization header, when present, decides.
				tcase{name: "wrong bearer with valid signature", req: eventRequest{body: body, authorization: ptr("Bearer nope"), signature: ptr(Sign(mustSecret(t, testTokenValue), body))}, wantCode: 401, wantInErr: "bearer token does not match", signFail: reasonMismatch},
				tcase{name: "lower-case scheme", req: eventRequest{body: body, authorization: ptr("bearer " + testTokenValue)}, wantCode: 202},
			)
		}
		for _, tc := range cases {
			t.Run(s.source+"/"+tc.name, func(t *testing.T) {
				f := newEventFixture(t, EventReceiverConfig{MaxBodyBytes: tc.maxBody})
				code, rep, hdr := f.do(t, s.source, tc.req)
				if code != tc.wantCode {
					t.Fatalf("status = %d (%+v), want %d", code, rep, tc.wantCode)
				}
				if !strings.Contains(rep.Error, tc.wantInErr) {
					t.Errorf("error %q does not contain %q", rep.Error, tc.wantInErr)
				}
				if code == 405 && hdr.Get("Allow") != "POST" {
					t.Errorf("405 without Allow: POST")
				}
				wantStored := 0
				if code == 202 {
					wantStored = 1
				}
				if got := f.pending(t); got != wantStored {
					t.Errorf("stored %d deliveries, want %d", got, wantStored)
				}
				if tc.signFail != "" {
					if got := testutil.ToFloat64(f.metrics.signatureFailures.WithLabelValues(s.source, tc.signFail)); got != 1 {
						t.Errorf("signature failures{%s,%s} = %v, want 1", s.source, tc.signFail, got)
					}
				}
				if tc.rejected != "" {
					if got := testutil.ToFloat64(f.metrics.rejected.WithLabelValues(s.source, tc.rejected)); got != 1 {
						t.Errorf("rejected{%s,%s} = %v, want 1", s.source, tc.rejected, got)
					}
				}
				if strings.Contains(f.logs.String(), testTokenValue) {
					t.Errorf("token in logs")
				}
			})
		}
	}
}

// TestEventReceiverDecoderErrors: an authenticated JSON object that is not what the source sends
// is refused with the decoder's own explanation, and nothing is stored.
func TestEventReceiverDecoderErrors(t *testing.T) {
	cases := []struct{ source, body, wantInErr string }{
		{store.SourceFlux, `{"hello": "world"}`, "flux: event has no involvedObject.kind and .name"},
		{store.SourceFlux, `{"involvedObject": {"kind": "Kustomization", "name": "apps"}}`, "has no timestamp"},
		{store.SourceArgoCD, `{"parley": "v1", "event": "out-of-sync"}`, "argocd: notification has no app.name"},
		{store.SourceK8sAudit, `{"kind": "Pod", "apiVersion": "v1"}`, `k8s-audit: body is a "Pod"`},
		{store.SourceK8sAudit, `{"kind": "EventList", "items": 7}`, "k8s-audit: decode EventList"},
		{store.SourceCloudTrail, `{"hello": "world"}`, "cloudtrail: body is neither a CloudTrail record"},
		{store.SourceCloudTrail, `{"detail-type": "AWS API Call via CloudTrail"}`, "EventBridge envelope has no detail"},
	}
	for _, tc := range cases {
		t.Run(tc.source, func(t *testing.T) {
			f := newEventFixture(t, EventReceiverConfig{})
			code, rep, _ := f.do(t, tc.source, eventRequest{body: []byte(tc.body)})
			if code != http.StatusBadRequest || rep.Status != "refused" || !strings.Contains(rep.Error, tc.wantInErr) {
				t.Fatalf("= %d %+v, want 400 naming %q", code, rep, tc.wantInErr)
			}
			if f.pending(t) != 0 {
				t.Errorf("a body the decoder refused was stored")
			}
			if got := testutil.ToFloat64(f.metrics.rejected.WithLabelValues(tc.source, reasonInvalidEvent)); got != 1 {
				t.Errorf("rejected{%s,%s} = %v, want 1", tc.source, reasonInvalidEvent, got)
			}
		})
	}
}

func TestEventReceiverIgnored(t *testing.T) {
	cases := []struct {
		source, file, reason string
		body                 []byte
	}{
		{source: store.SourceFlux, file: "flux/finished.json", reason: "flux-no-change-set"},
		{source: store.SourceFlux, file: "flux/error.json", reason: "flux-error-event"},
		{source: store.SourceCloudTrail, reason: "eventbridge-other-detail-type",
			body: []byte(`{"version": "0", "id": "7bf73129", "detail-type": "EC2 Instance State-change Notification", "source": "aws.ec2", "detail": {"state": "running"}}`)},
		{source: store.SourceK8sAudit, reason: "read-verb",
			body: []byte(`{"kind": "EventList", "apiVersion": "audit.k8s.io/v1", "items": [{"auditID": "5b1c8f0e-0000-4000-8000-000000000001", "stage": "ResponseComplete", "verb": "get", "requestURI": "/api/v1/namespaces/prod/configmaps/x", "objectRef": {"resource": "configmaps", "namespace": "prod", "name": "x", "apiVersion": "v1"}, "responseStatus": {"code": 200}}]}`)},
	}
	for _, tc := range cases {
		t.Run(tc.reason, func(t *testing.T) {
			f := newEventFixture(t, EventReceiverConfig{})
			body := tc.body
			if tc.file != "" {
				body = sample(t, tc.file)
			}
			code, rep, _ := f.do(t, tc.source, eventRequest{body: body})
			if code != http.StatusOK || rep.Status != "ignored" || rep.Delivery != "" || rep.Ignored[tc.reason] != 1 {
				t.Fatalf("= %d %+v, want 200 ignored naming %s", code, rep, tc.reason)
			}
			if f.pending(t) != 0 || f.notified.Load() != 0 {
				t.Errorf("an ignored body was stored (%d pending, %d notified)", f.pending(t), f.notified.Load())
			}
			if got := testutil.ToFloat64(f.events.ignored.WithLabelValues(tc.source, tc.reason)); got != 1 {
				t.Errorf("parley_events_ignored_total{%s,%s} = %v, want 1", tc.source, tc.reason, got)
			}
		})
	}
}

func TestEventReceiverNotEnabled(t *testing.T) {
	f := newEventFixture(t, EventReceiverConfig{}, []Secret{}...)
	for _, s := range eventSources {
		f.rcv[s.source].SetSecrets() // no secret: the source is off
		code, rep, _ := f.do(t, s.source, eventRequest{body: sample(t, s.sample)})
		if code != http.StatusForbidden || !strings.Contains(rep.Error, "set "+s.setting+" to enable") {
			t.Errorf("%s: = %d %+v, want 403 naming %s", s.source, code, rep, s.setting)
		}
		if got := testutil.ToFloat64(f.metrics.rejected.WithLabelValues(s.source, reasonNotEnabled)); got != 1 {
			t.Errorf("rejected{%s,%s} = %v, want 1", s.source, reasonNotEnabled, got)
		}
	}
	if f.pending(t) != 0 {
		t.Errorf("a disabled source stored a delivery")
	}
}

// TestEventReceiverRotation: with the old and the new secret configured, a sender using either
// gets in, by bearer token and by signature; once the old one is dropped it no longer does.
func TestEventReceiverRotation(t *testing.T) {
	oldS, newS := mustSecret(t, "old-token"), mustSecret(t, "new-token")
	f := newEventFixture(t, EventReceiverConfig{}, oldS, newS)
	argo := sample(t, "argocd/out-of-sync.json")
	flux := sample(t, "flux/configured.json")
	for i, r := range []struct {
		source string
		req    eventRequest
		want   int
	}{
		{store.SourceArgoCD, eventRequest{body: argo, signWith: oldS}, 202},
		{store.SourceArgoCD, eventRequest{body: argo, signWith: newS}, 200}, // same body: duplicate
		{store.SourceFlux, eventRequest{body: flux, signWith: newS}, 202},
		{store.SourceFlux, eventRequest{body: flux, signWith: oldS}, 200},
		{store.SourceCloudTrail, eventRequest{body: sample(t, "cloudtrail/raw-record.json"), signWith: oldS, useSignature: true}, 202},
	} {
		if code, rep, _ := f.do(t, r.source, r.req); code != r.want {
			t.Errorf("request %d (%s) = %d %+v, want %d", i, r.source, code, rep, r.want)
		}
	}
	f.rcv[store.SourceArgoCD].SetSecrets(newS)
	if code, rep, _ := f.do(t, store.SourceArgoCD, eventRequest{body: argo, signWith: oldS}); code != http.StatusUnauthorized {
		t.Errorf("old token after rotation = %d %+v, want 401", code, rep)
	}
}

// knownClusters is the Clusters of the cluster tests: the server is configured for "prod" and
// "staging". It counts the questions, so that a test can check who got to ask.
type knownClusters struct{ asked atomic.Int64 }

func (k *knownClusters) known(name string) bool {
	k.asked.Add(1)
	return name == "prod" || name == "staging"
}

// logRecords returns the JSON log records whose message is msg.
func logRecords(t *testing.T, logs, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.Lines(logs) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line is not JSON: %q", line)
		}
		if rec["msg"] == msg {
			out = append(out, rec)
		}
	}
	return out
}

// TestEventReceiverClusterScope: an event posted to /events/<source>/<cluster> is stored with
// the cluster as its Scope, by bearer token and by signature, and the "event stored" line names
// the cluster. The same body posted again under another cluster is a duplicate (deduplication
// is by source and delivery ID) and the first scope stands.
func TestEventReceiverClusterScope(t *testing.T) {
	for _, s := range eventSources {
		for _, viaSignature := range []bool{false, true} {
			if s.source == store.SourceFlux && !viaSignature {
				continue // Flux signs
			}
			name := s.source + "/bearer"
			if viaSignature {
				name = s.source + "/signature"
			}
			t.Run(name, func(t *testing.T) {
				var k knownClusters
				f := newEventFixture(t, EventReceiverConfig{Clusters: k.known})
				body := sample(t, s.sample)
				code, rep, _ := f.do(t, s.source, eventRequest{body: body, cluster: "prod", useSignature: viaSignature})
				if code != http.StatusAccepted || rep.Status != "accepted" {
					t.Fatalf("POST /events/%s/prod = %d %+v, want 202 accepted", s.source, code, rep)
				}
				if !strings.HasSuffix(rep.Delivery, "@prod") {
					t.Errorf("delivery ID %q does not name the cluster (want ...@prod)", rep.Delivery)
				}
				key := store.Key{Source: s.source, ID: rep.Delivery}
				d, err := f.store.Get(context.Background(), key)
				if err != nil {
					t.Fatal(err)
				}
				if d.Scope != "prod" || !bytes.Equal(d.Body, body) {
					t.Errorf("stored scope %q, %d bytes; want scope prod and the %d request bytes", d.Scope, len(d.Body), len(body))
				}
				stored := logRecords(t, f.logs.String(), "event stored")
				if len(stored) != 1 || stored[0][LogKeyCluster] != "prod" || stored[0][LogKeyDeliveryID] != rep.Delivery {
					t.Errorf(`"event stored" records = %v, want one with %s "prod"`, stored, LogKeyCluster)
				}

				// The cluster is part of the delivery's identity: the same body under staging is
				// another delivery, a redelivery to prod a duplicate.
				code, other, _ := f.do(t, s.source, eventRequest{body: body, cluster: "staging", useSignature: viaSignature})
				if code != http.StatusAccepted || other.Delivery == rep.Delivery || !strings.HasSuffix(other.Delivery, "@staging") {
					t.Fatalf("same body under staging = %d %+v, want 202 accepted as a delivery of its own", code, other)
				}
				code, again, _ := f.do(t, s.source, eventRequest{body: body, cluster: "prod", useSignature: viaSignature})
				if code != http.StatusOK || again.Status != "duplicate" || again.Delivery != rep.Delivery {
					t.Fatalf("redelivery to prod = %d %+v, want 200 duplicate %s", code, again, rep.Delivery)
				}
				if d, err := f.store.Get(context.Background(), key); err != nil || d.Scope != "prod" {
					t.Errorf("after the duplicate: scope %q, %v; want prod", d.Scope, err)
				}
				if f.pending(t) != 2 || f.notified.Load() != 2 || k.asked.Load() != 3 {
					t.Errorf("pending %d, notified %d, clusters asked %d; want 2, 2, 3", f.pending(t), f.notified.Load(), k.asked.Load())
				}
				if strings.Contains(f.logs.String(), testTokenValue) {
					t.Errorf("token in logs")
				}
			})
		}
	}
}

// TestEventReceiverNarrowCredentials: a cluster's event secret posts only to its own cluster's
// path, an AWS account's only CloudTrail records of that account; each is refused 403 elsewhere
// and nothing is stored. A secret several clusters share posts for each of them.
func TestEventReceiverNarrowCredentials(t *testing.T) {
	prod, staging, shared, account := mustSecret(t, "prod-s3cret"), mustSecret(t, "staging-s3cret"), mustSecret(t, "shared-s3cret"), mustSecret(t, "acct-s3cret")
	for _, s := range eventSources {
		t.Run(s.source, func(t *testing.T) {
			var k knownClusters
			source := s.source
			f := newEventFixture(t, EventReceiverConfig{Clusters: k.known,
				Credentials: []Credential{{Secret: prod, Cluster: "prod"}, {Secret: staging, Cluster: "staging"},
					{Secret: shared, Cluster: "prod"}, {Secret: shared, Cluster: "staging"}, {Secret: account, Account: "123456789012"}},
				Accounts: func(body []byte) ([]string, error) {
					o, err := events.OriginOf(source, body)
					return o.Accounts, err
				}})
			body := sample(t, s.sample)
			for _, c := range []struct {
				name    string
				secret  Secret
				cluster string
				want    int
			}{
				{"prod's secret for staging", prod, "staging", http.StatusForbidden},
				{"prod's secret without a cluster", prod, "", http.StatusForbidden},
				{"staging's secret for prod", staging, "prod", http.StatusForbidden},
				{"an account's secret for a cluster", account, "prod", http.StatusForbidden},
			} {
				code, rep, _ := f.do(t, s.source, eventRequest{body: body, cluster: c.cluster, signWith: c.secret})
				if code != c.want || rep.Status != "refused" || !strings.Contains(rep.Error, "credential") {
					t.Errorf("%s: %d %+v, want %d refused", c.name, code, rep, c.want)
				}
			}
			if f.pending(t) != 0 {
				t.Fatalf("a refused post was stored")
			}
			code, rep, _ := f.do(t, s.source, eventRequest{body: body, cluster: "staging", signWith: shared})
			if code != http.StatusAccepted {
				t.Errorf("the shared secret for staging: %d %+v", code, rep)
			}
			if d, err := f.store.Get(context.Background(), store.Key{Source: s.source, ID: rep.Delivery}); err != nil || d.Scope != "staging" {
				t.Errorf("stored scope %q, %v", d.Scope, err)
			}
			// An account's secret posts its own account's CloudTrail records, and nothing else.
			code, rep, _ = f.do(t, s.source, eventRequest{body: body, signWith: account})
			if s.source == store.SourceCloudTrail {
				if code != http.StatusAccepted || rep.Status != "accepted" {
					t.Errorf("the account's own records: %d %+v, want 202 (the staging post is another delivery)", code, rep)
				}
			} else if code != http.StatusForbidden {
				t.Errorf("an account's secret for %s: %d %+v, want 403", s.source, code, rep)
			}
		})
	}
	// Records of another account are refused to the account's secret.
	var k knownClusters
	f := newEventFixture(t, EventReceiverConfig{Clusters: k.known, Credentials: []Credential{{Secret: account, Account: "210987654321"}},
		Accounts: func(body []byte) ([]string, error) {
			o, err := events.OriginOf(store.SourceCloudTrail, body)
			return o.Accounts, err
		}})
	code, rep, _ := f.do(t, store.SourceCloudTrail, eventRequest{body: sample(t, "cloudtrail/records.json"), signWith: account})
	if code != http.StatusForbidden || !strings.Contains(rep.Error, "123456789012") {
		t.Errorf("another account's records: %d %+v, want 403 naming the account", code, rep)
	}
}

// TestEventReceiverClusterCannotClaimAnothersBody: a cluster's credential posts only to its own
// path, but it can post any body there. Staging posting prod's body first (event IDs of Flux
// and Argo CD can be predicted) must not decide that body's cluster: prod's own post is stored
// and judged under prod, and only prod's redelivery of it is a duplicate.
func TestEventReceiverClusterCannotClaimAnothersBody(t *testing.T) {
	prod, staging := mustSecret(t, "prod-s3cret"), mustSecret(t, "staging-s3cret")
	for _, s := range eventSources {
		t.Run(s.source, func(t *testing.T) {
			var k knownClusters
			f := newEventFixture(t, EventReceiverConfig{Clusters: k.known,
				Credentials: []Credential{{Secret: prod, Cluster: "prod"}, {Secret: staging, Cluster: "staging"}}})
			body := sample(t, s.sample)
			code, first, _ := f.do(t, s.source, eventRequest{body: body, cluster: "staging", signWith: staging})
			if code != http.StatusAccepted {
				t.Fatalf("staging posting prod's body to its own path: %d %+v, want 202", code, first)
			}
			code, rightful, _ := f.do(t, s.source, eventRequest{body: body, cluster: "prod", signWith: prod})
			if code != http.StatusAccepted || rightful.Status != "accepted" || rightful.Delivery == first.Delivery {
				t.Fatalf("prod's own post after staging's = %d %+v, want 202 accepted as a delivery of its own (staging's was %s)",
					code, rightful, first.Delivery)
			}
			for id, want := range map[string]string{first.Delivery: "staging", rightful.Delivery: "prod"} {
				if d, err := f.store.Get(context.Background(), store.Key{Source: s.source, ID: id}); err != nil || d.Scope != want || !bytes.Equal(d.Body, body) {
					t.Errorf("delivery %s: scope %q, %v; want scope %s and the posted body", id, d.Scope, err, want)
				}
			}
			code, again, _ := f.do(t, s.source, eventRequest{body: body, cluster: "prod", signWith: prod})
			if code != http.StatusOK || again.Status != "duplicate" || again.Delivery != rightful.Delivery {
				t.Errorf("prod's redelivery = %d %+v, want 200 duplicate %s", code, again, rightful.Delivery)
			}
			if n := f.pending(t); n != 2 {
				t.Errorf("pending %d, want 2 (one per cluster)", n)
			}
		})
	}
}

// TestEventReceiverUnscopedPath: with clusters configured, /events/<source> still stores events,
// with Scope "", without asking about clusters and without a cluster in the log.
func TestEventReceiverUnscopedPath(t *testing.T) {
	for _, s := range eventSources {
		t.Run(s.source, func(t *testing.T) {
			var k knownClusters
			f := newEventFixture(t, EventReceiverConfig{Clusters: k.known})
			code, rep, _ := f.do(t, s.source, eventRequest{body: sample(t, s.sample)})
			if code != http.StatusAccepted {
				t.Fatalf("POST /events/%s = %d %+v, want 202", s.source, code, rep)
			}
			d, err := f.store.Get(context.Background(), store.Key{Source: s.source, ID: rep.Delivery})
			if err != nil {
				t.Fatal(err)
			}
			if d.Scope != "" || k.asked.Load() != 0 {
				t.Errorf("scope %q, clusters asked %d; want no scope and no question", d.Scope, k.asked.Load())
			}
			stored := logRecords(t, f.logs.String(), "event stored")
			if len(stored) != 1 {
				t.Fatalf(`%d "event stored" records, want 1`, len(stored))
			}
			if c, ok := stored[0][LogKeyCluster]; ok {
				t.Errorf(`"event stored" of an unscoped event has %s %v`, LogKeyCluster, c)
			}
		})
	}
}

// TestEventReceiverUnknownCluster: an authenticated event for a cluster the server does not know
// is refused with 404 naming the configuration to add, and nothing is stored. With no Clusters
// at all, no cluster is known.
func TestEventReceiverUnknownCluster(t *testing.T) {
	var k knownClusters
	for _, tc := range []struct {
		name     string
		clusters func(string) bool
		cluster  string
	}{
		{"not configured", k.known, "nope"},
		{"no clusters", nil, "prod"},
	} {
		for _, s := range eventSources {
			t.Run(tc.name+"/"+s.source, func(t *testing.T) {
				f := newEventFixture(t, EventReceiverConfig{Clusters: tc.clusters})
				code, rep, _ := f.do(t, s.source, eventRequest{body: sample(t, s.sample), cluster: tc.cluster})
				want := `unknown cluster "` + tc.cluster + `": add a cluster "` + tc.cluster +
					`" { repository = "owner/name" } block to the server configuration (docs/install.md)`
				if code != http.StatusNotFound || rep.Status != "refused" || rep.Error != want {
					t.Fatalf("= %d %+v, want 404 refused %q", code, rep, want)
				}
				if f.pending(t) != 0 || f.notified.Load() != 0 {
					t.Errorf("an event for an unknown cluster was stored (%d pending, %d notified)", f.pending(t), f.notified.Load())
				}
				if got := testutil.ToFloat64(f.metrics.rejected.WithLabelValues(s.source, reasonUnknownCluster)); got != 1 {
					t.Errorf("rejected{%s,%s} = %v, want 1", s.source, reasonUnknownCluster, got)
				}
			})
		}
	}
}

// TestEventReceiverInvalidCluster: a cluster name that no configuration could hold is refused with
// 400 naming it, without asking Clusters, and nothing is stored.
func TestEventReceiverInvalidCluster(t *testing.T) {
	long := strings.Repeat("c", 70)
	for _, tc := range []struct{ path, name string }{
		{"-x", "-x"},
		{".x", ".x"},
		{"_x", "_x"},
		{long, long},
		{strings.Repeat("d", 64), strings.Repeat("d", 64)},
		{"a%2Fb", "a/b"}, // PathValue unescapes
		{"a%20b", "a b"},
		{"%C3%BC", "ü"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			var k knownClusters
			f := newEventFixture(t, EventReceiverConfig{Clusters: k.known})
			code, rep, _ := f.do(t, store.SourceArgoCD, eventRequest{body: sample(t, "argocd/out-of-sync.json"), cluster: tc.path})
			if code != http.StatusBadRequest || rep.Status != "refused" || !strings.Contains(rep.Error, strconv.Quote(tc.name)) {
				t.Fatalf("= %d %+v, want 400 refused naming %q", code, rep, tc.name)
			}
			if f.pending(t) != 0 || k.asked.Load() != 0 {
				t.Errorf("pending %d, clusters asked %d; want 0, 0", f.pending(t), k.asked.Load())
			}
			if got := testutil.ToFloat64(f.metrics.rejected.WithLabelValues(store.SourceArgoCD, reasonInvalidCluster)); got != 1 {
				t.Errorf("rejected{%s} = %v, want 1", reasonInvalidCluster, got)
			}
		})
	}
}

// TestEventReceiverClusterAfterCredentials: the cluster is looked at only once the credentials are
// verified, so a caller without them cannot tell a known cluster from an unknown or invalid one:
// every such request is answered 401, and Clusters is never asked.
func TestEventReceiverClusterAfterCredentials(t *testing.T) {
	other := mustSecret(t, "not-the-token")
	for _, s := range eventSources {
		body := sample(t, s.sample)
		for _, tc := range []struct {
			name string
			req  eventRequest
		}{
			{"wrong secret", eventRequest{body: body, signWith: other}},
			{"wrong HMAC key", eventRequest{body: body, signWith: other, useSignature: true}},
			{"signature of another body", eventRequest{body: body, signature: ptr(Sign(mustSecret(t, testTokenValue), []byte("{}"))), authorization: ptr("")}},
			{"no credentials", eventRequest{body: body, signature: ptr(""), authorization: ptr("")}},
		} {
			for _, cluster := range []string{"nope", "prod", "-x", strings.Repeat("c", 70)} {
				t.Run(s.source+"/"+tc.name+"/"+cluster[:min(len(cluster), 8)], func(t *testing.T) {
					var k knownClusters
					f := newEventFixture(t, EventReceiverConfig{Clusters: k.known})
					req := tc.req
					req.cluster = cluster
					code, rep, _ := f.do(t, s.source, req)
					if code != http.StatusUnauthorized || rep.Status != "unauthorized" {
						t.Fatalf("= %d %+v, want 401", code, rep)
					}
					if strings.Contains(rep.Error, "cluster") || strings.Contains(f.logs.String(), cluster) {
						t.Errorf("an unauthenticated request was told or logged about its cluster: %q\n%s", rep.Error, f.logs.String())
					}
					if k.asked.Load() != 0 || f.pending(t) != 0 {
						t.Errorf("clusters asked %d times, %d stored; want 0, 0", k.asked.Load(), f.pending(t))
					}
				})
			}
		}
	}
}

func TestEventReceiverSignatureAlgorithms(t *testing.T) {
	f := newEventFixture(t, EventReceiverConfig{})
	body := sample(t, "flux/configured.json")
	for alg, newHash := range testHashes {
		h := hmac.New(newHash, []byte(testTokenValue))
		h.Write(body)
		// The algorithm name is matched case-insensitively, as Flux's own receiver does.
		sig := strings.ToUpper(alg[:1]) + alg[1:] + "=" + hex.EncodeToString(h.Sum(nil))
		code, rep, _ := f.do(t, store.SourceFlux, eventRequest{body: body, signature: ptr(sig)})
		if code != http.StatusAccepted && code != http.StatusOK {
			t.Errorf("%s signature = %d %+v, want accepted", alg, code, rep)
		}
	}
}

func TestEventReceiverStoreUnavailable(t *testing.T) {
	f := newEventFixture(t, EventReceiverConfig{PutTimeout: time.Second})
	if err := f.store.Close(); err != nil {
		t.Fatal(err)
	}
	code, rep, hdr := f.do(t, store.SourceArgoCD, eventRequest{body: sample(t, "argocd/out-of-sync.json")})
	if code != http.StatusServiceUnavailable || hdr.Get("Retry-After") == "" || rep.Delivery != argoOutOfSyncID {
		t.Fatalf("= %d %+v (Retry-After %q), want 503 with Retry-After", code, rep, hdr.Get("Retry-After"))
	}
	if f.notified.Load() != 0 {
		t.Errorf("notified although nothing was stored")
	}
}

func TestNewEventReceiver(t *testing.T) {
	s := openStore(t, store.Options{})
	id := func([]byte) ([]string, map[string]int, error) { return nil, nil, nil }
	if _, err := NewEventReceiver(EventReceiverConfig{Source: "github", Store: s, ID: id}); err == nil || !strings.Contains(err.Error(), `unknown source "github"`) {
		t.Errorf("github source: %v", err)
	}
	if _, err := NewEventReceiver(EventReceiverConfig{Source: store.SourceFlux, ID: id}); err == nil || !strings.Contains(err.Error(), "no store") {
		t.Errorf("no store: %v", err)
	}
	if _, err := NewEventReceiver(EventReceiverConfig{Source: store.SourceFlux, Store: s}); err == nil || !strings.Contains(err.Error(), "no ID function") {
		t.Errorf("no ID function: %v", err)
	}
	r, err := NewEventReceiver(EventReceiverConfig{Source: store.SourceK8sAudit, Store: s, ID: id})
	if err != nil {
		t.Fatal(err)
	}
	if r.maxBody != MaxBodyBytes || r.Source() != store.SourceK8sAudit || len(*r.secrets.Load()) != 0 {
		t.Errorf("defaults: max body %d, source %s, %d secrets", r.maxBody, r.Source(), len(*r.secrets.Load()))
	}
}

func TestDeliveryID(t *testing.T) {
	a, b, c := "0b6b9f0a-1c1e-4f5e-9a57-1d2a3b4c5d02", "0b6b9f0a-1c1e-4f5e-9a57-1d2a3b4c5d04", "0b6b9f0a-1c1e-4f5e-9a57-1d2a3b4c5d05"
	batch := DeliveryID([]string{a, b, c})
	if !strings.HasPrefix(batch, "batch-") || len(batch) != len("batch-")+32 || !validDeliveryID(batch) {
		t.Fatalf("batch ID %q: want batch- and 32 hex digits", batch)
	}
	// Stable: the value is part of the store's contract (a resend after an upgrade must still be
	// a duplicate), so it is pinned.
	if batch != "batch-"+hash32(a+"\n"+b+"\n"+c) {
		t.Errorf("batch ID %q is not the hash of the sorted IDs joined by newlines", batch)
	}
	for _, perm := range [][]string{{c, b, a}, {b, a, c}, {a, b, c, a}, {"", c, a, b}} {
		if got := DeliveryID(perm); got != batch {
			t.Errorf("DeliveryID(%q) = %s, want %s (order and repeats must not matter)", perm, got, batch)
		}
	}
	if got, want := ScopedDeliveryID("prod-eu.1", a), a+"@prod-eu.1"; got != want {
		t.Errorf("ScopedDeliveryID = %q, want %q", got, want)
	}
	if got := DeliveryID([]string{a, b}); got == batch {
		t.Errorf("a different batch got the same ID %s", got)
	}
	if got := DeliveryID([]string{a}); got != a {
		t.Errorf("one event: %s, want its own ID %s", got, a)
	}
	if got := DeliveryID([]string{a, a}); got != a {
		t.Errorf("one event twice: %s, want %s", got, a)
	}
	for _, bad := range []string{"has space", "new\nline", strings.Repeat("x", 129), "ünïcode"} {
		got := DeliveryID([]string{bad})
		if !strings.HasPrefix(got, "event-") || !validDeliveryID(got) || got != DeliveryID([]string{bad}) {
			t.Errorf("DeliveryID(%q) = %q: want a stable event- hash that is a valid delivery ID", bad, got)
		}
	}
}

func TestIgnoredLabel(t *testing.T) {
	for in, want := range map[string]string{"read-verb": "read-verb", "flux-no-change-set": "flux-no-change-set",
		"": "other", "Bad Reason": "other", strings.Repeat("a", 49): "other"} {
		if got := ignoredLabel(in); got != want {
			t.Errorf("ignoredLabel(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzEventReceiver throws arbitrary bodies and credential headers at the four receivers over a
// real store. Properties: no panic; a 2xx only when the request carried the right bearer token
// (sources other than Flux) or an X-Signature that is the HMAC of the body under the secret; never
// a 5xx (the store is healthy, so not even the 503); a 202 always leaves the body stored, as sent.
// When sign is true the body is signed with the secret, so that the fuzzer reaches the decoders
// behind the authentication; otherwise the headers are the fuzzer's.
func FuzzEventReceiver(f *testing.F) {
	const fuzzToken = "fuzz-token"
	sec := mustSecret(f, fuzzToken)
	srcs := []string{store.SourceFlux, store.SourceArgoCD, store.SourceK8sAudit, store.SourceCloudTrail}
	for i, s := range eventSources {
		f.Add(uint8(i), "", "", "application/json", sample(f, s.sample), true)
	}
	f.Add(uint8(1), "Bearer fuzz-token", "", "application/json", sample(f, "argocd/sync-succeeded.json"), false)
	f.Add(uint8(0), "", "sha256="+strings.Repeat("ab", 32), "application/json", sample(f, "flux/configured.json"), false)
	f.Add(uint8(0), "", "", "application/json", sample(f, "flux/finished.json"), true)
	f.Add(uint8(3), "", "", "application/json", sample(f, "cloudtrail/eventbridge-set-desired-capacity.json"), true)
	f.Add(uint8(2), "Bearer wrong", "", "application/json", []byte(`{"kind":"EventList","items":[]}`), false)
	f.Add(uint8(3), "", "", "text/plain", []byte(`{"Records":[]}`), true)

	st := openStore(f, store.Options{})
	rcvs := make([]*EventReceiver, len(srcs))
	for i, source := range srcs {
		r, err := NewEventReceiver(EventReceiverConfig{Source: source, Secrets: []Secret{sec}, Store: st,
			ID:           func(body []byte) ([]string, map[string]int, error) { return events.EventIDs(source, body) },
			MaxBodyBytes: 1 << 20, PutTimeout: 5 * time.Second})
		if err != nil {
			f.Fatal(err)
		}
		rcvs[i] = r
	}
	f.Fuzz(func(t *testing.T, which uint8, authz, sig, ctype string, body []byte, sign bool) {
		i := int(which) % len(srcs)
		source := srcs[i]
		req := httptest.NewRequest(http.MethodPost, "/events/"+source, bytes.NewReader(body))
		req.Header = http.Header{}
		if sign {
			sig = Sign(sec, body)
		}
		if authz != "" {
			req.Header[HeaderAuthorization] = []string{authz}
		}
		if sig != "" {
			req.Header[HeaderXSignature] = []string{sig}
		}
		if ctype != "" {
			req.Header["Content-Type"] = []string{ctype}
		}
		w := httptest.NewRecorder()
		rcvs[i].ServeHTTP(w, req)
		code := w.Code
		if code >= 500 {
			t.Fatalf("status %d (%s) with a healthy store", code, w.Body)
		}
		if code < 200 || code >= 300 {
			return
		}
		bearerOK := source != store.SourceFlux && validBearer(fuzzToken, authz)
		sigOK := (source == store.SourceFlux || authz == "") && validXSignature(fuzzToken, sig, body)
		if !bearerOK && !sigOK {
			t.Fatalf("status %d for %s with Authorization %q and X-Signature %q that do not authenticate the body", code, source, authz, sig)
		}
		var rep eventReply
		if err := json.Unmarshal(w.Body.Bytes(), &rep); err != nil {
			t.Fatalf("reply is not JSON: %q", w.Body)
		}
		if code == http.StatusAccepted {
			d, err := st.Get(context.Background(), store.Key{Source: source, ID: rep.Delivery})
			if err != nil {
				t.Fatalf("202 but not stored: %v", err)
			}
			if !bytes.Equal(d.Body, body) {
				t.Fatalf("stored body differs from the request's")
			}
		}
	})
}

var testHashes = map[string]func() hash.Hash{"sha256": sha256.New, "sha384": sha512.New384, "sha512": sha512.New}

// validXSignature checks an X-Signature value independently of the receiver's parser, for the
// fuzz property: "<sha256|sha384|sha512, any case>=<hex HMAC of body>", surrounding spaces allowed.
func validXSignature(sec string, sig string, body []byte) bool {
	alg, hexMAC, ok := strings.Cut(strings.TrimSpace(sig), "=")
	newHash, known := testHashes[strings.ToLower(alg)]
	if !ok || !known {
		return false
	}
	got, err := hex.DecodeString(hexMAC)
	if err != nil {
		return false
	}
	h := hmac.New(newHash, []byte(sec))
	h.Write(body)
	return hmac.Equal(got, h.Sum(nil))
}

// validBearer checks an Authorization value independently: the scheme in any case, one space,
// the token (surrounding spaces allowed).
func validBearer(token, authz string) bool {
	scheme, rest, ok := strings.Cut(authz, " ")
	return ok && strings.EqualFold(scheme, "bearer") && strings.TrimSpace(rest) == token
}
