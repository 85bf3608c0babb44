package webhooks

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/parleyhq/parley/webhooks/store"
)

// jwksOf is the JSON Web Key Set of keys, by key ID, as Google publishes its own.
func jwksOf(keys map[string]*rsa.PublicKey) []byte {
	var set struct {
		Keys []map[string]string `json:"keys"`
	}
	for kid, k := range keys {
		set.Keys = append(set.Keys, map[string]string{"kty": "RSA", "alg": "RS256", "use": "sig", "kid": kid,
			"n": base64.RawURLEncoding.EncodeToString(k.N.Bytes()), "e": base64.RawURLEncoding.EncodeToString(big.NewInt(int64(k.E)).Bytes())})
	}
	b, _ := json.Marshal(set)
	return b
}

const (
	pushAudience = "https://parley.example.com/events/pubsub/prod-gke"
	pushAccount  = "pubsub-push@acme-prod.iam.gserviceaccount.com"
)

// pushToken is a push token as Google signs it, changed by mutate.
func pushToken(t testing.TB, key *rsa.PrivateKey, kid string, mutate func(jwt.MapClaims)) string {
	t.Helper()
	now := time.Now()
	c := jwt.MapClaims{"iss": "https://accounts.google.com", "aud": pushAudience, "azp": "1234567890", "email": pushAccount,
		"email_verified": true, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix(), "sub": "1234567890"}
	if mutate != nil {
		mutate(c)
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, c)
	tok.Header["kid"] = kid
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newPubSubTest(t *testing.T) (*rsa.PrivateKey, *countingIntake, *http.ServeMux) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "certs.json")
	os.WriteFile(path, jwksOf(map[string]*rsa.PublicKey{"google-key-1": &key.PublicKey}), 0o600)
	ks, err := NewKeySetFile(path)
	if err != nil {
		t.Fatal(err)
	}
	in := &countingIntake{st: openStore(t, store.Options{})}
	r, err := NewPubSubReceiver(PubSubReceiverConfig{IntakeConfig: IntakeConfig{Store: in}, Subscriptions: []PubSubSubscription{{Cluster: "prod-gke", Audience: pushAudience, ServiceAccount: pushAccount, Keys: ks}},
		Unwrap: func(_ string, body []byte) (string, []Part, map[string]int, error) {
			var b struct {
				Message struct {
					ID string `json:"messageId"`
				} `json:"message"`
			}
			json.Unmarshal(body, &b)
			if b.Message.ID == "" {
				return "", nil, nil, errBadPush
			}
			return b.Message.ID, []Part{{Source: store.SourceK8sAudit, Body: body, IDs: []string{"audit-1"}}}, nil, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(PubSubPattern(), r)
	return key, in, mux
}

var errBadPush = errors.New("pubsub: message has no messageId")

func push(t *testing.T, mux *http.ServeMux, path, authz, body string) (int, string) {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

const pushBody = `{"message":{"data":"e30=","messageId":"13066142925958543","publishTime":"2026-11-28T03:12:10.511Z"},"subscription":"projects/acme-prod/subscriptions/parley"}`

// A push with Google's token for the subscription is stored once; its redelivery is
// acknowledged and stores nothing.
func TestPubSubStoresOncePerMessage(t *testing.T) {
	key, in, mux := newPubSubTest(t)
	tok := "Bearer " + pushToken(t, key, "google-key-1", nil)
	for i, want := range []string{`"status":"accepted"`, `"status":"duplicate"`} {
		code, body := push(t, mux, "/events/pubsub/prod-gke", tok, pushBody)
		if code != http.StatusOK || !strings.Contains(body, want) {
			t.Fatalf("push %d: %d %s", i+1, code, body)
		}
	}
	if len(in.inserted) != 1 || in.inserted[0].Scope != "prod-gke" || in.inserted[0].ID != "pubsub-13066142925958543-0@prod-gke" {
		t.Fatalf("stored %+v", in.inserted)
	}
	in.failNext = 1
	if code, body := push(t, mux, "/events/pubsub/prod-gke", tok, strings.Replace(pushBody, "13066142925958543", "13066142925958544", 1)); code != http.StatusServiceUnavailable {
		t.Fatalf("store down: %d %s", code, body)
	}
}

// Tokens that are not Google's push token for this subscription are refused with 401.
func TestPubSubRefusesBadTokens(t *testing.T) {
	key, in, mux := newPubSubTest(t)
	other, _ := rsa.GenerateKey(rand.Reader, 2048)
	hs := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"iss": "https://accounts.google.com", "aud": pushAudience, "email": pushAccount,
		"email_verified": true, "exp": time.Now().Add(time.Hour).Unix()})
	hs.Header["kid"] = "google-key-1"
	hsTok, _ := hs.SignedString([]byte("guessable"))
	for _, tc := range []struct {
		name, path, authz, want string
	}{
		{"no token", "/events/pubsub/prod-gke", "", "missing Authorization"},
		{"not bearer", "/events/pubsub/prod-gke", "Basic x", "malformed Authorization"},
		{"wrong audience", "/events/pubsub/prod-gke", "Bearer " + pushToken(t, key, "google-key-1", func(c jwt.MapClaims) { c["aud"] = "https://evil.example.com" }), "audience"},
		{"wrong issuer", "/events/pubsub/prod-gke", "Bearer " + pushToken(t, key, "google-key-1", func(c jwt.MapClaims) { c["iss"] = "https://evil.example.com" }), "issuer"},
		{"another account", "/events/pubsub/prod-gke", "Bearer " + pushToken(t, key, "google-key-1", func(c jwt.MapClaims) { c["email"] = "someone@acme-prod.iam.gserviceaccount.com" }), "not the push service account's"},
		{"email not verified", "/events/pubsub/prod-gke", "Bearer " + pushToken(t, key, "google-key-1", func(c jwt.MapClaims) { c["email_verified"] = false }), "not verified"},
		{"expired", "/events/pubsub/prod-gke", "Bearer " + pushToken(t, key, "google-key-1", func(c jwt.MapClaims) { c["exp"] = time.Now().Add(-time.Hour).Unix() }), "expired"},
		{"no expiry", "/events/pubsub/prod-gke", "Bearer " + pushToken(t, key, "google-key-1", func(c jwt.MapClaims) { delete(c, "exp") }), "exp"},
		{"issued in the future", "/events/pubsub/prod-gke", "Bearer " + pushToken(t, key, "google-key-1", func(c jwt.MapClaims) { c["iat"] = time.Now().Add(time.Hour).Unix() }), "before issued"},
		{"another key", "/events/pubsub/prod-gke", "Bearer " + pushToken(t, other, "google-key-1", nil), "verification"},
		{"unknown key ID", "/events/pubsub/prod-gke", "Bearer " + pushToken(t, key, "google-key-9", nil), "no key"},
		{"HMAC with the key ID", "/events/pubsub/prod-gke", "Bearer " + hsTok, "signing method"},
		{"unknown cluster", "/events/pubsub/staging", "Bearer " + pushToken(t, key, "google-key-1", nil), "no push subscription"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := push(t, mux, tc.path, tc.authz, pushBody)
			if code != http.StatusUnauthorized || !strings.Contains(body, tc.want) {
				t.Fatalf("%d %s, want 401 with %q", code, body, tc.want)
			}
		})
	}
	if len(in.inserted) != 0 {
		t.Fatalf("stored %d", len(in.inserted))
	}
	// A bad body with a good token is a clear 400.
	tok := "Bearer " + pushToken(t, key, "google-key-1", nil)
	if code, body := push(t, mux, "/events/pubsub/prod-gke", tok, `{"message":{}}`); code != http.StatusBadRequest || !strings.Contains(body, "no messageId") {
		t.Fatalf("%d %s", code, body)
	}
	if code, body := push(t, mux, "/events/pubsub/prod-gke", tok, `[1]`); code != http.StatusBadRequest || !strings.Contains(body, "not a JSON object") {
		t.Fatalf("%d %s", code, body)
	}
}

