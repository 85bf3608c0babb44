package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/gittest"
)

// runIn runs the CLI with stdin.
func runIn(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

// gitOracle runs git with a clean configuration, outside any repository, under a timeout (git
// 2.39 loops forever on some divider/scissors inputs).
func gitOracle(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is required: the tests compare with and build repositories through the git CLI")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CEILING_DIRECTORIES="+filepath.Dir(cmd.Dir))
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("git %s: %v: %s", strings.Join(args, " "), err, errb.String())
	}
	return out.String()
}

var trailerMessages = []string{
	"Scale consumers\n\nIntent: availability\nMotivation: incident INC-4211 severity=high\n",
	"Subject only\n",
	"Subject\n\nBody paragraph.\n\nSigned-off-by: A <a@example.com>\nCo-authored-by: B <b@example.com>\n",
	"Subject\n\nIntent: cost\n  continued on the next line\nExpires: 4h\n",
	"Subject\n\nnot a trailer line\nIntent: cost\n",
	"Subject\n\nIntent: cost\n---\nstat\nFoo: bar\n",
	"Subject\n\nIntent: cost\n# a comment\nMotivation: budget\n",
	"Subject\n\nhttps://example.com/x\nIntent: security\n",
	"Subject\n\nIntent = cost\nKey: value\n",
}

func TestTrailersParseIsByteIdenticalToGit(t *testing.T) {
	for _, msg := range trailerMessages {
		for _, flags := range [][]string{nil, {"--no-divider"}} {
			code, got, stderr := runIn(t, msg, append([]string{"trailers", "parse"}, flags...)...)
			want := gitOracle(t, msg, append([]string{"interpret-trailers", "--parse"}, flags...)...)
			if code != 0 || got != want {
				t.Errorf("parse %v of %q: exit %d, got %q, git %q (stderr %s)", flags, msg, code, got, want, stderr)
			}
		}
	}
	msg := "Subject\n\nIntent= cost\nKey% v\n"
	code, got, _ := runIn(t, msg, "trailers", "parse", "--separators", "=%")
	if want := gitOracle(t, msg, "-c", "trailer.separators==%", "interpret-trailers", "--parse"); code != 0 || got != want {
		t.Errorf("--separators: got %q, git %q", got, want)
	}
}

func TestTrailersAddMatchesGit(t *testing.T) {
	cases := []struct {
		msg      string
		trailers []string
		ifExists string
	}{
		{"Scale consumers\n", []string{"Intent=availability", "Motivation=incident INC-4211"}, ""},
		{"Scale\n\nIntent: cost\n", []string{"Intent=availability"}, "replace"},
		{"Scale\n\nIntent: cost\n", []string{"Intent=cost"}, "addIfDifferentNeighbor"},
		{"Scale\n\nIntent: cost\nExpires: 1h\n", []string{"Intent=cost"}, "addIfDifferent"},
		{"Scale\n\nIntent: cost\n", []string{"Intent=cost"}, "add"},
		{"Scale\n\nIntent: cost\n", []string{"Intent=security"}, "doNothing"},
		{"Scale\n\nBody.\n# comment\n", []string{"Expires: 4h"}, ""},
	}
	for _, c := range cases {
		args := []string{"trailers", "add"}
		gitArgs := []string{"interpret-trailers"}
		if c.ifExists != "" {
			args = append(args, "--if-exists", c.ifExists)
			gitArgs = append(gitArgs, "--if-exists", c.ifExists)
		}
		for _, tr := range c.trailers {
			args = append(args, "--trailer", tr)
			gitArgs = append(gitArgs, "--trailer", tr)
		}
		code, got, stderr := runIn(t, c.msg, args...)
		want := gitOracle(t, c.msg, gitArgs...)
		if code != 0 || got != want {
			t.Errorf("add %v to %q: exit %d, got %q, git %q (stderr %s)", c.trailers, c.msg, code, got, want, stderr)
		}
	}
	if code, _, _ := runIn(t, "x\n", "trailers", "add", "--trailer", "A=b", "--if-exists", "sometimes"); code != exitUsage {
		t.Errorf("bad --if-exists: exit %d, want %d", code, exitUsage)
	}
	if code, _, _ := runIn(t, "x\n", "trailers", "add"); code != exitUsage {
		t.Errorf("no --trailer: exit %d, want %d", code, exitUsage)
	}
}

