package main

import (
	"github.com/parleyhq/parley/internal/demo"

	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/policy/arbiter"
)

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

func writeFile(t *testing.T, path, content string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestPolicyCheck(t *testing.T) {
	dir := t.TempDir()
	bad := writeFile(t, filepath.Join(dir, "bad.hcl"), `intent "cost" { rank = 1 }
actor "bot" {
  intent = "costs"
}
rule "r" {
  when     = claim.intnt == "cost"
  decision = "win"
}
`)
	tests := []struct {
		name       string
		args       []string
		code       int
		stdout     string
		stderrHas  []string
		stderrNone string
	}{
		{"demo policy", []string{"policy", "check", "../../internal/demo/policy.hcl"}, 0, "../../internal/demo/policy.hcl: ok (", nil, ""},
		{"diagnostics", []string{"policy", "check", bad}, 1, "", []string{
			bad + `:3:12: actor bot intent refers to undefined intent "costs" (did you mean "cost"?)`,
			bad + `:6:14: claim has no attribute "intnt" (did you mean "intent"?)`,
		}, ""},
		{"missing file", []string{"policy", "check", filepath.Join(dir, "nope.hcl")}, 2, "", []string{"read policy"}, ""},
		{"too many args", []string{"policy", "check", "a", "b"}, 2, "", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, tt.args...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d; stdout %q stderr %q", code, tt.code, stdout, stderr)
			}
			if !strings.HasPrefix(stdout, tt.stdout) {
				t.Errorf("stdout %q, want prefix %q", stdout, tt.stdout)
			}
			for _, s := range tt.stderrHas {
				if !strings.Contains(stderr, s) {
					t.Errorf("stderr lacks %q:\n%s", s, stderr)
				}
			}
		})
	}
}

func TestInit(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, ".parley", "policy.hcl")
	if code, _, stderr := runCLI(t, "init", "--file", file); code != 0 {
		t.Fatalf("init: exit %d: %s", code, stderr)
	}
	if code, stdout, stderr := runCLI(t, "policy", "check", file); code != 0 {
		t.Fatalf("the starter policy does not check: %s%s", stdout, stderr)
	}
	writeFile(t, file, "# mine\n")
	code, _, stderr := runCLI(t, "init", "--file", file)
	if code != 2 || !strings.Contains(stderr, "already exists") {
		t.Fatalf("init over an existing file: exit %d, %q", code, stderr)
	}
	if b, _ := os.ReadFile(file); string(b) != "# mine\n" {
		t.Fatalf("init overwrote the file without --force")
	}
	if code, _, stderr := runCLI(t, "init", "--file", file, "--force"); code != 0 {
		t.Fatalf("init --force: exit %d: %s", code, stderr)
	}
	if b, _ := os.ReadFile(file); !strings.Contains(string(b), "intent \"security\"") {
		t.Fatalf("init --force did not write the starter policy")
	}
}

func TestSimulate(t *testing.T) {
	want, err := os.ReadFile("../../examples/hpa-vs-cost/expected.txt")
	if err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI(t, "simulate", "../../examples/hpa-vs-cost/events.jsonl")
	if code != 0 || stdout != string(want) {
		t.Fatalf("simulate: exit %d, stderr %q, stdout:\n%s", code, stderr, stdout)
	}
	code, stdout, _ = runCLI(t, "simulate", "--brief", "../../examples/bound-check/events.jsonl")
	if code != 0 || !strings.Contains(stdout, "veto git=6  [bounds]") || strings.Count(stdout, "\n") != 3 {
		t.Fatalf("simulate --brief: exit %d:\n%s", code, stdout)
	}
	code, stdout, _ = runCLI(t, "simulate", "--json", "../../examples/oscillation/events.jsonl")
	var changes []struct {
		Verdict core.Verdict `json:"verdict"`
	}
	if err := json.Unmarshal([]byte(stdout), &changes); code != 0 || err != nil || len(changes) == 0 {
		t.Fatalf("simulate --json: exit %d, %v:\n%s", code, err, stdout)
	}
	if changes[3].Verdict.Decision != core.DecisionHold {
		t.Errorf("change 4 is %s, want hold", changes[3].Verdict.Decision)
	}

	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "policy.hcl"), `intent "cost" { rank = 1 }`)
	bad := writeFile(t, filepath.Join(dir, "events.jsonl"), `{"kind":"tick","at":"2026-11-22T10:00:00Z"}
{"kind":"claim","at":"2026-11-22T11:00:00Z","field":"k8s:apps/Deployment/prod/web#/spec/replicas","actor":{"source":"nobody","id":"x"},"value":1}
`)
	code, _, stderr = runCLI(t, "simulate", bad)
	if code != 2 || !strings.Contains(stderr, "events line 2") || !strings.Contains(stderr, `actor source "nobody"`) {
		t.Fatalf("bad events: exit %d, %q", code, stderr)
	}
}

