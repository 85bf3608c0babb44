package ghclient

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-github/v60/github"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/parleyhq/parley/internal/fakegithub"
)

func TestConditionalGetsAreServedFromCache(t *testing.T) {
	gh := fakegithub.New(t)
	cache := &ETagCache{Base: gh.Client().Transport}
	c, _ := github.NewClient(&http.Client{Transport: cache}).WithEnterpriseURLs(gh.URL+"/api/v3/", gh.URL+"/api/uploads/")
	ctx := context.Background()
	body := "<!-- parley:sticky -->"
	if _, _, err := c.Issues.CreateComment(ctx, "acme", "infra", 1, &github.IssueComment{Body: &body}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		list, _, err := c.Issues.ListComments(ctx, "acme", "infra", 1, nil)
		if err != nil || len(list) != 1 || list[0].GetBody() != body {
			t.Fatalf("read %d: %v %v", i, list, err)
		}
	}
	if cache.Hits() != 2 || gh.Calls()["issues/list-comments 304"] != 2 || gh.Calls()["issues/list-comments 200"] != 1 {
		t.Fatalf("hits %d, calls %v: want one full answer then two free 304s", cache.Hits(), gh.Calls())
	}
	// A change invalidates: the next read gets the new representation.
	edited := "edited"
	list, _, _ := c.Issues.ListComments(ctx, "acme", "infra", 1, nil)
	if _, _, err := c.Issues.EditComment(ctx, "acme", "infra", list[0].GetID(), &github.IssueComment{Body: &edited}); err != nil {
		t.Fatal(err)
	}
	list, _, _ = c.Issues.ListComments(ctx, "acme", "infra", 1, nil)
	if list[0].GetBody() != "edited" {
		t.Errorf("stale body %q after an edit", list[0].GetBody())
	}
}

func TestRateLimitWaitsAsAsked(t *testing.T) {
	gh := fakegithub.New(t)
	var slept []time.Duration
	rl := &RateLimit{Base: gh.Client().Transport, Sleep: func(_ context.Context, d time.Duration) error { slept = append(slept, d); return nil }}
	gh.Throttle(2, http.StatusTooManyRequests, "7")
	resp, err := (&http.Client{Transport: rl}).Get(gh.URL + "/repos/acme/infra/pulls/1/files")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || len(slept) != 2 || slept[0] != 7*time.Second {
		t.Errorf("status %d after sleeping %v; want 200 after two 7 s waits", resp.StatusCode, slept)
	}
	// A wait longer than MaxWait is handed back to the caller instead of blocking a worker.
	slept = nil
	rl.MaxWait = 5 * time.Second
	gh.Throttle(1, http.StatusForbidden, "60")
	resp, _ = (&http.Client{Transport: rl}).Get(gh.URL + "/repos/acme/infra/pulls/1/files")
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || len(slept) != 0 {
		t.Errorf("status %d, slept %v; want the 403 returned at once", resp.StatusCode, slept)
	}
	// A 403 that is not rate limiting (no Retry-After, limit not exhausted) is not retried.
	if _, limited := waitFor(&http.Response{StatusCode: 403, Header: http.Header{}}, time.Now()); limited {
		t.Error("a permission 403 was taken for rate limiting")
	}
	reset := time.Now().Add(30 * time.Second)
	h := http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {strconv.FormatInt(reset.Unix(), 10)}}
	if d, limited := waitFor(&http.Response{StatusCode: 403, Header: h}, time.Now()); !limited || d < 25*time.Second || d > 32*time.Second {
		t.Errorf("exhausted primary limit: wait %v, %v", d, limited)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestLimitBoundsConcurrency(t *testing.T) {
	var inFlight, peak atomic.Int32
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		n := inFlight.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(5 * time.Millisecond)
		inFlight.Add(-1)
		return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader("{}")), Header: http.Header{}}, nil
	})
	l := NewLimit(base, 3)
	var wg sync.WaitGroup
	for i := 0; i < 30; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("GET", "http://x/", nil)
			resp, err := l.RoundTrip(req)
			if err == nil {
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	if p := peak.Load(); p > 3 || p < 2 {
		t.Errorf("peak concurrency %d, want at most 3 (and the limit used)", p)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	full := NewLimit(base, 1)
	full.sem <- struct{}{}
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://x/", nil)
	if _, err := full.RoundTrip(req); err == nil {
		t.Error("a cancelled request waited for a slot")
	}
}

// TestLimitIsReleasedByErrorAnswers: go-github reads an error answer's body but never closes it
// (it closes a copy), so a slot held until Close leaked on every 404, and once the installation's
// slots were gone every call waited until its context ended. Two "not found" answers through a
// limit of one slot must both come back, and a third call must still get through.
func TestLimitIsReleasedByErrorAnswers(t *testing.T) {
	gh := fakegithub.New(t)
	gh.SetInstallation("acme/infra", 5)
	c, _ := github.NewClient(&http.Client{Transport: NewLimit(gh.Client().Transport, 1)}).WithEnterpriseURLs(gh.URL+"/api/v3/", gh.URL+"/api/uploads/")
	// A guard, not a timing: without the fix the second call waits for a slot until this ends.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i, sha := range []string{"0123456789abcdef0123456789abcdef01234567", "89abcdef0123456789abcdef0123456789abcdef"} {
		_, resp, err := c.Repositories.GetCommit(ctx, "acme", "infra", sha, nil)
		if resp == nil || resp.StatusCode != http.StatusNotFound {
			t.Fatalf("call %d: %v (status %v), want GitHub's 404", i+1, err, resp)
		}
	}
	if _, resp, err := c.Teams.GetTeamMembershipBySlug(ctx, "acme", "sre", "carol"); resp == nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("after two 404s, a third call: %v (status %v), want an answer", err, resp)
	}
}

func TestRouteAndCounter(t *testing.T) {
	for in, want := range map[string]string{
		"/api/v3/repos/acme/infra/issues/12/comments":                                   "/repos/{owner}/{repo}/issues/{n}/comments",
		"/repos/acme/infra/commits/0123456789abcdef0123456789abcdef01234567/check-runs": "/repos/{owner}/{repo}/commits/{sha}/check-runs",
		"/repos/acme/infra/contents/k8s/prod/web.yaml":                                  "/repos/{owner}/{repo}/contents/{path}",
		"/app/installations/42/access_tokens":                                           "/app/installations/{n}/access_tokens",
	} {
		if got := Route(in); got != want {
			t.Errorf("Route(%s) = %s, want %s", in, got, want)
		}
	}
	gh := fakegithub.New(t)
	reg := prometheus.NewRegistry()
	cnt, err := NewCounter(gh.Client().Transport, reg)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		resp, _ := (&http.Client{Transport: cnt}).Get(gh.URL + "/repos/acme/infra/pulls/3/files")
		resp.Body.Close()
	}
	if n := testutil.ToFloat64(cnt.calls.WithLabelValues("GET /repos/{owner}/{repo}/pulls/{n}/files", "200")); n != 2 {
		t.Errorf("counted %v calls", n)
	}
	ctx, n := WithCallCount(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", gh.URL+"/repos/acme/infra/pulls/3/files", nil)
	resp, _ := cnt.Wrap(gh.Client().Transport).RoundTrip(req)
	resp.Body.Close()
	if n.Load() != 1 {
		t.Errorf("per-event count %d, want 1", n.Load())
	}
	if _, err := NewCounter(nil, reg); err == nil {
		t.Error("registering twice must fail")
	}
}
