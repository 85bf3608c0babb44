package fakegithub

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

const (
	testClientID     = "Iv23liFAKE"
	testClientSecret = "s3cret"
	testRedirect     = "https://parley.example/auth/callback?next=%2Fproposals"
)

// browser is an HTTP client that stops at redirects, as a test of a web server's sign-in must:
// the redirect back to the server carries the code, and following it would lose it.
func browser(s *Server) *http.Client {
	c := *s.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &c
}

// pkce returns a fresh code verifier and its S256 challenge, as a client makes them.
func pkce(t *testing.T) (verifier, challenge string) {
	t.Helper()
	b := make([]byte, 32)
	rand.Read(b)
	verifier = base64.RawURLEncoding.EncodeToString(b)
	return verifier, challengeOf(verifier)
}

func oauthServer(t *testing.T) *Server {
	s := New(t)
	s.SetOAuthApp(testClientID, testClientSecret)
	s.SignIn("dana")
	return s
}

// authorizeURL is the authorize page's URL with the flow's usual parameters, changed by set
// (a value of "" removes the parameter).
func authorizeURL(s *Server, challenge string, set map[string]string) string {
	q := url.Values{"client_id": {testClientID}, "redirect_uri": {testRedirect}, "state": {"st/8 &="},
		"code_challenge": {challenge}, "code_challenge_method": {"S256"}}
	for k, v := range set {
		if v == "" {
			q.Del(k)
		} else {
			q.Set(k, v)
		}
	}
	return s.URL + "/login/oauth/authorize?" + q.Encode()
}

// get does a GET without following redirects and returns the status, body and Location.
func get(t *testing.T, s *Server, u, auth string) (int, string, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := browser(s).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), resp.Header.Get("Location")
}

// code runs the authorize page and returns the code it redirects back with.
func code(t *testing.T, s *Server, challenge string) string {
	t.Helper()
	status, body, loc := get(t, s, authorizeURL(s, challenge, nil), "")
	if status != http.StatusFound {
		t.Fatalf("authorize: %d %s", status, body)
	}
	to, err := url.Parse(loc)
	if err != nil || to.Query().Get("code") == "" {
		t.Fatalf("authorize redirected to %q", loc)
	}
	return to.Query().Get("code")
}

// exchange posts a form-encoded code exchange asking for JSON, and returns the answer's fields.
func exchange(t *testing.T, s *Server, fields url.Values) map[string]any {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, s.URL+"/login/oauth/access_token", strings.NewReader(fields.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	resp, err := s.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("exchange: %d, %v", resp.StatusCode, err)
	}
	return out
}

func exchangeFields(code, verifier string) url.Values {
	return url.Values{"client_id": {testClientID}, "client_secret": {testClientSecret}, "code": {code},
		"redirect_uri": {testRedirect}, "code_verifier": {verifier}}
}

func TestOAuthWebFlow(t *testing.T) {
	s := oauthServer(t)
	verifier, challenge := pkce(t)

	status, body, loc := get(t, s, authorizeURL(s, challenge, nil), "")
	if status != http.StatusFound {
		t.Fatalf("authorize: %d %s", status, body)
	}
	to, _ := url.Parse(loc)
	q := to.Query()
	if to.Scheme != "https" || to.Host != "parley.example" || to.Path != "/auth/callback" || q.Get("next") != "/proposals" {
		t.Errorf("redirected to %q, want the redirect_uri with its own parameters", loc)
	}
	if q.Get("state") != "st/8 &=" || q.Get("code") == "" {
		t.Errorf("redirect parameters %v, want the state echoed and a code", q)
	}

	tok := exchange(t, s, exchangeFields(q.Get("code"), verifier))
	access, _ := tok["access_token"].(string)
	if !strings.HasPrefix(access, "ghu_") || tok["token_type"] != "bearer" || tok["scope"] != "" || tok["expires_in"] != 28800.0 ||
		!strings.HasPrefix(tok["refresh_token"].(string), "ghr_") || tok["refresh_token_expires_in"] != 15811200.0 {
		t.Fatalf("token answer %v", tok)
	}

	for _, auth := range []string{"Bearer " + access, "token " + access} {
		status, body, _ := get(t, s, s.URL+"/user", auth)
		var user map[string]any
		json.Unmarshal([]byte(body), &user)
		if status != http.StatusOK || user["login"] != "dana" || user["id"] != float64(userID("dana")) {
			t.Errorf("GET /user with %q: %d %s", strings.Fields(auth)[0], status, body)
		}
		if user["html_url"] == nil {
			t.Errorf("GET /user: %v, want the description's example under the login", user)
		}
	}
	if userID("dana") == userID("mallory") || userID("dana") != userID("Dana") {
		t.Errorf("user IDs: dana %d, Dana %d, mallory %d", userID("dana"), userID("Dana"), userID("mallory"))
	}

	// A signed-in user the test gave no permission: the fake answers 404, as it always has.
	status, body, _ = get(t, s, s.URL+"/repos/acme/infra/collaborators/dana/permission", "")
	if status != http.StatusNotFound {
		t.Errorf("permission of a user without SetPermission: %d %s", status, body)
	}

	calls := s.Calls()
	if calls["oauth/authorize 302"] != 1 || calls["oauth/access-token 200"] != 1 || calls["users/get-authenticated 200"] != 2 {
		t.Errorf("calls %v", calls)
	}
	if a, n := s.OAuthCalls(); a != 1 || n != 1 {
		t.Errorf("OAuthCalls %d, %d", a, n)
	}
	if w := s.Writes(); len(w) != 0 {
		t.Errorf("the OAuth flow recorded writes %v", w)
	}
}