// A key set fetched from a URL is cached for the answer's max-age, and fetched again at once for
// a key ID it lacks, at most once a minute.
func TestKeySetURLCachesAndRefetches(t *testing.T) {
	k1, _ := rsa.GenerateKey(rand.Reader, 2048)
	k2, _ := rsa.GenerateKey(rand.Reader, 2048)
	var hits atomic.Int32
	var published atomic.Value
	published.Store(jwksOf(map[string]*rsa.PublicKey{"k1": &k1.PublicKey}))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Cache-Control", "public, max-age=600, must-revalidate, no-transform")
		w.Write(published.Load().([]byte))
	}))
	defer srv.Close()
	ks := NewKeySetURL(srv.URL, srv.Client())
	now := time.Date(2026, 11, 28, 3, 0, 0, 0, time.UTC)
	ks.now = func() time.Time { return now }
	ctx := context.Background()
	for range 3 {
		if k, err := ks.Key(ctx, "k1"); err != nil || k.N.Cmp(k1.N) != 0 {
			t.Fatalf("k1: %v", err)
		}
	}
	if hits.Load() != 1 {
		t.Fatalf("%d fetches for three uses within max-age", hits.Load())
	}
	// Google publishes k2; a token signed with it arrives before the cache expires.
	published.Store(jwksOf(map[string]*rsa.PublicKey{"k1": &k1.PublicKey, "k2": &k2.PublicKey}))
	if _, err := ks.Key(ctx, "k2"); err == nil {
		t.Fatal("k2 found without a refetch a minute after the last")
	}
	now = now.Add(2 * time.Minute)
	if k, err := ks.Key(ctx, "k2"); err != nil || k.N.Cmp(k2.N) != 0 {
		t.Fatalf("k2 after a minute: %v", err)
	}
	for range 5 {
		ks.Key(ctx, "made-up")
	}
	if hits.Load() != 2 {
		t.Fatalf("%d fetches: made-up key IDs must not refetch within a minute", hits.Load())
	}
	now = now.Add(11 * time.Minute)
	ks.Key(ctx, "k1")
	if hits.Load() != 3 {
		t.Fatalf("%d fetches: an expired set is fetched again", hits.Load())
	}
	if _, err := ParseJWKS([]byte(`{"keys":[{"kty":"RSA","kid":"x","n":"AQAB","e":"AQAB"}]}`)); err == nil || !strings.Contains(err.Error(), "2048 bits") {
		t.Fatalf("short modulus: %v", err)
	}
	if _, err := ParseJWKS(bytes.Repeat([]byte("{"), 3)); err == nil {
		t.Fatal("not JSON accepted")
	}
}
