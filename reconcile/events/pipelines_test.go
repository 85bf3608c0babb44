package events

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/parleyhq/parley/core"
)

func pipelineFile(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "pipelines", name))
	if err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSpace(b)
}

func gz(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(b)
	zw.Close()
	return buf.Bytes()
}

// cwlMessageOf is a CloudWatch Logs subscription message of group/stream holding messages.
func cwlMessageOf(t testing.TB, group, stream string, messages ...[]byte) []byte {
	t.Helper()
	type ev struct {
		ID        string `json:"id"`
		Timestamp int64  `json:"timestamp"`
		Message   string `json:"message"`
	}
	m := map[string]any{"messageType": "DATA_MESSAGE", "owner": "111122223333", "logGroup": group, "logStream": stream,
		"subscriptionFilters": []string{"parley"}}
	var evs []ev
	for i, msg := range messages {
		evs = append(evs, ev{ID: fmt.Sprintf("3800000000000000000000000000000000000000000000%04d", i), Timestamp: 1764299529497, Message: string(msg)})
	}
	m["logEvents"] = evs
	b, _ := json.Marshal(m)
	return b
}

// firehoseBody is a Firehose request whose records are the given data.
func firehoseBody(rid string, records ...[]byte) []byte {
	var recs []map[string]string
	for _, r := range records {
		recs = append(recs, map[string]string{"data": base64.StdEncoding.EncodeToString(r)})
	}
	b, _ := json.Marshal(map[string]any{"requestId": rid, "timestamp": 1764299531000, "records": recs})
	return b
}

