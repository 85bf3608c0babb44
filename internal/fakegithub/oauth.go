package fakegithub

// GitHub App user authorization: the OAuth web application flow
// (https://docs.github.com/en/apps/creating-github-apps/authenticating-with-a-github-app/generating-a-user-access-token-for-a-github-app),
// by which a web server signs users in with GitHub. Its two endpoints are github.com pages, not
// REST API operations, so they are served here before the description's router sees the request.
//
// The fake is stricter than GitHub in one way on purpose: GitHub lets a client skip PKCE, the
// fake requires it (S256), so a client that forgets it fails its tests.

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"maps"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"
)

const (
	authorizeOp   = "oauth/authorize"
	accessTokenOp = "oauth/access-token"

	userTokenPrefix = "ghu_"
	codeTTL         = 10 * time.Minute // GitHub's lifetime for authorization codes
	userTokenTTL    = 8 * time.Hour    // expires_in of GitHub App user access tokens
	refreshTokenTTL = 15811200 * time.Second
)

// oauthCode is what an authorization code was issued for.
type oauthCode struct {
	clientID, redirectURI, challenge, login string
	expires                                 time.Time
}

// userToken is a user access token the fake issued.
type userToken struct {
	login   string
	expires time.Time
}

// SetOAuthApp sets the App's OAuth client credentials. Until it is called the authorize page knows
// no client and every code exchange fails with incorrect_client_credentials.
func (s *Server) SetOAuthApp(clientID, clientSecret string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.oauthClientID, s.oauthClientSecret = clientID, clientSecret
}

// SignIn says who is signed in to GitHub in "the browser": the authorize page approves the App for
// them without asking. "" signs out, and the authorize page then answers 401.
func (s *Server) SignIn(login string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.signedIn = login
}

// OAuthCalls returns how many requests the authorize page and the token exchange served, whatever
// their status. Calls has them by status; note that the exchange answers its errors with 200.
func (s *Server) OAuthCalls() (authorize, tokens int) {
	for k, n := range s.Calls() {
		switch {
		case strings.HasPrefix(k, authorizeOp+" "):
			authorize += n
		case strings.HasPrefix(k, accessTokenOp+" "):
			tokens += n
		}
	}
	return authorize, tokens
}

// serveOAuth serves the OAuth web flow's endpoints and reports whether the request was one of
// theirs. They are counted in Calls like API operations, but they are neither recorded as writes
// (the exchange carries the client secret, and it changes no repository) nor counted against the
// REST rate limit, nor throttled, as github.com's pages are not the API.
func (s *Server) serveOAuth(w http.ResponseWriter, r *http.Request) bool {
	switch r.URL.Path {
	case "/login/oauth/authorize":
		if r.Method != http.MethodGet {
			w.Header().Set("Allow", http.MethodGet)
			s.oauthText(w, authorizeOp, http.StatusMethodNotAllowed, "use GET for /login/oauth/authorize")
			return true
		}
		s.authorize(w, r)
	case "/login/oauth/access_token":
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			s.oauthText(w, accessTokenOp, http.StatusMethodNotAllowed, "use POST for /login/oauth/access_token")
			return true
		}
		s.accessToken(w, r)
	default:
		return false
	}
	return true
}

