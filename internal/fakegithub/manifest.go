package fakegithub

// Registering a GitHub App from a manifest
// (https://docs.github.com/apps/sharing-github-apps/registering-a-github-app-from-a-manifest):
// the user's browser POSTs a form with the manifest to github.com/settings/apps/new (or an
// organisation's), GitHub creates the App and redirects to the manifest's redirect_url with a
// one-time code, and the server exchanges the code at POST /app-manifests/{code}/conversions for
// the App's ID, private key and webhook secret. The form is a github.com page, served here before
// the description's router; the conversion is a REST operation, routed and validated by it.
//
// Also the App-level reads `parley doctor` makes: its installations with their permissions and
// events, each installation's repositories, and the App's webhook configuration.

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

const (
	manifestFormOp  = "web/settings/apps/new"
	manifestCodeTTL = time.Hour // GitHub: the code must be exchanged within an hour
)

// manifestCode is what a manifest code was issued for.
type manifestCode struct {
	manifest map[string]any
	owner    string
	expires  time.Time
}

// Grants are an installation's permissions and subscribed events, as GET /app/installations
// answers them.
type Grants struct {
	Permissions map[string]string
	Events      []string
}

// SetGrants sets what installation id was granted. An installation without grants answers no
// permissions and no events.
func (s *Server) SetGrants(id int64, g Grants) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.grants == nil {
		s.grants = map[int64]Grants{}
	}
	s.grants[id] = g
}

// HookConfig returns the App's webhook URL and secret as the manifest registration set them.
func (s *Server) HookConfig() (hookURL, secret string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hookURL, s.webhookSecret
}

var manifestFormPath = regexp.MustCompile(`^/(settings|organizations/[A-Za-z0-9-]+/settings)/apps/new$`)

// serveManifestForm is github.com's "create a GitHub App from a manifest" page with the user
// confirming at once: it checks the manifest as GitHub does where Parley could get it wrong, then
// redirects to redirect_url with a code and the state it was given.
func (s *Server) serveManifestForm(w http.ResponseWriter, r *http.Request) bool {
	m := manifestFormPath.FindStringSubmatch(r.URL.Path)
	if m == nil {
		return false
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		s.oauthText(w, manifestFormOp, http.StatusMethodNotAllowed, "POST the manifest form to "+r.URL.Path)
		return true
	}
	if err := r.ParseForm(); err != nil {
		s.oauthText(w, manifestFormOp, http.StatusBadRequest, "form: "+err.Error())
		return true
	}
	var manifest map[string]any
	if err := json.Unmarshal([]byte(r.PostForm.Get("manifest")), &manifest); err != nil {
		s.oauthText(w, manifestFormOp, http.StatusBadRequest, "manifest is not a JSON object: "+err.Error())
		return true
	}
	if msg := checkManifest(manifest); msg != "" {
		s.oauthText(w, manifestFormOp, http.StatusUnprocessableEntity, msg)
		return true
	}
	owner := strings.TrimSuffix(strings.TrimPrefix(m[1], "organizations/"), "/settings")
	if m[1] == "settings" {
		owner = s.signedIn
		if owner == "" {
			owner = "octocat"
		}
	}
	code := make([]byte, 10)
	rand.Read(code)
	s.mu.Lock()
	if s.manifestCodes == nil {
		s.manifestCodes = map[string]manifestCode{}
	}
	c := hex.EncodeToString(code)
	s.manifestCodes[c] = manifestCode{manifest: manifest, owner: owner, expires: s.now().Add(manifestCodeTTL)}
	s.mu.Unlock()
	to, _ := url.Parse(manifest["redirect_url"].(string)) // checked by checkManifest
	q := to.Query()
	q.Set("code", c)
	if st := r.URL.Query().Get("state"); st != "" {
		q.Set("state", st)
	}
	to.RawQuery = q.Encode()
	s.count(manifestFormOp, http.StatusFound)
	http.Redirect(w, r, to.String(), http.StatusFound)
	return true
}

