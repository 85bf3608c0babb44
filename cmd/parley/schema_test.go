package main

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/parleyhq/parley/internal/demo"
	"github.com/parleyhq/parley/internal/schematest"
)

// jsonOutputs maps every command with a --json flag to the schema its output must match. A command
// that gains --json without a published schema fails TestEveryJSONCommandHasASchema.
var jsonOutputs = map[string]string{
	"discover":     "discover.schema.json",
	"doctor":       "doctor.schema.json",
	"explain":      "explain.schema.json",
	"fields diff":  "field-changes.schema.json",
	"gates":        "gates.schema.json",
	"ingest":       "ingest.schema.json",
	"ledger":       "ledger.schema.json",
	"policy check": "policy-check.schema.json",
	"policy diff":  "policy-diff.schema.json",
	"propose":      "proposal-response.schema.json",
	"review":       "verdicts-document.schema.json",
	"simulate":     "simulate.schema.json",
	"tokens list":  "tokens.schema.json",
	"verdicts":     "drift-verdicts.schema.json", // with --timers: timers.schema.json
	"version":      "version.schema.json",
}

func TestEveryJSONCommandHasASchema(t *testing.T) {
	var withJSON []string
	var walk func(c *cobra.Command, path string)
	walk = func(c *cobra.Command, path string) {
		if c.Flags().Lookup("json") != nil {
			withJSON = append(withJSON, path)
		}
		for _, sub := range c.Commands() {
			p := sub.Name()
			if path != "" {
				p = path + " " + sub.Name()
			}
			walk(sub, p)
		}
	}
	walk(newRootCmd(), "")
	sort.Strings(withJSON)
	var listed []string
	for c := range jsonOutputs {
		listed = append(listed, c)
	}
	sort.Strings(listed)
	if !slices.Equal(withJSON, listed) {
		t.Fatalf("commands with --json: %v\nlisted with a schema: %v", withJSON, listed)
	}
	names, err := schematest.Names()
	if err != nil {
		t.Fatal(err)
	}
	for c, s := range jsonOutputs {
		if !slices.Contains(names, s) {
			t.Errorf("%s: no docs/schemas/%s", c, s)
		}
	}
}

