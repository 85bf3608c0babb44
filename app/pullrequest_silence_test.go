package app

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/app/report"
	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/internal/fakegithub"
	"github.com/parleyhq/parley/internal/gittest"
	"github.com/parleyhq/parley/webhooks/store"
)

// TestPullRequestDeclaringNeverBeatsSilence is issue 33's attack through the App: under the demo
// policy, during the peak-sales freeze, a pull request by a GitHub user no actor names raises
// prod/web's CPU request with Intent: availability. The verdict the App publishes is the freeze's
// deferral, the same as for the pull request without the trailer, and the comment says the
// declaration was not counted.
func TestPullRequestDeclaringNeverBeatsSilence(t *testing.T) {
	const web = `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: prod}
spec:
  template:
    spec:
      containers:
        - name: web
          resources:
            requests:
              cpu: 750m
`
	cpu := core.K8sField("apps", "Deployment", "prod", "web", "/spec/template/spec/containers/0/resources/requests/cpu")
	for _, tc := range []struct{ name, trailer string }{
		{"declared", "\nIntent: availability\n"},
		{"silent", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			r := gittest.New(t, dir).As("Dana Okafor", "dana@parley.example")
			r.Env = append(r.Env, "GIT_AUTHOR_DATE=2026-11-20T10:00:00Z", "GIT_COMMITTER_DATE=2026-11-20T10:00:00Z")
			pol, err := os.ReadFile(filepath.Join("..", "internal", "demo", "policy.hcl"))
			if err != nil {
				t.Fatal(err)
			}
			write := func(p, s string) {
				os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755)
				os.WriteFile(filepath.Join(dir, p), []byte(s), 0o644)
			}
			r.Run("init", "-q", "-b", "main")
			write(".parley/policy.hcl", string(pol))
			write("k8s/prod/web.yaml", web)
			r.Run("add", ".")
			r.Run("commit", "-q", "-m", "Size the web Deployment\n\nIntent: performance\n")
			base := r.Run("rev-parse", "HEAD")
			m := r.As("Mallory", "mallory@evil.example")
			m.Run("checkout", "-q", "-b", "more-cpu")
			write("k8s/prod/web.yaml", strings.Replace(web, "cpu: 750m", "cpu: 1500m", 1))
			m.Run("commit", "-q", "-am", "More CPU for the sale\n"+tc.trailer)
			head := m.Run("rev-parse", "HEAD")
			m.Run("update-ref", "refs/pull/7/head", head)
			m.Run("checkout", "-q", "main")

			h, gh := handler(t)
			h.Now = func() time.Time { return time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC) }
			gh.SetCommit("acme/infra", head, fakegithub.Commit{AuthorLogin: "mallory", CommitterLogin: "mallory", Verified: true})
			body := example(t, "pull_request", "opened", func(ev map[string]any) {
				pointAt(ev, dir)
				ev["action"], ev["number"] = "opened", 7
				pr := ev["pull_request"].(map[string]any)
				pr["number"], pr["title"], pr["body"] = 7, "More CPU for the sale", ""
				pr["head"].(map[string]any)["sha"] = head
				pr["base"].(map[string]any)["sha"] = base
				pr["user"].(map[string]any)["login"] = "mallory"
			})
			if err := h.Handle(context.Background(), store.Delivery{ID: "d-" + tc.name, Event: "pull_request", Body: body}); err != nil {
				t.Fatal(err)
			}
			comments := gh.Comments("acme/infra#7")
			if len(comments) != 1 {
				t.Fatalf("comments %+v", comments)
			}
			doc, err := report.Extract(comments[0].Body)
			if err != nil {
				t.Fatal(err)
			}
			var v *core.Verdict
			for i := range doc.Verdicts {
				if doc.Verdicts[i].Field == cpu {
					v = &doc.Verdicts[i]
				}
			}
			if v == nil || v.Decision != core.DecisionEnforceGit || v.Rule != "freeze.peak-sales" || v.Winner == nil || v.Winner.Value.String() != `"750m"` {
				t.Fatalf("the stranger's CPU raise is not deferred by the freeze: %+v\n%s", v, comments[0].Body)
			}
			notCounted := strings.Contains(comments[0].Body, "declares intent availability, which is not one an unknown actor may declare")
			if notCounted != (tc.trailer != "") {
				t.Errorf("the comment says the declaration was not counted: %v\n%s", notCounted, comments[0].Body)
			}
		})
	}
}
