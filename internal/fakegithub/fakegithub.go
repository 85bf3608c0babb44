// Package fakegithub is a GitHub REST API for tests, built from GitHub's own OpenAPI description
// (the npm package @octokit/openapi, fetched with npm on first use by internal/npmdata). A request
// whose method and path are not in the description is refused with 404, and one whose parameters
// or body do not match the description's schema with 422, so a test cannot pass against an API
// GitHub does not have. Answers come from the description's own examples, overridden by the small
// state the test sets up (comments, check runs, permissions, file contents) for the operations
// Parley uses. Every call is counted by route and status, and every write is recorded.
//
// Routing and validation are kin-openapi's (github.com/getkin/kin-openapi); only the state model is
// written here.
package fakegithub

import (
	"bytes"
	"context"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/golang-jwt/jwt/v5"

	"github.com/parleyhq/parley/internal/npmdata"
)

// description is GitHub's API description, loaded once per test binary: it takes about two
// seconds, and it is never modified after loading, so sharing it between tests is safe.
var description struct {
	once   sync.Once
	doc    *openapi3.T
	router routers.Router
	err    error
}

func load() (*openapi3.T, routers.Router, error) {
	description.once.Do(func() {
		dir, err := npmdata.Dir(npmdata.OpenAPI)
		if err != nil {
			description.err = fmt.Errorf("GitHub's OpenAPI description: %w", err) // wraps npmdata.ErrNoNPM if npm is missing
			return
		}
		loader := openapi3.NewLoader()
		doc, err := loader.LoadFromFile(filepath.Join(dir, "generated", "api.github.com.json"))
		if err != nil {
			description.err = fmt.Errorf("load GitHub's OpenAPI description: %w", err)
			return
		}
		// Route on paths only: the test server is not api.github.com.
		doc.Servers = openapi3.Servers{{URL: "/"}}
		description.router, description.err = gorillamux.NewRouter(doc)
		description.doc = doc
	})
	return description.doc, description.router, description.err
}

// Write is one recorded write request.
type Write struct {
	Method, Path, Operation string
	Body                    map[string]any
}

// Comment is an issue comment in the fake's state.
type Comment struct {
	ID        int64
	Body      string
	User      string
	UpdatedAt time.Time
}

// CheckRun is a check run in the fake's state.
type CheckRun struct {
	ID                         int64
	Name, HeadSHA, Status      string
	Conclusion, Title, Summary string
	ExternalID                 string
	DetailsURL                 string
}

// Server is the fake GitHub. Its zero value is not usable: call New.
type Server struct {
	*httptest.Server
	router routers.Router

	// AppPublicKey verifies App JWTs on the installation token endpoint; nil accepts none.
	AppPublicKey *rsa.PublicKey
	AppID        int64
	// AppSlug is the App's slug, as GET /app answers it; comments the App writes are by
	// "<AppSlug>[bot]". New sets it to "parley".
	AppSlug string

	mu          sync.Mutex
	calls       map[string]int // "OPERATION STATUS"
	writes      []Write
	nextID      int64
	comments    map[string][]*Comment // "owner/repo#n"
	checkRuns   map[string][]*CheckRun
	permissions map[string]string          // "owner/repo user" -> permission
	contents    map[string][]byte          // "owner/repo ref path"
	tokens      map[string]int64           // installation token -> installation
	pulls       map[string]any             // "owner/repo#n" -> pull request object
	installs    map[string]int64           // "owner/repo" -> installation ID
	repos       map[string]map[string]any  // "owner/repo" -> fields over the description's example
	bytes       int                        // response body bytes served
	used        int                        // primary rate limit used (304s are free)
	members     map[string]bool            // "org/team user" -> active member
	reviews     map[string][]Review        // "owner/repo#n" -> reviews, oldest first
	commits     map[string]Commit          // "owner/repo sha" -> what GitHub knows of the commit
	timelines   map[string][]TimelineEvent // "owner/repo#n" -> timeline events, oldest first
	tokenTTL    time.Duration
	throttle    []throttle
	now         func() time.Time

	// The App's OAuth web flow (oauth.go).
	oauthClientID, oauthClientSecret string
	signedIn                         string               // who is signed in to GitHub in "the browser"
	codes                            map[string]oauthCode // authorization code -> what it was issued for
	userTokens                       map[string]userToken // user access token (ghu_) -> its user

	// The App's registration from a manifest, and what its installations were granted (manifest.go).
	manifestCodes          map[string]manifestCode
	hookURL, webhookSecret string
	grants                 map[int64]Grants
}

type throttle struct {
	status     int
	retryAfter string
}

// New starts a fake GitHub; it is closed when the test ends. It skips the test if the description
// is not cached and npm is not installed to fetch it, and fails it if the description cannot be
// fetched or loaded otherwise.
func New(t testing.TB) *Server {
	t.Helper()
	s, err := Start()
	if err != nil {
		npmdata.FatalOrSkip(t, err)
	}
	t.Cleanup(s.Close)
	return s
}

// Start starts a fake GitHub outside a test, for a program that runs parley serve against it
// (bench/admission); the caller closes it. The error wraps npmdata.ErrNoNPM if the description is
// not cached and npm is not installed to fetch it.
func Start() (*Server, error) {
	_, router, err := load()
	if err != nil {
		return nil, err
	}
	s := &Server{router: router, calls: map[string]int{}, nextID: 1000, comments: map[string][]*Comment{},
		checkRuns: map[string][]*CheckRun{}, permissions: map[string]string{}, contents: map[string][]byte{},
		tokens: map[string]int64{}, pulls: map[string]any{}, installs: map[string]int64{}, repos: map[string]map[string]any{}, members: map[string]bool{}, reviews: map[string][]Review{}, commits: map[string]Commit{}, timelines: map[string][]TimelineEvent{}, tokenTTL: time.Hour, now: time.Now,
		codes: map[string]oauthCode{}, userTokens: map[string]userToken{}}
	s.AppSlug = "parley"
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s, nil
}

