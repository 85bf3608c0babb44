package tfplan

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/core"
)

func extract(t *testing.T, name, moduleDir string) Result {
	t.Helper()
	p, err := ReadPlanFile(filepath.Join("testdata", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := Extract(p, Options{ModuleDir: moduleDir})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// lines renders changes one per line: field action old -> new [sensitive].
func lines(cs []Change) []string {
	var out []string
	for _, c := range cs {
		r := c.Redacted()
		s := c.Field.String() + " " + string(c.Action) + " " + r.Old.String() + " -> " + r.New.String()
		if c.Sensitive {
			s += " sensitive"
		}
		out = append(out, s)
	}
	return out
}

func wantLines(t *testing.T, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("got:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

func TestExtractCreate(t *testing.T) {
	res := extract(t, "create", ".")
	// Every attribute that is set, and those known after apply; nulls and empty collections are
	// unset; arrays of scalars are one value, nested blocks descend by index.
	wantLines(t, lines(res.Changes), []string{
		`tf:.//aws_instance.web#/ami create (absent) -> "ami-0c55b159cbfafe1f0"`,
		`tf:.//aws_instance.web#/arn create (absent) -> ${(known after apply)}`,
		`tf:.//aws_instance.web#/id create (absent) -> ${(known after apply)}`,
		`tf:.//aws_instance.web#/instance_type create (absent) -> "t3.micro"`,
		`tf:.//aws_instance.web#/monitoring create (absent) -> false`,
		`tf:.//aws_instance.web#/private_ip create (absent) -> ${(known after apply)}`,
		`tf:.//aws_instance.web#/public_ip create (absent) -> ${(known after apply)}`,
		`tf:.//aws_instance.web#/root_block_device/0/encrypted create (absent) -> true`,
		`tf:.//aws_instance.web#/root_block_device/0/volume_id create (absent) -> ${(known after apply)}`,
		`tf:.//aws_instance.web#/root_block_device/0/volume_size create (absent) -> 20`,
		`tf:.//aws_instance.web#/root_block_device/0/volume_type create (absent) -> "gp3"`,
		`tf:.//aws_instance.web#/tags/Name create (absent) -> "web"`,
		`tf:.//aws_instance.web#/tags/team create (absent) -> "shop"`,
		`tf:.//aws_instance.web#/vpc_security_group_ids create (absent) -> ["sg-0123"]`,
	})
	for _, c := range res.Changes {
		if c.Unknown != (c.New.Expr() == KnownAfterApply) {
			t.Errorf("%s: Unknown %v with value %s", c.Field, c.Unknown, c.New)
		}
	}
	if len(res.Notes) != 0 || len(res.Drift) != 0 {
		t.Errorf("notes %v drift %v", res.Notes, res.Drift)
	}
}

func TestExtractUpdate(t *testing.T) {
	res := extract(t, "update", "infra/web")
	// No-op resources and data sources are not changes.
	wantLines(t, lines(res.Changes), []string{
		`tf:infra/web//aws_security_group.web#/arn update "arn:aws:ec2:eu-west-1:123456789012:security-group/sg-0123" -> ${(known after apply)}`,
		`tf:infra/web//aws_security_group.web#/ingress/0/from_port update 443 -> 8443`,
		`tf:infra/web//aws_security_group.web#/ingress/0/to_port update 443 -> 8443`,
		`tf:infra/web//aws_security_group.web#/tags/env update "prod" -> (absent)`,
		`tf:infra/web//aws_security_group.web#/tags/owner update (absent) -> "alice"`,
	})
	if !res.Timestamp.Equal(mustTime(t, "2026-11-24T09:30:00Z")) {
		t.Errorf("timestamp %v", res.Timestamp)
	}
}

func TestExtractDelete(t *testing.T) {
	res := extract(t, "delete", ".")
	// Deleting a resource removes every attribute it has.
	wantLines(t, lines(res.Changes), []string{
		`tf:.//aws_s3_bucket.logs#/arn delete "arn:aws:s3:::parley-logs" -> (absent)`,
		`tf:.//aws_s3_bucket.logs#/bucket delete "parley-logs" -> (absent)`,
		`tf:.//aws_s3_bucket.logs#/force_destroy delete false -> (absent)`,
		`tf:.//aws_s3_bucket.logs#/id delete "parley-logs" -> (absent)`,
		`tf:.//aws_s3_bucket.logs#/tags/team delete "platform" -> (absent)`,
	})
	for _, c := range res.Changes {
		if cl := c.Claim(ClaimOptions{}); !cl.Value.Absent() || cl.Yield || cl.JSON().Remove != true {
			t.Errorf("%s: a deletion must claim a removal, got %+v", c.Field, cl.JSON())
		}
	}
}

func TestExtractReplace(t *testing.T) {
	res := extract(t, "replace", ".")
	wantLines(t, lines(res.Changes), []string{
		`tf:.//aws_instance.web#/ami replace "ami-0c55b159cbfafe1f0" -> "ami-0fedcba9876543210"`,
		`tf:.//aws_instance.web#/arn replace "arn:aws:ec2:eu-west-1:123456789012:instance/i-0abc" -> ${(known after apply)}`,
		`tf:.//aws_instance.web#/id replace "i-0abc" -> ${(known after apply)}`,
		`tf:.//aws_instance.web#/private_ip replace "10.0.1.5" -> ${(known after apply)}`,
		`tf:.//aws_instance.web#/public_ip replace (absent) -> ${(known after apply)}`,
		`tf:.//aws_instance.web#/root_block_device/0/volume_id replace "vol-1" -> ${(known after apply)}`,
	})
	// create_before_destroy with nothing changed (-replace): said, not judged.
	if !slices.Equal(res.Notes, []string{"aws_instance.api: replaced (replace_by_request) without an attribute change: nothing to judge"}) {
		t.Errorf("notes: %q", res.Notes)
	}
}

func TestExtractSensitive(t *testing.T) {
	res := extract(t, "sensitive", ".")
	// The unchanged api_token is no change, though sensitive; the list with one sensitive element
	// is sensitive as a whole; a resource whose whole after is sensitive has every attribute so.
	wantLines(t, lines(res.Changes), []string{
		`tf:.//aws_db_instance.orders#/allocated_storage update 50 -> 100`,
		`tf:.//aws_db_instance.orders#/password update "(sensitive)" -> "(sensitive)" sensitive`,
		`tf:.//aws_db_instance.orders#/replicas update "(sensitive)" -> "(sensitive)" sensitive`,
		`tf:.//aws_ssm_parameter.token#/arn create (absent) -> ${(known after apply)} sensitive`,
		`tf:.//aws_ssm_parameter.token#/name create (absent) -> "(sensitive)" sensitive`,
		`tf:.//aws_ssm_parameter.token#/type create (absent) -> "(sensitive)" sensitive`,
		`tf:.//aws_ssm_parameter.token#/value create (absent) -> "(sensitive)" sensitive`,
	})
	for _, c := range res.Changes {
		if s := c.String(); strings.Contains(s, "S3CRET") {
			t.Errorf("String() prints a secret: %s", s)
		}
	}
	// The real values are still there for Judge to hash.
	if c := res.Changes[1]; c.New.JSON() != `"correct-horse-S3CRET"` || c.Old.JSON() != `"hunter2-old-S3CRET"` {
		t.Errorf("password change carries %s -> %s", c.Old, c.New)
	}
}

func TestExtractDrift(t *testing.T) {
	res := extract(t, "drift", "infra/kafka")
	wantLines(t, lines(res.Changes), []string{
		`tf:infra/kafka//aws_autoscaling_group.consumer#/desired_capacity update 9 -> 5`,
	})
	wantLines(t, lines(res.Drift), []string{
		`tf:infra/kafka//aws_autoscaling_group.consumer#/desired_capacity drift 5 -> 9`,
		`tf:infra/kafka//aws_sqs_queue.dlq#/message_retention_seconds drift 1209600 -> (absent)`,
		`tf:infra/kafka//aws_sqs_queue.dlq#/name drift "orders-dlq" -> (absent)`,
	})
	at := mustTime(t, "2026-11-24T10:00:00Z")
	cl := res.Drift[0].Claim(ClaimOptions{Author: core.Identity{Source: core.SourceGitHubUser, ID: "alice"}, Intent: core.IntentPerformance, At: at})
	if cl.Actor.Identity.String() != "terraform-drift:aws_autoscaling_group.consumer" || cl.Intent != "" || !cl.At.Equal(at) || cl.Evidence.Source != "terraform-drift" {
		t.Errorf("drift claim: %+v", cl)
	}
	cl = res.Changes[0].Claim(ClaimOptions{Author: core.Identity{Source: core.SourceGitHubUser, ID: "alice"}, Intent: core.IntentPerformance, At: at})
	if cl.Actor.Identity.String() != "github-user:alice" || cl.Intent != core.IntentPerformance || cl.Value.JSON() != "5" || cl.Evidence.Source != PlanSource {
		t.Errorf("plan claim: %+v", cl)
	}
}

func TestExtractModules(t *testing.T) {
	res := extract(t, "modules", "infra")
	wantLines(t, lines(res.Changes), []string{
		`tf:infra/modules/kafka//aws_autoscaling_group.consumer#/desired_capacity update 5 -> 6`,
		`tf:infra/modules/alarm//aws_cloudwatch_metric_alarm.lag#/threshold update 5000 -> 6000`,
		`tf:infra//module.vpc.aws_vpc.this[0]#/cidr_block update "10.0.0.0/16" -> "10.1.0.0/16"`,
		`tf:infra//module.worker[1].aws_instance.w["blue"]#/instance_type update "t3.micro" -> "t3.small"`,
	})
	wantLines(t, res.Notes, []string{
		`module.vpc: module source "terraform-aws-modules/vpc/aws" is not a local path; its resources keep their full address under infra`,
		`module.worker[1]: an instance of a module called with count or for_each; its resources keep their full address under infra`,
	})
	// Without the configuration, no module maps.
	p, _ := ReadPlanFile(filepath.Join("testdata", "modules.json"))
	p.Config = nil
	res, _ = Extract(p, Options{})
	if res.Changes[0].Field.Module != "." || res.Changes[0].Field.Resource != "module.kafka.aws_autoscaling_group.consumer" || len(res.Notes) != 3 {
		t.Errorf("no configuration: %v %q", lines(res.Changes), res.Notes)
	}
	if _, err := Extract(p, Options{ModuleDir: "../elsewhere"}); err == nil {
		t.Error("a module directory outside the repository is accepted")
	}
}

func TestSplitModules(t *testing.T) {
	for _, tt := range []struct {
		addr, rest string
		steps      []moduleStep
		ok         bool
	}{
		{"aws_x.y", "aws_x.y", nil, true},
		{"module.a.aws_x.y", "aws_x.y", []moduleStep{{"a", ""}}, true},
		{`module.a["k.]"].module.b[3].aws_x.y["z"]`, `aws_x.y["z"]`, []moduleStep{{"a", `["k.]"]`}, {"b", "[3]"}}, true},
		{"module.a", "", nil, false},
		{"module..aws_x.y", "", nil, false},
		{"module.a[x].aws_x.y", "", nil, false},
		{`module.a["k`, "", nil, false},
	} {
		steps, rest, ok := splitModules(tt.addr)
		if ok != tt.ok || rest != tt.rest || !slices.Equal(steps, tt.steps) {
			t.Errorf("%s: %v %q %v", tt.addr, steps, rest, ok)
		}
	}
}

// What a plan does that Parley does not judge (a forget, an action it does not know, a change
// without an address) is a problem, and the plan cannot pass on the rest (issue 33: unjudged
// never passes): its conclusion is at best action_required, where before it was success.
func TestUnjudgedPlanChangesDoNotPass(t *testing.T) {
	for _, rc := range []string{
		`{"address": "aws_instance.old", "mode": "managed", "type": "aws_instance", "name": "old", "change": {"actions": ["forget"], "before": {"ami": "a"}, "after": null}}`,
		`{"address": "aws_instance.odd", "mode": "managed", "type": "aws_instance", "name": "odd", "change": {"actions": ["transmogrify"], "before": {"ami": "a"}, "after": {"ami": "b"}}}`,
		`{"mode": "managed", "type": "aws_instance", "name": "anon", "change": {"actions": ["update"], "before": {"ami": "a"}, "after": {"ami": "b"}}}`,
	} {
		plan := `{"format_version": "1.2", "terraform_version": "1.14.0", "resource_changes": [` + rc + `]}`
		p, err := ParsePlan([]byte(plan))
		if err != nil {
			t.Fatal(err)
		}
		res, err := Extract(p, Options{ModuleDir: "."})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Unjudged || len(res.Notes) != 1 || !strings.Contains(res.Notes[0], "not judged") {
			t.Errorf("%s: unjudged %v, notes %q", rc, res.Unjudged, res.Notes)
		}
		if c := res.Conclusion(nil); c != "action_required" {
			t.Errorf("%s: conclusion %s, want action_required", rc, c)
		}
		if c := res.Conclusion([]Judgement{{Blocks: core.DecisionVeto}}); c != "failure" {
			t.Errorf("%s: a veto beside it concludes %s, want failure", rc, c)
		}
		if doc := NewDocument(res, nil, core.Identity{}, ".", time.Time{}); doc.Conclusion != "action_required" {
			t.Errorf("%s: the document (POST /v1/plans) concludes %s", rc, doc.Conclusion)
		}
	}
}
