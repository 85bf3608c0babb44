package app

// Registering Parley's GitHub App in one step, with GitHub's manifest flow
// (https://docs.github.com/apps/sharing-github-apps/registering-a-github-app-from-a-manifest):
// the /setup page POSTs app.yml's manifest to GitHub, GitHub creates the App and sends the browser
// back to /setup with a one-time code, and /setup exchanges the code for the App's ID, private
// key and webhook secret and writes them to the App directory (config.AppDir), where serve and
// the chart's Secret read them. `parley serve` offers it while no App is configured; `parley app
// create` runs the same handler on localhost.

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/go-github/v60/github"

	"github.com/parleyhq/parley/app/config"
	"github.com/parleyhq/parley/webhooks"
)

// SetupPath is where the manifest flow starts and where GitHub sends the browser back
// (app.yml's redirect_url).
const SetupPath = "/setup"

// Manifest is a GitHub App manifest, the JSON the registration form posts.
type Manifest struct {
	Name               string            `json:"name"`
	URL                string            `json:"url"`
	Description        string            `json:"description,omitempty"`
	HookAttributes     HookAttributes    `json:"hook_attributes"`
	RedirectURL        string            `json:"redirect_url"`
	CallbackURLs       []string          `json:"callback_urls,omitempty"`
	Public             bool              `json:"public"`
	DefaultPermissions map[string]string `json:"default_permissions"`
	DefaultEvents      []string          `json:"default_events"`
}

// JSON is the manifest as the form posts it.
func (m Manifest) JSON() string {
	b, _ := json.Marshal(m) // strings, a bool and a map of strings: always encodes
	return string(b)
}

// HookAttributes is the manifest's webhook.
type HookAttributes struct {
	URL    string `json:"url"`
	Active bool   `json:"active"`
}

// ParleyManifest is app.yml's manifest (a test keeps them the same) for a server reached at
// publicURL, sending the browser back to redirectURL. The sign-in callback (the details pages'
// /auth/callback) is registered too, so turning the pages on later needs no change to the App.
func ParleyManifest(publicURL, redirectURL string) Manifest {
	base := strings.TrimSuffix(publicURL, "/")
	return Manifest{
		Name:        "Parley",
		URL:         "https://github.com/parleyhq/parley",
		Description: "Decides whose change to an infrastructure field wins (Git, the HPA, a cost optimizer, an on-call engineer, an agent) and explains why, on every pull request.",
		HookAttributes: HookAttributes{
			URL:    base + webhooks.GitHubPath,
			Active: true,
		},
		RedirectURL:  redirectURL,
		CallbackURLs: []string{base + "/auth/callback"},
		Public:       false,
		DefaultPermissions: map[string]string{
			"checks": "write", "contents": "write", "members": "read", "metadata": "read", "pull_requests": "write",
		},
		DefaultEvents: []string{"check_run", "check_suite", "issue_comment", "pull_request", "pull_request_review", "push"},
	}
}

// WebURL is github.com's address for a REST API base URL: https://github.com for
// https://api.github.com/, https://HOST for GitHub Enterprise Server's https://HOST/api/v3/, and
// the URL itself otherwise (a test's fake serves both at one address).
func WebURL(apiURL string) string {
	u, err := url.Parse(apiURL)
	if err != nil {
		return strings.TrimSuffix(apiURL, "/")
	}
	if u.Host == "api.github.com" {
		return "https://github.com"
	}
	u.Path = strings.TrimSuffix(strings.TrimSuffix(u.Path, "/"), "/api/v3")
	return strings.TrimSuffix(u.String(), "/")
}

// Credentials are what the manifest flow gives back.
type Credentials struct {
	AppID         int64
	Slug, HTMLURL string
	PEM           string
	WebhookSecret string
}