func eventList(items ...[]byte) []byte {
	return []byte(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","metadata":{},"items":[` + string(bytes.Join(items, []byte(","))) + `]}`)
}

// sameClaims decodes both bodies as audit EventLists and requires the same claims.
func sameClaims(t *testing.T, got, want []byte) []core.Claim {
	t.Helper()
	gb, err := DecodeK8sAudit(got)
	if err != nil {
		t.Fatalf("unwrapped body: %v", err)
	}
	wb, err := DecodeK8sAudit(want)
	if err != nil {
		t.Fatal(err)
	}
	gc, wc := Claims(gb, nil, nil), Claims(wb, nil, nil)
	if len(wc) == 0 {
		t.Fatal("the audit door's own body gives no claim: the comparison proves nothing")
	}
	if !reflect.DeepEqual(gc, wc) {
		t.Fatalf("claims differ from the audit door's:\n got  %+v\n want %+v", gc, wc)
	}
	if !reflect.DeepEqual(gb.EventIDs, wb.EventIDs) || !reflect.DeepEqual(gb.Ignored, wb.Ignored) {
		t.Fatalf("ids %v ignored %v, the audit door's %v %v", gb.EventIDs, gb.Ignored, wb.EventIDs, wb.Ignored)
	}
	return gc
}

// An EKS audit event, in a CloudWatch Logs subscription message (gzip, as the subscription writes
// it), in a Firehose request, is the audit door's EventList of the same event: the same claims,
// IDs and ignored counts.
func TestFirehoseEKSAuditIsTheAuditDoorsEvent(t *testing.T) {
	patch, get := pipelineFile(t, "eks-audit-event.json"), pipelineFile(t, "eks-audit-get.json")
	group, stream := "/aws/eks/prod-eks/cluster", "kube-apiserver-audit-0a1b2c3d4e5f60718293a4b5c6d7e8f9"
	for _, tc := range []struct {
		name   string
		record []byte
	}{
		{"gzip", gz(t, cwlMessageOf(t, group, stream, get, patch))},
		{"decompressed by the stream", cwlMessageOf(t, group, stream, get, patch)},
		{"messages extracted by the stream", append(append(append([]byte{}, get...), '\n'), append(patch, '\n')...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := firehoseBody("7d2e0c8a-51f4-4b0e-9d0c-3c1f8a6b2e11", tc.record, gz(t, []byte(`{"messageType":"CONTROL_MESSAGE","owner":"CloudwatchLogs","logGroup":"","logStream":"","subscriptionFilters":[],"logEvents":[{"id":"","timestamp":1764299529000,"message":"CWL CONTROL MESSAGE: Checking health of destination Firehose."}]}`)))
			req, recs, err := DecodeFirehose(body, 0)
			if err != nil {
				t.Fatal(err)
			}
			if req.RequestID != "7d2e0c8a-51f4-4b0e-9d0c-3c1f8a6b2e11" || req.Timestamp != 1764299531000 || recs.Ignored[ignControlMessage] != 1 {
				t.Fatalf("request %+v, ignored %v", req, recs.Ignored)
			}
			bodies := recs.Bodies(0)
			if len(bodies) != 1 || bodies[0].Source != SourceK8sAudit {
				t.Fatalf("bodies %+v", bodies)
			}
			claims := sameClaims(t, bodies[0].Body, eventList(get, patch))
			if len(claims) != 1 || claims[0].Field.String() != "k8s:apps/Deployment/prod/web#/spec/replicas" || claims[0].Actor.Identity.ID != "cost-optimizer" {
				t.Fatalf("claims %+v", claims)
			}
		})
	}
}

// The other streams of an EKS log group (the API server's own log, the authenticator) are
// counted, not read; CloudTrail records in a log group of their own become a Records file the
// CloudTrail decoder reads.
func TestFirehoseOtherStreamsAndCloudTrail(t *testing.T) {
	var l LogRecords
	budget := int64(MaxUnwrapped)
	if err := l.AddCloudWatchLogs(gz(t, cwlMessageOf(t, "/aws/eks/prod-eks/cluster", "authenticator-0a1b2c3d", []byte(`time="2026-11-28T03:12:09Z" level=info msg="access granted"`))), &budget); err != nil {
		t.Fatal(err)
	}
	ct := pipelineFile(t, "cloudtrail-record.json")
	if err := l.AddCloudWatchLogs(gz(t, cwlMessageOf(t, "aws-cloudtrail-logs-111122223333", "111122223333_CloudTrail_eu-west-1", ct, []byte("not json"))), &budget); err != nil {
		t.Fatal(err)
	}
	if l.Ignored[ignOtherLogStream] != 1 || l.Ignored[ignUnknownLog] != 1 || len(l.Audit) != 0 || len(l.CloudTrail) != 1 {
		t.Fatalf("%+v", l)
	}
	bodies := l.Bodies(0)
	if len(bodies) != 1 || bodies[0].Source != SourceCloudTrail {
		t.Fatalf("bodies %+v", bodies)
	}
	got, _, err := EventIDs(SourceCloudTrail, bodies[0].Body)
	want, _, werr := EventIDs(SourceCloudTrail, []byte(`{"Records":[`+string(ct)+`]}`))
	if err != nil || werr != nil || !reflect.DeepEqual(got, want) || len(got) != 1 {
		t.Fatalf("ids %v %v, the CloudTrail door's %v %v", got, err, want, werr)
	}
}

// Bad bodies are refused with an error naming what is wrong.
func TestFirehoseRefusesBadBodies(t *testing.T) {
	event := pipelineFile(t, "eks-audit-event.json")
	for _, tc := range []struct {
		name, body, want string
	}{
		{"not JSON", `{"requestId":`, "firehose: decode request"},
		{"no request ID", `{"timestamp":1,"records":[]}`, "no requestId"},
		{"no records", `{"requestId":"r","timestamp":1}`, "no records array"},
		{"record without data", `{"requestId":"r","timestamp":1,"records":[{}]}`, "record 0 has no data"},
		{"data not base64", `{"requestId":"r","timestamp":1,"records":[{"data":"%%%"}]}`, "record 0: data is not base64"},
		{"duplicate key", `{"requestId":"r","requestId":"s","timestamp":1,"records":[]}`, "duplicate"},
		{"record not a subscription message", string(firehoseBody("r", []byte("hello"))), "record 0: cloudwatch logs message"},
		{"bad gzip", string(firehoseBody("r", []byte{0x1f, 0x8b, 0, 0})), "record 0: cloudwatch logs message: gzip"},
		{"unknown message type", string(firehoseBody("r", []byte(`{"messageType":"X","logGroup":"g"}`))), `messageType "X"`},
		{"extracted line of something else", string(firehoseBody("r", []byte(`{"a":1}`+"\n"))), "line 1 is neither"},
		{"audit stream of something else", string(firehoseBody("r", cwlMessageOf(t, "/aws/eks/c/cluster", "kube-apiserver-audit-1", []byte("I1128 03:12:09 log line")))), "not an audit.k8s.io/v1 Event"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := DecodeFirehose([]byte(tc.body), 0)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
	// A record that decompresses past the budget.
	big := gz(t, cwlMessageOf(t, "/aws/eks/c/cluster", "kube-apiserver-audit-1", bytes.Repeat([]byte(" "), 1<<20), event))
	if _, _, err := DecodeFirehose(firehoseBody("r", big), 1<<16); !errors.Is(err, ErrUnwrapBudget) {
		t.Fatalf("error %v, want ErrUnwrapBudget", err)
	}
}

// Bodies splits long record lists into bodies of at most the limit, the same way every time.
func TestBodiesSplitDeterministically(t *testing.T) {
	var l LogRecords
	for i := range 10 {
		l.Audit = append(l.Audit, json.RawMessage(fmt.Sprintf(`{"kind":"Event","auditID":"a%d","stage":"RequestReceived"}`, i)))
	}
	a, b := l.Bodies(200), l.Bodies(200)
	if len(a) < 3 || !reflect.DeepEqual(a, b) {
		t.Fatalf("%d bodies; deterministic %v", len(a), reflect.DeepEqual(a, b))
	}
	n := 0
	for _, body := range a {
		if len(body.Body) > 200 {
			t.Fatalf("body of %d bytes", len(body.Body))
		}
		bt, err := DecodeK8sAudit(body.Body)
		if err != nil {
			t.Fatal(err)
		}
		n += bt.Ignored[ignStage]
	}
	if n != 10 {
		t.Fatalf("%d events in the bodies, want 10", n)
	}
}

// A line of the S3 backup Firehose writes what it could not deliver to replays the same event.
func TestFirehoseBackupLine(t *testing.T) {
	patch := pipelineFile(t, "eks-audit-event.json")
	rec := gz(t, cwlMessageOf(t, "/aws/eks/prod-eks/cluster", "kube-apiserver-audit-1", patch))
	line, _ := json.Marshal(map[string]any{"attemptsMade": 12, "arrivalTimestamp": 1764299531000, "errorCode": "HttpEndpoint.DestinationException",
		"errorMessage": "The endpoint answered 503", "attemptEndingTimestamp": 1764306731000, "rawData": base64.StdEncoding.EncodeToString(rec)})
	if src, err := Sniff(line); err != nil || src != SourceFirehoseBackup {
		t.Fatalf("sniffed %q %v", src, err)
	}
	bodies, _, ok, err := Unwrap(line)
	if err != nil || !ok || len(bodies) != 1 {
		t.Fatalf("unwrap: %v %v %+v", ok, err, bodies)
	}
	sameClaims(t, bodies[0].Body, eventList(patch))
	if _, err := DecodeFirehoseBackup([]byte(`{"errorCode":"x"}`), 0); err == nil || !strings.Contains(err.Error(), "no rawData") {
		t.Fatalf("error %v", err)
	}
}

// gkeCounterpart is the audit event GKE's API server recorded for gke-audit-entry.json, as the
// audit webhook would have sent it: the same write, user, ID and time.
const gkeCounterpart = `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Request","auditID":"9e8d7c6b-5a4f-4e3d-8c2b-1a0f9e8d7c6b","stage":"ResponseComplete",
"requestURI":"/apis/apps/v1/namespaces/prod/deployments/web","verb":"patch","user":{"username":"cost-optimizer@acme-prod.iam.gserviceaccount.com"},
"userAgent":"kubectl/v1.31.2 (linux/amd64) kubernetes/5864a46","objectRef":{"resource":"deployments","namespace":"prod","name":"web","apiGroup":"apps","apiVersion":"v1"},
"responseStatus":{"metadata":{},"code":200},"requestObject":{"spec":{"replicas":1}},
"requestReceivedTimestamp":"2026-11-28T03:12:09.497352Z","stageTimestamp":"2026-11-28T03:12:09.497352Z"}`

// A GKE audit LogEntry, pushed by Pub/Sub, maps to the claims of the audit event GKE's API server
// recorded for the same write.
func TestGKEAuditEntryIsTheAuditDoorsEvent(t *testing.T) {
	entry := pipelineFile(t, "gke-audit-entry.json")
	push, _ := json.Marshal(map[string]any{"message": map[string]any{"data": base64.StdEncoding.EncodeToString(entry),
		"attributes": map[string]string{"logging.googleapis.com/timestamp": "2026-11-28T03:12:09.497352Z"}, "messageId": "13066142925958543", "message_id": "13066142925958543",
		"publishTime": "2026-11-28T03:12:10.511Z", "publish_time": "2026-11-28T03:12:10.511Z"}, "subscription": "projects/acme-prod/subscriptions/parley-prod-gke"})
	p, err := DecodePubSubPush(push)
	if err != nil || p.MessageID != "13066142925958543" || p.PublishTime.IsZero() || p.Subscription != "projects/acme-prod/subscriptions/parley-prod-gke" {
		t.Fatalf("push %+v %v", p, err)
	}
	bodies, _, ok, err := Unwrap(push)
	if err != nil || !ok || len(bodies) != 1 {
		t.Fatalf("unwrap %v %v %+v", ok, err, bodies)
	}
	claims := sameClaims(t, bodies[0].Body, eventList([]byte(gkeCounterpart)))
	if len(claims) != 1 || claims[0].Field.String() != "k8s:apps/Deployment/prod/web#/spec/replicas" {
		t.Fatalf("claims %+v", claims)
	}

	// "@type" is not a field: without removing it, the patch would seem to write /@type.
	for _, tc := range []struct {
		name, change, reason string
	}{
		{"failed call", `"status": {}` + "\x00" + `"status": {"code": 7, "message": "forbidden"}`, ignFailed},
		{"first stage only", `"first": true, "last": true` + "\x00" + `"first": true, "last": false`, ignStage},
		{"read", `"methodName": "io.k8s.apps.v1.deployments.patch"` + "\x00" + `"methodName": "io.k8s.apps.v1.deployments.get"`, ignReadVerb},
		{"status subresource", `"resourceName": "apps/v1/namespaces/prod/deployments/web",` + "\x00" + `"resourceName": "apps/v1/namespaces/prod/deployments/web/status",`, ignStatus},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old, repl, _ := strings.Cut(tc.change, "\x00")
			if !bytes.Contains(entry, []byte(old)) {
				t.Fatalf("fixture lacks %s", old)
			}
			var l LogRecords
			if err := l.AddGKEAuditEntry(bytes.Replace(entry, []byte(old), []byte(repl), 1)); err != nil {
				t.Fatal(err)
			}
			b, err := DecodeK8sAudit(l.Bodies(0)[0].Body)
			if err != nil || len(b.Observations) != 0 || b.Ignored[tc.reason] != 1 {
				t.Fatalf("batch %+v %v, want ignored %s", b, err, tc.reason)
			}
		})
	}
}

// GKE entries of other services, and bad pushes, are counted or refused by name.
func TestPubSubRefusesBadPushes(t *testing.T) {
	data := func(s string) string {
		return `{"message":{"data":"` + base64.StdEncoding.EncodeToString([]byte(s)) + `","messageId":"1"},"subscription":"s"}`
	}
	for _, tc := range []struct {
		name, body, want string
	}{
		{"no message", `{"subscription":"s"}`, "no message"},
		{"no message ID", `{"message":{"data":""}}`, "no messageId"},
		{"no data", `{"message":{"messageId":"1"}}`, "message 1 has no data"},
		{"data not base64", `{"message":{"messageId":"1","data":"%%"}}`, "data is not base64"},
		{"bad publish time", `{"message":{"messageId":"1","data":"","publishTime":"yesterday"}}`, "publishTime"},
		{"data not a LogEntry", data("hello"), "gke audit log entry"},
		{"bad timestamp", data(`{"resource":{"type":"k8s_cluster"},"protoPayload":{"serviceName":"k8s.io"},"timestamp":"x"}`), `timestamp "x"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := DecodePubSubPush([]byte(tc.body))
			if err == nil {
				var l LogRecords
				err = l.AddGKEAuditEntry(p.Data)
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
	bodies, ignored, ok, err := Unwrap([]byte(data(`{"resource":{"type":"gce_instance"},"protoPayload":{"serviceName":"compute.googleapis.com"},"timestamp":"2026-11-28T03:12:09Z"}`)))
	if err != nil || !ok || len(bodies) != 0 || ignored[ignNotK8sAudit] != 1 {
		t.Fatalf("%v %v %+v %v", ok, err, bodies, ignored)
	}
}

func FuzzDecodeFirehose(f *testing.F) {
	patch := pipelineFile(f, "eks-audit-event.json")
	f.Add(firehoseBody("r", gz(f, cwlMessageOf(f, "/aws/eks/c/cluster", "kube-apiserver-audit-1", patch))))
	f.Add(firehoseBody("r", cwlMessageOf(f, "g", "s", pipelineFile(f, "cloudtrail-record.json"), patch)))
	f.Add([]byte(`{"requestId":"r","timestamp":1,"records":[{"data":"e30="}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		req, recs, err := DecodeFirehose(body, 1<<20)
		if err != nil {
			if req.RequestID != "" || len(recs.Audit)+len(recs.CloudTrail) != 0 {
				t.Fatalf("error %v with a partial result", err)
			}
			return
		}
		for _, b := range recs.Bodies(4096) {
			// Every body is one the decoders take or refuse with an error, never a panic.
			id, _ := Identify(b.Source, b.Body)
			_ = id
		}
	})
}

func FuzzDecodePubSubPush(f *testing.F) {
	entry := pipelineFile(f, "gke-audit-entry.json")
	f.Add([]byte(`{"message":{"data":"` + base64.StdEncoding.EncodeToString(entry) + `","messageId":"1","publishTime":"2026-11-28T03:12:10Z"},"subscription":"s"}`))
	f.Add(entry)
	f.Add([]byte(`{"message":{"data":"","messageId":"1"},"subscription":"s"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		bodies, _, ok, err := Unwrap(body)
		if err != nil && len(bodies) != 0 {
			t.Fatalf("error %v with bodies", err)
		}
		if !ok {
			return
		}
		for _, b := range bodies {
			if _, err := DecodeK8sAudit(b.Body); b.Source == SourceK8sAudit && err != nil && !json.Valid(b.Body) {
				t.Fatalf("a GKE entry made a body that is not JSON: %v", err)
			}
		}
	})
}
