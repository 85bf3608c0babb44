package app

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/parleyhq/parley/app/config"
	"github.com/parleyhq/parley/app/internal/ghauth"
	"github.com/parleyhq/parley/internal/fakegithub"
)

// TestParleyManifestIsAppYML keeps the manifest /setup posts and app.yml (what people copy by
// hand, or read to see what the App may do) the same, redirect_url included: it must name the
// route serve has.
func TestParleyManifestIsAppYML(t *testing.T) {
	src, err := os.ReadFile("../app.yml")
	if err != nil {
		t.Fatal(err)
	}
	var want, got map[string]any
	if err := yaml.Unmarshal(src, &want); err != nil {
		t.Fatalf("app.yml: %v", err)
	}
	b, _ := json.Marshal(ParleyManifest("https://parley.example.com", "https://parley.example.com"+SetupPath))
	json.Unmarshal(b, &got)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ParleyManifest differs from app.yml:\n got %v\nwant %v", got, want)
	}
}

// registerThroughSetup walks the manifest flow as a browser does: open /setup with the token,
// submit its form to GitHub (the fake), follow GitHub's redirect back to /setup. It returns the
// last answer's status and body.
func registerThroughSetup(t *testing.T, client *http.Client, setupURL string) (int, string) {
	t.Helper()
	code, body, err := fakegithub.RegisterThroughSetup(client, setupURL)
	if err != nil {
		t.Fatal(err)
	}
	return code, body
}

// TestSetupRegistersTheApp runs the whole flow against the fake GitHub: the form, GitHub's
// redirect with a code, the conversion, the files written (0600), and then the App authenticating
// with those files as serve loads them. It also shows who cannot use /setup: a visitor without the
// token, a forged state, and anyone at all once an App is written.
func TestSetupRegistersTheApp(t *testing.T) {
	gh := fakegithub.New(t)
	dir := filepath.Join(t.TempDir(), "app")
	var got Credentials
	setup := &Setup{Token: "tok3n", APIURL: gh.URL + "/", PublicURL: "https://parley.example.com", Dir: dir,
		Done: func(c Credentials) { got = c }}
	mux := http.NewServeMux()
	mux.Handle("GET "+SetupPath, setup)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	client := srv.Client()

	for _, u := range []string{srv.URL + SetupPath, srv.URL + SetupPath + "?token=wrong"} {
		resp, err := client.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("GET %s without the token: %d, want 403", u, resp.StatusCode)
		}
	}
	resp, _ := client.Get(srv.URL + SetupPath + "?code=abc&state=forged")
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a forged state: %d, want 400", resp.StatusCode)
	}
	resp.Body.Close()

	status, body := registerThroughSetup(t, client, srv.URL+SetupPath+"?token=tok3n")
	if status != http.StatusOK || !strings.Contains(body, "is registered") || !strings.Contains(body, "/installations/new") {
		t.Fatalf("after GitHub's redirect: %d\n%s", status, body)
	}
	hookURL, secret := gh.HookConfig()
	if hookURL != "https://parley.example.com/webhooks/github" {
		t.Errorf("the App's webhook URL is %q", hookURL)
	}
	for name, mode := range map[string]os.FileMode{config.AppIDFile: 0o600, config.PrivateKeyFileName: 0o600, config.WebhookSecretsFile: 0o600} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || fi.Mode().Perm() != mode {
			t.Errorf("%s: %v, mode %v", name, err, fi)
		}
	}
	if got.AppID != gh.AppID || got.WebhookSecret != secret {
		t.Errorf("Done got App %d secret %q; GitHub has %d %q", got.AppID, got.WebhookSecret, gh.AppID, secret)
	}

	// serve's configuration reads the directory, and GitHub accepts the App's JWT.
	cfg, err := config.Load("", func(k string) string {
		return map[string]string{"PARLEY_APP_DIR": dir, "PARLEY_GITHUB_URL": gh.URL + "/"}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.AppID != gh.AppID || cfg.WebhookSecrets[0].Reveal() != secret {
		t.Errorf("config read App %d", cfg.AppID)
	}
	a, err := ghauth.NewApp(cfg.AppID, []byte(cfg.PrivateKey.Reveal()), ghauth.Options{BaseURL: cfg.GitHubURL})
	if err != nil {
		t.Fatal(err)
	}
	c, err := a.AppClient(http.DefaultTransport)
	if err != nil {
		t.Fatal(err)
	}
	me, _, err := c.Apps.Get(context.Background(), "")
	if err != nil || me.GetID() != gh.AppID {
		t.Fatalf("GET /app as the registered App: %v %v", me.GetID(), err)
	}

	// Once written, /setup refuses everything, the token included.
	resp, _ = client.Get(srv.URL + SetupPath + "?token=tok3n")
	if resp.StatusCode != http.StatusGone {
		t.Errorf("/setup after registration: %d, want 410", resp.StatusCode)
	}
	resp.Body.Close()
}

// TestWriteCredentialsNeverOverwrites: an existing App's files stay as they are, and a refused
// write leaves no new file behind.
func TestWriteCredentialsNeverOverwrites(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, config.WebhookSecretsFile), []byte("old"), 0o600)
	err := WriteCredentials(dir, Credentials{AppID: 1, PEM: "k", WebhookSecret: "new"})
	if err == nil || !strings.Contains(err.Error(), "never overwritten") {
		t.Fatalf("want a refusal, got %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, config.WebhookSecretsFile)); string(b) != "old" {
		t.Errorf("webhook-secrets now %q", b)
	}
	if _, err := os.Stat(filepath.Join(dir, config.AppIDFile)); err == nil {
		t.Error("a refused write left app-id behind")
	}
}

func TestWebURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://api.github.com/":         "https://github.com",
		"https://ghe.example.com/api/v3/": "https://ghe.example.com",
		"http://127.0.0.1:4000/":          "http://127.0.0.1:4000",
	} {
		if got := WebURL(in); got != want {
			t.Errorf("WebURL(%q) = %q, want %q", in, got, want)
		}
	}
}
