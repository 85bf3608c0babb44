package ghauth

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-github/v60/github"

	"github.com/parleyhq/parley/internal/fakegithub"
)

func keyPEM(t *testing.T, pkcs8 bool) (*rsa.PrivateKey, []byte) {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	if pkcs8 {
		der, _ := x509.MarshalPKCS8PrivateKey(k)
		return k, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	}
	return k, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)})
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func setup(t *testing.T, pkcs8 bool) (*fakegithub.Server, *App, *clock) {
	t.Helper()
	gh := fakegithub.New(t)
	key, pemKey := keyPEM(t, pkcs8)
	gh.AppPublicKey, gh.AppID = &key.PublicKey, 4242
	clk := &clock{t: time.Now()}
	gh.SetClock(clk.now)
	app, err := NewApp(4242, pemKey, Options{BaseURL: gh.URL + "/api/v3/", Client: gh.Client(), Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	return gh, app, clk
}

func TestInstallationTokenRefreshedOnceUnderConcurrency(t *testing.T) {
	gh, app, clk := setup(t, false)
	ctx := context.Background()
	var wg sync.WaitGroup
	tokens := make([]string, 50)
	errs := make([]error, 50)
	for i := range tokens {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tok, err := app.InstallationToken(ctx, 77)
			tokens[i], errs[i] = tok.Value(), err
		}()
	}
	wg.Wait()
	for i := range tokens {
		if errs[i] != nil || tokens[i] != tokens[0] || tokens[0] == "" {
			t.Fatalf("caller %d: token %q, err %v", i, tokens[i], errs[i])
		}
	}
	if n := gh.Calls()["apps/create-installation-access-token 201"]; n != 1 {
		t.Fatalf("50 concurrent callers made %d token requests, want 1", n)
	}
	// Still cached 54 minutes later (the fake's tokens last an hour); refreshed inside the margin.
	clk.add(54 * time.Minute)
	if tok, _ := app.InstallationToken(ctx, 77); tok.Value() != tokens[0] {
		t.Errorf("token replaced while it had 6 minutes left")
	}
	clk.add(2 * time.Minute)
	tok, err := app.InstallationToken(ctx, 77)
	if err != nil || tok.Value() == tokens[0] {
		t.Errorf("token not refreshed with 4 minutes left: %v", err)
	}
	if n := gh.Calls()["apps/create-installation-access-token 201"]; n != 2 {
		t.Errorf("%d token requests, want 2", n)
	}
	// Another installation has its own token.
	if other, _ := app.InstallationToken(ctx, 78); other.Value() == tok.Value() {
		t.Error("installations share a token")
	}
}

func TestClientActsAsInstallation(t *testing.T) {
	gh, app, _ := setup(t, true)
	c, err := app.Client(77, gh.Client().Transport)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Issues.CreateComment(context.Background(), "acme", "infra", 3, nil); err == nil {
		t.Error("a comment without a body must be refused by the fake's schema check")
	}
	body := "hello"
	if _, _, err := c.Issues.CreateComment(context.Background(), "acme", "infra", 3, &github.IssueComment{Body: &body}); err != nil {
		t.Fatal(err)
	}
	if got := gh.Comments("acme/infra#3"); len(got) != 1 {
		t.Errorf("comments %v", got)
	}
}

func TestJWTAndErrors(t *testing.T) {
	gh, app, clk := setup(t, false)
	j1, err := app.JWT()
	if err != nil {
		t.Fatal(err)
	}
	if j2, _ := app.JWT(); j2.Value() != j1.Value() {
		t.Error("a fresh JWT should be reused")
	}
	clk.add(9 * time.Minute)
	if j3, _ := app.JWT(); j3.Value() == j1.Value() {
		t.Error("a JWT about to expire must be replaced")
	}
	// A JWT signed by another key is refused by GitHub (the fake verifies RS256 signatures).
	_, otherPEM := keyPEM(t, false)
	stranger, _ := NewApp(4242, otherPEM, Options{BaseURL: gh.URL + "/api/v3/", Client: gh.Client()})
	if _, err := stranger.InstallationToken(context.Background(), 77); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("foreign key: %v", err)
	}
	wrongID, _ := NewApp(1, otherPEM, Options{BaseURL: gh.URL + "/api/v3/", Client: gh.Client()})
	if _, err := wrongID.InstallationToken(context.Background(), 77); err == nil {
		t.Error("wrong App ID accepted")
	}
	for _, bad := range []string{"", "not pem", "-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----\n"} {
		if _, err := NewApp(1, []byte(bad), Options{}); err == nil || !strings.Contains(err.Error(), "private key") {
			t.Errorf("bad key %q: %v", bad, err)
		}
	}
	if _, err := NewApp(0, nil, Options{}); err == nil {
		t.Error("App ID 0 accepted")
	}
	tok, err := app.InstallationToken(context.Background(), 9)
	if err != nil || tok.Value() == "" {
		t.Fatalf("token: %v", err)
	}
	var logged strings.Builder
	slog.New(slog.NewTextHandler(&logged, nil)).Info("x", "token", tok, "jwt", j1)
	printed := fmt.Sprintf("%v %+v %#v %s", tok, tok, tok, j1) + logged.String()
	if strings.Contains(printed, tok.Value()) || strings.Contains(printed, j1.Value()) {
		t.Errorf("a credential was printed: %s", printed)
	}
}

func TestAppClientFindsTheRepositoryInstallation(t *testing.T) {
	gh, app, _ := setup(t, false)
	c, err := app.AppClient(gh.Client().Transport)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, _, err := c.Apps.FindRepositoryInstallation(ctx, "acme", "infra"); err == nil {
		t.Fatal("a repository the App is not installed on must be a 404")
	}
	gh.SetInstallation("acme/infra", 31)
	inst, _, err := c.Apps.FindRepositoryInstallation(ctx, "acme", "infra")
	if err != nil || inst.GetID() != 31 {
		t.Fatalf("installation %v, %v", inst, err)
	}
	// An installation token is no App JWT: the lookup refuses it.
	ic, _ := app.Client(31, gh.Client().Transport)
	if _, _, err := ic.Apps.FindRepositoryInstallation(ctx, "acme", "infra"); err == nil {
		t.Fatal("the lookup accepted an installation token")
	}
}
