// Package ghauth authenticates Parley as a GitHub App: it signs App JWTs (RS256, iss = App ID, iat a
// minute in the past, exp nine minutes ahead) and exchanges them for per-installation access tokens,
// cached until five minutes before they expire and refreshed once however many goroutines ask at
// the same time. It is written on github.com/golang-jwt/jwt/v5 because ghinstallation, the usual
// library, is not available from the module proxy this project builds with.
//
// Tokens and keys never print: Token redacts itself under fmt and slog.
package ghauth

import (
	"context"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/go-github/v60/github"
	"golang.org/x/sync/singleflight"
)

// ParsePrivateKey reads an App's PEM private key (PKCS#1 as GitHub issues it, or PKCS#8).
func ParsePrivateKey(pemBytes []byte) (*rsa.PrivateKey, error) {
	block, _ := pem.Decode(pemBytes)
	if block == nil {
		return nil, errors.New("GitHub App private key: no PEM block found (want -----BEGIN RSA PRIVATE KEY-----)")
	}
	if k, err := x509.ParsePKCS1PrivateKey(block.Bytes); err == nil {
		return k, nil
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("GitHub App private key: %s block is neither PKCS#1 nor PKCS#8 RSA: %w", block.Type, err)
	}
	rk, ok := k.(*rsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("GitHub App private key: %T is not an RSA key (GitHub Apps sign with RS256)", k)
	}
	return rk, nil
}

// Token is a credential; it prints as [redacted].
type Token struct {
	value     string
	ExpiresAt time.Time
}

// Value returns the token for an Authorization header.
func (t Token) Value() string { return t.value }

func (t Token) String() string               { return "[redacted]" }
func (t Token) GoString() string             { return "[redacted]" }
func (t Token) LogValue() slog.Value         { return slog.StringValue("[redacted]") }
func (t Token) MarshalText() ([]byte, error) { return []byte("[redacted]"), nil }

// App mints App JWTs and installation tokens.
type App struct {
	id      int64
	key     *rsa.PrivateKey
	baseURL string // REST API base URL ending in "/"
	http    *http.Client
	now     func() time.Time

	mu     sync.Mutex
	jwt    Token
	tokens map[int64]Token
	login  string // the App's bot login, once GET /app has answered
	flight singleflight.Group
}

// Options tune an App; the zero value is fine for api.github.com.
type Options struct {
	BaseURL string       // default https://api.github.com/; GHES: https://HOST/api/v3/
	Client  *http.Client // transport for token requests; default http.DefaultClient
	Now     func() time.Time
}

// NewApp returns an App for the given App ID and PEM private key.
func NewApp(id int64, pemKey []byte, opts Options) (*App, error) {
	if id <= 0 {
		return nil, fmt.Errorf("GitHub App ID %d: want a positive number", id)
	}
	key, err := ParsePrivateKey(pemKey)
	if err != nil {
		return nil, err
	}
	a := &App{id: id, key: key, baseURL: opts.BaseURL, http: opts.Client, now: opts.Now, tokens: map[int64]Token{}}
	if a.baseURL == "" {
		a.baseURL = "https://api.github.com/"
	}
	if !strings.HasSuffix(a.baseURL, "/") {
		a.baseURL += "/"
	}
	if a.http == nil {
		a.http = http.DefaultClient
	}
	if a.now == nil {
		a.now = time.Now
	}
	return a, nil
}

// JWT returns an App JWT, reusing one that is valid for at least another minute.
func (a *App) JWT() (Token, error) {
	now := a.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.jwt.value != "" && a.jwt.ExpiresAt.Sub(now) > time.Minute {
		return a.jwt, nil
	}
	// iat is backdated a minute against clock drift; exp stays inside GitHub's ten-minute limit.
	iat, exp := now.Add(-time.Minute).Truncate(time.Second), now.Add(9*time.Minute).Truncate(time.Second)
	claims := jwt.RegisteredClaims{Issuer: strconv.FormatInt(a.id, 10), IssuedAt: jwt.NewNumericDate(iat), ExpiresAt: jwt.NewNumericDate(exp)}
	signed, err := jwt.NewWithClaims(jwt.SigningMethodRS256, claims).SignedString(a.key)
	if err != nil {
		return Token{}, fmt.Errorf("sign GitHub App JWT: %w", err)
	}
	a.jwt = Token{value: signed, ExpiresAt: exp}
	return a.jwt, nil
}

// refreshMargin is how long before expiry a cached installation token is replaced.
const refreshMargin = 5 * time.Minute

// InstallationToken returns a token for the installation, from the cache while it has more than
// five minutes left; concurrent callers share one request.
func (a *App) InstallationToken(ctx context.Context, installation int64) (Token, error) {
	a.mu.Lock()
	t, ok := a.tokens[installation]
	a.mu.Unlock()
	if ok && t.ExpiresAt.Sub(a.now()) > refreshMargin {
		return t, nil
	}
	v, err, _ := a.flight.Do(strconv.FormatInt(installation, 10), func() (any, error) {
		a.mu.Lock()
		t, ok := a.tokens[installation]
		a.mu.Unlock()
		if ok && t.ExpiresAt.Sub(a.now()) > refreshMargin {
			return t, nil // another flight refreshed it meanwhile
		}
		t, err := a.fetch(ctx, installation)
		if err != nil {
			return Token{}, err
		}
		a.mu.Lock()
		a.tokens[installation] = t
		a.mu.Unlock()
		return t, nil
	})
	if err != nil {
		return Token{}, err
	}
	return v.(Token), nil
}

