package main

import (
	"crypto/sha256"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// runAsCLIEnv makes the test binary run as parley (see TestMain).
const runAsCLIEnv = "PARLEY_TEST_RUN_AS_CLI"

var actionDir = filepath.Join("..", "..", "actions", "review-plan")

// runAction runs the action's script as its composite step would, with env, and returns its exit
// code and output.
func runAction(t *testing.T, env ...string) (int, string) {
	t.Helper()
	cmd := exec.Command("bash", filepath.Join(actionDir, "review-plan.sh"))
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), runAsCLIEnv + "=1",
		"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null"}, env...)
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, string(out)
}

// parleyBin is this test binary under the name parley (TestMain runs it as the CLI).
func parleyBin(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return self
}

// TestReviewPlanAction: the action's step on the demo's real plans fails the job on a veto and
// passes an accepted plan, with the verdicts in the job summary both times.
func TestReviewPlanAction(t *testing.T) {
	dir, _ := demoRepo(t)
	summary := filepath.Join(t.TempDir(), "step-summary.md")
	abs := func(p string) string { a, _ := filepath.Abs(p); return a }
	common := []string{"PARLEY_BIN=" + parleyBin(t), "PARLEY_REPO=" + dir, "PARLEY_MODULE_DIR=infra/kafka",
		"PARLEY_AUTHOR=git-author:alice@parley.example", "PARLEY_ARGS=--at " + planAt, "GITHUB_STEP_SUMMARY=" + summary}

	code, out := runAction(t, append(common, "PARLEY_PLAN="+abs(planFixture("kafka-scale-24")))...)
	if code != exitFindings {
		t.Fatalf("a vetoed plan: exit %d, want %d:\n%s", code, exitFindings, out)
	}
	if !strings.Contains(out, "::error title=Parley::the plan changes a field the policy vetoes") || !strings.Contains(out, "decision: veto") {
		t.Errorf("a vetoed plan: output lacks the error annotation or the verdict:\n%s", out)
	}
	md, _ := os.ReadFile(summary)
	for _, want := range []string{
		"### Parley: 1 field, 1 veto",
		// Every piece of the plan through ghmarkdown: escaped, and @ and # followed by a
		// zero-width space so GitHub links nothing.
		"by git\\-author\\:alice@\u200bparley\\.example (terraform 1\\.9\\.0), judged by `parley review --plan`: **failure**",
		"| tf\\:infra/kafka//aws\\_autoscaling\\_group\\.consumer#\u200b/desired\\_capacity | update aws\\_autoscaling\\_group\\.consumer\\: 5 \\-&gt; 24 | veto | **yes**: the plan's value is vetoed |",
		"oncall wants 24, above the maximum 16",
	} {
		if !strings.Contains(string(md), want) {
			t.Errorf("the job summary lacks %q:\n%s", want, md)
		}
	}

	code, out = runAction(t, append(common, "PARLEY_PLAN="+abs(planFixture("kafka-scale-12")))...)
	if code != 0 {
		t.Fatalf("an accepted plan: exit %d:\n%s", code, out)
	}
	md, _ = os.ReadFile(summary)
	if strings.Count(string(md), "### Parley:") != 2 || !strings.Contains(string(md), "**success**") || !strings.Contains(string(md), "5 \\-&gt; 12 | adopt | no |") {
		t.Errorf("the second run's summary is not appended as a success:\n%s", md)
	}

	if code, out = runAction(t, common...); code != exitUsage || !strings.Contains(out, "the plan input is required") {
		t.Errorf("no plan: exit %d:\n%s", code, out)
	}
	if code, out = runAction(t, append(common, "PARLEY_PLAN="+abs(planFixture("malformed")))...); code != exitUsage {
		t.Errorf("a malformed plan: exit %d, want %d:\n%s", code, exitUsage, out)
	}
}