const explainPolicy = `
intent "availability" { rank = 90 }
intent "cost"         { rank = 40 }
actor "hpa" {
  intent    = "availability"
  k8s_users = ["system:serviceaccount:kube-system:horizontal-pod-autoscaler"]
}
actor "agent" {
  intent         = "cost"
  aws_principals = ["arn:aws:sts::*:assumed-role/agent/*"]
}
field "capacity" {
  match = ["tf:**//aws_autoscaling_group.*#/desired_capacity"]
  max   = git("${field.object}#/max_size")
}
`

const explainClaims = `{
  "at": "2026-11-22T10:00:00Z",
  "git_values": {"tf:infra/kafka//aws_autoscaling_group.consumer#/max_size": 16},
  "git": [
    {"field": "k8s:apps/Deployment/prod/web#/spec/replicas", "actor": {"source": "git-author", "id": "alice@example.com"}, "value": 3, "at": "2026-11-20T09:00:00Z", "evidence": {"source": "git", "commit": "abc"}},
    {"field": "tf:infra/kafka//aws_autoscaling_group.consumer#/desired_capacity", "actor": {"source": "git-author", "id": "alice@example.com"}, "value": 4, "at": "2026-11-20T09:00:00Z"}
  ],
  "live": [
    {"field": "k8s:apps/Deployment/prod/web#/spec/replicas", "actor": {"source": "k8s-user", "id": "system:serviceaccount:kube-system:horizontal-pod-autoscaler"}, "value": 8, "at": "2026-11-22T09:55:00Z", "expires": "1h"},
    {"field": "tf:infra/kafka//aws_autoscaling_group.consumer#/desired_capacity", "actor": {"source": "aws-principal", "id": "arn:aws:sts::1:assumed-role/agent/s"}, "value": 20, "at": "2026-11-22T09:58:00Z"}
  ]
}`

func TestExplainClaims(t *testing.T) {
	dir := t.TempDir()
	pol := writeFile(t, filepath.Join(dir, "policy.hcl"), explainPolicy)
	claims := writeFile(t, filepath.Join(dir, "claims.json"), explainClaims)
	replicas := "k8s:apps/Deployment/prod/web#/spec/replicas"
	tests := []struct {
		name   string
		args   []string
		code   int
		stdout []string
	}{
		{"yield to the hpa", []string{"explain", replicas, "--claims", claims, "--policy", pol}, 0,
			[]string{"decision: yield", "winner:   hpa", "until:    2026-11-22T10:55:00Z", "[rank: decided] hpa (availability, rank 90) outranks git"}},
		{"after the expiry", []string{"explain", replicas, "--claims", claims, "--policy", pol, "--at", "2026-11-22T11:00:00Z"}, 0,
			[]string{"decision: enforce-git", "[expiry: expired] hpa's claim (8) expired at 2026-11-22T10:55:00Z"}},
		{"bound veto, exit 1", []string{"explain", "tf:infra/kafka//aws_autoscaling_group.consumer#/desired_capacity", "--claims", claims, "--policy", pol}, 1,
			[]string{"decision: veto", "above the maximum 16"}},
		{"pattern", []string{"explain", "k8s:apps/*/*/*#/**", "--claims", claims, "--policy", pol}, 0,
			[]string{"k8s:apps/Deployment/prod/web#/spec/replicas\n  decision: yield"}},
		{"no repository and no claims", []string{"explain", replicas, "--repo", dir}, 2, nil},
		{"bad field", []string{"explain", "nope", "--claims", claims, "--policy", pol}, 2, nil},
		{"bad time", []string{"explain", replicas, "--claims", claims, "--policy", pol, "--at", "noon"}, 2, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, tt.args...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d; stderr %q\n%s", code, tt.code, stderr, stdout)
			}
			for _, s := range tt.stdout {
				if !strings.Contains(stdout, s) {
					t.Errorf("stdout lacks %q:\n%s", s, stdout)
				}
			}
		})
	}

	code, stdout, stderr := runCLI(t, "explain", replicas, "--claims", claims, "--policy", pol, "--json")
	var v core.Verdict
	if err := json.Unmarshal([]byte(stdout), &v); code != 0 || err != nil {
		t.Fatalf("--json: exit %d, %v, %s\n%s", code, err, stderr, stdout)
	}
	if v.Decision != core.DecisionYield || v.Winner == nil || v.Winner.Actor.Name != "hpa" || len(v.Explanation) == 0 {
		t.Errorf("--json verdict: %+v", v)
	}
}

