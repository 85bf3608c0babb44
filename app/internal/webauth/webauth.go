// Package webauth signs people in to Parley's pages with GitHub: the GitHub App's own user
// authorisation (the OAuth web application flow, with state and PKCE), then a signed session
// cookie. It answers who is signed in; whether they may see a repository is the caller's question
// (GitHub's permission API).
//
// Written by hand on net/http and crypto/hmac: golang.org/x/oauth2 would cover the code exchange
// but not the signed cookies that carry the flow's state and the session across replicas, which
// is most of this package.
package webauth

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/google/go-github/v60/github"
)

// The paths the package serves, under the public URL.
const (
	LoginPath    = "/auth/login"
	CallbackPath = "/auth/callback"
	LogoutPath   = "/auth/logout"
)

const (
	sessionCookie = "parley_session"
	flowCookie    = "parley_signin" // the state, PKCE verifier and return path of a sign-in under way
	flowTTL       = 10 * time.Minute
)

// Config configures sign-in.
type Config struct {
	ClientID     string
	ClientSecret string
	// PublicURL is where people reach parley serve (https://parley.example.com); the callback
	// GitHub redirects to is under it.
	PublicURL *url.URL
	// GitHubWeb is GitHub's web address: https://github.com/, or https://HOST/ for GitHub
	// Enterprise Server; the authorize and token endpoints are under it.
	GitHubWeb *url.URL
	// APIBase is GitHub's REST API (https://api.github.com/), for GET /user.
	APIBase *url.URL
	// Key signs the cookies: at least 32 bytes, the same on every replica.
	Key []byte
	// Client makes the requests to GitHub; nil: http.DefaultClient.
	Client *http.Client
	// SessionTTL is how long a sign-in lasts; default 8 hours.
	SessionTTL time.Duration
	Now        func() time.Time
	Log        *slog.Logger
}

// Auth is the sign-in. Safe for concurrent use.
type Auth struct {
	cfg Config
}

// New checks cfg.
func New(cfg Config) (*Auth, error) {
	switch {
	case cfg.ClientID == "" || cfg.ClientSecret == "":
		return nil, errors.New("sign-in: the GitHub App's client ID and client secret are required")
	case cfg.PublicURL == nil || cfg.PublicURL.Host == "":
		return nil, errors.New("sign-in: the public URL is required")
	case cfg.GitHubWeb == nil || cfg.APIBase == nil:
		return nil, errors.New("sign-in: GitHub's web and API addresses are required")
	case len(cfg.Key) < 32:
		return nil, errors.New("sign-in: the cookie key must be at least 32 bytes")
	}
	if cfg.Client == nil {
		cfg.Client = http.DefaultClient
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = 8 * time.Hour
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Auth{cfg: cfg}, nil
}

// Register adds the sign-in, callback and sign-out handlers to mux.
func (a *Auth) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET "+LoginPath, a.login)
	mux.HandleFunc("GET "+CallbackPath, a.callback)
	mux.HandleFunc("POST "+LogoutPath, a.logout)
}

// User returns the login of the person signed in on r, if any.
func (a *Auth) User(r *http.Request) (string, bool) {
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return "", false
	}
	var s session
	if !a.open(sessionCookie, c.Value, &s) || a.cfg.Now().Unix() >= s.Expires || s.Login == "" {
		return "", false
	}
	return s.Login, true
}

// Require serves next to people signed in, and sends anyone else to sign in first, back to the
// page they asked for afterwards.
func (a *Auth) Require(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := a.User(r); ok {
			next.ServeHTTP(w, r)
			return
		}
		http.Redirect(w, r, LoginPath+"?return_to="+url.QueryEscape(r.URL.RequestURI()), http.StatusFound)
	})
}

type session struct {
	Login   string `json:"l"`
	Expires int64  `json:"e"`
}

type flow struct {
	State    string `json:"s"`
	Verifier string `json:"v"`
	ReturnTo string `json:"r"`
	Expires  int64  `json:"e"`
}

// login starts the authorisation: a fresh state and PKCE verifier, kept in a signed cookie only
// this browser sends back, and a redirect to GitHub's authorize page with the verifier's challenge.
func (a *Auth) login(w http.ResponseWriter, r *http.Request) {
	f := flow{State: random(24), Verifier: random(32), ReturnTo: safeReturn(r.URL.Query().Get("return_to")),
		Expires: a.cfg.Now().Add(flowTTL).Unix()}
	a.setCookie(w, flowCookie, a.seal(flowCookie, f), flowTTL)
	sum := sha256.Sum256([]byte(f.Verifier))
	q := url.Values{
		"client_id":             {a.cfg.ClientID},
		"redirect_uri":          {a.callbackURL()},
		"state":                 {f.State},
		"code_challenge":        {base64.RawURLEncoding.EncodeToString(sum[:])},
		"code_challenge_method": {"S256"},
	}
	http.Redirect(w, r, a.cfg.GitHubWeb.JoinPath("login/oauth/authorize").String()+"?"+q.Encode(), http.StatusFound)
}