// TestEveryJSONOutputMatchesItsSchema runs every command that prints JSON on real inputs (the demo
// repository, the drift examples, the scenarios) and validates what it prints against the published
// schema. Each run is chosen to reach the optional parts: expressions, yields, removals, gates,
// adoptions, timers, problems.
func TestEveryJSONOutputMatchesItsSchema(t *testing.T) {
	dir, git := demoRepo(t)
	state := filepath.Join(t.TempDir(), "drift.db")
	covered := map[string]bool{}
	check := func(command, schema string, args ...string) string {
		t.Helper()
		code, out, errOut := runCLI(t, args...)
		if code != 0 && code != exitFindings {
			t.Fatalf("%v: exit %d: %s", args, code, errOut)
		}
		schematest.Validate(t, schema, []byte(out))
		if jsonOutputs[command] == "" {
			t.Fatalf("%s is not in jsonOutputs", command)
		}
		covered[command] = true
		return out
	}

	// Proposals, judged offline before the drift below moves Git's value: a refusal (with its
	// holder) and an acceptance (with its until).
	if out := check("propose", "proposal-response.schema.json", "propose", "--repo", dir, "--as", agentIdentity, "--at", "2026-11-20T12:00:00Z",
		"--field", capacityField, "--value", "24", "--json"); !strings.Contains(out, `"holder"`) {
		t.Errorf("propose --json refuses 24 without naming the holder:\n%s", out)
	}
	if out := check("propose", "proposal-response.schema.json", "propose", "--repo", dir, "--as", agentIdentity, "--at", "2026-11-20T12:00:00Z",
		"--field", capacityField, "--value", "12", "--expires", "4h", "--json"); !strings.Contains(out, `"until"`) {
		t.Errorf("propose --json accepts 12 for 4h without saying until when:\n%s", out)
	}

	// Drift: ingest writes gates and adoptions into the demo repository and records verdicts.
	out := check("ingest", "ingest.schema.json", append([]string{"ingest", "--repo", dir, "--apply", "--state", state, "--json"}, driftExamples...)...)
	for _, want := range []string{`"action": "gate"`, `"action": "adopt"`, `"decision": "veto"`, `"timers": [`} {
		if !strings.Contains(out, want) {
			t.Errorf("ingest --json lacks %s (the run must reach it to check its shape)", want)
		}
	}
	check("verdicts", "drift-verdicts.schema.json", "verdicts", "--state", state, "--json")
	if out := check("verdicts", "timers.schema.json", "verdicts", "--state", state, "--timers", "--json"); !strings.Contains(out, `"due"`) {
		t.Errorf("verdicts --timers --json lists no timer:\n%s", out)
	}
	git.Run("checkout", "--quiet", "--force", "main") // the work tree as the gate commits left the branch
	if out := check("gates", "gates.schema.json", "gates", "--repo", dir, "--json"); !strings.Contains(out, `"target"`) {
		t.Errorf("gates --json lists no gate:\n%s", out)
	}
	if out := check("discover", "discover.schema.json", "discover", "--repo", dir, "--object", "k8s:apps/Deployment/prod/web", "--json"); !strings.Contains(out, `"found": true`) {
		t.Errorf("discover --json does not locate the demo's Deployment:\n%s", out)
	}

	// The ledger, and verdicts from it.
	check("ledger", "ledger.schema.json", "ledger", "--repo", dir, "--all", "--json")
	check("explain", "explain.schema.json", "explain", "k8s:apps/Deployment/prod/web#/spec/replicas", "--repo", dir, "--json")
	check("explain", "explain.schema.json", "explain", "tf:**//*#/**", "--repo", dir, "--json")

	// The agents' tokens: one used, one revoked.
	agents := filepath.Join(t.TempDir(), "agents.db")
	if _, err := verifyToken(t, agents, createToken(t, agents, "kafka-agent", agentIdentity)); err != nil {
		t.Fatal(err)
	}
	createToken(t, agents, "retired", "github-user:alice")
	if code, _, errOut := runCLI(t, "tokens", "revoke", "retired", "--db", agents); code != 0 {
		t.Fatalf("tokens revoke: %s", errOut)
	}
	check("version", "version.schema.json", "version", "--json")
	if out := check("tokens list", "tokens.schema.json", "tokens", "list", "--db", agents, "--json"); !strings.Contains(out, `"last_used"`) || !strings.Contains(out, `"revoked"`) {
		t.Errorf("tokens list --json lacks last_used or revoked:\n%s", out)
	}

	// A claims file with every form of claim, itself valid input.
	claims := `{
  "at": "2026-11-22T10:00:00Z",
  "git": [{"field": "tf:infra/kafka//aws_autoscaling_group.consumer#/desired_capacity", "actor": {"source": "git-author", "id": "alice@example.com"},
           "value": 6, "at": "2026-11-20T09:00:00Z", "evidence": {"source": "git", "commit": "b0b0b0b"}}],
  "live": [
    {"field": "tf:infra/kafka//aws_autoscaling_group.consumer#/desired_capacity", "actor": {"source": "aws-principal", "id": "arn:aws:iam::123456789012:role/kafka-scaling-agent"},
     "expr": "var.capacity * 2", "intent": "performance", "motivation": {"kind": "traffic", "severity": "high"}, "at": "2026-11-22T09:58:00Z", "expires": "4h"},
    {"field": "k8s:apps/Deployment/prod/web#/spec/replicas", "actor": {"source": "github-user", "id": "bob", "groups": ["parleyhq/sre"]}, "yield": true, "at": "2026-11-22T09:00:00Z"},
    {"field": "k8s:apps/Deployment/prod/web#/spec/template/spec/containers/0/resources/limits", "actor": {"source": "k8s-user", "id": "system:serviceaccount:finops:cost-optimizer"},
     "remove": true, "intent": "cost", "at": "2026-11-22T09:30:00Z", "evidence": {"source": "k8s-audit", "event_ids": ["e1"]}}
  ],
  "git_values": {"tf:infra/kafka//aws_autoscaling_group.consumer#/max_size": 16}
}`
	schematest.Validate(t, "claims-file.schema.json", []byte(claims))
	claimsFile := writeFile(t, filepath.Join(t.TempDir(), "claims.json"), claims)
	out = check("explain", "explain.schema.json", "explain", "tf:**//*#/**", "--repo", dir, "--claims", claimsFile, "--json")
	out += check("explain", "explain.schema.json", "explain", "k8s:apps/Deployment/prod/web#/**", "--repo", dir, "--claims", claimsFile, "--json")
	for _, want := range []string{`"expr": "var.capacity * 2"`, `"remove": true`} {
		if !strings.Contains(out, want) {
			t.Errorf("explain --claims --json lacks %s:\n%s", want, out)
		}
	}

	// A pull request, judged offline.
	git.Run("checkout", "--quiet", "-b", "scale")
	web := filepath.Join(dir, "k8s/prod/web.yaml")
	b, err := os.ReadFile(web)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, web, strings.Replace(string(b), "replicas: 8", "replicas: 12", 1))
	git.Run("commit", "--quiet", "-am", "Scale web for the launch\n\nIntent: performance\nMotivation: launch\n")
	check("review", "verdicts-document.schema.json", "review", "--repo", dir, "--base", "main", "--head", "scale", "--json", "--at", "2026-11-25T10:00:00Z")

	// A change to the policy: what it changes, offline and in a review of the branch, and a
	// policy whose patterns match no field, or that does not parse.
	policyFile := filepath.Join(dir, ".parley", "policy.hcl")
	git.Run("checkout", "--quiet", "-b", "no-hpa", "main")
	writeFile(t, policyFile, withoutHPAOwnership(t))
	git.Run("commit", "--quiet", "-am", "Stop giving replicas to the HPA")
	if out := check("review", "verdicts-document.schema.json", "review", "--repo", dir, "--base", "main", "--head", "no-hpa", "--json", "--at", "2026-11-20T10:00:00Z"); !strings.Contains(out, `"policy_change"`) || !strings.Contains(out, `"winner"`) {
		t.Errorf("review --json of a policy change lacks its diff:\n%s", out)
	}
	git.Run("checkout", "--quiet", "-b", "broken-policy", "main")
	writeFile(t, policyFile, "actor {")
	git.Run("commit", "--quiet", "-am", "Break the policy")
	if out := check("review", "verdicts-document.schema.json", "review", "--repo", dir, "--base", "main", "--head", "broken-policy", "--json", "--at", "2026-11-20T10:00:00Z"); !strings.Contains(out, `"invalid"`) {
		t.Errorf("review --json of a broken policy lacks its errors:\n%s", out)
	}
	git.Run("checkout", "--quiet", "scale")
	next := writeFile(t, filepath.Join(t.TempDir(), "next.hcl"), withoutHPAOwnership(t))
	if out := check("policy diff", "policy-diff.schema.json", "policy", "diff", next, "--repo", dir, "--base", "main", "--at", "2026-11-20T10:00:00Z", "--json"); !strings.Contains(out, `"winner"`) {
		t.Errorf("policy diff --json names no winner:\n%s", out)
	}
	typo := writeFile(t, filepath.Join(t.TempDir(), "typo.hcl"), demo.Policy()+`
freeze "no-scaling" {
  start  = "2026-12-24T00:00:00Z"
  end    = "2026-12-27T00:00:00Z"
  fields = ["k8s:apps/Deploymnet/*/*#/spec/replicas"]
}
`)
	if out := check("policy check", "policy-check.schema.json", "policy", "check", typo, "--repo", dir, "--json"); !strings.Contains(out, `"nearest"`) {
		t.Errorf("policy check --json names no nearest field:\n%s", out)
	}
	broken := writeFile(t, filepath.Join(t.TempDir(), "broken.hcl"), "actor {")
	if out := check("policy check", "policy-check.schema.json", "policy", "check", broken, "--json"); !strings.Contains(out, `"message"`) {
		t.Errorf("policy check --json of a broken policy lacks its errors:\n%s", out)
	}

	// Every scenario's timeline.
	scenarios, err := filepath.Glob("../../examples/*/events.jsonl")
	if err != nil || len(scenarios) == 0 {
		t.Fatalf("no scenarios: %v", err)
	}
	for _, s := range scenarios {
		out := check("simulate", "simulate.schema.json", "simulate", "--json", s)
		golden, err := os.ReadFile(filepath.Join(filepath.Dir(s), "expected.json"))
		if err != nil || string(golden) != out {
			t.Errorf("simulate --json %s differs from its expected.json (%v)", s, err)
		}
	}

	// Field diffs: Kubernetes and Terraform, with an expression, an added and a removed field.
	tdir := t.TempDir()
	oldTF := writeFile(t, filepath.Join(tdir, "old.tf"), "resource \"aws_autoscaling_group\" \"consumer\" {\n  desired_capacity = 4\n  max_size = var.max\n}\n")
	newTF := writeFile(t, filepath.Join(tdir, "new.tf"), "resource \"aws_autoscaling_group\" \"consumer\" {\n  desired_capacity = var.capacity\n  min_size = 2\n}\n")
	out = check("fields diff", "field-changes.schema.json", "fields", "diff", "--as", "infra/kafka/main.tf", "--json", oldTF, newTF)
	for _, want := range []string{`"old": 4`, `"new_expr": "var.capacity"`, `"old_expr": "var.max"`, `"new": 2`} {
		if !strings.Contains(out, want) {
			t.Errorf("fields diff --json lacks %s:\n%s", want, out)
		}
	}
	var changes []map[string]any
	if err := json.Unmarshal([]byte(out), &changes); err != nil {
		t.Fatal(err)
	}

	// doctor with a GitHub that does not answer: the budget check and a failed App check.
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	closed.Close()
	key, _ := rsa.GenerateKey(rand.Reader, 2048)
	t.Setenv("PARLEY_APP_ID", "7")
	t.Setenv("PARLEY_PRIVATE_KEY", string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})))
	t.Setenv("PARLEY_WEBHOOK_SECRETS", "s")
	t.Setenv("PARLEY_GITHUB_URL", "http://"+closed.Addr().String()+"/")
	check("doctor", "doctor.schema.json", "doctor", "--json", "--memory-limit", "1Gi")

	for c := range jsonOutputs {
		if !covered[c] {
			t.Errorf("%s --json was not run", c)
		}
	}
}