// TestExplainRepo explains real fields of the demo repository from its Git ledger, under the
// policy on its default branch.
func TestExplainRepo(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "repo")
	if code, _, stderr := runCLI(t, "demo", "--dir", dir); code != 0 {
		t.Fatalf("demo: exit %d: %s", code, stderr)
	}
	tests := []struct {
		field string
		want  []string
	}{
		{"k8s:apps/Deployment/prod/web#/spec/replicas", []string{"decision: ", "[field.replicas: applies]", "owner.replicas"}},
		{"tf:infra/kafka//aws_autoscaling_group.consumer#/desired_capacity", []string{"decision: ", "[field.kafka-capacity: applies]", "maximum 16"}},
		{"tf:infra/kafka//aws_iam_role_policy.consumer#/policy", []string{"[field.skeleton: applies]", "immutable skeleton"}},
	}
	for _, tt := range tests {
		t.Run(tt.field, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, "explain", tt.field, "--repo", dir, "--at", "2026-11-22T12:00:00Z")
			if code != 0 && code != 1 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			if !strings.HasPrefix(stdout, tt.field+"\n") {
				t.Errorf("output does not start with the field:\n%s", stdout)
			}
			for _, s := range tt.want {
				if !strings.Contains(stdout, s) {
					t.Errorf("output lacks %q:\n%s", s, stdout)
				}
			}
		})
	}
	// A pattern explains every matching field the ledger knows.
	code, stdout, stderr := runCLI(t, "explain", "tf:infra/kafka//aws_autoscaling_group.consumer#/*", "--repo", dir, "--json")
	var vs []core.Verdict
	if err := json.Unmarshal([]byte(stdout), &vs); (code != 0 && code != 1) || err != nil || len(vs) < 3 {
		t.Fatalf("pattern: exit %d, %v, %d verdicts: %s", code, err, len(vs), stderr)
	}
}

func TestPolicyCommandsHaveHelp(t *testing.T) {
	root := newRootCmd()
	for _, path := range [][]string{{"policy"}, {"policy", "check"}, {"init"}, {"explain"}, {"simulate"}} {
		cmd, _, err := root.Find(path)
		if err != nil {
			t.Fatalf("%v: %v", path, err)
		}
		if cmd.Short == "" || cmd.Long == "" || cmd.Example == "" {
			t.Errorf("%v lacks Short, Long or Example", path)
		}
		code, out, _ := runCLI(t, append(path, "--help")...)
		if code != 0 || !strings.Contains(out, "Examples:") {
			t.Errorf("%v --help: exit %d", path, code)
		}
	}
}

// memState is a gitState over fixed claims, standing in for a ledger.
type memState struct {
	current map[core.Field]core.Claim
	history map[core.Field][]core.Claim
}

func (m memState) History(f core.Field) ([]core.Claim, error) { return m.history[f], nil }
func (m memState) Current(f core.Field) (core.Claim, bool, error) {
	c, ok := m.current[f]
	return c, ok, nil
}
func (m memState) Fields(p core.FieldPattern) ([]core.Field, error) {
	var out []core.Field
	for f := range m.current {
		if p.Match(f) {
			out = append(out, f)
		}
	}
	return out, nil
}

// TestExplainInputMergesLedgerAndClaims checks how a ledger and a claims file combine: Git's claim,
// history and values from the ledger, live claims and value overrides from the file.
func TestExplainInputMergesLedgerAndClaims(t *testing.T) {
	f := core.TFField("infra/kafka", "aws_autoscaling_group.consumer", "/desired_capacity")
	maxSize := f.Object().Child("max_size")
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	val := func(n int) core.Value { v, _ := core.JSONValue(n); return v }
	gitClaim := core.Claim{Field: f, Value: val(6), At: at.Add(-time.Hour),
		Actor: core.Actor{Identity: core.Identity{Source: core.SourceGitAuthor, ID: "alice@example.com"}}}
	state := memState{
		current: map[core.Field]core.Claim{f: gitClaim, maxSize: {Field: maxSize, Value: val(16)}},
		history: map[core.Field][]core.Claim{f: {gitClaim}},
	}
	cs, err := arbiter.ReadClaims(strings.NewReader(`{"live": [{"field": "` + f.String() + `", "actor": {"source": "aws-principal", "id": "arn:x"}, "value": 20, "at": "2026-11-22T09:59:00Z"}],
		"git_values": {"` + maxSize.String() + `": 24}}`))
	if err != nil {
		t.Fatal(err)
	}
	in, err := explainInput(f, at, state, cs)
	if err != nil {
		t.Fatal(err)
	}
	if in.Git == nil || !in.Git.Value.Equal(val(6)) || len(in.History) != 1 || len(in.Live) != 1 {
		t.Fatalf("input: git %v, %d history, %d live", in.Git, len(in.History), len(in.Live))
	}
	look := stateLookup{state: state, values: cs.Values}
	if v, ok, _ := look.GitValue(maxSize); !ok || !v.Equal(val(24)) {
		t.Errorf("the claims file's git_values should override the ledger: %v %v", v, ok)
	}
	look = stateLookup{state: state}
	if v, ok, _ := look.GitValue(maxSize); !ok || !v.Equal(val(16)) {
		t.Errorf("ledger value: %v %v", v, ok)
	}
	fields, err := explainFields(core.Field{}, core.MustFieldPattern("tf:**//aws_autoscaling_group.*#/*"), state, cs)
	if err != nil || len(fields) != 2 {
		t.Errorf("fields: %v %v", fields, err)
	}
}