// callback finishes it: the state must be this browser's, the code is exchanged with the
// verifier, and the token is used once, to learn who signed in. The token is not kept.
func (a *Auth) callback(w http.ResponseWriter, r *http.Request) {
	c, err := r.Cookie(flowCookie)
	var f flow
	if err != nil || !a.open(flowCookie, c.Value, &f) || a.cfg.Now().Unix() >= f.Expires {
		http.Error(w, "This sign-in expired or was started in another browser: sign in again.", http.StatusBadRequest)
		return
	}
	a.setCookie(w, flowCookie, "", -1) // one use
	q := r.URL.Query()
	if e := q.Get("error"); e != "" {
		http.Error(w, "GitHub did not sign you in: "+e, http.StatusForbidden)
		return
	}
	if q.Get("state") == "" || !hmac.Equal([]byte(q.Get("state")), []byte(f.State)) {
		http.Error(w, "The sign-in's state does not match this browser's: sign in again.", http.StatusBadRequest)
		return
	}
	login, err := a.exchange(r.Context(), q.Get("code"), f.Verifier)
	if err != nil {
		a.cfg.Log.Warn("sign-in failed", "error", err.Error())
		http.Error(w, "GitHub did not confirm the sign-in: sign in again.", http.StatusBadGateway)
		return
	}
	a.setCookie(w, sessionCookie, a.seal(sessionCookie, session{Login: login, Expires: a.cfg.Now().Add(a.cfg.SessionTTL).Unix()}), a.cfg.SessionTTL)
	a.cfg.Log.Info("signed in", "user", login)
	http.Redirect(w, r, f.ReturnTo, http.StatusFound)
}

func (a *Auth) logout(w http.ResponseWriter, r *http.Request) {
	a.setCookie(w, sessionCookie, "", -1)
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// exchange trades the code for a user token, with the PKCE verifier, and asks GitHub whose it is.
func (a *Auth) exchange(ctx context.Context, code, verifier string) (string, error) {
	if code == "" {
		return "", errors.New("no code in the callback")
	}
	form := url.Values{"client_id": {a.cfg.ClientID}, "client_secret": {a.cfg.ClientSecret}, "code": {code},
		"redirect_uri": {a.callbackURL()}, "code_verifier": {verifier}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.cfg.GitHubWeb.JoinPath("login/oauth/access_token").String(), strings.NewReader(form.Encode()))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	resp, err := a.cfg.Client.Do(req)
	if err != nil {
		return "", fmt.Errorf("exchange the code: %w", err)
	}
	defer resp.Body.Close()
	var tok struct {
		AccessToken string `json:"access_token"`
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return "", fmt.Errorf("exchange the code: %w", err)
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &tok) != nil {
		return "", fmt.Errorf("exchange the code: GitHub answered %s", resp.Status)
	}
	if tok.AccessToken == "" {
		// GitHub answers 200 with an error for a bad code, secret or verifier.
		return "", fmt.Errorf("exchange the code: %s: %s", tok.Error, tok.Description)
	}
	gh := github.NewClient(a.cfg.Client).WithAuthToken(tok.AccessToken)
	gh.BaseURL = a.cfg.APIBase
	user, _, err := gh.Users.Get(ctx, "")
	if err != nil {
		return "", fmt.Errorf("ask GitHub who signed in: %w", err)
	}
	if user.GetLogin() == "" {
		return "", errors.New("GitHub named no user")
	}
	return user.GetLogin(), nil
}

func (a *Auth) callbackURL() string { return a.cfg.PublicURL.JoinPath(CallbackPath).String() }

// setCookie sets an HttpOnly, Secure, SameSite=Lax cookie for the whole site: Lax, because the
// callback is a top-level navigation from GitHub and must carry the sign-in's cookie. ttl < 0
// deletes it.
func (a *Auth) setCookie(w http.ResponseWriter, name, value string, ttl time.Duration) {
	c := &http.Cookie{Name: name, Value: value, Path: "/", HttpOnly: true, Secure: true, SameSite: http.SameSiteLaxMode}
	if ttl < 0 {
		c.MaxAge = -1
	} else {
		c.MaxAge = int(ttl / time.Second)
	}
	http.SetCookie(w, c)
}

// seal encodes v and signs it, with the cookie's name in the signature so that one cookie's value
// is never accepted as another's.
func (a *Auth) seal(name string, v any) string {
	payload, _ := json.Marshal(v)
	p := base64.RawURLEncoding.EncodeToString(payload)
	return p + "." + base64.RawURLEncoding.EncodeToString(a.mac(name, p))
}

// open checks value's signature and decodes it into v.
func (a *Auth) open(name, value string, v any) bool {
	p, sig, ok := strings.Cut(value, ".")
	if !ok {
		return false
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, a.mac(name, p)) {
		return false
	}
	payload, err := base64.RawURLEncoding.DecodeString(p)
	return err == nil && json.Unmarshal(payload, v) == nil
}

func (a *Auth) mac(name, payload string) []byte {
	m := hmac.New(sha256.New, a.cfg.Key)
	m.Write([]byte(name))
	m.Write([]byte{0})
	m.Write([]byte(payload))
	return m.Sum(nil)
}

// safeReturn keeps the page to return to only if it is a path on this site: never another host
// (an open redirect), never a scheme-relative //host.
func safeReturn(p string) string {
	if !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") || strings.HasPrefix(p, "/\\") || strings.ContainsAny(p, "\r\n") {
		return "/"
	}
	return p
}

func random(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails: since Go 1.24 a broken source crashes the program instead
	return base64.RawURLEncoding.EncodeToString(b)
}
