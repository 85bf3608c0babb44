package fakegithub

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestManifestRegistration: the form refuses what GitHub refuses, redirects with the code and the
// state it was given, and a code converts once.
func TestManifestRegistration(t *testing.T) {
	s := New(t)
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	post := func(path, manifest string) *http.Response {
		t.Helper()
		resp, err := noFollow.PostForm(s.URL+path, url.Values{"manifest": {manifest}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	good := `{"name":"Parley Test","url":"https://example.com","redirect_url":"https://parley.example.com/setup",` +
		`"hook_attributes":{"url":"https://parley.example.com/webhooks/github","active":true},"default_permissions":{"checks":"write"},"default_events":["push"]}`
	for _, bad := range []string{`not json`, `{"name":"x","redirect_url":"https://a/setup"}`, `{"name":"x","url":"https://a","redirect_url":"/setup"}`,
		`{"name":"x","url":"https://a","redirect_url":"https://a/s","hook_attributes":{"url":""}}`,
		`{"name":"x","url":"https://a","redirect_url":"https://a/s","hook_attributes":{"active":false},"default_permissions":{"checks":"all"}}`} {
		if resp := post("/settings/apps/new", bad); resp.StatusCode < 400 {
			t.Errorf("manifest %s: %d, want a refusal", bad, resp.StatusCode)
		}
	}
	resp := post("/organizations/acme/settings/apps/new?state=st8", good)
	to, err := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusFound || err != nil || to.Host != "parley.example.com" || to.Query().Get("state") != "st8" || to.Query().Get("code") == "" {
		t.Fatalf("redirect: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	c := client(t, s)
	app, _, err := c.Apps.CompleteAppManifest(context.Background(), to.Query().Get("code"))
	if err != nil || app.GetID() != s.AppID || app.GetSlug() != "parley-test" || !strings.Contains(app.GetPEM(), "PRIVATE KEY") || app.GetOwner().GetLogin() != "acme" {
		t.Fatalf("conversion: %+v %v", app, err)
	}
	if _, secret := s.HookConfig(); secret != app.GetWebhookSecret() {
		t.Errorf("the fake's webhook secret %q is not the one handed out", secret)
	}
	if _, resp, err := c.Apps.CompleteAppManifest(context.Background(), to.Query().Get("code")); err == nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("a code converted twice: %v", err)
	}
}