// AddComment adds a comment by user (a login such as "github-actions[bot]" or "octocat") to an
// issue or pull request ("owner/repo#n"), as if they had written it; it returns the comment's ID.
// A login ending in "[bot]" is a Bot, any other a User.
func (s *Server) AddComment(issue, user, body string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextID++
	s.comments[issue] = append(s.comments[issue], &Comment{ID: s.nextID, Body: body, User: user, UpdatedAt: s.now()})
	return s.nextID
}

// SetPermission sets a user's permission on a repository ("admin", "maintain", "write", ...).
func (s *Server) SetPermission(repo, user, permission string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.permissions[repo+" "+user] = permission
}

// SetPullRequest sets what GET /repos/{owner}/{repo}/pulls/{n} answers ("owner/repo", n).
func (s *Server) SetPullRequest(repo string, number int, pr any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pulls[fmt.Sprintf("%s#%d", repo, number)] = pr
}

// Commit is what the fake knows of a commit beyond Git: the GitHub user its author email belongs
// to, whether GitHub verified its signature, and the pull requests it belongs to.
type Commit struct {
	AuthorLogin, CommitterLogin string
	Verified                    bool
	Pulls                       []CommitPull
}

// CommitPull is a pull request a commit belongs to.
type CommitPull struct {
	Number   int
	OpenedBy string // the pull request's author
	BaseRef  string
	Merged   bool
}

// SetCommit sets what GET /repos/{owner}/{repo}/commits/{sha} and .../commits/{sha}/pulls answer.
func (s *Server) SetCommit(repo, sha string, c Commit) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.commits[repo+" "+sha] = c
}

// exampleOf returns a copy of the description's example answer of r's operation: the object, or
// the first element of a list.
func (s *Server) exampleOf(r *http.Request) map[string]any {
	route, _, err := s.findRoute(r)
	if err != nil {
		return map[string]any{}
	}
	_, ex, _ := successExample(route.Operation)
	if list, ok := ex.([]any); ok && len(list) > 0 {
		ex = list[0]
	}
	b, _ := json.Marshal(ex) // a copy: the example belongs to the shared description
	var m map[string]any
	if json.Unmarshal(b, &m) != nil || m == nil {
		m = map[string]any{}
	}
	return m
}

func (s *Server) getCommit(w http.ResponseWriter, r *http.Request, op string, p map[string]string, _ map[string]any) {
	s.mu.Lock()
	c, ok := s.commits[repoKey(p)+" "+p["ref"]]
	s.mu.Unlock()
	if !ok {
		s.fail(w, op, http.StatusNotFound, "No commit found for SHA: %s", p["ref"])
		return
	}
	m := s.exampleOf(r)
	m["sha"] = p["ref"]
	for key, login := range map[string]string{"author": c.AuthorLogin, "committer": c.CommitterLogin} {
		if login == "" {
			m[key] = nil
		} else if a, ok := m[key].(map[string]any); ok {
			a["login"] = login
		}
	}
	if commit, ok := m["commit"].(map[string]any); ok {
		v, _ := commit["verification"].(map[string]any)
		if v == nil {
			v = map[string]any{}
		}
		v["verified"] = c.Verified
		v["reason"] = map[bool]string{true: "valid", false: "unsigned"}[c.Verified]
		commit["verification"] = v
	}
	s.answer(w, op, http.StatusOK, m)
}

func (s *Server) commitPulls(w http.ResponseWriter, r *http.Request, op string, p map[string]string, _ map[string]any) {
	s.mu.Lock()
	c := s.commits[repoKey(p)+" "+p["commit_sha"]]
	s.mu.Unlock()
	out := []any{}
	for _, cp := range c.Pulls {
		m := s.exampleOf(r)
		m["number"] = cp.Number
		if u, ok := m["user"].(map[string]any); ok {
			u["login"] = cp.OpenedBy
		}
		if b, ok := m["base"].(map[string]any); ok {
			b["ref"] = cp.BaseRef
		}
		m["merged_at"] = nil
		if cp.Merged {
			m["merged_at"], m["state"] = "2026-11-20T09:30:00Z", "closed"
		}
		out = append(out, m)
	}
	s.answer(w, op, http.StatusOK, out)
}

// Review is a pull request review as the fake keeps it: who, what (APPROVED, CHANGES_REQUESTED,
// COMMENTED, DISMISSED) and at which head commit.
type Review struct {
	User, State, CommitID string
}

// AddReview adds a review to a pull request ("owner/repo", n), as GET
// /repos/{owner}/{repo}/pulls/{n}/reviews lists them, oldest first.
func (s *Server) AddReview(repo string, number int, r Review) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := fmt.Sprintf("%s#%d", repo, number)
	s.reviews[k] = append(s.reviews[k], r)
}

// TimelineEvent is an event of an issue's or pull request's timeline as the fake keeps it: its
// kind ("head_ref_force_pushed", ...), who did it, the commit it names and when GitHub recorded it.
type TimelineEvent struct {
	Event, Actor, CommitID string
	CreatedAt              time.Time
}