func TestTrailersCheck(t *testing.T) {
	good := "Scale\n\nIntent: availability\nMotivation: incident INC-4211 severity=high\nExpires: 4h\nSigned-off-by: A <a@example.com>\n"
	if code, out, stderr := runIn(t, good, "trailers", "check"); code != 0 || out != "" {
		t.Errorf("good message: exit %d, out %q, stderr %q", code, out, stderr)
	}
	bad := "Scale\n\nIntent: availability\nExpires: after lunch\nClaim: not-an-address\n"
	code, out, _ := runIn(t, bad, "trailers", "check")
	if code != exitFindings || !strings.Contains(out, "line 4: Expires:") || !strings.Contains(out, "line 5: Claim:") {
		t.Errorf("bad message: exit %d, out %q", code, out)
	}
	file := filepath.Join(t.TempDir(), "COMMIT_EDITMSG")
	if err := os.WriteFile(file, []byte(bad+"# Please enter the commit message\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, _ := runIn(t, "", "trailers", "check", file); code != exitFindings || !strings.Contains(out, "Expires") {
		t.Errorf("check FILE: exit %d, out %q", code, out)
	}
	if code, _, _ := runIn(t, "", "trailers", "check", filepath.Join(t.TempDir(), "missing")); code != exitUsage {
		t.Errorf("missing file: exit %d", code)
	}
}

func TestFieldsDiff(t *testing.T) {
	dir := t.TempDir()
	oldF := writeFile(t, filepath.Join(dir, "old", "web.yaml"), deploymentYAML(3, "1.0"))
	newF := writeFile(t, filepath.Join(dir, "k8s", "web.yaml"), deploymentYAML(5, "1.0"))
	code, out, stderr := runIn(t, "", "fields", "diff", oldF, newF)
	if code != 0 || strings.TrimSpace(out) != "k8s:apps/Deployment/prod/web#/spec/replicas: 3 -> 5" {
		t.Errorf("fields diff: exit %d, out %q, stderr %q", code, out, stderr)
	}
	code, out, _ = runIn(t, "", "fields", "diff", "--json", oldF, newF)
	var changes []struct {
		Field    string
		Old, New any
	}
	if err := json.Unmarshal([]byte(out), &changes); err != nil || code != 0 || len(changes) != 1 ||
		changes[0].Field != "k8s:apps/Deployment/prod/web#/spec/replicas" || changes[0].Old != float64(3) || changes[0].New != float64(5) {
		t.Errorf("--json: exit %d, %q, err %v", code, out, err)
	}
	if code, _, _ := runIn(t, "", "fields", "diff", "--exit-code", oldF, newF); code != exitFindings {
		t.Errorf("--exit-code with changes: exit %d", code)
	}
	if code, _, _ := runIn(t, "", "fields", "diff", "--exit-code", oldF, oldF); code != 0 {
		t.Errorf("--exit-code without changes: exit %d", code)
	}

	oldTF := writeFile(t, filepath.Join(dir, "a.orig"), "resource \"aws_autoscaling_group\" \"consumer\" {\n  desired_capacity = 4\n}\n")
	newTF := writeFile(t, filepath.Join(dir, "b.orig"), "resource \"aws_autoscaling_group\" \"consumer\" {\n  desired_capacity = 12\n}\n")
	if code, _, _ := runIn(t, "", "fields", "diff", oldTF, newTF); code != exitUsage {
		t.Errorf("unsupported file type: exit %d, want %d", code, exitUsage)
	}
	code, out, _ = runIn(t, "", "fields", "diff", "--as", "infra/kafka/main.tf", oldTF, newTF)
	if code != 0 || strings.TrimSpace(out) != "tf:infra/kafka//aws_autoscaling_group.consumer#/desired_capacity: 4 -> 12" {
		t.Errorf("--as: exit %d, out %q", code, out)
	}
	if code, _, _ := runIn(t, "", "fields", "diff", oldF); code != exitUsage {
		t.Errorf("one argument: exit %d, want %d", code, exitUsage)
	}
}

func deploymentYAML(replicas int, tag string) string {
	return "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: prod\nspec:\n  replicas: " +
		strconv.Itoa(replicas) + "\n  template:\n    spec:\n      containers:\n        - name: web\n          image: example.com/web:" + tag + "\n"
}

// cliRepo makes a repository with the git command line, committing as Alice, each git command a
// minute after the one before.
func cliRepo(t *testing.T) (dir string, git func(args ...string) string) {
	t.Helper()
	r := gittest.Init(t, time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC), time.Minute).As("Alice Martin", "alice@parley.example")
	git = func(args ...string) string {
		t.Helper()
		defer r.Clock.Tick()
		return r.Run(args...)
	}
	r.Clock.Tick() // the init was the first command
	return r.Dir, git
}

