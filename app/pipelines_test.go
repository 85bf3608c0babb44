package app

import (
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/parleyhq/parley/internal/gittest"
	"github.com/parleyhq/parley/reconcile/events"
)

func gzipped(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(b)
	zw.Close()
	return buf.Bytes()
}

// eksFirehoseRequest is what EKS's control plane logging, a CloudWatch Logs subscription filter
// and a Firehose delivery stream make of audit events: the events as log events of the cluster's
// kube-apiserver-audit stream, one gzip subscription message, one record of a request.
func eksFirehoseRequest(t testing.TB, rid string, items []json.RawMessage) []byte {
	t.Helper()
	type logEvent struct {
		ID        string `json:"id"`
		Timestamp int64  `json:"timestamp"`
		Message   string `json:"message"`
	}
	var evs []logEvent
	for i, it := range items {
		// Each message is one Event as the API server logs it, kind and apiVersion included.
		msg := `{"kind":"Event","apiVersion":"audit.k8s.io/v1",` + string(bytes.TrimPrefix(bytes.TrimSpace(it), []byte("{")))
		evs = append(evs, logEvent{ID: fmt.Sprintf("38%044d", i), Timestamp: time.Now().UnixMilli(), Message: msg})
	}
	msg, _ := json.Marshal(map[string]any{"messageType": "DATA_MESSAGE", "owner": "111122223333", "logGroup": "/aws/eks/eks/cluster",
		"logStream": "kube-apiserver-audit-0a1b2c3d4e5f60718293a4b5c6d7e8f9", "subscriptionFilters": []string{"parley-audit"}, "logEvents": evs})
	body, _ := json.Marshal(map[string]any{"requestId": rid, "timestamp": time.Now().UnixMilli(),
		"records": []map[string]string{{"data": base64.StdEncoding.EncodeToString(gzipped(t, msg))}}})
	return gzipped(t, body)
}

// gkeEntryOf is the Cloud Logging LogEntry GKE writes for an audit event: the protoPayload of a
// google.cloud.audit.AuditLog, the request and response objects with GKE's "@type".
func gkeEntryOf(t testing.TB, item json.RawMessage) []byte {
	t.Helper()
	var ev struct {
		AuditID        string `json:"auditID"`
		Stage          string `json:"stage"`
		Verb           string `json:"verb"`
		User           struct{ Username string }
		UserAgent      string         `json:"userAgent"`
		ObjectRef      map[string]any `json:"objectRef"`
		RequestObject  map[string]any `json:"requestObject"`
		ResponseObject map[string]any `json:"responseObject"`
		StageTimestamp string         `json:"stageTimestamp"`
	}
	if err := json.Unmarshal(item, &ev); err != nil {
		t.Fatal(err)
	}
	ref := func(k string) string { s, _ := ev.ObjectRef[k].(string); return s }
	group := ref("apiGroup")
	if group == "" {
		group = "core"
	}
	name := group + "/" + ref("apiVersion") + "/namespaces/" + ref("namespace") + "/" + ref("resource") + "/" + ref("name")
	method := "io.k8s." + strings.TrimSuffix(group, ".k8s.io") + "." + ref("apiVersion") + "." + ref("resource")
	if sub := ref("subresource"); sub != "" {
		name += "/" + sub
		method += "." + sub
	}
	pp := map[string]any{"@type": "type.googleapis.com/google.cloud.audit.AuditLog", "serviceName": "k8s.io", "methodName": method + "." + ev.Verb,
		"resourceName": name, "authenticationInfo": map[string]any{"principalEmail": ev.User.Username},
		"requestMetadata": map[string]any{"callerIp": "10.128.0.7", "callerSuppliedUserAgent": ev.UserAgent}, "status": map[string]any{}}
	if ev.RequestObject != nil {
		ev.RequestObject["@type"] = "k8s.io/Patch"
		pp["request"] = ev.RequestObject
	}
	if ev.ResponseObject != nil {
		ev.ResponseObject["@type"] = "apps.k8s.io/v1.Deployment"
		pp["response"] = ev.ResponseObject
	}
	b, _ := json.Marshal(map[string]any{"protoPayload": pp, "insertId": "ins-" + ev.AuditID, "timestamp": ev.StageTimestamp,
		"resource":  map[string]any{"type": "k8s_cluster", "labels": map[string]string{"cluster_name": "gke", "location": "europe-west1", "project_id": "acme-prod"}},
		"logName":   "projects/acme-prod/logs/cloudaudit.googleapis.com%2Factivity",
		"operation": map[string]any{"id": ev.AuditID, "producer": "k8s.io", "first": true, "last": true}})
	return b
}