// AddTimelineEvent adds an event to a pull request's timeline ("owner/repo", n), as GET
// /repos/{owner}/{repo}/issues/{n}/timeline lists them (oldest first, paginated as GitHub does);
// a pull request without any lists none.
func (s *Server) AddTimelineEvent(repo string, number int, e TimelineEvent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := fmt.Sprintf("%s#%d", repo, number)
	s.timelines[k] = append(s.timelines[k], e)
}

// listTimeline answers a page of a timeline: per_page (default 30, at most 100) events from page
// (default 1), with a Link header naming the next page when there is one.
func (s *Server) listTimeline(w http.ResponseWriter, r *http.Request, op string, p map[string]string, _ map[string]any) {
	n, _ := strconv.Atoi(p["issue_number"])
	s.mu.Lock()
	evs := append([]TimelineEvent(nil), s.timelines[fmt.Sprintf("%s#%d", repoKey(p), n)]...)
	s.mu.Unlock()
	per, page := 30, 1
	if v, err := strconv.Atoi(r.URL.Query().Get("per_page")); err == nil && v > 0 {
		per = min(v, 100)
	}
	if v, err := strconv.Atoi(r.URL.Query().Get("page")); err == nil && v > 0 {
		page = v
	}
	from := min((page-1)*per, len(evs))
	to := min(from+per, len(evs))
	out := []any{}
	for i, e := range evs[from:to] {
		var commitURL any
		if e.CommitID != "" {
			commitURL = fmt.Sprintf("https://api.github.com/repos/%s/commits/%s", repoKey(p), e.CommitID)
		}
		var commit any
		if e.CommitID != "" {
			commit = e.CommitID
		}
		out = append(out, map[string]any{"id": from + i + 1, "node_id": fmt.Sprintf("E_%d", from+i+1),
			"url":   fmt.Sprintf("https://api.github.com/repos/%s/issues/events/%d", repoKey(p), from+i+1),
			"actor": map[string]any{"login": e.Actor, "type": "User"}, "event": e.Event, "commit_id": commit, "commit_url": commitURL,
			"created_at": e.CreatedAt.UTC().Format(time.RFC3339), "performed_via_github_app": nil})
	}
	if to < len(evs) {
		next := *r.URL
		q := next.Query()
		q.Set("page", strconv.Itoa(page+1))
		q.Set("per_page", strconv.Itoa(per))
		next.RawQuery = q.Encode()
		w.Header().Set("Link", fmt.Sprintf(`<%s%s>; rel="next"`, s.URL, next.RequestURI()))
	}
	s.answer(w, op, http.StatusOK, out)
}

// SetInstallation says which installation of the App covers a repository ("owner/repo"), as
// GET /repos/{owner}/{repo}/installation answers; without it that call is a 404, as for a
// repository the App is not installed on.
func (s *Server) SetInstallation(repo string, id int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.installs[repo] = id
}

// SetRepository sets fields of what GET /repos/{owner}/{repo} answers (clone_url,
// default_branch, ...) over the description's example.
func (s *Server) SetRepository(repo string, fields map[string]any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.repos[repo] = fields
}

// SetTeamMember makes user an active member of org/team.
func (s *Server) SetTeamMember(org, team, user string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.members[org+"/"+team+" "+user] = true
}

// SetContent sets a file's content at a ref.
func (s *Server) SetContent(repo, ref, path string, data []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.contents[repo+" "+ref+" "+path] = data
}

// SetClock sets the fake's clock: token expiry and App JWT validation follow it, so tests can move
// time forward.
func (s *Server) SetClock(now func() time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = now
}

// SetTokenTTL sets the lifetime of installation tokens the fake issues.
func (s *Server) SetTokenTTL(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokenTTL = d
}

// Throttle makes the next n requests answer status (403 or 429) with a Retry-After header.
func (s *Server) Throttle(n, status int, retryAfter string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := 0; i < n; i++ {
		s.throttle = append(s.throttle, throttle{status, retryAfter})
	}
}

// Comments returns the comments on an issue or pull request ("owner/repo#n").
func (s *Server) Comments(issue string) []Comment {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Comment
	for _, c := range s.comments[issue] {
		out = append(out, *c)
	}
	return out
}

// CheckRuns returns the check runs of a repository.
func (s *Server) CheckRuns(repo string) []CheckRun {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []CheckRun
	for _, c := range s.checkRuns[repo] {
		out = append(out, *c)
	}
	return out
}

// Writes returns every recorded write, in order.
func (s *Server) Writes() []Write {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Write(nil), s.writes...)
}

// Calls returns the number of calls per "operationId status" (e.g. "checks/create 201"),
// "unknown 404" for requests outside the description, and "oauth/authorize STATUS" and
// "oauth/access-token STATUS" for the OAuth web flow's two github.com endpoints.
func (s *Server) Calls() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for k, v := range s.calls {
		out[k] = v
	}
	return out
}

// TotalBytes is the number of response body bytes served.
func (s *Server) TotalBytes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bytes
}

// TotalCalls is the number of requests served.
func (s *Server) TotalCalls() int {
	n := 0
	for _, v := range s.Calls() {
		n += v
	}
	return n
}

type errorBody struct {
	Message          string `json:"message"`
	DocumentationURL string `json:"documentation_url"`
}