func TestLedgerCommand(t *testing.T) {
	dir, git := cliRepo(t)
	writeFile(t, filepath.Join(dir, "k8s/prod/web.yaml"), deploymentYAML(3, "1.0"))
	git("add", "-A")
	git("commit", "--quiet", "-m", "Add web")
	writeFile(t, filepath.Join(dir, "k8s/prod/web.yaml"), deploymentYAML(8, "1.0"))
	git("add", "-A")
	git("commit", "--quiet", "-m", "Scale web (#7)\n\nIntent: availability\nMotivation: incident INC-4211 severity=high\nExpires: 4h\nClaim: k8s:apps/Deployment/prod/web#/spec/replicas\n")
	head := git("rev-parse", "HEAD")

	code, out, stderr := runIn(t, "", "ledger", "--repo", dir)
	if code != 0 {
		t.Fatalf("ledger: exit %d, stderr %s", code, stderr)
	}
	for _, want := range []string{
		"Ledger of main at " + head[:8] + ": 2 commits",
		"k8s:apps/Deployment/prod/web#/spec/replicas\n",
		"baseline (undeclared)",
		"availability",
		"incident INC-4211 severity=high",
		"explicit",
		"2026-03-02 13:04",
		"#7",
		"Git holds 8, from " + head[:8] + " by alice@parley.example (availability, incident INC-4211 severity=high, expires 2026-03-02 13:04)",
		"more fields have a single claim",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("ledger output lacks %q:\n%s", want, out)
		}
	}
	// A second run reads nothing new; --field narrows to matching fields and shows them in full.
	code, out, _ = runIn(t, "", "ledger", "--repo", dir, "--branch", "main", "--field", "k8s:apps/Deployment/*/*#/spec/template/**", "--json")
	var rep ledgerReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 0 {
		t.Fatalf("--json: exit %d, err %v\n%s", code, err, out)
	}
	if rep.Update.Commits != 0 || rep.Commits != 2 || rep.Tip != head || len(rep.Fields) == 0 {
		t.Errorf("report: %+v", rep)
	}
	for _, f := range rep.Fields {
		if !strings.Contains(f.Field, "#/spec/template/") || len(f.History) != 1 || f.Current == nil || f.Current.IntentDeclared {
			t.Errorf("field %+v", f)
		}
	}
	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{"ledger", "--repo", t.TempDir()}, exitUsage},
		{[]string{"ledger", "--repo", dir, "--branch", "nope"}, exitUsage},
		{[]string{"ledger", "--repo", dir, "--field", "k8s:nope"}, exitUsage},
		{[]string{"ledger", "extra-arg"}, exitUsage},
	} {
		if code, _, stderr := runIn(t, "", c.args...); code != c.code || stderr == "" {
			t.Errorf("%v: exit %d (stderr %q), want %d", c.args, code, stderr, c.code)
		}
	}
}

func TestDemo(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is required: the tests compare with and build repositories through the git CLI")
	}
	code, out, stderr := runIn(t, "", "demo")
	if code != 0 {
		t.Fatalf("demo: exit %d, stderr %s", code, stderr)
	}
	if stderr != "" {
		t.Errorf("demo without --keep writes to stderr: %q", stderr)
	}
	for _, want := range []string{
		"Parley demo: an infrastructure repository with 12 commits by five writers.",
		"Ledger of main at ",
		"tf:infra/kafka//aws_autoscaling_group.consumer#/desired_capacity\n",
		"incident INC-4211 severity=high",
		"cve CVE-2026-1234 severity=critical",
		"baseline (undeclared)",
		"#12", "#15", "#17",
		"Git holds 5, from ",
		"by cost-optimizer@parley.example (cost, rightsizing)",
		"k8s:apps/Deployment/prod/web#/spec/replicas\n",
		"(yield)",
		"Problems (1):",
		"Expires",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
	// The demo signs every commit but one, whose author line says Alice without her key.
	if n := strings.Count(out, "(unverified)"); n != 1 || !strings.Contains(out, "alice@parley.example (unverified)") {
		t.Errorf("demo output marks %d commits unverified, want the forged one by alice@parley.example:\n%s", n, out)
	}
	_, again, _ := runIn(t, "", "demo")
	if again != out {
		t.Errorf("demo output differs between runs")
	}
	dir := filepath.Join(t.TempDir(), "demo")
	code, out2, stderr := runIn(t, "", "demo", "--dir", dir)
	if code != 0 || out2 != out || !strings.Contains(stderr, dir) {
		t.Errorf("demo --dir: exit %d, same output %v, stderr %q", code, out2 == out, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, ".parley", "policy.hcl")); err != nil {
		t.Errorf("demo --dir did not keep the repository: %v", err)
	}
	if code, _, _ := runIn(t, "", "demo", "--dir", dir); code != exitUsage {
		t.Errorf("demo into a non-empty --dir: exit %d, want %d", code, exitUsage)
	}
}

func TestMyCommandsHaveHelpAndExamples(t *testing.T) {
	root := newRootCmd()
	for _, path := range [][]string{{"trailers"}, {"trailers", "parse"}, {"trailers", "add"}, {"trailers", "check"},
		{"fields"}, {"fields", "diff"}, {"ledger"}, {"demo"}} {
		cmd, _, err := root.Find(path)
		if err != nil {
			t.Fatalf("%v: %v", path, err)
		}
		if cmd.Short == "" || cmd.Long == "" || cmd.Example == "" {
			t.Errorf("%v lacks Short, Long or Example", path)
		}
		code, out, _ := runIn(t, "", append(path, "--help")...)
		if code != 0 || !strings.Contains(out, "Examples:") {
			t.Errorf("%v --help: exit %d", path, code)
		}
	}
}
