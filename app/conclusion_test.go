package app

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parleyhq/parley/internal/gittest"
	"github.com/parleyhq/parley/webhooks/store"
)

// conclusionPolicy makes the web Deployment's replicas immutable and freezes every field on the
// day the handler judges (2026-11-20).
const conclusionPolicy = `field "fixed" {
  match     = ["k8s:apps/Deployment/*/*#/spec/replicas"]
  immutable = true
}
freeze "launch" {
  start = "2026-11-20T00:00:00Z"
  end   = "2026-11-21T00:00:00Z"
}
`

const plainWeb = `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: prod}
spec:
  replicas: 3
  template:
    spec:
      containers: [{name: web, image: "web:1.0"}]
`

// TestPullRequestCheckPassesOnlyWhenItsChangeMayHappen: the App's check run for issue 33's
// attacks. A pull request whose image change a freeze defers concluded success, since the verdict
// (enforce-git) was not a veto, hold or escalation; it is action_required and says until when. A
// pull request changing the immutable replicas beside a document nested 101 levels deep
// concluded neutral, the whole file "not judged"; the veto now stands (failure) and the document
// is named.
func TestPullRequestCheckPassesOnlyWhenItsChangeMayHappen(t *testing.T) {
	cases := []struct {
		name, web, conclusion string
		want                  []string
	}{
		{"deferred by a freeze", strings.Replace(plainWeb, "web:1.0", "web:1.1", 1), "action_required",
			[]string{`deferred by freeze\.launch until 2026\-11\-21T00\:00\:00Z`}},
		{"a veto beside an unreadable document", strings.Replace(plainWeb, "replicas: 3", "replicas: 5", 1) + "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: deep, namespace: prod}\ndata: " +
			strings.Repeat("{a: ", 101) + "x" + strings.Repeat("}", 101) + "\n", "failure",
			[]string{"❌ vetoed", `Problem: k8s/prod/web\.yaml\: the document at line 9 is not judged`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			r := gittest.New(t, dir).As("Dana", "dana@parley.example")
			r.Env = append(r.Env, "GIT_AUTHOR_DATE=2026-11-19T10:00:00Z", "GIT_COMMITTER_DATE=2026-11-19T10:00:00Z")
			write := func(p, s string) {
				os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755)
				if err := os.WriteFile(filepath.Join(dir, p), []byte(s), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			r.Run("init", "-q", "-b", "main")
			write(".parley/policy.hcl", conclusionPolicy)
			write("k8s/prod/web.yaml", plainWeb)
			r.Run("add", ".")
			r.Run("commit", "-q", "-m", "Baseline")
			r.Run("checkout", "-q", "-b", "change")
			write("k8s/prod/web.yaml", c.web)
			r.Run("commit", "-q", "-am", "Change web")
			r.Run("update-ref", "refs/pull/7/head", "HEAD")
			r.Run("checkout", "-q", "main")

			h, gh := handler(t)
			if err := h.Handle(context.Background(), store.Delivery{ID: "d", Event: "pull_request",
				Body: prEvent(t, dir, r.Run("rev-parse", "main"), r.Run("rev-parse", "refs/pull/7/head"), "opened")}); err != nil {
				t.Fatal(err)
			}
			runs := gh.CheckRuns("acme/infra")
			if len(runs) != 1 || runs[0].Conclusion != c.conclusion {
				t.Fatalf("check runs %+v, want one concluding %s", runs, c.conclusion)
			}
			for _, w := range c.want {
				if !strings.Contains(runs[0].Summary, w) {
					t.Errorf("the check run's summary lacks %q:\n%s", w, runs[0].Summary)
				}
			}
		})
	}
}