// answer writes a JSON answer. Successful GETs carry an ETag, and a request whose If-None-Match
// names the current one is answered 304 with no body, as GitHub does (and GitHub does not count
// such answers against the rate limit).
func (s *Server) answer(w http.ResponseWriter, op string, status int, body any) {
	var buf []byte
	if body != nil {
		buf, _ = json.Marshal(body)
	}
	if status == http.StatusOK && w.Header().Get("X-Fake-Method") == http.MethodGet {
		etag := fmt.Sprintf(`"%x"`, sha256.Sum256(buf))
		w.Header().Set("ETag", etag)
		if w.Header().Get("X-Fake-If-None-Match") == etag {
			status, buf = http.StatusNotModified, nil
		}
	}
	w.Header().Del("X-Fake-Method")
	w.Header().Del("X-Fake-If-None-Match")
	s.mu.Lock()
	s.calls[op+" "+strconv.Itoa(status)]++
	s.bytes += len(buf)
	if status != http.StatusNotModified { // GitHub does not count 304s against the primary limit
		s.used++
	}
	used := s.used
	s.mu.Unlock()
	// GitHub's clock, as the fake's: callers read the time of an answer from it.
	s.mu.Lock()
	now := s.now()
	s.mu.Unlock()
	w.Header().Set("Date", now.UTC().Format(http.TimeFormat))
	w.Header().Set("X-RateLimit-Limit", "5000")
	w.Header().Set("X-RateLimit-Used", strconv.Itoa(used))
	w.Header().Set("X-RateLimit-Remaining", strconv.Itoa(max(5000-used, 0)))
	w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(time.Now().Add(time.Hour).Truncate(time.Hour).Unix(), 10))
	if buf != nil {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
	}
	w.WriteHeader(status)
	w.Write(buf)
}

func (s *Server) fail(w http.ResponseWriter, op string, status int, format string, args ...any) {
	s.answer(w, op, status, errorBody{Message: fmt.Sprintf(format, args...), DocumentationURL: "https://docs.github.com/rest"})
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	// The OAuth web flow is served by github.com, not the REST API, so it is not in the description.
	if s.serveOAuth(w, r) || s.serveManifestForm(w, r) {
		return
	}
	// answer reads these to decide on ETags; they never reach the client.
	w.Header().Set("X-Fake-Method", r.Method)
	w.Header().Set("X-Fake-If-None-Match", r.Header.Get("If-None-Match"))
	// GitHub Enterprise Server clients call /api/v3/...; serve both.
	r.URL.Path = strings.TrimPrefix(r.URL.Path, "/api/v3")
	route, params, err := s.findRoute(r)
	if err != nil {
		s.fail(w, "unknown", http.StatusNotFound, "%s %s is not in GitHub's API description", r.Method, r.URL.Path)
		return
	}
	op := route.Operation.OperationID
	body, err := io.ReadAll(r.Body)
	if err != nil {
		s.fail(w, op, http.StatusBadRequest, "read body: %v", err)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	in := &openapi3filter.RequestValidationInput{Request: r, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: func(context.Context, *openapi3filter.AuthenticationInput) error { return nil }}}
	if err := openapi3filter.ValidateRequest(r.Context(), in); err != nil {
		s.fail(w, op, http.StatusUnprocessableEntity, "%s %s does not match GitHub's description: %v", r.Method, r.URL.Path, err)
		return
	}
	s.mu.Lock()
	var th *throttle
	if len(s.throttle) > 0 {
		th = &s.throttle[0]
		s.throttle = s.throttle[1:]
	}
	s.mu.Unlock()
	if th != nil {
		w.Header().Set("Retry-After", th.retryAfter)
		s.fail(w, op, th.status, "You have exceeded a secondary rate limit.")
		return
	}
	var doc map[string]any
	if len(body) > 0 {
		_ = json.Unmarshal(body, &doc) // validated above
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		s.mu.Lock()
		s.writes = append(s.writes, Write{Method: r.Method, Path: r.URL.Path, Operation: op, Body: doc})
		s.mu.Unlock()
	}
	if op != "apps/create-installation-access-token" {
		if status, msg := s.authorised(r, op); status != 0 {
			s.fail(w, op, status, "%s", msg)
			return
		}
	}
	if h, ok := s.handlers()[op]; ok {
		h(w, r, op, params, doc)
		return
	}
	s.example(w, route, op)
}

// findRoute routes r. The contents API's {path} parameter spans several segments
// (contents/k8s/prod/web.yaml), which the router's one-segment parameters cannot match, so it is
// routed with one placeholder segment and the parameter restored afterwards.
func (s *Server) findRoute(r *http.Request) (*routers.Route, map[string]string, error) {
	parts := strings.SplitN(r.URL.Path, "/", 6) // "", "repos", owner, repo, "contents", path
	if len(parts) == 6 && parts[1] == "repos" && parts[4] == "contents" && strings.Contains(parts[5], "/") {
		alt := r.Clone(r.Context())
		alt.URL.Path = strings.Join(parts[:5], "/") + "/placeholder"
		alt.URL.RawPath = ""
		route, params, err := s.router.FindRoute(alt)
		if err == nil {
			params["path"] = parts[5]
		}
		return route, params, err
	}
	return s.router.FindRoute(r)
}

