package main

import (
	"bytes"
	"github.com/parleyhq/parley/internal/ghmarkdown"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/parleyhq/parley/internal/gittest"
)

// prCheckout is a pull request job's work tree as actions/checkout leaves it on a pull_request
// event with fetch-depth: 0, built with the git CLI.
type prCheckout struct {
	dir              string // the job's work tree ($GITHUB_WORKSPACE)
	merge, head      string // GitHub's test merge commit (HEAD, detached) and the pull request's head
	baseRef, headRef string // GITHUB_BASE_REF and GITHUB_HEAD_REF
}

// pullRequestCheckout builds the demo repository as "GitHub" holds it (a bare repository with
// main), a pull request from branch scale-kafka (a commit by alice), GitHub's test merge commit
// at refs/pull/7/merge ("Merge HEAD into BASE", made by GitHub, not by the pull request's
// author), and then the job's checkout the way actions/checkout makes it with fetch-depth: 0:
// git init, a fetch of +refs/heads/*:refs/remotes/origin/*, +refs/tags/*:refs/tags/* and
// +MERGE_SHA:refs/remotes/pull/7/merge, and a checkout of refs/remotes/pull/7/merge, which
// detaches HEAD. No local branch exists, and origin/HEAD is not set (nothing cloned).
func pullRequestCheckout(t *testing.T) prCheckout {
	t.Helper()
	src, git := demoRepo(t)
	bare := filepath.Join(t.TempDir(), "github.git")
	git.Run("clone", "--quiet", "--bare", src, bare)
	base := git.Run("rev-parse", "main")

	// The pull request: alice raises the Kafka consumers on her branch and pushes it.
	git.Run("checkout", "--quiet", "-b", "scale-kafka")
	alice := git.As("Alice", "alice@parley.example")
	tf, err := os.ReadFile(filepath.Join(src, "infra", "kafka", "main.tf"))
	if err != nil {
		t.Fatal(err)
	}
	alice.Write("infra/kafka/main.tf", strings.Replace(string(tf), "desired_capacity    = 6", "desired_capacity    = 12", 1))
	head := alice.Commit("kafka: more consumers for the backlog\n\nIntent: availability\n" +
		"Claim: tf:infra/kafka//aws_autoscaling_group.consumer#/desired_capacity = 12\n")
	git.Run("push", "--quiet", bare, "scale-kafka")

	// GitHub's test merge of the pull request into main, under refs/pull/7/.
	gh := git.As("GitHub", "noreply@github.com")
	gh.Run("checkout", "--quiet", "--detach", base)
	gh.Run("merge", "--quiet", "--no-ff", "-m", "Merge "+head+" into "+base, head)
	merge := gh.Run("rev-parse", "HEAD")
	gh.Run("push", "--quiet", bare, head+":refs/pull/7/head", merge+":refs/pull/7/merge")
	git.Run("checkout", "--quiet", "main")

	// The job's checkout, as actions/checkout runs git.
	ws := filepath.Join(t.TempDir(), "workspace")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	job := gittest.New(t, ws)
	job.Run("init", "--quiet", ws)
	job.Run("remote", "add", "origin", "file://"+bare)
	job.Run("-c", "protocol.version=2", "fetch", "--quiet", "--prune", "--no-recurse-submodules", "origin",
		"+refs/heads/*:refs/remotes/origin/*", "+refs/tags/*:refs/tags/*", "+"+merge+":refs/remotes/pull/7/merge")
	job.Run("checkout", "--quiet", "--progress", "--force", "refs/remotes/pull/7/merge")
	if out := job.Run("branch", "--list"); !strings.Contains(out, "HEAD detached") || strings.Contains(out, "main") {
		t.Fatalf("the checkout is not actions/checkout's layout (a detached HEAD, no local branch): git branch says\n%s", out)
	}
	return prCheckout{dir: ws, merge: merge, head: head, baseRef: "main", headRef: "scale-kafka"}
}

// cliIn runs the CLI with the environment of a pull request job (GITHUB_BASE_REF, GITHUB_HEAD_REF).
func (c prCheckout) cliIn(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	t.Setenv("GITHUB_BASE_REF", c.baseRef)
	t.Setenv("GITHUB_HEAD_REF", c.headRef)
	t.Setenv("GITHUB_EVENT_NAME", "pull_request")
	return runCLI(t, args...)
}