func (a *App) fetch(ctx context.Context, installation int64) (Token, error) {
	j, err := a.JWT()
	if err != nil {
		return Token{}, err
	}
	url := fmt.Sprintf("%sapp/installations/%d/access_tokens", a.baseURL, installation)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
	if err != nil {
		return Token{}, err
	}
	req.Header.Set("Authorization", "Bearer "+j.Value())
	req.Header.Set("Accept", "application/vnd.github+json")
	req.Header.Set("X-GitHub-Api-Version", "2022-11-28")
	resp, err := a.http.Do(req)
	if err != nil {
		return Token{}, fmt.Errorf("installation %d: request access token: %w", installation, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return Token{}, fmt.Errorf("installation %d: read access token: %w", installation, err)
	}
	if resp.StatusCode != http.StatusCreated {
		var e struct{ Message string }
		_ = json.Unmarshal(body, &e)
		return Token{}, fmt.Errorf("installation %d: access token: GitHub answered %d: %s", installation, resp.StatusCode, e.Message)
	}
	var out struct {
		Token     string    `json:"token"`
		ExpiresAt time.Time `json:"expires_at"`
	}
	if err := json.Unmarshal(body, &out); err != nil || out.Token == "" || out.ExpiresAt.IsZero() {
		return Token{}, fmt.Errorf("installation %d: access token answer has no token or expires_at", installation)
	}
	return Token{value: out.Token, ExpiresAt: out.ExpiresAt}, nil
}

// installationTransport adds the installation's token to each request.
type installationTransport struct {
	app          *App
	installation int64
	base         http.RoundTripper
}

func (t *installationTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	tok, err := t.app.InstallationToken(req.Context(), t.installation)
	if err != nil {
		return nil, err
	}
	r := req.Clone(req.Context())
	r.Header.Set("Authorization", "token "+tok.Value())
	return t.base.RoundTrip(r)
}

// appTransport signs each request as the App itself (a fresh JWT), for the App's own endpoints
// such as finding the installation of a repository.
type appTransport struct {
	app  *App
	base http.RoundTripper
}

func (t *appTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	tok, err := t.app.JWT()
	if err != nil {
		return nil, err
	}
	r := req.Clone(req.Context())
	r.Header.Set("Authorization", "Bearer "+tok.Value())
	return t.base.RoundTrip(r)
}

// AppClient returns a go-github client acting as the App (JWT authentication): only the /app
// endpoints and installation lookups accept it.
func (a *App) AppClient(base http.RoundTripper) (*github.Client, error) {
	if base == nil {
		base = http.DefaultTransport
	}
	c := github.NewClient(&http.Client{Transport: &appTransport{app: a, base: base}})
	if a.baseURL != "https://api.github.com/" {
		return c.WithEnterpriseURLs(a.baseURL, strings.TrimSuffix(a.baseURL, "api/v3/")+"api/uploads/")
	}
	return c, nil
}

// BotLogin returns the login GitHub shows on what the App writes as an installation:
// "<app-slug>[bot]". It asks GET /app (as the App, over base) once and keeps the answer: an App's
// slug does not change while it runs. Comments are told apart by it, since any other App or a
// workflow (github-actions[bot]) is also a Bot and can write the same text.
func (a *App) BotLogin(ctx context.Context, base http.RoundTripper) (string, error) {
	a.mu.Lock()
	login := a.login
	a.mu.Unlock()
	if login != "" {
		return login, nil
	}
	v, err, _ := a.flight.Do("app", func() (any, error) {
		c, err := a.AppClient(base)
		if err != nil {
			return "", err
		}
		app, _, err := c.Apps.Get(ctx, "")
		if err != nil {
			return "", fmt.Errorf("GitHub App %d: read its slug (GET /app): %w", a.id, err)
		}
		if app.GetSlug() == "" {
			return "", fmt.Errorf("GitHub App %d: GET /app gave no slug", a.id)
		}
		login := app.GetSlug() + "[bot]"
		a.mu.Lock()
		a.login = login
		a.mu.Unlock()
		return login, nil
	})
	if err != nil {
		return "", err
	}
	return v.(string), nil
}

// Client returns a go-github client acting as the installation. base is the transport below the
// authentication (caching, rate limiting); nil means http.DefaultTransport.
func (a *App) Client(installation int64, base http.RoundTripper) (*github.Client, error) {
	if base == nil {
		base = http.DefaultTransport
	}
	hc := &http.Client{Transport: &installationTransport{app: a, installation: installation, base: base}}
	c := github.NewClient(hc)
	if a.baseURL != "https://api.github.com/" {
		return c.WithEnterpriseURLs(a.baseURL, strings.TrimSuffix(a.baseURL, "api/v3/")+"api/uploads/")
	}
	return c, nil
}