// authorised decides whether a request may reach its operation: status 0 if so, else the status
// and message to refuse it with. It accepts requests carrying an installation token the fake
// issued, or none at all (tests of unauthenticated calls), and any other Bearer value, because
// App JWTs are checked where they are served. A token it did not issue is refused.
//
// User access tokens from the OAuth web flow are accepted on GET /user only (403 elsewhere): the
// fake models them for signing users in, so a server that does the App's work with a signed-in
// user's token fails its tests instead of passing against powers the fake never modelled. As
// they are the fake's own format, an unknown or expired one is refused even as a Bearer value.
func (s *Server) authorised(r *http.Request, op string) (int, string) {
	auth := r.Header.Get("Authorization")
	if auth == "" {
		return 0, ""
	}
	if _, ok := s.userLogin(r); ok {
		if op == "users/get-authenticated" {
			return 0, ""
		}
		return http.StatusForbidden, "fakegithub accepts user access tokens on GET /user only; " + op + " needs an installation token"
	}
	tok := presentedToken(r)
	if strings.HasPrefix(tok, userTokenPrefix) {
		return http.StatusUnauthorized, "Bad credentials"
	}
	if strings.HasPrefix(auth, "Bearer ") {
		return 0, "" // App JWT endpoints are checked where they are served
	}
	if !s.isInstallationToken(tok) {
		return http.StatusUnauthorized, "Bad credentials"
	}
	return 0, ""
}

// presentedToken is the token of an "Authorization: token X" or "Authorization: Bearer X" header
// (GitHub takes both), or the whole header for any other scheme, which no token matches.
func presentedToken(r *http.Request) string {
	return strings.TrimPrefix(strings.TrimPrefix(r.Header.Get("Authorization"), "token "), "Bearer ")
}

func (s *Server) isInstallationToken(tok string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.tokens[tok]
	return ok
}

// example answers with the description's example for the operation's success response.
func (s *Server) example(w http.ResponseWriter, route *routers.Route, op string) {
	status, body, ok := successExample(route.Operation)
	if !ok {
		s.fail(w, op, http.StatusNotImplemented, "no success response described for %s", op)
		return
	}
	s.answer(w, op, status, body)
}

// successExample returns the operation's first success response and the description's example
// body for it: nil for a response without a JSON body, {} for one without an example. ok is false
// if the description has no success response for the operation. The body belongs to the shared
// description: copy it before changing it.
func successExample(operation *openapi3.Operation) (status int, body any, ok bool) {
	codes := operation.Responses.Map()
	var keys []string
	for k := range codes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !strings.HasPrefix(k, "2") {
			continue
		}
		status, _ := strconv.Atoi(k)
		resp := codes[k].Value
		if resp == nil {
			continue
		}
		mt := resp.Content.Get("application/json")
		if mt == nil {
			return status, nil, true
		}
		if mt.Example != nil {
			return status, mt.Example, true
		}
		var names []string
		for n := range mt.Examples {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			if ex := mt.Examples[n]; ex != nil && ex.Value != nil {
				return status, ex.Value.Value, true
			}
		}
		return status, map[string]any{}, true
	}
	return 0, nil, false
}

type handler func(w http.ResponseWriter, r *http.Request, op string, params map[string]string, body map[string]any)

func (s *Server) handlers() map[string]handler {
	return map[string]handler{
		"apps/create-installation-access-token":   s.createToken,
		"issues/list-comments":                    s.listComments,
		"issues/create-comment":                   s.createComment,
		"issues/update-comment":                   s.updateComment,
		"checks/create":                           s.createCheckRun,
		"checks/update":                           s.updateCheckRun,
		"checks/list-for-ref":                     s.listCheckRuns,
		"repos/get-collaborator-permission-level": s.permission,
		"repos/get-content":                       s.content,
		"pulls/list":                              s.listPulls,
		"pulls/create":                            s.createPull,
		"pulls/update":                            s.updatePull,
		"apps/get-repo-installation":              s.repoInstallation,
		"repos/get":                               s.repository,
		"pulls/get":                               s.pull,
		"pulls/list-reviews":                      s.listReviews,
		"issues/list-events-for-timeline":         s.listTimeline,
		"repos/get-commit":                        s.getCommit,
		"repos/list-pull-requests-associated-with-commit": s.commitPulls,
		"teams/get-membership-for-user-in-org":            s.membership,
		"users/get-authenticated":                         s.authenticatedUser,
		"apps/get-authenticated":                          s.authenticatedApp,
		"apps/create-from-manifest":                       s.convertManifest,
		"apps/list-installations":                         s.listInstallations,
		"apps/list-repos-accessible-to-installation":      s.installationRepos,
		"apps/get-webhook-config-for-app":                 s.hookConfig,
		"git/get-tree":                                    s.tree,
	}
}

func repoKey(p map[string]string) string { return p["owner"] + "/" + p["repo"] }

func (s *Server) createToken(w http.ResponseWriter, r *http.Request, op string, p map[string]string, _ map[string]any) {
	if !s.appJWT(w, r, op) {
		return
	}
	id, _ := strconv.ParseInt(p["installation_id"], 10, 64)
	s.mu.Lock()
	s.nextID++
	tok := fmt.Sprintf("ghs_fake%d_%d", id, s.nextID)
	s.tokens[tok] = id
	exp := s.now().Add(s.tokenTTL).UTC().Truncate(time.Second)
	s.mu.Unlock()
	s.answer(w, op, http.StatusCreated, map[string]any{"token": tok, "expires_at": exp.Format(time.RFC3339),
		"permissions": map[string]string{"checks": "write", "contents": "write", "pull_requests": "write"}, "repository_selection": "all"})
}

