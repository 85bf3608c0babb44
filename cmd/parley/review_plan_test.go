package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parleyhq/parley/internal/schematest"
)

// planFixture is a plan JSON fixture of package tfplan (terraform show -json, format 1.2).
func planFixture(name string) string {
	return filepath.Join("..", "..", "reconcile", "tfplan", "testdata", name+".json")
}

const planAt = "2026-11-24T10:00:00Z" // before the demo policy's peak-sales freeze

// TestReviewPlanBoundsVetoAndAccept: the demo's Kafka consumers are bounded by Terraform's own
// min_size 4 and max_size 16; on-call (alice) scaling them to 24 is vetoed, to 12 accepted.
func TestReviewPlanBoundsVetoAndAccept(t *testing.T) {
	dir, _ := demoRepo(t)
	base := []string{"review", "--repo", dir, "--module-dir", "infra/kafka", "--author", "git-author:alice@parley.example", "--at", planAt}

	code, out, stderr := runCLI(t, append(base, "--plan", planFixture("kafka-scale-24"))...)
	if code != exitFindings {
		t.Fatalf("24: exit %d, want 1: %s\n%s", code, stderr, out)
	}
	for _, want := range []string{
		"1 field, 1 veto (plan by git-author:alice@parley.example, terraform 1.9.0, format 1.2)",
		"tf:infra/kafka//aws_autoscaling_group.consumer#/desired_capacity",
		"plan:     update aws_autoscaling_group.consumer: 5 -> 24",
		"blocks:   the plan's value is vetoed",
		"decision: veto", "oncall wants 24, above the maximum 16",
		"conclusion: failure",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("24: output lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(stderr, "vetoes") {
		t.Errorf("24: stderr %q", stderr)
	}

	code, out, stderr = runCLI(t, append(base, "--plan", planFixture("kafka-scale-12"))...)
	if code != 0 {
		t.Fatalf("12: exit %d, want 0: %s\n%s", code, stderr, out)
	}
	for _, want := range []string{"5 -> 12", "decision: adopt", "every claim is within them", "conclusion: success"} {
		if !strings.Contains(out, want) {
			t.Errorf("12: output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "blocks:") {
		t.Errorf("12: a change blocks:\n%s", out)
	}

	// The same plan from standard input, as JSON.
	plan, err := os.ReadFile(planFixture("kafka-scale-24"))
	if err != nil {
		t.Fatal(err)
	}
	code, out, stderr = runIn(t, string(plan), append(base, "--plan", "-", "--json")...)
	var doc struct {
		Schema, Conclusion string
		Changes            []struct{ Field, Action, Blocks string }
		Verdicts           []struct{ Decision, Rule string }
	}
	if code != exitFindings || json.Unmarshal([]byte(out), &doc) != nil {
		t.Fatalf("stdin --json: exit %d: %s\n%s", code, stderr, out)
	}
	if doc.Schema != "parley.dev/plan-review/v1" || doc.Conclusion != "failure" || len(doc.Verdicts) != 1 || doc.Verdicts[0].Rule != "bounds" ||
		len(doc.Changes) != 1 || doc.Changes[0].Blocks != "veto" || doc.Changes[0].Action != "update" {
		t.Errorf("stdin --json: %s", out)
	}
	schematest.Validate(t, "plan-review.schema.json", []byte(out))
}

// TestReviewPlanDefaultAuthor: without --author the plan is the HEAD commit author's (the demo's
// last commit is dana's, the platform team's), who may not write the Kafka capacity.
func TestReviewPlanDefaultAuthor(t *testing.T) {
	dir, _ := demoRepo(t)
	code, out, stderr := runCLI(t, "review", "--repo", dir, "--module-dir", "infra/kafka", "--at", planAt, "--plan", planFixture("kafka-scale-12"))
	if code != exitFindings {
		t.Fatalf("exit %d: %s\n%s", code, stderr, out)
	}
	for _, want := range []string{"plan by git-author:dana@parley.example", "decision: veto", "rule:     writers", "vetoed platform"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// Intent and motivation from flags: alice declares an incident, which on-call may assert.
	code, out, stderr = runCLI(t, "review", "--repo", dir, "--module-dir", "infra/kafka", "--at", planAt, "--plan", planFixture("kafka-scale-12"),
		"--author", "git-author:alice@parley.example", "--intent", "availability", "--motivation", "incident INC-4300 severity=high")
	if code != 0 || !strings.Contains(out, "intent availability, motivation incident INC-4300 severity=high") || !strings.Contains(out, "motivation incident INC-4300") {
		t.Errorf("--intent --motivation: exit %d: %s\n%s", code, stderr, out)
	}
}

// TestReviewPlanActions: create, update, delete and replace, values known after apply, and
// modules, in text and in JSON that matches the published schema.
func TestReviewPlanActions(t *testing.T) {
	dir, _ := demoRepo(t)
	for _, tt := range []struct {
		plan, moduleDir string
		want            []string
	}{
		{"create", ".", []string{
			"tf:.//aws_instance.web#/tags/Name", `plan:     create aws_instance.web: (absent) -> "web"`,
			"plan:     create aws_instance.web: (absent) -> (known after apply)", "tf:.//aws_instance.web#/root_block_device/0/volume_id",
		}},
		{"update", "infra/web", []string{
			"tf:infra/web//aws_security_group.web#/ingress/0/from_port", "update aws_security_group.web: 443 -> 8443",
			`update aws_security_group.web: "prod" -> (absent)`,
		}},
		{"delete", ".", []string{
			"tf:.//aws_s3_bucket.logs#/bucket", `delete aws_s3_bucket.logs: "parley-logs" -> (absent)`, "wants (absent)",
		}},
		{"replace", ".", []string{
			`replace aws_instance.web: "ami-0c55b159cbfafe1f0" -> "ami-0fedcba9876543210"`,
			"problem: aws_instance.api: replaced (replace_by_request) without an attribute change: nothing to judge",
		}},
		{"modules", "infra", []string{
			"tf:infra/modules/kafka//aws_autoscaling_group.consumer#/desired_capacity",
			"tf:infra/modules/alarm//aws_cloudwatch_metric_alarm.lag#/threshold",
			`problem: module.vpc: module source "terraform-aws-modules/vpc/aws" is not a local path`,
		}},
	} {
		code, out, stderr := runCLI(t, "review", "--repo", dir, "--author", "github-user:dana", "--at", planAt, "--module-dir", tt.moduleDir, "--plan", planFixture(tt.plan))
		if code != 0 && code != exitFindings {
			t.Fatalf("%s: exit %d: %s", tt.plan, code, stderr)
		}
		for _, want := range tt.want {
			if !strings.Contains(out, want) {
				t.Errorf("%s: output lacks %q:\n%s", tt.plan, want, out)
			}
		}
		code, out, stderr = runCLI(t, "review", "--repo", dir, "--author", "github-user:dana", "--at", planAt, "--module-dir", tt.moduleDir, "--plan", planFixture(tt.plan), "--json")
		if code != 0 && code != exitFindings {
			t.Fatalf("%s --json: exit %d: %s", tt.plan, code, stderr)
		}
		schematest.Validate(t, "plan-review.schema.json", []byte(out))
		if tt.plan == "create" && !strings.Contains(out, `"new_expr": "(known after apply)"`) {
			t.Errorf("create --json has no value known after apply:\n%s", out)
		}
		if tt.plan == "delete" && !strings.Contains(out, `"remove": true`) {
			t.Errorf("delete --json claims no removal:\n%s", out)
		}
	}
}

// TestReviewPlanSensitiveNeverPrinted: no secret of the plan appears anywhere, in text or JSON,
// on stdout or stderr; the unchanged sensitive value is not a change.
func TestReviewPlanSensitiveNeverPrinted(t *testing.T) {
	dir, _ := demoRepo(t)
	for _, asJSON := range []bool{false, true} {
		args := []string{"review", "--repo", dir, "--author", "github-user:alice", "--at", planAt, "--plan", planFixture("sensitive")}
		if asJSON {
			args = append(args, "--json")
		}
		code, out, stderr := runCLI(t, args...)
		if code != 0 {
			t.Fatalf("json %v: exit %d: %s\n%s", asJSON, code, stderr, out)
		}
		for _, secret := range []string{"S3CRET", "hunter2", "correct-horse", "tok-UNCHANGED", "db-b", "/orders/token", "(sensitive "} {
			if strings.Contains(out, secret) || strings.Contains(stderr, secret) {
				t.Errorf("json %v: %q is printed:\n%s\n%s", asJSON, secret, out, stderr)
			}
		}
		if strings.Contains(out, "api_token") {
			t.Errorf("json %v: the unchanged sensitive api_token is reported:\n%s", asJSON, out)
		}
		if !strings.Contains(out, "(sensitive)") || !strings.Contains(out, "aws_db_instance.orders#/password") || !strings.Contains(out, "100") {
			t.Errorf("json %v: the changes are not shown redacted:\n%s", asJSON, out)
		}
		if asJSON {
			schematest.Validate(t, "plan-review.schema.json", []byte(out))
			if !strings.Contains(out, `"sensitive": true`) {
				t.Errorf("no change is marked sensitive:\n%s", out)
			}
		}
	}
}

// TestReviewPlanDrift: resource_drift is judged as an unknown outside actor's claims (counting as
// baseline, as any claim of an identity no actor names); the plan that puts Git's value back is not
// blocked by the drift's veto.
func TestReviewPlanDrift(t *testing.T) {
	dir, _ := demoRepo(t)
	args := []string{"review", "--repo", dir, "--module-dir", "infra/kafka", "--author", "git-author:alice@parley.example", "--at", planAt, "--plan", planFixture("drift")}
	code, out, stderr := runCLI(t, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, stderr, out)
	}
	for _, want := range []string{
		"plan:     update aws_autoscaling_group.consumer: 9 -> 5",
		"plan:     drift aws_autoscaling_group.consumer: 5 -> 9",
		"terraform-drift:aws_autoscaling_group.consumer wants 9 (intent baseline, at 2026-11-24T10:00:00Z, terraform-drift)",
		"vetoed terraform-drift:aws_autoscaling_group.consumer",
		`drift aws_sqs_queue.dlq: "orders-dlq" -> (absent)`,
		"conclusion: success",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	code, out, _ = runCLI(t, append(args, "--json")...)
	if code != 0 || !strings.Contains(out, `"source": "terraform-drift"`) {
		t.Errorf("--json: exit %d:\n%s", code, out)
	}
	schematest.Validate(t, "plan-review.schema.json", []byte(out))
	// The drift's claims are not valid as review's verdicts: that is why the plan has its schema.
	if schematest.Check("verdicts-document.schema.json", []byte(out)) == nil {
		t.Error("the plan review document passes as a verdicts document")
	}
}

// TestReviewPlanBadInput: a missing, malformed or unsupported plan and bad flags exit 2 with an
// error that names the problem.
func TestReviewPlanBadInput(t *testing.T) {
	dir, _ := demoRepo(t)
	missing := filepath.Join(t.TempDir(), "plan.json")
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--plan", planFixture("malformed")}, "malformed.json: not JSON"},
		{[]string{"--plan", planFixture("format-2")}, `unsupported plan format_version "2.0"`},
		{[]string{"--plan", planFixture("state")}, "Terraform state, not a plan"},
		{[]string{"--plan", missing}, missing + ": no such file"},
		{[]string{"--plan", planFixture("create"), "--head", "main"}, "does not take --head"},
		{[]string{"--plan", planFixture("create"), "--author", "gitlab:alice"}, `unknown identity source "gitlab"`},
		{[]string{"--plan", planFixture("create"), "--motivation", "vibes"}, `--motivation "vibes"`},
		{[]string{"--plan", planFixture("create"), "--module-dir", "../outside"}, "not inside the repository"},
		{[]string{"--plan", planFixture("create"), "--at", "yesterday"}, "want an RFC 3339 time"},
		{[]string{"--head", "main", "--module-dir", "infra"}, "go with --plan"},
		{[]string{}, "--head is required"},
	} {
		code, out, stderr := runCLI(t, append([]string{"review", "--repo", dir}, tt.args...)...)
		if code != exitUsage || !strings.Contains(stderr, tt.want) {
			t.Errorf("%v: exit %d, want 2 and %q: %s%s", tt.args, code, tt.want, stderr, out)
		}
	}
	code, _, stderr := runIn(t, "{", "review", "--repo", dir, "--plan", "-")
	if code != exitUsage || !strings.Contains(stderr, "plan on standard input: not JSON") {
		t.Errorf("stdin: exit %d: %s", code, stderr)
	}
	// An empty plan judges nothing: neutral, exit 0.
	code, out, stderr := runCLI(t, "review", "--repo", dir, "--plan", planFixture("empty"), "--author", "github-user:dana", "--at", planAt, "--json")
	if code != 0 || !strings.Contains(out, `"conclusion": "neutral"`) {
		t.Errorf("empty plan: exit %d: %s%s", code, stderr, out)
	}
	schematest.Validate(t, "plan-review.schema.json", []byte(out))
}
