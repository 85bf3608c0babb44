package app

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestReadinessFollowsTheAppKey: serve is ready while GitHub accepts its App key, not ready while
// GitHub rejects it (a key that is no key of the App: the install mistake that used to surface only
// on the first pull request), and still ready, saying the key is unchecked, while GitHub does not
// answer at all.
func TestReadinessFollowsTheAppKey(t *testing.T) {
	gh, _, goodKey := fakeApp(t)
	other, _ := rsa.GenerateKey(rand.Reader, 2048)
	wrongKey := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(other)})
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	deadURL := "http://" + closed.Addr().String() + "/"
	closed.Close()

	for _, c := range []struct {
		name, githubURL string
		key             []byte
		status          int
		body            string
	}{
		{"accepted", gh.URL + "/api/v3/", goodKey, http.StatusOK, "ok\n"},
		{"rejected", gh.URL + "/api/v3/", wrongKey, http.StatusServiceUnavailable, "GitHub rejects the App's key (401"},
		{"unreachable", deadURL, goodKey, http.StatusOK, "the key is unchecked, not rejected"},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv, base, _ := runServe(t, map[string]string{"PARLEY_APP_ID": "99", "PARLEY_PRIVATE_KEY": string(c.key), "PARLEY_WEBHOOK_SECRETS": "hook",
				"PARLEY_GITHUB_URL": c.githubURL, "PARLEY_STORE": filepath.Join(t.TempDir(), "parley.db"), "PARLEY_LISTEN": "127.0.0.1:0"})
			for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				if st, _, _ := srv.appKey.get(); st != keyUnchecked {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("serve never checked the App key")
				}
			}
			resp, err := http.Get(base + "/readyz")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.status || !strings.Contains(string(body), c.body) {
				t.Errorf("/readyz: %d %q, want %d with %q", resp.StatusCode, body, c.status, c.body)
			}
		})
	}
}