// checkManifest returns what is wrong with a manifest, or "". GitHub requires url and, for an
// active webhook, hook_attributes.url; permission levels are read or write (or admin for a few).
func checkManifest(m map[string]any) string {
	if s, _ := m["url"].(string); !absoluteHTTP(s) {
		return "manifest: url must be an absolute http(s) URL"
	}
	if s, _ := m["redirect_url"].(string); !absoluteHTTP(s) {
		return "manifest: redirect_url must be an absolute http(s) URL (this fake needs it to send the code back)"
	}
	if hook, ok := m["hook_attributes"].(map[string]any); ok {
		if active, _ := hook["active"].(bool); active || hook["active"] == nil {
			if s, _ := hook["url"].(string); !absoluteHTTP(s) {
				return "manifest: hook_attributes.url must be an absolute http(s) URL for an active webhook"
			}
		}
	}
	perms, _ := m["default_permissions"].(map[string]any)
	for k, v := range perms {
		if l, _ := v.(string); l != "read" && l != "write" && l != "admin" {
			return fmt.Sprintf("manifest: default_permissions.%s = %v: want read or write", k, v)
		}
	}
	return ""
}

func absoluteHTTP(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// convertManifest exchanges a manifest code once: the fake becomes that App (its ID, slug, public
// key, webhook URL and secret), and the answer carries the private key and secrets.
func (s *Server) convertManifest(w http.ResponseWriter, r *http.Request, op string, p map[string]string, _ map[string]any) {
	s.mu.Lock()
	c, ok := s.manifestCodes[p["code"]]
	delete(s.manifestCodes, p["code"])
	now := s.now()
	s.mu.Unlock()
	if !ok || now.After(c.expires) {
		s.fail(w, op, http.StatusNotFound, "Not Found")
		return
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		s.fail(w, op, http.StatusInternalServerError, "generate key: %v", err)
		return
	}
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	secret := make([]byte, 20)
	rand.Read(secret)
	name, _ := c.manifest["name"].(string)
	slug := strings.Trim(regexp.MustCompile(`[^a-z0-9]+`).ReplaceAllString(strings.ToLower(name), "-"), "-")
	hookURL := ""
	if hook, ok := c.manifest["hook_attributes"].(map[string]any); ok {
		hookURL, _ = hook["url"].(string)
	}
	s.mu.Lock()
	s.nextID++
	id := s.nextID
	s.AppID, s.AppSlug, s.AppPublicKey = id, slug, &key.PublicKey
	s.hookURL, s.webhookSecret = hookURL, hex.EncodeToString(secret)
	s.mu.Unlock()
	stamp := now.UTC().Format(time.RFC3339)
	s.answer(w, op, http.StatusCreated, map[string]any{
		"id": id, "slug": slug, "node_id": "A_" + strconv.FormatInt(id, 10), "name": name,
		"owner":       map[string]any{"login": c.owner, "id": 1, "type": "User"},
		"description": c.manifest["description"], "external_url": c.manifest["url"],
		"html_url": "https://github.com/apps/" + slug, "created_at": stamp, "updated_at": stamp,
		"permissions": c.manifest["default_permissions"], "events": c.manifest["default_events"],
		"client_id": "Iv1." + hex.EncodeToString(secret[:8]), "client_secret": hex.EncodeToString(secret),
		"webhook_secret": s.webhookSecret, "pem": string(pemKey),
	})
}

// listInstallations answers GET /app/installations: one installation per ID SetInstallation
// gave, with its grants.
func (s *Server) listInstallations(w http.ResponseWriter, r *http.Request, op string, _ map[string]string, _ map[string]any) {
	if !s.appJWT(w, r, op) {
		return
	}
	s.mu.Lock()
	owners := map[int64]string{}
	for repo, id := range s.installs {
		owners[id], _, _ = strings.Cut(repo, "/")
	}
	ids := make([]int64, 0, len(owners))
	for id := range owners {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	out := []any{}
	for _, id := range ids {
		g := s.grants[id]
		perms := map[string]any{}
		for k, v := range g.Permissions {
			perms[k] = v
		}
		events := append([]string{}, g.Events...)
		out = append(out, map[string]any{"id": id, "app_id": s.AppID, "app_slug": s.AppSlug, "target_type": "Organization",
			"account": map[string]any{"login": owners[id]}, "repository_selection": "selected",
			"html_url":    fmt.Sprintf("https://github.com/organizations/%s/settings/installations/%d", owners[id], id),
			"permissions": perms, "events": events})
	}
	s.mu.Unlock()
	s.answer(w, op, http.StatusOK, out)
}

// installationRepos answers GET /installation/repositories for an installation token: the
// repositories SetInstallation put in that installation.
func (s *Server) installationRepos(w http.ResponseWriter, r *http.Request, op string, _ map[string]string, _ map[string]any) {
	s.mu.Lock()
	id, ok := s.tokens[presentedToken(r)]
	var repos []any
	if ok {
		var names []string
		for repo, in := range s.installs {
			if in == id {
				names = append(names, repo)
			}
		}
		slices.Sort(names)
		for _, name := range names {
			owner, short, _ := strings.Cut(name, "/")
			repo := map[string]any{"id": 1, "name": short, "full_name": name, "owner": map[string]any{"login": owner},
				"private": true, "default_branch": "main"}
			for k, v := range s.repos[name] {
				repo[k] = v
			}
			repos = append(repos, repo)
		}
	}
	s.mu.Unlock()
	if !ok {
		s.fail(w, op, http.StatusUnauthorized, "Bad credentials")
		return
	}
	s.answer(w, op, http.StatusOK, map[string]any{"total_count": len(repos), "repositories": repos})
}

// hookConfig answers GET /app/hook/config. GitHub never returns the secret itself: it answers
// "********" when one is set.
func (s *Server) hookConfig(w http.ResponseWriter, r *http.Request, op string, _ map[string]string, _ map[string]any) {
	if !s.appJWT(w, r, op) {
		return
	}
	s.mu.Lock()
	out := map[string]any{"url": s.hookURL, "content_type": "json", "insecure_ssl": "0"}
	if s.webhookSecret != "" {
		out["secret"] = "********"
	}
	s.mu.Unlock()
	s.answer(w, op, http.StatusOK, out)
}

// tree answers GET /repos/{owner}/{repo}/git/trees/{tree_sha} with the files SetContent put at
// that ref (a branch name or commit, as the test set them), as blobs; recursive or not, every file
// is listed, with the directories they imply.
func (s *Server) tree(w http.ResponseWriter, r *http.Request, op string, p map[string]string, _ map[string]any) {
	prefix := repoKey(p) + " " + p["tree_sha"] + " "
	s.mu.Lock()
	var paths []string
	for k := range s.contents {
		if rest, ok := strings.CutPrefix(k, prefix); ok {
			paths = append(paths, rest)
		}
	}
	s.mu.Unlock()
	if len(paths) == 0 {
		s.fail(w, op, http.StatusNotFound, "Not Found")
		return
	}
	slices.Sort(paths)
	dirs := map[string]bool{}
	var entries []any
	for _, path := range paths {
		for d := path; strings.Contains(d, "/"); {
			d = d[:strings.LastIndex(d, "/")]
			if !dirs[d] {
				dirs[d] = true
				entries = append(entries, map[string]any{"path": d, "mode": "040000", "type": "tree", "sha": fmt.Sprintf("%040x", len(dirs))})
			}
		}
		entries = append(entries, map[string]any{"path": path, "mode": "100644", "type": "blob", "sha": fmt.Sprintf("%040x", len(entries)+1000)})
	}
	s.answer(w, op, http.StatusOK, map[string]any{"sha": fmt.Sprintf("%040x", 1), "url": "http://" + r.Host + r.URL.Path, "tree": entries, "truncated": false})
}