// Setup serves the manifest flow at SetupPath. Whoever completes it decides which App serve
// acts as, so it is guarded twice: the form is served only to a request carrying Token (printed
// in serve's log, never derived from anything a visitor can see), and the code is exchanged only
// with a state the form issued (single use, an hour). Once one App is written Setup answers 410
// to everything: it never replaces credentials, and WriteCredentials refuses existing files.
type Setup struct {
	Token     string // the one-time setup token; empty refuses every form request
	APIURL    string // GitHub's REST API base URL (config.GitHubURL)
	Org       string // register under this organisation instead of the signed-in user
	PublicURL string // where GitHub reaches serve (webhooks); "" = the origin the form was opened at
	Dir       string // the App directory the credentials are written to
	// Done, if set, is called once with the credentials written.
	Done func(Credentials)

	mu     sync.Mutex
	states map[string]time.Time // state -> expiry
	done   bool
}

// ServeHTTP runs the flow: GET without code serves the form, GET with code and state finishes it.
func (s *Setup) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		http.Error(w, "use GET", http.StatusMethodNotAllowed)
		return
	}
	s.mu.Lock()
	done := s.done
	s.mu.Unlock()
	if done {
		http.Error(w, "the GitHub App is registered: /setup never replaces it (delete the App directory's files by hand to start over)", http.StatusGone)
		return
	}
	q := r.URL.Query()
	if q.Has("code") {
		s.finish(w, r, q.Get("code"), q.Get("state"))
		return
	}
	if s.Token == "" || subtle.ConstantTimeCompare([]byte(q.Get("token")), []byte(s.Token)) != 1 {
		http.Error(w, "open the /setup address with the token parley printed in its log (?token=...)", http.StatusForbidden)
		return
	}
	state := randomHex(16)
	s.mu.Lock()
	if s.states == nil {
		s.states = map[string]time.Time{}
	}
	now := time.Now()
	for k, exp := range s.states { // keep the map bounded by the hour
		if now.After(exp) {
			delete(s.states, k)
		}
	}
	s.states[state] = now.Add(time.Hour)
	s.mu.Unlock()

	origin := s.PublicURL
	if origin == "" {
		origin = requestOrigin(r)
	}
	m := ParleyManifest(origin, requestOrigin(r)+SetupPath)
	action := WebURL(s.APIURL) + "/settings/apps/new"
	if s.Org != "" {
		action = WebURL(s.APIURL) + "/organizations/" + url.PathEscape(s.Org) + "/settings/apps/new"
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer") // the token is in this page's address
	if err := setupForm.Execute(w, map[string]any{"Action": action + "?state=" + state, "Manifest": m.JSON(), "M": m}); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}

