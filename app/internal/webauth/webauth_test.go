package webauth

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/fakegithub"
)

// site is a server with sign-in in front of a page that greets whoever is signed in, against the
// fake GitHub's OAuth flow.
func site(t *testing.T) (*httptest.Server, *fakegithub.Server, *Auth) {
	t.Helper()
	gh := fakegithub.New(t)
	gh.SetOAuthApp("Iv1.parley", "client-secret")
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	public, _ := url.Parse(srv.URL)
	web, _ := url.Parse(gh.URL + "/")
	api, _ := url.Parse(gh.URL + "/api/v3/")
	a, err := New(Config{ClientID: "Iv1.parley", ClientSecret: "client-secret", PublicURL: public, GitHubWeb: web, APIBase: api,
		Key: []byte(strings.Repeat("k", 32)), Client: gh.Client()})
	if err != nil {
		t.Fatal(err)
	}
	a.Register(mux)
	mux.Handle("GET /ui/page", a.Require(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		login, _ := a.User(r)
		w.Write([]byte("hello " + login))
	})))
	return srv, gh, a
}

// browser follows redirects by hand and keeps cookies itself: Go's cookie jar does not send Secure
// cookies over http, which a browser does to localhost.
type browser struct {
	t       *testing.T
	cookies map[string]string
}