// TestExplainRepoReadsPolicyFromDefaultBranch checks that --repo judges with the policy on the
// default branch, not the one in the checked-out pull request branch.
func TestExplainRepoReadsPolicyFromDefaultBranch(t *testing.T) {
	dir, git := cliRepo(t)
	writeFile(t, filepath.Join(dir, ".parley", "policy.hcl"), "intent \"availability\" { rank = 90 }\n")
	git("add", ".")
	git("commit", "-q", "-m", "policy")
	git("checkout", "-q", "-b", "pr")
	writeFile(t, filepath.Join(dir, ".parley", "policy.hcl"), "this is { not a policy\n")
	git("commit", "-q", "-am", "loosen the policy")

	code, stdout, stderr := runCLI(t, "explain", "k8s:apps/Deployment/prod/web#/spec/replicas", "--repo", dir)
	if code != 0 || !strings.Contains(stdout, "decision: hold") {
		t.Fatalf("exit %d: %s\n%s", code, stderr, stdout)
	}
}

// TestPolicyCheckSaysWhomItBelieves: a policy that believes unsigned commit authors says so, and
// one whose actor matches emails but lists no key says that actor's commits will not count.
func TestPolicyCheckSaysWhomItBelieves(t *testing.T) {
	dir := t.TempDir()
	noKeys := filepath.Join(dir, "nokeys.hcl")
	writeFile(t, noKeys, "actor \"dev\" {\n  git_authors = [\"*@example.com\"]\n}\n")
	trusting := filepath.Join(dir, "trusting.hcl")
	writeFile(t, trusting, "trust_unsigned_git_authors = true\nactor \"dev\" {\n  git_authors = [\"*@example.com\"]\n}\n")
	for file, want := range map[string]string{
		noKeys:   "note: actor dev matches git_authors but lists no signing_keys: its commits count as an unverified identity",
		trusting: "note: trust_unsigned_git_authors = true: commit author emails are believed without a signature",
	} {
		code, out, stderr := runCLI(t, "policy", "check", file)
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("%s: exit %d, output lacks %q:\n%s%s", filepath.Base(file), code, want, out, stderr)
		}
	}
	if _, out, _ := runCLI(t, "policy", "check", "../../internal/demo/policy.hcl"); strings.Contains(out, "note:") {
		t.Errorf("the demo policy lists a key for every actor with git_authors, yet:\n%s", out)
	}
}

// TestPolicyDiffShowsTheVerdictsANewPolicyFlips: on the demo repository, a policy that lets
// anyone tune the Kafka lag alarm flips the verdict of the forged commit that tuned it (an
// unverified identity, which the base's writers veto); the unchanged policy flips none.
func TestPolicyDiffShowsTheVerdictsANewPolicyFlips(t *testing.T) {
	dir, _ := demoRepo(t)
	same := filepath.Join(t.TempDir(), "same.hcl")
	writeFile(t, same, demo.Policy())
	code, out, stderr := runCLI(t, "policy", "diff", same, "--repo", dir)
	if code != 0 || !strings.Contains(out, "against main:.parley/policy.hcl") || !strings.Contains(out, "\n0 of ") {
		t.Fatalf("unchanged policy: exit %d: %s\n%s", code, stderr, out)
	}
	open := filepath.Join(t.TempDir(), "open.hcl")
	writeFile(t, open, strings.Replace(demo.Policy(), `writers = ["kafka-agent", "oncall"]`, "", 1))
	code, out, stderr = runCLI(t, "policy", "diff", open, "--repo", dir)
	if code != 0 || strings.Contains(out, "\n0 of ") || !strings.Contains(out, "\n1 of ") ||
		!strings.Contains(out, "- tf:infra/kafka//aws_cloudwatch_metric_alarm.consumer_lag#/evaluation_periods: veto (rule writers) -> enforce-git (rule rank)") {
		t.Fatalf("open policy: exit %d: %s\n%s", code, stderr, out)
	}
	bad := filepath.Join(t.TempDir(), "bad.hcl")
	writeFile(t, bad, "actor {")
	if code, _, _ := runCLI(t, "policy", "diff", bad, "--repo", dir); code != exitFindings {
		t.Errorf("invalid policy: exit %d, want %d", code, exitFindings)
	}
}