// appJWT checks the request carries a valid App JWT, as GitHub's App endpoints require, and
// answers 401 if not.
func (s *Server) appJWT(w http.ResponseWriter, r *http.Request, op string) bool {
	raw, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || s.AppPublicKey == nil {
		s.fail(w, op, http.StatusUnauthorized, "A JSON web token could not be decoded")
		return false
	}
	claims := jwt.RegisteredClaims{}
	s.mu.Lock()
	now := s.now
	s.mu.Unlock()
	_, err := jwt.ParseWithClaims(raw, &claims, func(*jwt.Token) (any, error) { return s.AppPublicKey, nil },
		jwt.WithValidMethods([]string{"RS256"}), jwt.WithIssuedAt(), jwt.WithExpirationRequired(), jwt.WithLeeway(30*time.Second),
		jwt.WithTimeFunc(now))
	if err != nil {
		s.fail(w, op, http.StatusUnauthorized, "'Expiration time' claim ('exp') or signature is invalid: %v", err)
		return false
	}
	if claims.Issuer != strconv.FormatInt(s.AppID, 10) {
		s.fail(w, op, http.StatusUnauthorized, "'Issuer' claim ('iss') must be the App ID %d, got %q", s.AppID, claims.Issuer)
		return false
	}
	if claims.ExpiresAt.Sub(claims.IssuedAt.Time) > 10*time.Minute+time.Second {
		s.fail(w, op, http.StatusUnauthorized, "'Expiration time' claim ('exp') is too far in the future")
		return false
	}
	return true
}

func (s *Server) commentJSON(r *http.Request, repo string, issue string, c *Comment) map[string]any {
	return map[string]any{"id": c.ID, "node_id": "IC_" + strconv.FormatInt(c.ID, 10), "body": c.Body,
		"url":      "http://" + r.Host + "/repos/" + repo + "/issues/comments/" + strconv.FormatInt(c.ID, 10),
		"html_url": "https://github.com/" + repo + "/pull/" + issue + "#issuecomment-" + strconv.FormatInt(c.ID, 10),
		"user":     map[string]any{"login": c.User, "type": userType(c.User)}, "created_at": c.UpdatedAt.Format(time.RFC3339),
		"updated_at": c.UpdatedAt.Format(time.RFC3339), "author_association": "NONE"}
}

func (s *Server) listComments(w http.ResponseWriter, r *http.Request, op string, p map[string]string, _ map[string]any) {
	key := repoKey(p) + "#" + p["issue_number"]
	s.mu.Lock()
	out := []map[string]any{}
	for _, c := range s.comments[key] {
		out = append(out, s.commentJSON(r, repoKey(p), p["issue_number"], c))
	}
	s.mu.Unlock()
	s.answer(w, op, http.StatusOK, out)
}

func (s *Server) createComment(w http.ResponseWriter, r *http.Request, op string, p map[string]string, body map[string]any) {
	key := repoKey(p) + "#" + p["issue_number"]
	s.mu.Lock()
	s.nextID++
	c := &Comment{ID: s.nextID, Body: fmt.Sprint(body["body"]), User: s.AppSlug + "[bot]", UpdatedAt: s.now()}
	s.comments[key] = append(s.comments[key], c)
	out := s.commentJSON(r, repoKey(p), p["issue_number"], c)
	s.mu.Unlock()
	s.answer(w, op, http.StatusCreated, out)
}

func (s *Server) updateComment(w http.ResponseWriter, r *http.Request, op string, p map[string]string, body map[string]any) {
	id, _ := strconv.ParseInt(p["comment_id"], 10, 64)
	var out map[string]any
	s.mu.Lock()
	for key, cs := range s.comments {
		if !strings.HasPrefix(key, repoKey(p)+"#") {
			continue
		}
		for _, c := range cs {
			if c.ID == id {
				c.Body, c.UpdatedAt = fmt.Sprint(body["body"]), s.now()
				out = s.commentJSON(r, repoKey(p), strings.TrimPrefix(key, repoKey(p)+"#"), c)
			}
		}
	}
	s.mu.Unlock()
	if out == nil {
		s.fail(w, op, http.StatusNotFound, "Not Found")
		return
	}
	s.answer(w, op, http.StatusOK, out)
}

func str(v any) string {
	if v == nil {
		return ""
	}
	return fmt.Sprint(v)
}