// TestManagedClusterPipelinesJudgeAsTheAuditDoor: the same writes reach one server three ways:
// the audit webhook (/events/k8s-audit/audit), EKS's pipeline (CloudWatch Logs subscription,
// Firehose, /events/firehose/eks) and GKE's (Cloud Logging sink, Pub/Sub push with Google's
// token, /events/pubsub/gke), each cluster with a copy of the demo repository. Each repository
// gets the same verdict commits, and the deliveries stored decode to the same claims; redelivered
// requests and messages are judged once.
func TestManagedClusterPipelinesJudgeAsTheAuditDoor(t *testing.T) {
	gh, _, pemKey := fakeApp(t)
	repos := map[string]*gittest.Runner{"audit": hostDemo(t, gh, "acme/via-audit", 5), "eks": hostDemo(t, gh, "acme/via-firehose", 6), "gke": hostDemo(t, gh, "acme/via-pubsub", 7)}
	dir := t.TempDir()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	jwks, _ := json.Marshal(map[string]any{"keys": []map[string]string{{"kty": "RSA", "alg": "RS256", "use": "sig", "kid": "google-1",
		"n": base64.RawURLEncoding.EncodeToString(key.N.Bytes()), "e": base64.RawURLEncoding.EncodeToString(big.NewInt(int64(key.E)).Bytes())}}})
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const audience, account = "https://parley.example.com/events/pubsub/gke", "pubsub-push@acme-prod.iam.gserviceaccount.com"
	cfgPath := write("parley.hcl", fmt.Sprintf(`
firehose "eks" {
  access_key_file = %q
}
pubsub "gke" {
  audience        = %q
  service_account = %q
  keys_file       = %q
}
`, write("firehose-key", "the-eks-stream-access-key\n"), audience, account, write("certs.json", string(jwks))))
	env := map[string]string{"PARLEY_APP_ID": "99", "PARLEY_PRIVATE_KEY": string(pemKey), "PARLEY_WEBHOOK_SECRETS": "hook",
		"PARLEY_GITHUB_URL": gh.URL + "/api/v3/", "PARLEY_STORE": filepath.Join(dir, "parley.db"), "PARLEY_LISTEN": "127.0.0.1:0",
		"PARLEY_KUBE_AUDIT_TOKEN": "audit-token", "PARLEY_WRITE_MODE": "direct", "PARLEY_MAX_ATTEMPTS": "1",
		"PARLEY_CLUSTERS": "audit=acme/via-audit, eks=acme/via-firehose, gke=acme/via-pubsub"}
	srv, base, _ := runServeFile(t, cfgPath, env)

	at := time.Now().UTC().Add(-time.Minute).Format("2006-01-02T15:04:05")
	body := regexp.MustCompile(`2026-11-20T\d\d:\d\d:\d\d`).ReplaceAll(readTestdataFile(t, "../examples/drift/k8s-audit.json"), []byte(at))
	var list struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatal(err)
	}
	post := func(path string, body []byte, header map[string]string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, base+path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		return resp.StatusCode, b.String()
	}
	start := map[string]string{}
	for c, r := range repos {
		start[c] = r.Run("rev-parse", "main")
	}
	if code, rep := post("/events/k8s-audit/audit", body, map[string]string{"Authorization": "Bearer audit-token"}); code != http.StatusAccepted {
		t.Fatalf("audit door: %d %s", code, rep)
	}
	const rid = "7d2e0c8a-51f4-4b0e-9d0c-3c1f8a6b2e11"
	fh := eksFirehoseRequest(t, rid, list.Items)
	fhHeaders := map[string]string{"X-Amz-Firehose-Request-Id": rid, "X-Amz-Firehose-Access-Key": "the-eks-stream-access-key",
		"X-Amz-Firehose-Protocol-Version": "1.0", "X-Amz-Firehose-Source-Arn": "arn:aws:firehose:eu-west-1:111122223333:deliverystream/parley-eks",
		"Content-Encoding": "gzip"}
	token := func(aud string) string {
		tok := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{"iss": "https://accounts.google.com", "aud": aud, "email": account,
			"email_verified": true, "iat": time.Now().Unix(), "exp": time.Now().Add(time.Hour).Unix(), "sub": "1"})
		tok.Header["kid"] = "google-1"
		s, err := tok.SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return "Bearer " + s
	}
	pushes := make([][]byte, len(list.Items))
	for i, it := range list.Items {
		pushes[i], _ = json.Marshal(map[string]any{"message": map[string]any{"data": base64.StdEncoding.EncodeToString(gkeEntryOf(t, it)),
			"messageId": fmt.Sprintf("1306614292595854%d", i), "publishTime": time.Now().UTC().Format(time.RFC3339Nano)},
			"subscription": "projects/acme-prod/subscriptions/parley-gke"})
	}
	for round := range 2 { // the second round is the providers' redelivery: judged once
		if code, rep := post("/events/firehose/eks", fh, fhHeaders); code != http.StatusOK || !strings.Contains(rep, `"requestId":"`+rid+`"`) {
			t.Fatalf("firehose round %d: %d %s", round, code, rep)
		}
		for i, p := range pushes {
			if code, rep := post("/events/pubsub/gke", p, map[string]string{"Authorization": token(audience)}); code != http.StatusOK {
				t.Fatalf("push %d round %d: %d %s", i, round, code, rep)
			}
		}
	}
	// Refused at each door: the wrong access key, another audience's token.
	bad := map[string]string{}
	for k, v := range fhHeaders {
		bad[k] = v
	}
	bad["X-Amz-Firehose-Access-Key"] = "audit-token"
	if code, rep := post("/events/firehose/eks", fh, bad); code != http.StatusUnauthorized || !strings.Contains(rep, `"errorMessage"`) {
		t.Fatalf("wrong access key: %d %s", code, rep)
	}
	if code, _ := post("/events/pubsub/gke", pushes[1], map[string]string{"Authorization": token("https://parley.example.com/events/pubsub/other")}); code != http.StatusUnauthorized {
		t.Fatalf("wrong audience: %d", code)
	}

	logOf := func(c string) string {
		return repos[c].Run("log", "--format=%B%n--", start[c]+"..main")
	}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if repos["audit"].Run("rev-list", "--count", start["audit"]+"..main") == "2" &&
			repos["eks"].Run("rev-list", "--count", start["eks"]+"..main") == "2" &&
			repos["gke"].Run("rev-list", "--count", start["gke"]+"..main") == "2" {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	want := logOf("audit")
	if !strings.Contains(want, "parley: yield /spec/replicas of Deployment prod/web to hpa") {
		t.Fatalf("the audit door's verdicts:\n%s", want)
	}
	// The same verdict commits, in any order: Pub/Sub pushes each event as a message of its own,
	// and the workers judge two messages about different fields in whichever order they take them
	// (as Pub/Sub, which does not keep order either, would deliver them), while the audit door's
	// one body is judged in its order.
	commits := func(log string) string {
		msgs := strings.Split(strings.TrimSpace(log), "\n--")
		for i := range msgs {
			msgs[i] = strings.TrimSpace(msgs[i])
		}
		slices.Sort(msgs)
		return strings.Join(msgs, "\n--\n")
	}
	for _, c := range []string{"eks", "gke"} {
		if got := logOf(c); commits(got) != commits(want) {
			t.Errorf("%s's verdict commits differ from the audit door's:\n%s\nwant\n%s", c, got, want)
		}
	}
	dead, err := srv.Store().DeadLetters(t.Context())
	if err != nil || len(dead) != 0 {
		t.Fatalf("dead letters %v: %+v", err, dead)
	}

	// The stored deliveries decode to the audit door's claims (the verdicts above are of them).
	claimsOf := func(bodies ...[]byte) string {
		var all []string
		for _, b := range bodies {
			batch, err := events.DecodeK8sAudit(b)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range events.Claims(batch, nil, nil) {
				all = append(all, fmt.Sprintf("%s %s %s %s %s %v", c.Field, c.Actor.Identity.ID, c.Value, c.Intent, c.At.Format(time.RFC3339Nano), c.Evidence.EventIDs))
			}
		}
		return strings.Join(all, "\n")
	}
	wantClaims := claimsOf(body)
	_, fhRecs, err := events.DecodeFirehose(mustGunzip(t, fh), 0)
	if err != nil {
		t.Fatal(err)
	}
	var gkeRecs events.LogRecords
	for _, it := range list.Items {
		if err := gkeRecs.AddGKEAuditEntry(gkeEntryOf(t, it)); err != nil {
			t.Fatal(err)
		}
	}
	for name, recs := range map[string]events.LogRecords{"firehose": fhRecs, "pubsub": gkeRecs} {
		var bodies [][]byte
		for _, b := range recs.Bodies(0) {
			bodies = append(bodies, b.Body)
		}
		if got := claimsOf(bodies...); got != wantClaims || wantClaims == "" {
			t.Errorf("%s claims:\n%s\nwant\n%s", name, got, wantClaims)
		}
	}
}

func mustGunzip(t testing.TB, b []byte) []byte {
	t.Helper()
	budget := int64(1 << 30)
	out, err := events.Gunzip(b, &budget)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