func TestOAuthAuthorizeRefusals(t *testing.T) {
	s := oauthServer(t)
	_, challenge := pkce(t)
	cases := []struct {
		name   string
		set    map[string]string
		status int
		says   string
	}{
		{"unknown client", map[string]string{"client_id": "Iv23other"}, http.StatusNotFound, "client_id"},
		{"no redirect_uri", map[string]string{"redirect_uri": ""}, http.StatusBadRequest, "redirect_uri"},
		{"relative redirect_uri", map[string]string{"redirect_uri": "/auth/callback"}, http.StatusBadRequest, "redirect_uri"},
		{"redirect_uri not http", map[string]string{"redirect_uri": "ftp://parley.example/cb"}, http.StatusBadRequest, "redirect_uri"},
		{"no PKCE", map[string]string{"code_challenge": "", "code_challenge_method": ""}, http.StatusBadRequest, "code_challenge"},
		{"no challenge method", map[string]string{"code_challenge_method": ""}, http.StatusBadRequest, "code_challenge_method"},
		{"plain PKCE", map[string]string{"code_challenge_method": "plain"}, http.StatusBadRequest, "code_challenge_method"},
		{"hex challenge", map[string]string{"code_challenge": strings.Repeat("ab", 32)}, http.StatusBadRequest, "code_challenge"},
	}
	for _, c := range cases {
		status, body, loc := get(t, s, authorizeURL(s, challenge, c.set), "")
		if status != c.status || !strings.Contains(body, c.says) || loc != "" {
			t.Errorf("%s: %d %q (Location %q), want %d naming %s", c.name, status, body, loc, c.status, c.says)
		}
	}

	s.SignIn("")
	if status, body, _ := get(t, s, authorizeURL(s, challenge, nil), ""); status != http.StatusUnauthorized || !strings.Contains(body, "not signed in to GitHub") {
		t.Errorf("nobody signed in: %d %q", status, body)
	}
	if a, _ := s.OAuthCalls(); a != len(cases)+1 || s.Calls()["oauth/authorize 400"] != 7 {
		t.Errorf("calls %v", s.Calls())
	}
}

func TestOAuthExchangeRefusals(t *testing.T) {
	s := oauthServer(t)
	verifier, challenge := pkce(t)
	wantError := func(name string, got map[string]any, code, says string) {
		t.Helper()
		desc, _ := got["error_description"].(string)
		if got["error"] != code || !strings.Contains(desc, says) || got["access_token"] != nil {
			t.Errorf("%s: %v, want %s mentioning %q", name, got, code, says)
		}
	}

	// A wrong client secret is refused, and leaves the code usable by the real client.
	c := code(t, s, challenge)
	wrong := exchangeFields(c, verifier)
	wrong.Set("client_secret", "guess")
	wantError("wrong secret", exchange(t, s, wrong), "incorrect_client_credentials", "client_secret")
	if got := exchange(t, s, exchangeFields(c, verifier)); got["access_token"] == nil {
		t.Errorf("after a wrong secret: %v", got)
	}
	// A code is used once.
	wantError("reused code", exchange(t, s, exchangeFields(c, verifier)), "bad_verification_code", "code")

	// A wrong verifier spends the code: the right one cannot use it afterwards.
	c = code(t, s, challenge)
	other, _ := pkce(t)
	wantError("wrong verifier", exchange(t, s, exchangeFields(c, other)), "bad_verification_code", "code_verifier")
	wantError("right verifier after a wrong one", exchange(t, s, exchangeFields(c, verifier)), "bad_verification_code", "incorrect or expired")

	c = code(t, s, challenge)
	wantError("no verifier", exchange(t, s, exchangeFields(c, "")), "bad_verification_code", "code_verifier")

	c = code(t, s, challenge)
	moved := exchangeFields(c, verifier)
	moved.Set("redirect_uri", "https://parley.example/auth/callback")
	wantError("redirect_uri mismatch", exchange(t, s, moved), "bad_verification_code", "redirect_uri")

	// The redirect_uri may be left out of the exchange.
	c = code(t, s, challenge)
	bare := exchangeFields(c, verifier)
	bare.Del("redirect_uri")
	if got := exchange(t, s, bare); got["access_token"] == nil {
		t.Errorf("exchange without redirect_uri: %v", got)
	}

	// Codes live ten minutes on the fake's clock.
	c = code(t, s, challenge)
	later := time.Now().Add(11 * time.Minute)
	s.SetClock(func() time.Time { return later })
	wantError("expired code", exchange(t, s, exchangeFields(c, verifier)), "bad_verification_code", "expired")
}