// TestReviewInPullRequestCheckout: review, with --plan and with --head, works in the checkout a
// pull request job has: the base is GITHUB_BASE_REF's origin/main (or --base, remote refs
// included), the plan's author is the pull request head's (alice), not GitHub's merge commit's.
func TestReviewInPullRequestCheckout(t *testing.T) {
	c := pullRequestCheckout(t)
	// Without --author: the plan is the pull request head's author's (alice), not the merge commit's
	// (GitHub), judged under origin/main's policy; her commit is unsigned, so she is an unverified
	// identity the Kafka capacity's writers do not include.
	code, out, stderr := c.cliIn(t, "review", "--repo", c.dir, "--module-dir", "infra/kafka", "--at", planAt, "--plan", planFixture("kafka-scale-12"))
	if code != exitFindings || !strings.Contains(out, "plan by git-author:alice@parley.example") || !strings.Contains(out, "[identity: unverified]") {
		t.Fatalf("--plan in the pull request checkout without --author: exit %d: %s\n%s", code, stderr, out)
	}

	plan := []string{"review", "--repo", c.dir, "--module-dir", "infra/kafka", "--at", planAt, "--author", "git-author:alice@parley.example"}
	code, out, stderr = c.cliIn(t, append(plan, "--plan", planFixture("kafka-scale-12"))...)
	if code != 0 || !strings.Contains(out, "conclusion: success") {
		t.Fatalf("--plan in the pull request checkout: exit %d: %s\n%s", code, stderr, out)
	}
	code, out, stderr = c.cliIn(t, append(plan, "--plan", planFixture("kafka-scale-24"))...)
	if code != exitFindings || !strings.Contains(out, "oncall wants 24, above the maximum 16") {
		t.Fatalf("--plan 24 in the pull request checkout: exit %d, want %d: %s\n%s", code, exitFindings, stderr, out)
	}

	// --base with a remote-tracking branch, and without GITHUB_BASE_REF.
	t.Setenv("GITHUB_BASE_REF", "")
	code, out, stderr = runCLI(t, append(plan, "--base", "origin/main", "--plan", planFixture("kafka-scale-12"))...)
	if code != 0 || !strings.Contains(out, "conclusion: success") {
		t.Fatalf("--plan --base origin/main: exit %d: %s\n%s", code, stderr, out)
	}
	// Neither: the detached HEAD's repository still has origin/main to read.
	code, out, stderr = runCLI(t, append(plan, "--plan", planFixture("kafka-scale-12"))...)
	if code != 0 || !strings.Contains(out, "conclusion: success") {
		t.Fatalf("--plan without a base in a detached checkout: exit %d: %s\n%s", code, stderr, out)
	}
	// A base that is not there is named as the problem.
	code, _, stderr = runCLI(t, append(plan, "--base", "origin/trunk", "--plan", planFixture("kafka-scale-12"))...)
	if code != exitUsage || !strings.Contains(stderr, "--base origin/trunk") {
		t.Fatalf("--base origin/trunk: exit %d: %s", code, stderr)
	}
	c.baseRef = "release"
	code, _, stderr = c.cliIn(t, append(plan, "--plan", planFixture("kafka-scale-12"))...)
	if code != exitUsage || !strings.Contains(stderr, `GITHUB_BASE_REF names the base branch "release"`) {
		t.Fatalf("GITHUB_BASE_REF=release, which was not fetched: exit %d: %s", code, stderr)
	}
	c.baseRef = "main"

	// The branch itself: the detached merge commit judged against origin/main.
	code, out, stderr = c.cliIn(t, "review", "--repo", c.dir, "--head", "HEAD", "--at", planAt)
	if code == exitUsage || !strings.Contains(out, "..."+c.merge[:8]) || !strings.Contains(out, "tf:infra/kafka//aws_autoscaling_group.consumer#/desired_capacity") {
		t.Fatalf("--head HEAD in the pull request checkout: exit %d: %s\n%s", code, stderr, out)
	}
}

// workflowFromDoc is the workflow docs/plans.md shows for GitHub Actions, parsed from the doc
// itself so that the test runs what users copy.
type workflowStep struct {
	Name string
	Uses string
	Run  string
	With map[string]any
}

