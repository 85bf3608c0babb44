package review

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/app/report"
	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/internal/gittest"
)

const web = `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: prod}
spec:
  replicas: 3
  template:
    spec:
      containers: [{name: web, image: "ghcr.io/acme/web:1.4.2"}]
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: web, namespace: prod}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  minReplicas: 3
  maxReplicas: 20
`

const kafka = `resource "aws_autoscaling_group" "consumer" {
  name             = "kafka-consumer"
  min_size         = 4
  max_size         = 16
  desired_capacity = 6
}
`

// repo builds a real repository with the git CLI: main holds the baseline and the policy, branch
// pr holds the pull request's commits.
func repo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	pol, err := os.ReadFile(filepath.Join("..", "..", "internal", "demo", "policy.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	git := func(env []string, args ...string) {
		t.Helper()
		r := gittest.New(t, dir)
		r.Env = env
		r.Run(args...)
	}
	write := func(p, s string) {
		t.Helper()
		os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755)
		if err := os.WriteFile(filepath.Join(dir, p), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	as := func(name, email, when string) []string {
		return []string{"GIT_AUTHOR_NAME=" + name, "GIT_AUTHOR_EMAIL=" + email, "GIT_COMMITTER_NAME=" + name,
			"GIT_COMMITTER_EMAIL=" + email, "GIT_AUTHOR_DATE=" + when, "GIT_COMMITTER_DATE=" + when}
	}
	git(nil, "init", "-q", "-b", "main")
	write("k8s/prod/web.yaml", web)
	write("infra/kafka/main.tf", kafka)
	write(".parley/policy.hcl", string(pol))
	git(nil, "add", ".")
	git(as("Dana", "dana@parley.example", "2026-11-01T09:00:00Z"), "commit", "-q", "-m", "Baseline\n\nIntent: consistency\n")
	git(nil, "checkout", "-q", "-b", "pr")
	write("k8s/prod/web.yaml", strings.Replace(web, "replicas: 3", "replicas: 2", 1))
	write("infra/kafka/main.tf", strings.Replace(kafka, "desired_capacity = 6", "desired_capacity = 20", 1))
	git(as("Cost Bot", "cost-optimizer@parley.example", "2026-11-20T10:00:00Z"), "commit", "-q", "-am",
		"Right-size web and the consumers\n\nIntent: cost\nMotivation: budget\nMotivation: vibes\n")
	return dir
}

func TestEvaluatePullRequest(t *testing.T) {
	dir := repo(t)
	src, err := OpenGitSource(dir, "main", "pr")
	if err != nil {
		t.Fatal(err)
	}
	led, pol := mainLedgerAndPolicy(t, dir, src)
	now := time.Date(2026, 11, 20, 10, 5, 0, 0, time.UTC)
	pr := PullRequest{Number: 7, BaseSHA: src.BaseSHA(), HeadSHA: src.HeadSHA(), Title: "Right-size",
		Body: "Monthly budget review.\n\nIntent: cost\n", Labels: []string{"team/platform"},
		Author: core.Identity{Source: core.SourceGitHubUser, ID: "cost-optimizer[bot]"}, Updated: now}
	res, err := Evaluate(context.Background(), pr, src, pol, led, nil, now)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]core.Verdict{}
	for _, v := range res.Verdicts {
		got[v.Field.String()] = v
	}
	if len(got) != 2 {
		t.Fatalf("want verdicts on replicas and desired_capacity, got %v", res.Verdicts)
	}
	dc := got["tf:infra/kafka//aws_autoscaling_group.consumer#/desired_capacity"]
	if dc.Decision != core.DecisionVeto {
		t.Errorf("desired_capacity 20 above max_size 16: want veto, got %s\n%s", dc.Decision, report.Explanation(dc))
	}
	rep := got["k8s:apps/Deployment/prod/web#/spec/replicas"]
	if rep.Winner != nil && rep.Winner.Evidence.PR == 7 {
		t.Errorf("the HPA owns replicas; the pull request must not win them:\n%s", report.Explanation(rep))
	}
	if res.Declaration.Intent != core.IntentCost || res.Declaration.Motivation.Kind != "budget" {
		t.Errorf("declaration %+v", res.Declaration)
	}
	if len(res.Problems) != 1 || !strings.Contains(res.Problems[0], `unknown motivation "vibes"`) {
		t.Errorf("problems %v: the malformed trailer must be reported with its commit", res.Problems)
	}
	for _, v := range res.Verdicts {
		t.Logf("%s: %s by %s\n%s", v.Field, v.Decision, v.Rule, report.Explanation(v))
	}
	if c := res.Conclusion(); c != "failure" {
		t.Errorf("conclusion %s, want failure for a veto", c)
	}
}

func TestLabelsOverrideBodyAndCommits(t *testing.T) {
	res := &Result{}
	d, _ := declare(PullRequest{Title: "T", Body: "text\n\nIntent: cost\nMotivation: budget\n", Labels: []string{"intent/security", "motivation/cve"}},
		[]Commit{{SHA: "a1", Message: "x\n\nIntent: availability\n"}, {SHA: "b2", Message: "y\n\nIntent: performance\n"}}, res)
	if d.Intent != core.IntentSecurity || d.Motivation.Kind != "cve" {
		t.Errorf("labels must win: %+v", d)
	}
	if len(res.Problems) != 1 || !strings.Contains(res.Problems[0], "different intents") {
		t.Errorf("disagreeing commits must be reported: %v", res.Problems)
	}
}