// TestReviewPlanActionDownload: without a binary the step downloads the release for the runner and
// runs it only when its SHA-256 is the one the release's SHA256SUMS lists.
func TestReviewPlanActionDownload(t *testing.T) {
	if runtime.GOOS != "linux" && runtime.GOOS != "darwin" {
		t.Skip("releases are built for Linux and macOS")
	}
	bin, err := os.ReadFile(parleyBin(t))
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("parley_9.9.9_%s_%s", runtime.GOOS, runtime.GOARCH)
	sums := fmt.Sprintf("%x  %s\n", sha256.Sum256(bin), name)
	var served []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served = append(served, r.URL.Path)
		switch r.URL.Path {
		case "/v9.9.9/" + name:
			w.Write(bin)
		case "/v9.9.9/SHA256SUMS":
			w.Write([]byte(sums))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	dir, _ := demoRepo(t)
	plan, _ := filepath.Abs(planFixture("kafka-scale-12"))
	osName := map[string]string{"linux": "Linux", "darwin": "macOS"}[runtime.GOOS]
	archName := map[string]string{"amd64": "X64", "arm64": "ARM64"}[runtime.GOARCH]
	env := []string{"PARLEY_VERSION=9.9.9", "PARLEY_RELEASES_URL=" + srv.URL, "RUNNER_OS=" + osName, "RUNNER_ARCH=" + archName,
		"RUNNER_TEMP=" + t.TempDir(), "PARLEY_PLAN=" + plan, "PARLEY_REPO=" + dir, "PARLEY_MODULE_DIR=infra/kafka",
		"PARLEY_AUTHOR=git-author:alice@parley.example", "PARLEY_ARGS=--at " + planAt}
	code, out := runAction(t, env...)
	if code != 0 || !strings.Contains(out, "conclusion: success") {
		t.Fatalf("the downloaded release: exit %d (served %v):\n%s", code, served, out)
	}

	// A binary that is not the release's is refused before it runs.
	sums = strings.Repeat("0", 64) + "  " + name + "\n"
	code, out = runAction(t, env...)
	if code != exitFailure || !regexp.MustCompile(`SHA256SUMS says 0{64}: not running it`).MatchString(out) || strings.Contains(out, "conclusion:") {
		t.Fatalf("a tampered download: exit %d:\n%s", code, out)
	}
	sums = "abc  parley_9.9.9_plan9_mips\n"
	if code, out = runAction(t, env...); code != exitFailure || !strings.Contains(out, "does not list "+name) {
		t.Fatalf("a release without this platform: exit %d:\n%s", code, out)
	}
}

// The composite action passes every input to the script through the environment (never into the
// script's text, where a pull request's value could run as shell) and names only inputs it has.
func TestReviewPlanActionManifest(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(actionDir, "action.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var action struct {
		Inputs map[string]struct {
			Required bool
			Default  string
		}
		Runs struct {
			Using string
			Steps []struct {
				Shell, Run string
				Env        map[string]string
			}
		}
	}
	if err := yaml.Unmarshal(raw, &action); err != nil {
		t.Fatal(err)
	}
	if action.Runs.Using != "composite" || len(action.Runs.Steps) != 1 {
		t.Fatalf("runs %+v", action.Runs)
	}
	step := action.Runs.Steps[0]
	if step.Shell != "bash" || strings.Contains(step.Run, "${{") || !strings.Contains(step.Run, "$GITHUB_ACTION_PATH/review-plan.sh") {
		t.Errorf("the step runs %q in %q: want the script, with no expression in its text", step.Run, step.Shell)
	}
	script, err := os.ReadFile(filepath.Join(actionDir, "review-plan.sh"))
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	for _, m := range regexp.MustCompile(`inputs\.([a-z-]+)`).FindAllStringSubmatch(string(raw), -1) {
		used[m[1]] = true
		if _, ok := action.Inputs[m[1]]; !ok {
			t.Errorf("the step reads inputs.%s, which the action does not declare", m[1])
		}
	}
	for in := range action.Inputs {
		if !used[in] {
			t.Errorf("input %s reaches no step", in)
		}
	}
	for env := range step.Env {
		if !strings.Contains(string(script), env) {
			t.Errorf("the step sets %s, which the script never reads", env)
		}
	}
	if !action.Inputs["plan"].Required {
		t.Error("the plan input is not required")
	}
	// The release it downloads by default is the one the chart (and the image) are at.
	chart, err := os.ReadFile(filepath.Join("..", "..", "charts", "parley", "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^appVersion: "?([^"\n]+)"?$`).FindSubmatch(chart)
	if m == nil || action.Inputs["version"].Default != string(m[1]) {
		t.Errorf("the action downloads %q by default; the chart's appVersion is %q", action.Inputs["version"].Default, m)
	}
}