func workflowFromDoc(t *testing.T) []workflowStep {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "plans.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```yaml\n(# \\.github/workflows/plan\\.yml\n.*?)```").FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/plans.md has no ```yaml block starting # .github/workflows/plan.yml")
	}
	var wf struct {
		On   string
		Jobs map[string]struct {
			Steps []workflowStep
		}
	}
	if err := yaml.Unmarshal(m[1], &wf); err != nil {
		t.Fatalf("docs/plans.md's workflow: %v", err)
	}
	if wf.On != "pull_request" || len(wf.Jobs) != 1 {
		t.Fatalf("docs/plans.md's workflow: on %q, %d jobs: the test runs one job on pull_request", wf.On, len(wf.Jobs))
	}
	for _, j := range wf.Jobs {
		return j.Steps
	}
	return nil
}

// fakeTerraform stands in for hashicorp/setup-terraform and the terraform CLI, which would need
// the AWS provider from the network: init and plan succeed, show -json prints the plan fixture
// the test names. Every invocation is logged so the test sees the doc's commands ran.
const fakeTerraform = `#!/usr/bin/env bash
set -eu
echo "terraform $*" >> "$FAKE_TERRAFORM_LOG"
chdir=.
case "$1" in -chdir=*) chdir=${1#-chdir=}; shift ;; esac
case "$1" in
init) ;;
plan) for a in "$@"; do case "$a" in -out=*) echo plan > "$chdir/${a#-out=}" ;; esac; done ;;
show) [ -f "$chdir/${@: -1}" ] || { echo "no plan $chdir/${@: -1}" >&2; exit 1; }; cat "$FAKE_TERRAFORM_PLAN" ;;
*) echo "fake terraform: $1" >&2; exit 1 ;;
esac
`

// actionEnv evaluates the review-plan action's step environment as the runner would for the
// inputs with: the expressions it uses are inputs.NAME, format('...{0}', X), github.* context
// values and ||.
func actionEnv(t *testing.T, with map[string]any, github map[string]string) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(actionDir, "action.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var action struct {
		Inputs map[string]struct{ Default string }
		Runs   struct {
			Steps []struct{ Env map[string]string }
		}
	}
	if err := yaml.Unmarshal(raw, &action); err != nil {
		t.Fatal(err)
	}
	for k := range with {
		if _, ok := action.Inputs[k]; !ok {
			t.Fatalf("the workflow gives the action input %q, which action.yml does not declare", k)
		}
	}
	var eval func(expr string) string
	eval = func(expr string) string {
		expr = strings.TrimSpace(expr)
		if a, b, ok := strings.Cut(expr, "||"); ok && !strings.HasPrefix(expr, "format(") {
			if v := eval(a); v != "" {
				return v
			}
			return eval(b)
		}
		if f, ok := strings.CutPrefix(expr, "format('"); ok {
			tmpl, arg, _ := strings.Cut(f, "',")
			return strings.ReplaceAll(tmpl, "{0}", eval(strings.TrimSuffix(strings.TrimSpace(arg), ")")))
		}
		if name, ok := strings.CutPrefix(expr, "inputs."); ok {
			if v, ok := with[name]; ok {
				return strings.TrimSpace(toString(v))
			}
			return action.Inputs[name].Default
		}
		if v, ok := github[expr]; ok {
			return v
		}
		t.Fatalf("action.yml: an expression the test cannot evaluate: %q", expr)
		return ""
	}
	var env []string
	for k, v := range action.Runs.Steps[0].Env {
		m := regexp.MustCompile(`^\$\{\{(.*)\}\}$`).FindStringSubmatch(v)
		if m == nil {
			env = append(env, k+"="+v)
			continue
		}
		env = append(env, k+"="+eval(m[1]))
	}
	return env
}

func toString(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case nil:
		return ""
	default:
		b, _ := yaml.Marshal(v)
		return strings.TrimSpace(string(b))
	}
}

// TestPlanWorkflowFromDoc runs docs/plans.md's GitHub Actions workflow, step by step as written,
// in a pull request job's checkout: actions/checkout (fetch-depth: 0, as the doc says), the
// terraform steps' run: lines verbatim through bash (terraform itself faked: see fakeTerraform),
// and the review-plan action's script with the environment its action.yml gives it. A plan
// scaling the consumers to 12 passes; to 24 fails the job with the verdict in the job summary.
func TestPlanWorkflowFromDoc(t *testing.T) {
	steps := workflowFromDoc(t)
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "terraform"), []byte(fakeTerraform), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		fixture  string
		wantCode int
		want     []string
	}{
		{"kafka-scale-12", 0, []string{"plan by github-user:cost-optimizer[bot]", "conclusion: success", "[writers: passed]"}},
		{"kafka-scale-24", exitFindings, []string{"decision: veto", "cost-optimizer wants 24, above the maximum 16", "::error title=Parley::the plan changes a field the policy vetoes"}},
	} {
		t.Run(tc.fixture, func(t *testing.T) {
			var c prCheckout
			summary := filepath.Join(t.TempDir(), "summary.md")
			tfLog := filepath.Join(t.TempDir(), "terraform.log")
			plan, _ := filepath.Abs(planFixture(tc.fixture))
			env := []string{"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"), "HOME=" + t.TempDir(),
				"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", runAsCLIEnv + "=1",
				"FAKE_TERRAFORM_LOG=" + tfLog, "FAKE_TERRAFORM_PLAN=" + plan,
				"GITHUB_EVENT_NAME=pull_request", "GITHUB_REF=refs/pull/7/merge",
				"GITHUB_BASE_REF=main", "GITHUB_HEAD_REF=scale-kafka", "GITHUB_STEP_SUMMARY=" + summary,
				"RUNNER_TEMP=" + t.TempDir()}
			sawAction := false
			for i, s := range steps {
				switch {
				case strings.HasPrefix(s.Uses, "actions/checkout@"):
					if d, _ := s.With["fetch-depth"].(int); d != 0 || s.With["fetch-depth"] == nil {
						t.Fatalf("step %d: actions/checkout without fetch-depth: 0 (%v): the ledger needs the base's history", i, s.With)
					}
					c = pullRequestCheckout(t)
					env = append(env, "GITHUB_WORKSPACE="+c.dir, "GITHUB_SHA="+c.merge)
				case strings.HasPrefix(s.Uses, "hashicorp/setup-terraform@"):
					// fakeTerraform is on PATH.
				case s.Run != "":
					cmd := exec.Command("bash", "-e", "-c", s.Run)
					cmd.Dir, cmd.Env = c.dir, env
					if out, err := cmd.CombinedOutput(); err != nil {
						t.Fatalf("step %d %q: %v\n%s", i, s.Run, err, out)
					}
				case strings.Contains(s.Uses, "/actions/review-plan@"):
					sawAction = true
					with := map[string]any{}
					for k, v := range s.With {
						with[k] = v
					}
					// The one addition to the doc's inputs: judge at a fixed time, before the demo
					// policy's peak-sales freeze, so the verdict does not depend on today's date.
					with["args"] = "--at " + planAt
					with["parley"] = parleyBin(t)
					// The pull request is the cost optimizer's, a writer of the Kafka capacity.
					stepEnv := append(append([]string{}, env...), actionEnv(t, with, map[string]string{
						"github.event.pull_request.user.login": "cost-optimizer[bot]", "github.actor": "cost-optimizer[bot]"})...)
					actionPath, _ := filepath.Abs(actionDir)
					stepEnv = append(stepEnv, "GITHUB_ACTION_PATH="+actionPath)
					cmd := exec.Command("bash", "-c", `"$GITHUB_ACTION_PATH/review-plan.sh"`)
					cmd.Dir, cmd.Env = c.dir, stepEnv
					var out bytes.Buffer
					cmd.Stdout, cmd.Stderr = &out, &out
					err := cmd.Run()
					code := 0
					if ee, ok := err.(*exec.ExitError); ok {
						code = ee.ExitCode()
					} else if err != nil {
						t.Fatal(err)
					}
					if code != tc.wantCode {
						t.Fatalf("the action: exit %d, want %d:\n%s", code, tc.wantCode, out.String())
					}
					for _, w := range tc.want {
						if !strings.Contains(out.String(), w) {
							t.Errorf("the action's output lacks %q:\n%s", w, out.String())
						}
					}
					if md, _ := os.ReadFile(summary); !strings.Contains(string(md), ghmarkdown.Cell("tf:infra/kafka//aws_autoscaling_group.consumer#/desired_capacity")) {
						t.Errorf("the job summary lacks the field:\n%s", md)
					}
				default:
					t.Fatalf("step %d of docs/plans.md's workflow (%+v) is one this test does not know how to run: teach it", i, s)
				}
			}
			if !sawAction {
				t.Fatal("docs/plans.md's workflow never runs the review-plan action")
			}
			log, _ := os.ReadFile(tfLog)
			for _, w := range []string{"terraform -chdir=infra/kafka init -input=false", "terraform -chdir=infra/kafka plan -input=false -out=plan.out", "terraform -chdir=infra/kafka show -json plan.out"} {
				if !strings.Contains(string(log), w) {
					t.Errorf("the workflow did not run %q; terraform ran:\n%s", w, log)
				}
			}
		})
	}
}