func TestOAuthExchangeEncodings(t *testing.T) {
	s := oauthServer(t)
	verifier, challenge := pkce(t)

	// A JSON request without Accept: application/json gets a form-encoded answer, as from GitHub.
	doc, _ := json.Marshal(map[string]string{"client_id": testClientID, "client_secret": testClientSecret,
		"code": code(t, s, challenge), "code_verifier": verifier})
	req, _ := http.NewRequest(http.MethodPost, s.URL+"/login/oauth/access_token", strings.NewReader(string(doc)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	form, err := url.ParseQuery(string(body))
	if err != nil || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/x-www-form-urlencoded") ||
		!strings.HasPrefix(form.Get("access_token"), "ghu_") || form.Get("token_type") != "bearer" || form.Get("expires_in") != "28800" {
		t.Fatalf("form answer %q (%s), %v", body, resp.Header.Get("Content-Type"), err)
	}

	// Errors too are form-encoded, with status 200.
	resp, err = s.Client().PostForm(s.URL+"/login/oauth/access_token", url.Values{"client_id": {testClientID}, "client_secret": {"guess"}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if form, _ := url.ParseQuery(string(body)); resp.StatusCode != http.StatusOK || form.Get("error") != "incorrect_client_credentials" {
		t.Errorf("form error answer %d %q", resp.StatusCode, body)
	}
}

// installationToken gets an installation token the way the App does, with an App JWT.
func installationToken(t *testing.T, s *Server) string {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	s.AppPublicKey, s.AppID = &key.PublicKey, 4242
	now := time.Now()
	signed, err := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.RegisteredClaims{Issuer: strconv.Itoa(4242),
		IssuedAt: jwt.NewNumericDate(now.Add(-30 * time.Second)), ExpiresAt: jwt.NewNumericDate(now.Add(9 * time.Minute))}).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, s.URL+"/app/installations/7/access_tokens", nil)
	req.Header.Set("Authorization", "Bearer "+signed)
	resp, err := s.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct{ Token string }
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("installation token: %d, %v", resp.StatusCode, err)
	}
	return out.Token
}

// TestTokenKinds checks that user tokens and installation tokens each work only where they belong.
func TestTokenKinds(t *testing.T) {
	s := oauthServer(t)
	verifier, challenge := pkce(t)
	user := exchange(t, s, exchangeFields(code(t, s, challenge), verifier))["access_token"].(string)
	inst := installationToken(t, s)

	for _, c := range []struct {
		name, auth string
		status     int
		says       string
	}{
		{"installation token", "token " + inst, http.StatusForbidden, "Resource not accessible by integration"},
		{"installation token as Bearer", "Bearer " + inst, http.StatusForbidden, "Resource not accessible by integration"},
		{"no token", "", http.StatusUnauthorized, "Bad credentials"},
		{"unknown user token", "token ghu_nope", http.StatusUnauthorized, "Bad credentials"},
		{"unknown user token as Bearer", "Bearer ghu_nope", http.StatusUnauthorized, "Bad credentials"},
		{"something else as Bearer", "Bearer nope", http.StatusUnauthorized, "Bad credentials"},
	} {
		status, body, _ := get(t, s, s.URL+"/user", c.auth)
		if status != c.status || !strings.Contains(body, c.says) {
			t.Errorf("GET /user, %s: %d %s", c.name, status, body)
		}
	}

	// A user token does not do the App's work: creating a check run wants an installation token.
	post := func(auth string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, s.URL+"/repos/acme/infra/check-runs", strings.NewReader(`{"name":"parley","head_sha":"abc123"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", auth)
		resp, err := s.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	for _, auth := range []string{"token " + user, "Bearer " + user} {
		if status, body := post(auth); status != http.StatusForbidden || !strings.Contains(body, "installation token") {
			t.Errorf("check run with a user token (%s): %d %s", strings.Fields(auth)[0], status, body)
		}
	}
	if status, body := post("Bearer ghu_nope"); status != http.StatusUnauthorized {
		t.Errorf("check run with an unknown user token: %d %s", status, body)
	}
	if n := len(s.CheckRuns("acme/infra")); n != 0 {
		t.Fatalf("%d check runs created with user tokens", n)
	}
	if status, body := post("token " + inst); status != http.StatusCreated {
		t.Errorf("check run with the installation token: %d %s", status, body)
	}

	// User tokens expire after eight hours on the fake's clock.
	later := time.Now().Add(8*time.Hour + time.Minute)
	s.SetClock(func() time.Time { return later })
	if status, body, _ := get(t, s, s.URL+"/user", "Bearer "+user); status != http.StatusUnauthorized {
		t.Errorf("GET /user with an expired user token: %d %s", status, body)
	}
}
