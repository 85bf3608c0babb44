package fakegithub

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-github/v60/github"
)

func client(t *testing.T, s *Server) *github.Client {
	t.Helper()
	c, err := github.NewClient(s.Client()).WithEnterpriseURLs(s.URL+"/api/v3/", s.URL+"/api/uploads/")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestRefusesWhatGitHubDoesNotHave(t *testing.T) {
	s := New(t)
	cases := []struct {
		method, path, body string
		want               int
	}{
		{"GET", "/repos/o/r/definitely-not-an-endpoint", "", http.StatusNotFound},
		{"DELETE", "/repos/o/r/check-runs/1", "", http.StatusNotFound},                          // no such method on that path
		{"POST", "/repos/o/r/check-runs", `{"head_sha":"abc"}`, http.StatusUnprocessableEntity}, // name is required
		{"POST", "/repos/o/r/check-runs", `{"name":"parley","head_sha":"abc","status":"bogus"}`, http.StatusUnprocessableEntity},
		{"POST", "/repos/o/r/issues/1/comments", `{"body": 42}`, http.StatusUnprocessableEntity},
	}
	for _, c := range cases {
		req, _ := http.NewRequest(c.method, s.URL+c.path, strings.NewReader(c.body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := s.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s %s %s: %d, want %d", c.method, c.path, c.body, resp.StatusCode, c.want)
		}
	}
	if s.Calls()["unknown 404"] != 2 || s.Calls()["checks/create 422"] != 2 {
		t.Errorf("calls %v", s.Calls())
	}
}

func TestStateThroughGoGitHub(t *testing.T) {
	s := New(t)
	gh := client(t, s)
	ctx := context.Background()

	c, _, err := gh.Issues.CreateComment(ctx, "acme", "infra", 7, &github.IssueComment{Body: github.String("<!-- parley:sticky -->\nfirst")})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := gh.Issues.EditComment(ctx, "acme", "infra", c.GetID(), &github.IssueComment{Body: github.String("<!-- parley:sticky -->\nsecond")}); err != nil {
		t.Fatal(err)
	}
	list, _, err := gh.Issues.ListComments(ctx, "acme", "infra", 7, nil)
	if err != nil || len(list) != 1 || !strings.HasSuffix(list[0].GetBody(), "second") {
		t.Fatalf("comments %v, %v", list, err)
	}

	run, _, err := gh.Checks.CreateCheckRun(ctx, "acme", "infra", github.CreateCheckRunOptions{Name: "parley", HeadSHA: "abc123", Status: github.String("in_progress")})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := gh.Checks.UpdateCheckRun(ctx, "acme", "infra", run.GetID(), github.UpdateCheckRunOptions{Name: "parley",
		Conclusion: github.String("failure"), Output: &github.CheckRunOutput{Title: github.String("1 veto"), Summary: github.String("table")}}); err != nil {
		t.Fatal(err)
	}
	runs, _, err := gh.Checks.ListCheckRunsForRef(ctx, "acme", "infra", "abc123", &github.ListCheckRunsOptions{CheckName: github.String("parley")})
	if err != nil || runs.GetTotal() != 1 || runs.CheckRuns[0].GetConclusion() != "failure" || runs.CheckRuns[0].GetOutput().GetTitle() != "1 veto" {
		t.Fatalf("check runs %+v, %v", runs, err)
	}

	s.SetPermission("acme/infra", "dana", "maintain")
	perm, _, err := gh.Repositories.GetPermissionLevel(ctx, "acme", "infra", "dana")
	if err != nil || perm.GetPermission() != "write" {
		t.Fatalf("permission %+v, %v", perm, err)
	}
	if _, resp, err := gh.Repositories.GetPermissionLevel(ctx, "acme", "infra", "mallory"); err == nil || resp.StatusCode != 404 {
		t.Errorf("unknown user: %v", err)
	}

	s.SetContent("acme/infra", "main", ".parley/policy.hcl", []byte("intent \"cost\" { rank = 1 }\n"))
	fc, _, _, err := gh.Repositories.GetContents(ctx, "acme", "infra", ".parley/policy.hcl", &github.RepositoryContentGetOptions{Ref: "main"})
	if err != nil {
		t.Fatal(err)
	}
	if text, _ := fc.GetContent(); !strings.Contains(text, "rank = 1") {
		t.Errorf("content %q", text)
	}

	// Operations without state answer GitHub's own example.
	files, _, err := gh.PullRequests.ListFiles(ctx, "acme", "infra", 7, nil)
	if err != nil || len(files) == 0 || files[0].GetFilename() == "" {
		t.Fatalf("example files %v, %v", files, err)
	}
	if n := len(s.Writes()); n != 4 {
		t.Errorf("recorded %d writes, want 4 (comment, edit, check run, update)", n)
	}
}

func TestThrottle(t *testing.T) {
	s := New(t)
	s.Throttle(1, http.StatusTooManyRequests, "3")
	resp, err := s.Client().Get(s.URL + "/repos/o/r/pulls/1/files")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "3" {
		t.Errorf("throttled answer %d %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	resp, _ = s.Client().Get(s.URL + "/repos/o/r/pulls/1/files")
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("after the throttle: %d", resp.StatusCode)
	}
}