func (b *browser) get(u string) *http.Response {
	b.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	for k, v := range b.cookies {
		req.AddCookie(&http.Cookie{Name: k, Value: v})
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	for _, ck := range resp.Cookies() {
		if !ck.HttpOnly || !ck.Secure || ck.SameSite != http.SameSiteLaxMode || ck.Path != "/" {
			b.t.Errorf("cookie %s: HttpOnly %v Secure %v SameSite %v Path %q", ck.Name, ck.HttpOnly, ck.Secure, ck.SameSite, ck.Path)
		}
		if ck.MaxAge < 0 {
			delete(b.cookies, ck.Name)
		} else {
			b.cookies[ck.Name] = ck.Value
		}
	}
	return resp
}

// follow gets u and follows redirects until a page answers.
func (b *browser) follow(u string) (*http.Response, []string) {
	var hops []string
	for range 10 {
		resp := b.get(u)
		if resp.StatusCode != http.StatusFound && resp.StatusCode != http.StatusSeeOther {
			return resp, hops
		}
		resp.Body.Close()
		next, err := resp.Request.URL.Parse(resp.Header.Get("Location"))
		if err != nil {
			b.t.Fatal(err)
		}
		u = next.String()
		hops = append(hops, u)
	}
	b.t.Fatal("too many redirects")
	return nil, nil
}

func body(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestSignInWithGitHubThenTheSessionCarries(t *testing.T) {
	srv, gh, _ := site(t)
	gh.SignIn("alice")
	b := &browser{t: t, cookies: map[string]string{}}
	resp, hops := b.follow(srv.URL + "/ui/page?x=1")
	if got := body(t, resp); resp.StatusCode != 200 || got != "hello alice" {
		t.Fatalf("after signing in: %d %q (hops %v)", resp.StatusCode, got, hops)
	}
	// The way: to sign-in, to GitHub's authorize page with state and an S256 challenge, back to
	// the callback, back to the page asked for.
	if len(hops) != 4 || !strings.HasPrefix(hops[0], srv.URL+LoginPath+"?return_to=") || !strings.Contains(hops[1], "/login/oauth/authorize?") ||
		!strings.Contains(hops[1], "code_challenge_method=S256") || !strings.HasPrefix(hops[2], srv.URL+CallbackPath+"?code=") || hops[3] != srv.URL+"/ui/page?x=1" {
		t.Errorf("redirects %v", hops)
	}
	if _, ok := b.cookies[flowCookie]; ok {
		t.Error("the sign-in's cookie outlived the sign-in")
	}
	// Signed in: no more trips to GitHub.
	authorize, tokens := gh.OAuthCalls()
	if resp, _ := b.follow(srv.URL + "/ui/page"); body(t, resp) != "hello alice" {
		t.Error("the session did not carry")
	}
	if a2, t2 := gh.OAuthCalls(); a2 != authorize || t2 != tokens {
		t.Error("a signed-in request went to GitHub again")
	}
}

func TestSignInRefusals(t *testing.T) {
	srv, gh, a := site(t)
	gh.SignIn("alice")

	// A forged or altered session cookie is no session.
	b := &browser{t: t, cookies: map[string]string{sessionCookie: a.seal(sessionCookie, session{Login: "alice", Expires: time.Now().Add(time.Hour).Unix()})}}
	if resp, _ := b.follow(srv.URL + "/ui/page"); body(t, resp) != "hello alice" {
		t.Fatal("a genuine session was refused")
	}
	for name, value := range map[string]string{
		"altered login":       strings.Replace(b.cookies[sessionCookie], b.cookies[sessionCookie][:4], "eyJs", 1) + "x",
		"another key":         (&Auth{cfg: Config{Key: []byte(strings.Repeat("z", 32))}}).seal(sessionCookie, session{Login: "mallory", Expires: time.Now().Add(time.Hour).Unix()}),
		"the flow's cookie":   a.seal(flowCookie, session{Login: "mallory", Expires: time.Now().Add(time.Hour).Unix()}),
		"expired":             a.seal(sessionCookie, session{Login: "alice", Expires: time.Now().Add(-time.Minute).Unix()}),
		"no signature":        "eyJsIjoibWFsbG9yeSJ9",
		"not base64 at all ✗": "%%%.%%%",
	} {
		req := httptest.NewRequest(http.MethodGet, "/ui/page", nil)
		req.AddCookie(&http.Cookie{Name: sessionCookie, Value: value})
		if login, ok := a.User(req); ok {
			t.Errorf("%s: accepted as %q", name, login)
		}
	}

	// A callback without this browser's sign-in cookie, or with another state, signs no one in.
	fresh := &browser{t: t, cookies: map[string]string{}}
	if resp := fresh.get(srv.URL + CallbackPath + "?code=x&state=y"); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a callback without the sign-in cookie: %d", resp.StatusCode)
	}
	start := fresh.get(srv.URL + LoginPath)
	authorize := start.Header.Get("Location")
	resp := fresh.get(authorize)
	back, _ := url.Parse(resp.Header.Get("Location"))
	q := back.Query()
	q.Set("state", "forged")
	back.RawQuery = q.Encode()
	if resp := fresh.get(back.String()); resp.StatusCode != http.StatusBadRequest || strings.Contains(body(t, resp), "hello") {
		t.Errorf("a callback with another state: %d", resp.StatusCode)
	}
	if _, ok := fresh.cookies[sessionCookie]; ok {
		t.Error("a forged state got a session")
	}
	// Nobody signed in to GitHub: GitHub refuses, and so does Parley.
	gh.SignIn("")
	nobody := &browser{t: t, cookies: map[string]string{}}
	if resp, _ := nobody.follow(srv.URL + "/ui/page"); resp.StatusCode == 200 {
		t.Error("a page answered without anyone signed in")
	}
}

func TestReturnPathStaysOnTheSite(t *testing.T) {
	for in, want := range map[string]string{
		"/ui/acme/infra/pull/7?x=1": "/ui/acme/infra/pull/7?x=1",
		"//evil.example/":           "/",
		"/\\evil.example":           "/",
		"https://evil.example/":     "/",
		"":                          "/",
		"/ui\r\nSet-Cookie: x":      "/",
	} {
		if got := safeReturn(in); got != want {
			t.Errorf("safeReturn(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestNewRefusesAnIncompleteConfig(t *testing.T) {
	u, _ := url.Parse("https://parley.example.com")
	for _, cfg := range []Config{
		{ClientSecret: "s", PublicURL: u, GitHubWeb: u, APIBase: u, Key: make([]byte, 32)},
		{ClientID: "c", ClientSecret: "s", GitHubWeb: u, APIBase: u, Key: make([]byte, 32)},
		{ClientID: "c", ClientSecret: "s", PublicURL: u, GitHubWeb: u, APIBase: u, Key: make([]byte, 16)},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) accepted", cfg)
		}
	}
}
