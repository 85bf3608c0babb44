package app

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/webhooks"
)

// pageBrowser is a person's browser: it follows redirects itself and keeps cookies for the
// server and GitHub alike (Go's cookie jar sends no Secure cookie over http; a browser does, to
// localhost).
type pageBrowser struct {
	t       *testing.T
	cookies map[string]map[string]string // host -> name -> value
}

func newPageBrowser(t *testing.T) *pageBrowser {
	return &pageBrowser{t: t, cookies: map[string]map[string]string{}}
}

// open gets u, following redirects, and returns the final status, URL and body.
func (b *pageBrowser) open(u string) (int, string, string) {
	b.t.Helper()
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for range 10 {
		req, _ := http.NewRequest(http.MethodGet, u, nil)
		for k, v := range b.cookies[req.URL.Host] {
			req.AddCookie(&http.Cookie{Name: k, Value: v})
		}
		resp, err := c.Do(req)
		if err != nil {
			b.t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if b.cookies[req.URL.Host] == nil {
			b.cookies[req.URL.Host] = map[string]string{}
		}
		for _, ck := range resp.Cookies() {
			if ck.MaxAge < 0 {
				delete(b.cookies[req.URL.Host], ck.Name)
			} else {
				b.cookies[req.URL.Host][ck.Name] = ck.Value
			}
		}
		if resp.StatusCode != http.StatusFound && resp.StatusCode != http.StatusSeeOther {
			return resp.StatusCode, u, string(body)
		}
		next, err := req.URL.Parse(resp.Header.Get("Location"))
		if err != nil {
			b.t.Fatal(err)
		}
		u = next.String()
	}
	b.t.Fatal("too many redirects")
	return 0, "", ""
}

// TestDetailsPagesBehindSignIn: parley serve with the details pages on. A pull request judged
// through its webhook links its page from the check run; a person who may read the repository
// signs in with GitHub and sees it, and the field pages it links; a signed-in person without
// access, and anyone asking after a repository the App is not on, get the same 404; nobody sees a
// page without signing in.
func TestDetailsPagesBehindSignIn(t *testing.T) {
	dir, git := remote(t)
	gh, _, pemKey := fakeApp(t)
	gh.SetOAuthApp("Iv1.parley", "oauth-secret")
	gh.SetInstallation("acme/infra", 77)
	gh.SetRepository("acme/infra", map[string]any{"clone_url": dir, "default_branch": "main", "private": true})
	gh.SetPermission("acme/infra", "alice", "read")

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	public := fmt.Sprintf("http://localhost:%d", port)
	env := map[string]string{"PARLEY_APP_ID": "99", "PARLEY_PRIVATE_KEY": string(pemKey), "PARLEY_WEBHOOK_SECRETS": "hook",
		"PARLEY_GITHUB_URL": gh.URL + "/api/v3/", "PARLEY_STORE": t.TempDir() + "/parley.db", "PARLEY_LISTEN": fmt.Sprintf("127.0.0.1:%d", port),
		"PARLEY_PUBLIC_URL": public, "PARLEY_OAUTH_CLIENT_ID": "Iv1.parley", "PARLEY_OAUTH_CLIENT_SECRET": "oauth-secret"}
	runServe(t, env)

	// The pull request's webhook: judged, its check run links the page.
	body := prEvent(t, dir, git("rev-parse", "main"), git("rev-parse", "refs/pull/7/head"), "opened")
	secret, _ := webhooks.NewSecret("hook")
	req, _ := http.NewRequest(http.MethodPost, public+webhooks.GitHubPath, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(webhooks.HeaderEvent, "pull_request")
	req.Header.Set(webhooks.HeaderDelivery, "8b1d6d2e-0000-4000-8000-000000000007")
	req.Header.Set(webhooks.HeaderSignature, webhooks.Sign(secret, body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("webhook: %v %v", resp, err)
	}
	resp.Body.Close()
	deadline := time.Now().Add(30 * time.Second)
	for len(gh.CheckRuns("acme/infra")) == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	runs := gh.CheckRuns("acme/infra")
	if len(runs) != 1 || runs[0].DetailsURL != public+"/ui/acme/infra/pull/7" {
		t.Fatalf("check runs %+v: want one linking %s/ui/acme/infra/pull/7", runs, public)
	}

	// Nobody signed in to Parley: the page sends them to sign in with GitHub first.
	gh.SignIn("")
	code, at, _ := newPageBrowser(t).open(runs[0].DetailsURL)
	if code == http.StatusOK || !strings.Contains(at, "/login/oauth/authorize") {
		t.Fatalf("without signing in: %d at %s", code, at)
	}

	// Alice may read the repository: she signs in and sees the pull request, its field and the index.
	gh.SignIn("alice")
	alice := newPageBrowser(t)
	code, at, page := alice.open(runs[0].DetailsURL)
	if code != http.StatusOK || at != runs[0].DetailsURL || !strings.Contains(page, "Pull request #7") || !strings.Contains(page, "desired_capacity") {
		t.Fatalf("alice: %d at %s\n%s", code, at, page)
	}
	fieldURL := public + FieldPage("acme/infra", mustField(t, "tf:infra/kafka//aws_autoscaling_group.consumer#/desired_capacity"))
	if !strings.Contains(page, `href="`+strings.ReplaceAll(FieldPage("acme/infra", mustField(t, "tf:infra/kafka//aws_autoscaling_group.consumer#/desired_capacity")), "&", "&amp;")+`"`) {
		t.Errorf("the pull request page does not link its field:\n%s", page)
	}
	code, _, page = alice.open(fieldURL)
	if code != http.StatusOK || !strings.Contains(page, `role="img"`) || !strings.Contains(page, "class=\"claim git\"") {
		t.Fatalf("alice's field page: %d\n%s", code, page)
	}
	if code, _, page := alice.open(public + "/ui/acme/infra"); code != http.StatusOK || !strings.Contains(page, "desired_capacity") {
		t.Fatalf("alice's index: %d\n%s", code, page)
	}
	// A repository the App is not installed on is not found, for her too.
	if code, _, _ := alice.open(public + "/ui/acme/elsewhere/pull/1"); code != http.StatusNotFound {
		t.Errorf("a repository without the App: %d", code)
	}

	// Bob signs in with GitHub too, but may not read the private repository: 404 everywhere, the
	// same answer as for a repository that does not exist.
	gh.SignIn("bob")
	bob := newPageBrowser(t)
	for _, u := range []string{runs[0].DetailsURL, fieldURL, public + "/ui/acme/infra"} {
		code, _, page := bob.open(u)
		if code != http.StatusNotFound || strings.Contains(page, "desired_capacity") || strings.Contains(page, "Pull request") {
			t.Errorf("bob at %s: %d\n%s", u, code, page)
		}
	}
}

func mustField(t *testing.T, s string) core.Field {
	t.Helper()
	f, err := core.ParseField(s)
	if err != nil {
		t.Fatal(err)
	}
	return f
}
