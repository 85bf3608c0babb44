package app

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/go-github/v60/github"

	"github.com/parleyhq/parley/app/inspect"
	"github.com/parleyhq/parley/app/internal/livestate"
	"github.com/parleyhq/parley/app/internal/repocache"
	"github.com/parleyhq/parley/app/internal/webauth"
	"github.com/parleyhq/parley/app/pages"
	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/reconcile"
	"github.com/parleyhq/parley/trailers/ledger"
)

// UIPrefix is where the details pages are served: /ui/OWNER/REPO (the index),
// /ui/OWNER/REPO/pull/N and /ui/OWNER/REPO/field?f=FIELD.
const UIPrefix = "/ui/"

// PullRequestPage is the path of a pull request's details page, the check run's details_url.
func PullRequestPage(fullName string, number int) string {
	return UIPrefix + fullName + "/pull/" + strconv.Itoa(number)
}

// FieldPage is the path of a field's details page.
func FieldPage(fullName string, f core.Field) string {
	return UIPrefix + fullName + "/field?f=" + url.QueryEscape(f.String())
}

// detailsGitHub is what the details pages ask GitHub: which installation covers a repository, and
// through it the repository and a person's permission on it.
type detailsGitHub interface {
	AppClient() (*github.Client, error)
	Client(installation int64) (*github.Client, error)
	Token(ctx context.Context, installation int64) (string, error)
}

// Details serves the details pages to people signed in with GitHub who may read the repository:
// anyone else gets the same 404 as for a repository that does not exist, so a private
// repository's name is never confirmed to them.
type Details struct {
	Auth       *webauth.Auth
	GitHub     detailsGitHub
	Repos      *repocache.Cache
	Live       *livestate.DB
	Drift      *Drift // nil: no drift state is shown
	PolicyPath string
	// AccessTTL is how long a person's permission on a repository is remembered; default 1 minute.
	AccessTTL time.Duration
	Now       func() time.Time
	Log       *slog.Logger

	mu     sync.Mutex
	access map[string]accessEntry // "login owner/repo" (lower case)
}

type accessEntry struct {
	installation int64 // 0: may not read
	until        time.Time
}

// indexLimit is how many fields a repository's index page decides verdicts for: each is an
// arbitration, and a generated repository can hold tens of thousands of fields.
const indexLimit = 500

// maxAccessEntries bounds the permission cache; past it, expired entries are dropped first.
const maxAccessEntries = 10000

// Register adds the pages to mux, behind sign-in.
func (d *Details) Register(mux *http.ServeMux) {
	mux.Handle("GET "+UIPrefix+"{owner}/{repo}", d.Auth.Require(http.HandlerFunc(d.index)))
	mux.Handle("GET "+UIPrefix+"{owner}/{repo}/pull/{number}", d.Auth.Require(http.HandlerFunc(d.pullRequest)))
	mux.Handle("GET "+UIPrefix+"{owner}/{repo}/field", d.Auth.Require(http.HandlerFunc(d.field)))
}

func (d *Details) now() time.Time {
	if d.Now != nil {
		return d.Now()
	}
	return time.Now()
}

func (d *Details) log() *slog.Logger {
	if d.Log != nil {
		return d.Log
	}
	return slog.New(slog.DiscardHandler)
}

// allowed checks that the signed-in person may read the repository the request names, and
// returns its full name and the App's installation on it; otherwise it answers 404 itself.
func (d *Details) allowed(w http.ResponseWriter, r *http.Request) (string, int64, bool) {
	login, _ := d.Auth.User(r) // Require let the request through: someone is signed in
	owner, repo := r.PathValue("owner"), r.PathValue("repo")
	full := owner + "/" + repo
	inst, err := d.canRead(r.Context(), login, owner, repo)
	if err != nil {
		d.log().Error("details: permission check failed", "repo", full, "user", login, "error", err.Error())
		http.Error(w, "GitHub could not be asked who may see this repository; try again shortly.", http.StatusBadGateway)
		return "", 0, false
	}
	if inst == 0 {
		notFound(w)
		return "", 0, false
	}
	return full, inst, true
}