// finish exchanges the code GitHub sent back and writes the App's credentials.
func (s *Setup) finish(w http.ResponseWriter, r *http.Request, code, state string) {
	s.mu.Lock()
	exp, ok := s.states[state]
	delete(s.states, state)
	s.mu.Unlock()
	if !ok || time.Now().After(exp) {
		http.Error(w, "unknown or expired state: start again from the /setup address in parley's log", http.StatusBadRequest)
		return
	}
	creds, err := CompleteManifest(r.Context(), s.APIURL, code)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	s.mu.Lock()
	if s.done { // two forms finished at once: the first one's App stays
		s.mu.Unlock()
		http.Error(w, "another registration finished first; delete the App "+creds.HTMLURL+" on GitHub", http.StatusConflict)
		return
	}
	err = WriteCredentials(s.Dir, creds)
	s.done = err == nil
	s.mu.Unlock()
	if err != nil {
		http.Error(w, fmt.Sprintf("GitHub registered App %d (%s) but its credentials were not written: %v", creds.AppID, creds.HTMLURL, err), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	setupDone.Execute(w, map[string]any{"C": creds, "Dir": s.Dir, "Install": creds.HTMLURL + "/installations/new"})
	if s.Done != nil {
		s.Done(creds)
	}
}

// CompleteManifest exchanges a manifest code at POST /app-manifests/{code}/conversions. The call
// needs no authentication: the code is the credential, good once and for an hour.
func CompleteManifest(ctx context.Context, apiURL, code string) (Credentials, error) {
	gh, err := github.NewClient(nil).WithEnterpriseURLs(apiURL, apiURL)
	if err != nil {
		return Credentials{}, fmt.Errorf("github_url %s: %w", apiURL, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c, _, err := gh.Apps.CompleteAppManifest(ctx, code)
	if err != nil {
		return Credentials{}, fmt.Errorf("exchange the manifest code with GitHub (codes are good once, for an hour): %w", err)
	}
	if c.GetID() == 0 || c.GetPEM() == "" || c.GetWebhookSecret() == "" {
		return Credentials{}, fmt.Errorf("GitHub's answer for App %q lacks its ID, key or webhook secret", c.GetSlug())
	}
	return Credentials{AppID: c.GetID(), Slug: c.GetSlug(), HTMLURL: c.GetHTMLURL(), PEM: c.GetPEM(), WebhookSecret: c.GetWebhookSecret()}, nil
}

// WriteCredentials writes the App's ID, key and webhook secret to dir (created 0700 if missing)
// as the files config.AppDir reads, each 0600. It overwrites nothing: if any of the files exists
// it writes none, and a failure part-way removes what it wrote.
func WriteCredentials(dir string, c Credentials) error {
	if dir == "" {
		return errors.New("no App directory to write the credentials to (app_dir, PARLEY_APP_DIR or --dir)")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("App directory: %w", err)
	}
	files := []struct{ name, data string }{
		{config.AppIDFile, strconv.FormatInt(c.AppID, 10) + "\n"},
		{config.PrivateKeyFileName, c.PEM},
		{config.WebhookSecretsFile, c.WebhookSecret},
	}
	for _, f := range files {
		if _, err := os.Lstat(filepath.Join(dir, f.name)); err == nil {
			return fmt.Errorf("%s exists: an App is already registered there, and it is never overwritten", filepath.Join(dir, f.name))
		}
	}
	var written []string
	for _, f := range files {
		p := filepath.Join(dir, f.name)
		err := writeNew(p, f.data)
		if err != nil {
			for _, w := range written {
				os.Remove(w)
			}
			return err
		}
		written = append(written, p)
	}
	return nil
}

func writeNew(path, data string) error {
	fh, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := fh.WriteString(data); err != nil {
		fh.Close()
		os.Remove(path)
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := fh.Close(); err != nil {
		os.Remove(path)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// NewSetupToken returns a fresh one-time setup token.
func NewSetupToken() string { return randomHex(16) }

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b) // never fails (crypto/rand since Go 1.24)
	return hex.EncodeToString(b)
}

// requestOrigin is the scheme and host the browser used: https behind a proxy that says so.
func requestOrigin(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https" {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

var setupForm = template.Must(template.New("setup").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Register Parley's GitHub App</title></head>
<body>
<h1>Register Parley's GitHub App</h1>
<p>GitHub will create an App named <b>{{.M.Name}}</b> sending webhooks to <code>{{.M.HookAttributes.URL}}</code>
with these permissions: {{range $k, $v := .M.DefaultPermissions}}<code>{{$k}}: {{$v}}</code> {{end}}
and these events: {{range .M.DefaultEvents}}<code>{{.}}</code> {{end}}.
You can rename it on GitHub's page; then GitHub sends you back here and Parley writes its credentials.</p>
<form id="register" action="{{.Action}}" method="post">
<input type="hidden" name="manifest" value="{{.Manifest}}">
<button type="submit">Create the GitHub App</button>
</form>
</body></html>
`))

var setupDone = template.Must(template.New("done").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Parley's GitHub App is registered</title></head>
<body>
<h1>GitHub App {{.C.Slug}} (ID {{.C.AppID}}) is registered</h1>
<p>Its ID, private key and webhook secret are in <code>{{.Dir}}</code> (app-id, private-key.pem, webhook-secrets).</p>
<ol>
<li>Install it on the repositories Parley should judge: <a href="{{.Install}}">{{.Install}}</a></li>
<li>On Kubernetes, make the chart's Secret from the directory:
<code>kubectl create secret generic parley-github-app --from-file={{.Dir}}</code>
and set <code>github.appID={{.C.AppID}}</code>.</li>
<li>Check the install: <code>parley doctor</code> with the same configuration as serve.</li>
</ol>
</body></html>
`))