func checkRunJSON(c *CheckRun) map[string]any {
	return map[string]any{"id": c.ID, "html_url": fmt.Sprintf("https://github.example/runs/%d", c.ID), "name": c.Name, "head_sha": c.HeadSHA, "status": c.Status, "conclusion": nilIfEmpty(c.Conclusion),
		"external_id": c.ExternalID, "details_url": c.DetailsURL, "output": map[string]any{"title": c.Title, "summary": c.Summary}}
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func (s *Server) applyCheckRun(c *CheckRun, body map[string]any) {
	if v := str(body["status"]); v != "" {
		c.Status = v
	}
	if v := str(body["conclusion"]); v != "" {
		c.Conclusion, c.Status = v, "completed"
	}
	if v := str(body["external_id"]); v != "" {
		c.ExternalID = v
	}
	if v := str(body["details_url"]); v != "" {
		c.DetailsURL = v
	}
	if out, ok := body["output"].(map[string]any); ok {
		c.Title, c.Summary = str(out["title"]), str(out["summary"])
	}
}

func (s *Server) createCheckRun(w http.ResponseWriter, r *http.Request, op string, p map[string]string, body map[string]any) {
	s.mu.Lock()
	s.nextID++
	c := &CheckRun{ID: s.nextID, Name: str(body["name"]), HeadSHA: str(body["head_sha"]), Status: "queued"}
	s.applyCheckRun(c, body)
	s.checkRuns[repoKey(p)] = append(s.checkRuns[repoKey(p)], c)
	out := checkRunJSON(c)
	s.mu.Unlock()
	s.answer(w, op, http.StatusCreated, out)
}

func (s *Server) updateCheckRun(w http.ResponseWriter, r *http.Request, op string, p map[string]string, body map[string]any) {
	id, _ := strconv.ParseInt(p["check_run_id"], 10, 64)
	s.mu.Lock()
	for _, c := range s.checkRuns[repoKey(p)] {
		if c.ID == id {
			s.applyCheckRun(c, body)
			out := checkRunJSON(c)
			s.mu.Unlock()
			s.answer(w, op, http.StatusOK, out)
			return
		}
	}
	s.mu.Unlock()
	s.fail(w, op, http.StatusNotFound, "Not Found")
}

func (s *Server) listCheckRuns(w http.ResponseWriter, r *http.Request, op string, p map[string]string, _ map[string]any) {
	name := r.URL.Query().Get("check_name")
	s.mu.Lock()
	runs := []map[string]any{}
	for _, c := range s.checkRuns[repoKey(p)] {
		if c.HeadSHA == p["ref"] && (name == "" || c.Name == name) {
			runs = append(runs, checkRunJSON(c))
		}
	}
	s.mu.Unlock()
	s.answer(w, op, http.StatusOK, map[string]any{"total_count": len(runs), "check_runs": runs})
}

func (s *Server) permission(w http.ResponseWriter, r *http.Request, op string, p map[string]string, _ map[string]any) {
	s.mu.Lock()
	perm, ok := s.permissions[repoKey(p)+" "+p["username"]]
	s.mu.Unlock()
	if !ok {
		s.fail(w, op, http.StatusNotFound, "%s is not a user of %s", p["username"], repoKey(p))
		return
	}
	role := map[string]string{"admin": "admin", "maintain": "maintain", "write": "write", "triage": "triage", "read": "read"}[perm]
	legacy := map[string]string{"admin": "admin", "maintain": "write", "write": "write", "triage": "read", "read": "read"}[perm]
	s.answer(w, op, http.StatusOK, map[string]any{"permission": legacy, "role_name": role, "user": map[string]any{"login": p["username"]}})
}

func (s *Server) content(w http.ResponseWriter, r *http.Request, op string, p map[string]string, _ map[string]any) {
	ref := r.URL.Query().Get("ref")
	s.mu.Lock()
	data, ok := s.contents[repoKey(p)+" "+ref+" "+p["path"]]
	s.mu.Unlock()
	if !ok {
		s.fail(w, op, http.StatusNotFound, "Not Found")
		return
	}
	s.answer(w, op, http.StatusOK, map[string]any{"type": "file", "encoding": "base64", "name": filepath.Base(p["path"]),
		"path": p["path"], "size": len(data), "content": encodeBase64(data), "sha": fmt.Sprintf("%x", len(data))})
}

func (s *Server) pull(w http.ResponseWriter, r *http.Request, op string, p map[string]string, _ map[string]any) {
	s.mu.Lock()
	pr, ok := s.pulls[repoKey(p)+"#"+p["pull_number"]]
	s.mu.Unlock()
	if !ok {
		s.fail(w, op, http.StatusNotFound, "Not Found")
		return
	}
	s.answer(w, op, http.StatusOK, pr)
}

// listReviews answers with the pull request's reviews, each the description's example review with
// its user, state and commit replaced.
func (s *Server) listReviews(w http.ResponseWriter, r *http.Request, op string, p map[string]string, _ map[string]any) {
	route, _, err := s.findRoute(r)
	if err != nil {
		s.fail(w, op, http.StatusInternalServerError, "route: %v", err)
		return
	}
	_, ex, _ := successExample(route.Operation)
	var template map[string]any
	if list, ok := ex.([]any); ok && len(list) > 0 {
		template, _ = list[0].(map[string]any)
	}
	s.mu.Lock()
	reviews := append([]Review(nil), s.reviews[repoKey(p)+"#"+p["pull_number"]]...)
	s.mu.Unlock()
	out := []any{}
	for _, rv := range reviews {
		b, _ := json.Marshal(template) // a copy: the example belongs to the shared description
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		if m == nil {
			m = map[string]any{}
		}
		s.mu.Lock()
		s.nextID++
		m["id"] = s.nextID
		s.mu.Unlock()
		user, _ := m["user"].(map[string]any)
		if user == nil {
			user = map[string]any{}
		}
		user["login"] = rv.User
		m["user"], m["state"], m["commit_id"] = user, rv.State, rv.CommitID
		out = append(out, m)
	}
	s.answer(w, op, http.StatusOK, out)
}

func (s *Server) listPulls(w http.ResponseWriter, r *http.Request, op string, p map[string]string, _ map[string]any) {
	q := r.URL.Query()
	state := q.Get("state")
	if state == "" {
		state = "open"
	}
	s.mu.Lock()
	out := []any{}
	keys := []string{}
	for k := range s.pulls {
		if strings.HasPrefix(k, repoKey(p)+"#") {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		pr := s.pulls[k]
		if m, ok := pr.(map[string]any); ok { // pull requests the fake created can be filtered
			if st, _ := m["state"].(string); state != "all" && st != "" && st != state {
				continue
			}
			if h := q.Get("head"); h != "" {
				if head, _ := m["head"].(map[string]any); head == nil || head["label"] != h {
					continue
				}
			}
			if b := q.Get("base"); b != "" {
				if base, _ := m["base"].(map[string]any); base == nil || base["ref"] != b {
					continue
				}
			}
		}
		out = append(out, pr)
	}
	s.mu.Unlock()
	s.answer(w, op, http.StatusOK, out)
}

// createPull opens a pull request. Like GitHub it refuses a second open one from the same head
// into the same base (422).
func (s *Server) createPull(w http.ResponseWriter, r *http.Request, op string, p map[string]string, body map[string]any) {
	head, _ := body["head"].(string)
	base, _ := body["base"].(string)
	label := head
	if !strings.Contains(head, ":") {
		label = p["owner"] + ":" + head
	}
	s.mu.Lock()
	for k, pr := range s.pulls {
		m, ok := pr.(map[string]any)
		if !ok || !strings.HasPrefix(k, repoKey(p)+"#") || m["state"] != "open" {
			continue
		}
		if m["head"].(map[string]any)["label"] == label && m["base"].(map[string]any)["ref"] == base {
			s.mu.Unlock()
			s.fail(w, op, http.StatusUnprocessableEntity, "Validation Failed: A pull request already exists for %s.", label)
			return
		}
	}
	s.nextID++
	n := int(s.nextID % 100000)
	_, ref, _ := strings.Cut(label, ":")
	pr := map[string]any{
		"id": s.nextID, "number": n, "state": "open", "title": body["title"], "body": body["body"],
		"html_url": fmt.Sprintf("https://github.com/%s/pull/%d", repoKey(p), n),
		"head":     map[string]any{"ref": ref, "label": label},
		"base":     map[string]any{"ref": base, "label": p["owner"] + ":" + base},
		"user":     map[string]any{"login": s.AppSlug + "[bot]", "type": "Bot"},
	}
	s.pulls[fmt.Sprintf("%s#%d", repoKey(p), n)] = pr
	s.mu.Unlock()
	s.answer(w, op, http.StatusCreated, pr)
}

// updatePull changes the state, title or body of a pull request the fake holds as a map.
func (s *Server) updatePull(w http.ResponseWriter, r *http.Request, op string, p map[string]string, body map[string]any) {
	s.mu.Lock()
	pr, ok := s.pulls[repoKey(p)+"#"+p["pull_number"]].(map[string]any)
	if ok {
		for _, k := range []string{"state", "title", "body"} {
			if v, set := body[k]; set {
				pr[k] = v
			}
		}
	}
	s.mu.Unlock()
	if !ok {
		s.fail(w, op, http.StatusNotFound, "Not Found")
		return
	}
	s.answer(w, op, http.StatusOK, pr)
}

func (s *Server) repository(w http.ResponseWriter, r *http.Request, op string, p map[string]string, _ map[string]any) {
	s.mu.Lock()
	fields, ok := s.repos[repoKey(p)]
	s.mu.Unlock()
	if !ok {
		route, _, err := s.findRoute(r)
		if err != nil {
			s.fail(w, op, http.StatusNotFound, "Not Found")
			return
		}
		s.example(w, route, op)
		return
	}
	out := map[string]any{"id": 1, "name": p["repo"], "full_name": repoKey(p), "owner": map[string]any{"login": p["owner"]},
		"private": true, "default_branch": "main", "clone_url": "https://github.com/" + repoKey(p) + ".git"}
	for k, v := range fields {
		out[k] = v
	}
	s.answer(w, op, http.StatusOK, out)
}

// userType is GitHub's user type for a login: apps act as "<slug>[bot]".
func userType(login string) string {
	if strings.HasSuffix(login, "[bot]") {
		return "Bot"
	}
	return "User"
}

// authenticatedApp answers GET /app for a valid App JWT: the description's example App with the
// fake's AppID and AppSlug.
func (s *Server) authenticatedApp(w http.ResponseWriter, r *http.Request, op string, _ map[string]string, _ map[string]any) {
	if !s.appJWT(w, r, op) {
		return
	}
	route, _, err := s.findRoute(r)
	if err != nil {
		s.fail(w, op, http.StatusNotFound, "Not Found")
		return
	}
	_, example, _ := successExample(route.Operation)
	out := map[string]any{}
	if m, ok := example.(map[string]any); ok {
		for k, v := range m { // the example belongs to the shared description: copy it
			out[k] = v
		}
	}
	out["id"], out["slug"] = s.AppID, s.AppSlug
	s.answer(w, op, http.StatusOK, out)
}

func (s *Server) repoInstallation(w http.ResponseWriter, r *http.Request, op string, p map[string]string, _ map[string]any) {
	if !s.appJWT(w, r, op) {
		return
	}
	s.mu.Lock()
	id, ok := s.installs[repoKey(p)]
	s.mu.Unlock()
	if !ok {
		s.fail(w, op, http.StatusNotFound, "Not Found")
		return
	}
	s.answer(w, op, http.StatusOK, map[string]any{"id": id, "app_id": s.AppID, "target_type": "Organization",
		"account": map[string]any{"login": p["owner"]}, "repository_selection": "selected"})
}

func (s *Server) membership(w http.ResponseWriter, r *http.Request, op string, p map[string]string, _ map[string]any) {
	s.mu.Lock()
	ok := s.members[p["org"]+"/"+p["team_slug"]+" "+p["username"]]
	s.mu.Unlock()
	if !ok {
		s.fail(w, op, http.StatusNotFound, "Not Found")
		return
	}
	s.answer(w, op, http.StatusOK, map[string]any{"url": "https://api.github.com/teams/1/memberships/" + p["username"], "role": "member", "state": "active"})
}