func notFound(w http.ResponseWriter) {
	http.Error(w, "Not found.", http.StatusNotFound)
}

// canRead asks GitHub whether login may read owner/repo (its permission is at least read) and
// returns the App's installation on it; 0 when not, or when the App is not installed there.
// Answers are remembered for AccessTTL.
func (d *Details) canRead(ctx context.Context, login, owner, repo string) (int64, error) {
	key := strings.ToLower(login + " " + owner + "/" + repo)
	now := d.now()
	d.mu.Lock()
	if e, ok := d.access[key]; ok && now.Before(e.until) {
		d.mu.Unlock()
		return e.installation, nil
	}
	d.mu.Unlock()

	inst, err := d.check(ctx, login, owner, repo)
	if err != nil {
		return 0, err
	}
	ttl := d.AccessTTL
	if ttl <= 0 {
		ttl = time.Minute
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.access == nil {
		d.access = map[string]accessEntry{}
	}
	if len(d.access) >= maxAccessEntries {
		for k, e := range d.access {
			if !now.Before(e.until) {
				delete(d.access, k)
			}
		}
		if len(d.access) >= maxAccessEntries {
			clear(d.access)
		}
	}
	d.access[key] = accessEntry{installation: inst, until: now.Add(ttl)}
	return inst, nil
}

func (d *Details) check(ctx context.Context, login, owner, repo string) (int64, error) {
	appc, err := d.GitHub.AppClient()
	if err != nil {
		return 0, err
	}
	inst, resp, err := appc.Apps.FindRepositoryInstallation(ctx, owner, repo)
	if resp != nil && resp.StatusCode == http.StatusNotFound {
		return 0, nil // not installed there, or no such repository
	}
	if err != nil {
		return 0, fmt.Errorf("find the App's installation on %s/%s: %w", owner, repo, err)
	}
	gh, err := d.GitHub.Client(inst.GetID())
	if err != nil {
		return 0, err
	}
	perm, resp, err := gh.Repositories.GetPermissionLevel(ctx, owner, repo, login)
	if resp != nil && resp.StatusCode == http.StatusNotFound {
		return 0, nil // GitHub knows no such user
	}
	if err != nil {
		return 0, fmt.Errorf("%s's permission on %s/%s: %w", login, owner, repo, err)
	}
	switch perm.GetPermission() {
	case "admin", "maintain", "write", "triage", "read":
		return inst.GetID(), nil
	}
	return 0, nil
}

func (d *Details) pullRequest(w http.ResponseWriter, r *http.Request) {
	full, _, ok := d.allowed(w, r)
	if !ok {
		return
	}
	n, err := strconv.Atoi(r.PathValue("number"))
	if err != nil || n <= 0 {
		notFound(w)
		return
	}
	j, found, err := d.Live.LoadJudged(r.Context(), full, n)
	if err != nil {
		d.fail(w, full, err)
		return
	}
	if !found {
		http.Error(w, fmt.Sprintf("Parley has not judged %s#%d yet.", full, n), http.StatusNotFound)
		return
	}
	d.render(w, func(b *bytes.Buffer) error {
		return pages.RenderPullRequest(b, pages.PullRequest{Repository: full, Number: n, Title: j.Title, Head: j.Head, At: j.At, Verdicts: j.Verdicts},
			pages.Links{Index: UIPrefix + full, Field: func(f core.Field) string { return FieldPage(full, f) }})
	})
}

func (d *Details) field(w http.ResponseWriter, r *http.Request) {
	full, inst, ok := d.allowed(w, r)
	if !ok {
		return
	}
	f, err := core.ParseField(r.URL.Query().Get("f"))
	if err != nil {
		http.Error(w, "The f parameter must be a field address: "+err.Error(), http.StatusBadRequest)
		return
	}
	var page pages.Field
	err = d.withRepository(r.Context(), full, inst, func(src inspect.Source) error {
		var err error
		page, err = inspect.New(src).Field(f, d.now())
		return err
	})
	if err != nil {
		d.fail(w, full, err)
		return
	}
	d.render(w, func(b *bytes.Buffer) error {
		return pages.RenderField(b, page, pages.Links{Index: UIPrefix + full, Field: func(f core.Field) string { return FieldPage(full, f) }})
	})
}

func (d *Details) index(w http.ResponseWriter, r *http.Request) {
	full, inst, ok := d.allowed(w, r)
	if !ok {
		return
	}
	var idx pages.Index
	err := d.withRepository(r.Context(), full, inst, func(src inspect.Source) error {
		var err error
		idx, _, err = inspect.New(src).Index(core.FieldPattern{}, d.now(), indexLimit)
		return err
	})
	if err != nil {
		d.fail(w, full, err)
		return
	}
	d.render(w, func(b *bytes.Buffer) error {
		return pages.RenderIndex(b, idx, pages.Links{Field: func(f core.Field) string { return FieldPage(full, f) }})
	})
}

// errNoPolicy: the default branch has no policy (or an invalid one) to decide verdicts under.
var errNoPolicy = errors.New("no valid policy on the default branch")

// withRepository brings the repository's clone up to date and runs fn on its default branch:
// the ledger, the policy and the files, and the drift state when this process serves it.
func (d *Details) withRepository(ctx context.Context, full string, inst int64, fn func(inspect.Source) error) error {
	gh, err := d.GitHub.Client(inst)
	if err != nil {
		return err
	}
	owner, name, _ := strings.Cut(full, "/")
	repo, _, err := gh.Repositories.Get(ctx, owner, name)
	if err != nil {
		return fmt.Errorf("%s: %w", full, err)
	}
	token, err := d.GitHub.Token(ctx, inst)
	if err != nil {
		return fmt.Errorf("%s: installation token: %w", full, err)
	}
	dir, unlock, err := d.Repos.Sync(ctx, full, repo.GetCloneURL(), token)
	if err != nil {
		return fmt.Errorf("%s: %w", full, err)
	}
	defer unlock()
	branch := repo.GetDefaultBranch()
	pol, note, err := readPolicyAt(dir, branch, d.PolicyPath, nil)
	if err != nil {
		return fmt.Errorf("%s: %w", full, err)
	}
	if pol == nil {
		return fmt.Errorf("%w: %s", errNoPolicy, note)
	}
	led, err := reconcile.OpenLedger(dir, branch, repoPath(d.PolicyPath), ledger.Options{})
	if err != nil {
		return fmt.Errorf("%s: open ledger: %w", full, err)
	}
	defer led.Close()
	if _, err := led.Update(ctx, branch); err != nil {
		return fmt.Errorf("%s: update ledger of %s: %w", full, branch, err)
	}
	files, _, err := reconcile.ReadFiles(dir, "refs/heads/"+branch)
	if err != nil {
		return fmt.Errorf("%s: %w", full, err)
	}
	src := inspect.Source{Repository: full, Ledger: led, Policy: pol, Files: files}
	if d.Drift != nil {
		if st := d.Drift.stateOf(full); st != nil {
			src.Drift = st // the drift loop serves the repository here: its claims and verdicts too
		}
	}
	return fn(src)
}

func (d *Details) fail(w http.ResponseWriter, full string, err error) {
	if errors.Is(err, errNoPolicy) {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	d.log().Error("details page failed", "repo", full, "error", err.Error())
	http.Error(w, "This page could not be made; the server's log says why.", http.StatusInternalServerError)
}

// render renders a page in full before writing it, so an error never leaves half a page.
func (d *Details) render(w http.ResponseWriter, fn func(*bytes.Buffer) error) {
	var b bytes.Buffer
	if err := fn(&b); err != nil {
		d.log().Error("render a details page", "error", err.Error())
		http.Error(w, "This page could not be drawn.", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	// Nothing on the pages comes from elsewhere: a policy that says so stops anything injected.
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Referrer-Policy", "same-origin")
	w.Header().Set("Cache-Control", "private, no-store")
	w.Write(b.Bytes())
}
