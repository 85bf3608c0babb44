package main

import (
	"github.com/parleyhq/parley/internal/demo"

	"bytes"
	"context"
	"encoding/json"
	"fmt"
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
	// A policy that lets identities no actor vouches for declare something says so.
	open := filepath.Join(dir, "open.hcl")
	writeFile(t, open, "intent \"cost\" { rank = 40 }\nunknown_actors {\n  intents = [\"cost\"]\n  expiry  = true\n}\n")
	for file, want := range map[string]string{
		noKeys:   "note: actor dev matches git_authors but lists no signing_keys: its commits count as an unverified identity",
		trusting: "note: trust_unsigned_git_authors = true: commit author emails are believed without a signature",
		open:     "note: unknown_actors lets any identity no actor vouches for (any cluster user, pull request author or unverified commit) declare intents cost; an expiry that conditions see",
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
// anyone tune the Kafka lag alarm changes no verdict now (Git's value stands under either policy)
// but would have decided the forged commit that tuned it otherwise (an unverified identity, which
// the base's writers veto): the second view, labelled as such; the unchanged policy flips none.
func TestPolicyDiffShowsTheVerdictsANewPolicyFlips(t *testing.T) {
	dir, _ := demoRepo(t)
	same := filepath.Join(t.TempDir(), "same.hcl")
	writeFile(t, same, demo.Policy())
	code, out, stderr := runCLI(t, "policy", "diff", same, "--repo", dir, "--at", "2026-11-20T10:00:00Z")
	if code != 0 || !strings.Contains(out, "against main:.parley/policy.hcl") || !strings.Contains(out, ": 0 of 49 fields change their verdict") ||
		!strings.Contains(out, ": 0 of 49 changes would have been decided otherwise") {
		t.Fatalf("unchanged policy: exit %d: %s\n%s", code, stderr, out)
	}
	open := filepath.Join(t.TempDir(), "open.hcl")
	writeFile(t, open, strings.Replace(demo.Policy(), `writers = ["kafka-agent", "oncall"]`, "", 1))
	code, out, stderr = runCLI(t, "policy", "diff", open, "--repo", dir, "--at", "2026-11-20T10:00:00Z")
	if code != 0 || !strings.Contains(out, ": 0 of 49 fields change their verdict") ||
		!strings.Contains(out, "As each field's last change was judged when it was made: 1 of 49 changes would have been decided otherwise.\n"+
			"- tf:infra/kafka//aws_cloudwatch_metric_alarm.consumer_lag#/evaluation_periods: veto (rule writers) -> enforce-git (rule rank)") {
		t.Fatalf("open policy: exit %d: %s\n%s", code, stderr, out)
	}
	if code, _, _ := runCLI(t, "policy", "diff", open, "--repo", dir, "--at", "2026-11-20T10:00:00Z", "--exit-code"); code != exitFindings {
		t.Errorf("--exit-code with a verdict that differs: exit %d, want %d", code, exitFindings)
	}
	if code, _, _ := runCLI(t, "policy", "diff", same, "--repo", dir, "--exit-code"); code != 0 {
		t.Errorf("--exit-code with nothing that differs: exit %d, want 0", code)
	}
	bad := filepath.Join(t.TempDir(), "bad.hcl")
	writeFile(t, bad, "actor {")
	if code, _, _ := runCLI(t, "policy", "diff", bad, "--repo", dir); code != exitFindings {
		t.Errorf("invalid policy: exit %d, want %d", code, exitFindings)
	}
	if code, _, _ := runCLI(t, "policy", "diff", same, "--repo", dir, "--at", "yesterday"); code != exitUsage {
		t.Errorf("--at yesterday: exit %d, want %d", code, exitUsage)
	}
}

// withoutHPAOwnership is the demo policy without the HPA's standing ownership of replicas.
func withoutHPAOwnership(t *testing.T) string {
	t.Helper()
	owner := `  owner      = "hpa"
  owner_when = contains(git_values("k8s:autoscaling/HorizontalPodAutoscaler/${field.namespace}/*#/spec/scaleTargetRef/name"), field.name)
`
	if !strings.Contains(demo.Policy(), owner) {
		t.Fatal("the demo policy no longer gives replicas to the HPA as this test expects")
	}
	return strings.Replace(demo.Policy(), owner, "", 1)
}

// TestPolicyDiffJudgesWhatChangesNow is issue 33's attack: removing the HPA's ownership of
// replicas used to report "0 of 49 fields change their verdict" (each field's last change judged
// as it was made, when the HPA owned nothing that mattered), while explain --policy flips replicas
// from yield to enforce-git. The diff now judges each field's standing claims now, as explain
// does, and says so; --json carries the same.
func TestPolicyDiffJudgesWhatChangesNow(t *testing.T) {
	dir, _ := demoRepo(t)
	next := writeFile(t, filepath.Join(t.TempDir(), "next.hcl"), withoutHPAOwnership(t))
	const at, replicas = "2026-11-20T10:00:00Z", "k8s:apps/Deployment/prod/web#/spec/replicas"

	// explain is the reference: what the verdict is now under either policy.
	decision := func(args ...string) core.Decision {
		t.Helper()
		_, out, stderr := runCLI(t, append([]string{"explain", replicas, "--repo", dir, "--at", at, "--json"}, args...)...)
		var v core.Verdict
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatalf("explain %v: %v\n%s%s", args, err, out, stderr)
		}
		return v.Decision
	}
	if before, after := decision(), decision("--policy", next); before != core.DecisionYield || after != core.DecisionEnforceGit {
		t.Fatalf("explain: %s under the base, %s under the new policy; the test expects yield and enforce-git", before, after)
	}

	code, out, stderr := runCLI(t, "policy", "diff", next, "--repo", dir, "--at", at)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{
		"Now (2026-11-20T10:00:00Z), judging each field's standing claims (Git's value and the field's history): 1 of 49 fields change their verdict under the new policy.\n" +
			"- " + replicas + ": yield (rule owner.replicas) -> enforce-git (rule no-contest)\n",
		// docs/policy.md shows this output.
		"As each field's last change was judged when it was made: 1 of 49 changes would have been decided otherwise.\n" +
			"- " + replicas + ": yield (rule owner.replicas, no winner) -> yield (rule rule.incident-first, oncall wins with 8)\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("policy diff lacks %q:\n%s", want, out)
		}
	}

	code, out, stderr = runCLI(t, "policy", "diff", next, "--repo", dir, "--at", at, "--json")
	if code != 0 {
		t.Fatalf("--json: exit %d: %s", code, stderr)
	}
	var doc struct {
		Policy, Base string
		At           time.Time
		Fields       int
		Now          []struct {
			Field    string
			Old, New struct{ Decision, Rule string }
		}
		Changes   int
		AsChanged []json.RawMessage `json:"as_changed"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("--json: %v\n%s", err, out)
	}
	if doc.Policy != next || doc.Base != "main:.parley/policy.hcl" || !doc.At.Equal(time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)) || doc.Fields != 49 ||
		len(doc.Now) != 1 || doc.Now[0].Field != replicas || doc.Now[0].Old.Decision != "yield" || doc.Now[0].New.Decision != "enforce-git" ||
		doc.Now[0].New.Rule != "no-contest" || doc.Changes != 49 || doc.AsChanged == nil {
		t.Errorf("--json: %+v\n%s", doc, out)
	}
}

// TestReviewOfAPolicyChangeSaysWhatChangesNow: offline review of a branch that changes only the
// policy concluded neutral and did not mention the change. It now says the branch changes the
// policy, shows what changes now, and concludes action_required (the App waits for a policy
// owner's approval); a branch whose policy does not parse fails.
func TestReviewOfAPolicyChangeSaysWhatChangesNow(t *testing.T) {
	dir, git := demoRepo(t)
	git.Run("checkout", "-q", "-b", "no-hpa")
	writeFile(t, filepath.Join(dir, ".parley", "policy.hcl"), withoutHPAOwnership(t))
	git.Run("commit", "-q", "-am", "Stop giving replicas to the HPA")
	git.Run("checkout", "-q", "-b", "broken", "main")
	writeFile(t, filepath.Join(dir, ".parley", "policy.hcl"), "actor {")
	git.Run("commit", "-q", "-am", "Break the policy")
	git.Run("checkout", "-q", "main")

	// Offline review cannot see a policy owner's approval, so the change waits (exit 1), as the
	// App's check does until one approves.
	code, out, stderr := runCLI(t, "review", "--repo", dir, "--head", "no-hpa", "--base", "main", "--at", "2026-11-20T10:00:00Z")
	if code != 1 {
		t.Fatalf("exit %d: %s\n%s", code, stderr, out)
	}
	for _, want := range []string{
		"policy: this branch changes the policy (.parley/policy.hcl).",
		"1 of 49 fields change their verdict under the new policy.\n  - k8s:apps/Deployment/prod/web#/spec/replicas: yield (rule owner.replicas) -> enforce-git (rule no-contest)\n",
		"\nconclusion: action_required\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("review lacks %q:\n%s", want, out)
		}
	}
	code, out, stderr = runCLI(t, "review", "--repo", dir, "--head", "no-hpa", "--base", "main", "--at", "2026-11-20T10:00:00Z", "--json")
	var doc struct {
		Conclusion   string
		PolicyChange *struct {
			Path string
			Diff struct {
				Now []struct{ Field string }
			}
		} `json:"policy_change"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || code != 1 {
		t.Fatalf("--json: exit %d, %v: %s\n%s", code, err, stderr, out)
	}
	if doc.Conclusion != "action_required" || doc.PolicyChange == nil || doc.PolicyChange.Path != ".parley/policy.hcl" ||
		len(doc.PolicyChange.Diff.Now) != 1 || doc.PolicyChange.Diff.Now[0].Field != "k8s:apps/Deployment/prod/web#/spec/replicas" {
		t.Errorf("--json: %+v\n%s", doc, out)
	}

	code, out, _ = runCLI(t, "review", "--repo", dir, "--head", "broken", "--base", "main", "--at", "2026-11-20T10:00:00Z")
	if code != exitFindings || !strings.Contains(out, "The new policy is invalid:") || !strings.Contains(out, "\nconclusion: failure\n") {
		t.Errorf("broken policy: exit %d, want %d, the errors and failure:\n%s", code, exitFindings, out)
	}
}

// TestPolicyCheckWarnsAboutPatternsThatMatchNoField: with --repo, policy check reads the
// repository's fields and warns, at the pattern's line, about every pattern that matches none,
// naming the field it is nearest to matching: a ConfigMap addressed by its apiVersion (v1) where
// Parley addresses it by group (core), a misspelled kind. Patterns that match are not named; the
// warnings do not fail the check; --json carries them.
func TestPolicyCheckWarnsAboutPatternsThatMatchNoField(t *testing.T) {
	dir, git := demoRepo(t)
	writeFile(t, filepath.Join(dir, "k8s", "prod", "settings.yaml"), `apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: prod
data:
  LOG_LEVEL: info
`)
	git.Run("add", ".")
	git.Run("commit", "-q", "-m", "Add the settings")
	pol := demo.Policy() + `
field "settings" {
  match = ["k8s:v1/ConfigMap/prod/settings#/data/*"]
  writers = ["oncall"]
}

freeze "no-scaling" {
  start  = "2026-12-24T00:00:00Z"
  end    = "2026-12-27T00:00:00Z"
  fields = ["k8s:apps/Deploymnet/*/*#/spec/replicas", "k8s:apps/Deployment/*/*#/spec/replicas"]
}
`
	file := writeFile(t, filepath.Join(dir, ".parley", "policy.hcl"), pol)
	lineOf := func(s string) int {
		return 1 + strings.Count(pol[:strings.Index(pol, s)], "\n")
	}
	code, out, stderr := runCLI(t, "policy", "check", "--repo", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, stderr, out)
	}
	for _, want := range []string{
		fmt.Sprintf(`%s:%d:13: warning: field "settings" pattern "k8s:v1/ConfigMap/prod/settings#/data/*" matches no field of the repository; nearest field: k8s:core/ConfigMap/prod/settings#/data/LOG_LEVEL`,
			file, lineOf(`"k8s:v1/ConfigMap`)),
		fmt.Sprintf(`%s:%d:14: warning: freeze "no-scaling" pattern "k8s:apps/Deploymnet/*/*#/spec/replicas" matches no field of the repository; nearest field: k8s:apps/Deployment/prod/web#/spec/replicas`,
			file, lineOf(`"k8s:apps/Deploymnet`)),
	} {
		if !strings.Contains(out, want) {
			t.Errorf("policy check lacks\n%s\nin:\n%s", want, out)
		}
	}
	if strings.Contains(out, `pattern "k8s:apps/Deployment/*/*#/spec/replicas"`) {
		t.Errorf("a pattern that matches is warned about:\n%s", out)
	}
	// Without --repo nothing is read but the file: no warnings.
	if _, out, _ := runCLI(t, "policy", "check", file); strings.Contains(out, "warning:") {
		t.Errorf("without --repo:\n%s", out)
	}

	code, out, stderr = runCLI(t, "policy", "check", "--repo", dir, "--json")
	var res struct {
		File     string
		Valid    bool
		Warnings []struct {
			Line           int
			Block, Pattern string
			Nearest        string
		}
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != 0 {
		t.Fatalf("--json: exit %d, %v: %s\n%s", code, err, stderr, out)
	}
	found := false
	for _, w := range res.Warnings {
		if w.Pattern == "k8s:v1/ConfigMap/prod/settings#/data/*" && w.Block == `field "settings"` && w.Nearest == "k8s:core/ConfigMap/prod/settings#/data/LOG_LEVEL" &&
			w.Line == lineOf(`"k8s:v1/ConfigMap`) {
			found = true
		}
	}
	if !res.Valid || res.File != file || !found {
		t.Errorf("--json: %+v\n%s", res, out)
	}

	writeFile(t, file, "actor {")
	code, out, _ = runCLI(t, "policy", "check", "--repo", dir, "--json")
	var bad struct {
		Valid  bool
		Errors []struct {
			Line    int
			Message string
		}
	}
	if err := json.Unmarshal([]byte(out), &bad); err != nil || code != exitFindings || bad.Valid || len(bad.Errors) == 0 || bad.Errors[0].Line != 1 {
		t.Errorf("--json of an invalid policy: exit %d, %v: %+v\n%s", code, err, bad, out)
	}
}

// TestNearestAddress: the field a pattern is nearest to matching, wildcards matching what they
// may (* within a segment, ** whole segments).
func TestNearestAddress(t *testing.T) {
	addrs := []string{
		"k8s:apps/Deployment/prod/web#/spec/replicas",
		"k8s:apps/Deployment/prod/web#/spec/template/spec/containers/0/image",
		"k8s:autoscaling/HorizontalPodAutoscaler/prod/web#/spec/maxReplicas",
		"k8s:core/ConfigMap/prod/settings#/data/LOG_LEVEL",
		"tf:infra/kafka//aws_autoscaling_group.consumer#/desired_capacity",
	}
	for _, tt := range []struct {
		pattern, want string
		edits         int
	}{
		{"k8s:v1/ConfigMap/*/*#/data/*", "k8s:core/ConfigMap/prod/settings#/data/LOG_LEVEL", 4},
		{"k8s:apps/Deploymnet/*/*#/spec/replicas", "k8s:apps/Deployment/prod/web#/spec/replicas", 2},
		{"k8s:apps/Deployment/*/*#/spec/replica", "k8s:apps/Deployment/prod/web#/spec/replicas", 1},
		{"k8s:autoscaling/HorizontalPodAutoscaler/*/*#/spec/maxReplica", "k8s:autoscaling/HorizontalPodAutoscaler/prod/web#/spec/maxReplicas", 1},
		{"tf:**//aws_autoscaling_groups.*#/desired_capacity", "tf:infra/kafka//aws_autoscaling_group.consumer#/desired_capacity", 1},
		{"k8s:core/ConfigMaps/*/*", "k8s:core/ConfigMap/prod/settings#/data/LOG_LEVEL", 1},
	} {
		got, edits := nearestAddress(tt.pattern, addrs)
		if got != tt.want || edits != tt.edits {
			t.Errorf("nearestAddress(%q) = %q, %d edits; want %q, %d", tt.pattern, got, edits, tt.want, tt.edits)
		}
	}
	if got, edits := nearestAddress("k8s:apps/Deployment/*/*", nil); got != "" || edits != -1 {
		t.Errorf("no fields: %q, %d", got, edits)
	}
}