// authorize is GitHub's authorize page with the user already signed in and approving: it
// redirects back to the client with a one-time code.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	s.mu.Lock()
	clientID, login, now := s.oauthClientID, s.signedIn, s.now()
	s.mu.Unlock()

	if clientID == "" || q.Get("client_id") != clientID {
		s.oauthText(w, authorizeOp, http.StatusNotFound, fmt.Sprintf("no GitHub App has client_id %q", q.Get("client_id")))
		return
	}
	redirect := q.Get("redirect_uri")
	if redirect == "" {
		s.oauthText(w, authorizeOp, http.StatusBadRequest, "redirect_uri is required")
		return
	}
	to, err := url.Parse(redirect)
	if err != nil || (to.Scheme != "http" && to.Scheme != "https") || to.Host == "" || to.Fragment != "" {
		s.oauthText(w, authorizeOp, http.StatusBadRequest, fmt.Sprintf("redirect_uri %q is not an absolute http(s) URL without a fragment", redirect))
		return
	}
	challenge := q.Get("code_challenge")
	if challenge == "" {
		s.oauthText(w, authorizeOp, http.StatusBadRequest, "code_challenge is required: this fake requires PKCE")
		return
	}
	if m := q.Get("code_challenge_method"); m != "S256" {
		s.oauthText(w, authorizeOp, http.StatusBadRequest, fmt.Sprintf("code_challenge_method must be S256, got %q", m))
		return
	}
	// Checked here rather than only at the exchange, so that a client that encodes its challenge
	// wrongly (hex, or padded base64) is told what is wrong instead of getting a failed exchange.
	if sum, err := base64.RawURLEncoding.DecodeString(challenge); err != nil || len(sum) != sha256.Size {
		s.oauthText(w, authorizeOp, http.StatusBadRequest, "code_challenge must be BASE64URL(SHA256(code_verifier)) without padding (43 characters)")
		return
	}
	if login == "" {
		s.oauthText(w, authorizeOp, http.StatusUnauthorized, "not signed in to GitHub")
		return
	}

	code := rand.Text()
	s.mu.Lock()
	s.codes[code] = oauthCode{clientID: clientID, redirectURI: redirect, challenge: challenge, login: login, expires: now.Add(codeTTL)}
	s.mu.Unlock()

	// Appended to the raw query, so that the redirect_uri's own parameters come back byte for byte.
	add := url.Values{"code": {code}}
	if state := q.Get("state"); state != "" {
		add.Set("state", state)
	}
	if to.RawQuery != "" {
		to.RawQuery += "&"
	}
	to.RawQuery += add.Encode()
	w.Header().Set("Location", to.String())
	s.count(authorizeOp, http.StatusFound)
	w.WriteHeader(http.StatusFound)
}

// accessToken exchanges a code for a user access token. Like GitHub it answers its errors with
// 200 and OAuth error fields, in JSON if the client accepts it and form-encoded otherwise.
func (s *Server) accessToken(w http.ResponseWriter, r *http.Request) {
	params, err := oauthParams(r)
	if err != nil {
		s.oauthText(w, accessTokenOp, http.StatusBadRequest, err.Error())
		return
	}
	s.oauthAnswer(w, r, s.exchange(params))
}

// exchange checks a code exchange and answers its fields.
func (s *Server) exchange(p url.Values) map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.oauthClientID == "" || p.Get("client_id") != s.oauthClientID || p.Get("client_secret") != s.oauthClientSecret {
		// The code is left alone: a client that cannot authenticate has not used it.
		return oauthError("incorrect_client_credentials", "The client_id and/or client_secret passed are incorrect.")
	}
	code, ok := s.codes[p.Get("code")]
	// One use only, whatever its outcome: a code that failed once must not be tried again.
	delete(s.codes, p.Get("code"))
	now := s.now()
	switch {
	case !ok || !now.Before(code.expires) || code.clientID != p.Get("client_id"):
		return oauthError("bad_verification_code", "The code passed is incorrect or expired.")
	case p.Get("redirect_uri") != "" && p.Get("redirect_uri") != code.redirectURI:
		return oauthError("bad_verification_code", "The redirect_uri does not match the one the code was issued for.")
	case p.Get("code_verifier") == "":
		return oauthError("bad_verification_code", "The code_verifier is missing; the code was issued with a code_challenge.")
	case challengeOf(p.Get("code_verifier")) != code.challenge:
		return oauthError("bad_verification_code", "The code_verifier does not match the code_challenge the code was issued for.")
	}
	tok := userTokenPrefix + rand.Text()
	s.userTokens[tok] = userToken{login: code.login, expires: now.Add(userTokenTTL)}
	return map[string]any{"access_token": tok, "token_type": "bearer", "scope": "",
		"expires_in": int(userTokenTTL.Seconds()), "refresh_token": "ghr_" + rand.Text(),
		"refresh_token_expires_in": int(refreshTokenTTL.Seconds())}
}