// The schemas are not vacuous: the v1 shape, nulls and Go-cased keys fail them.
func TestSchemasRefuseTheOldShapes(t *testing.T) {
	for _, tt := range []struct{ schema, doc string }{
		{"verdicts-document.schema.json", `{"schema":"parley.dev/verdicts/v1","generated":"2026-11-22T09:00:00Z","verdicts":[]}`},
		{"verdicts-document.schema.json", `{"schema":"parley.dev/verdicts/v2","generated":"2026-11-22T09:00:00Z","verdicts":[{"field":"k8s:apps/Deployment/prod/web#/spec/replicas","decision":"yield","rule":"rank","winner":{"Field":"k8s:apps/Deployment/prod/web#/spec/replicas"}}]}`},
		{"verdict.schema.json", `{"field":"k8s:apps/Deployment/prod/web#/spec/replicas","decision":"yield","rule":"rank","explanation":null}`},
		{"field-changes.schema.json", `[{"field":"k8s:apps/Deployment/prod/web#/spec/replicas","old":{"json":3},"new":{"json":5},"old_expr":"x"}]`},
		{"drift-verdicts.schema.json", `[{"verdict":{"field":"k8s:apps/Deployment/prod/web#/spec/replicas","decision":"yield","rule":"rank"},"at":"2026-11-22T09:00:00Z","pullRequest":3}]`},
		{"gates.schema.json", `[{"file":"a.yaml","field":"k8s:apps/Deployment/prod/web#/spec/replicas","Target":{"Kind":"Application","Name":"web"}}]`},
		{"ledger.schema.json", `{"branch":"refs/heads/main","tip":"x","commits":1,"update":{"commits":1,"rebuilt":false},"fields":[{"field":"k8s:apps/Deployment/prod/web#/spec/replicas","history":[],"current":null}],"problems":[]}`},
	} {
		if schematest.Check(tt.schema, []byte(tt.doc)) == nil {
			t.Errorf("%s accepts %s", tt.schema, tt.doc)
		}
	}
}