// challengeOf is the S256 code challenge of a PKCE code verifier (RFC 7636, section 4.2).
func challengeOf(verifier string) string {
	sum := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

func oauthError(code, description string) map[string]any {
	return map[string]any{"error": code, "error_description": description,
		"error_uri": "https://docs.github.com/apps/managing-oauth-apps/troubleshooting-oauth-app-access-token-request-errors/#" + strings.ReplaceAll(code, "_", "-")}
}

// oauthParams reads the exchange's parameters from a JSON or form-encoded body; like GitHub it also
// takes them from the query string, which the body overrides.
func oauthParams(r *http.Request) (url.Values, error) {
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if ct != "application/json" {
		if err := r.ParseForm(); err != nil {
			return nil, fmt.Errorf("malformed form body: %v", err)
		}
		return r.Form, nil
	}
	data, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("read body: %v", err)
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("malformed JSON body: %v", err)
	}
	out := r.URL.Query()
	for k, v := range doc {
		if str, ok := v.(string); ok {
			out.Set(k, str)
		}
	}
	return out, nil
}

// oauthAnswer writes the exchange's answer as GitHub does: JSON only if asked for.
func (s *Server) oauthAnswer(w http.ResponseWriter, r *http.Request, fields map[string]any) {
	var buf []byte
	if strings.Contains(r.Header.Get("Accept"), "application/json") {
		buf, _ = json.Marshal(fields)
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
	} else {
		form := url.Values{}
		for k, v := range fields {
			form.Set(k, fmt.Sprint(v))
		}
		buf = []byte(form.Encode())
		w.Header().Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
	}
	s.count(accessTokenOp, http.StatusOK)
	w.WriteHeader(http.StatusOK)
	w.Write(buf)
}

// oauthText answers a page of the flow with a short plain-text body: on github.com these are
// HTML pages meant for a person, which a test only needs to read the reason from.
func (s *Server) oauthText(w http.ResponseWriter, op string, status int, text string) {
	s.count(op, status)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	io.WriteString(w, text+"\n")
}

// count records a call that does not go through answer.
func (s *Server) count(op string, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[op+" "+fmt.Sprint(status)]++
}

// userLogin is the user whose unexpired access token the request carries, if it does.
func (s *Server) userLogin(r *http.Request) (string, bool) {
	tok := presentedToken(r)
	s.mu.Lock()
	defer s.mu.Unlock()
	u, ok := s.userTokens[tok]
	if !ok || !s.now().Before(u.expires) {
		return "", false
	}
	return u.login, true
}

// authenticatedUser answers GET /user: the description's example, as the token's user. An
// installation token is refused with 403, as GitHub refuses it (an installation is no user).
func (s *Server) authenticatedUser(w http.ResponseWriter, r *http.Request, op string, _ map[string]string, _ map[string]any) {
	login, ok := s.userLogin(r)
	if !ok {
		if s.isInstallationToken(presentedToken(r)) {
			s.fail(w, op, http.StatusForbidden, "Resource not accessible by integration")
		} else {
			s.fail(w, op, http.StatusUnauthorized, "Bad credentials")
		}
		return
	}
	route, _, err := s.findRoute(r)
	if err != nil {
		s.fail(w, op, http.StatusNotFound, "Not Found")
		return
	}
	out := map[string]any{}
	if _, example, ok := successExample(route.Operation); ok {
		if m, isMap := example.(map[string]any); isMap {
			maps.Copy(out, m) // a copy: the example is shared by every test
		}
	}
	out["login"], out["id"] = login, userID(login)
	s.answer(w, op, http.StatusOK, out)
}

// userID is a stable, positive ID for a login. GitHub logins are case-insensitive, so the ID is too.
func userID(login string) int64 {
	h := fnv.New32a()
	h.Write([]byte(strings.ToLower(login)))
	return 1 + int64(h.Sum32())
}
