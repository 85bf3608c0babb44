package gitops

import (
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/parleyhq/parley/core"
)

const asgTF = `# The consumer group's autoscaling group.
resource "aws_autoscaling_group" "consumer" {
  name             = "kafka-consumer" # keep this name
  min_size         = 4
  max_size         = 16
  desired_capacity = 6

  tags = {
    Name  = "kafka-consumer"
    "cost-center" = "data"
  }

  tag {
    key   = "team"
    value = "data-platform"
  }
%s}

resource "aws_cloudwatch_metric_alarm" "lag" {
  threshold = 100000
}
`

func tfField(ptr string) core.Field {
	return core.TFField("infra/kafka", "aws_autoscaling_group.consumer", ptr)
}

var gateUntil = time.Date(2026, 11, 22, 13, 0, 0, 0, time.UTC)

// Each layout of lifecycle the resource may already have: the gate goes in, in the list's own
// layout, and the resume gives back the file's bytes.
func TestTFGateAddAndResumeExactly(t *testing.T) {
	for _, tt := range []struct {
		name, lifecycle, ptr, wantLine string
	}{
		{"no lifecycle block", "", "/desired_capacity", "    ignore_changes = [desired_capacity]\n"},
		{"lifecycle without ignore_changes", "\n  lifecycle {\n    create_before_destroy = true\n  }\n", "/desired_capacity",
			"    create_before_destroy = true\n    # parley.dev/gates: "},
		{"empty list", "\n  lifecycle {\n    ignore_changes = []\n  }\n", "/desired_capacity", "ignore_changes = [desired_capacity]"},
		{"one-line list", "\n  lifecycle {\n    ignore_changes = [load_balancers]\n  }\n", "/desired_capacity", "ignore_changes = [load_balancers, desired_capacity]"},
		{"one-line list with a trailing comma", "\n  lifecycle {\n    ignore_changes = [load_balancers,]\n  }\n", "/desired_capacity", "[load_balancers, desired_capacity,]"},
		{"multi-line list", "\n  lifecycle {\n    ignore_changes = [\n      load_balancers, # the ALB owns these\n      target_group_arns,\n    ]\n  }\n", "/desired_capacity",
			"      target_group_arns,\n      desired_capacity,\n    ]"},
		{"multi-line list without a trailing comma", "\n  lifecycle {\n    ignore_changes = [\n      load_balancers\n    ]\n  }\n", "/desired_capacity",
			"      load_balancers,\n      desired_capacity\n    ]"},
		{"a map key", "", "/tags/Name", `ignore_changes = [tags["Name"]]`},
		{"a map key that is no identifier", "", "/tags/cost-center", `ignore_changes = [tags["cost-center"]]`},
		{"a nested block's attribute", "", "/tag/0/value", `ignore_changes = [tag[0].value]`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			src := []byte(strings.Replace(asgTF, "%s", tt.lifecycle, 1))
			f := tfField(tt.ptr)
			out, changed, err := AddTFGate("infra/kafka/main.tf", src, Gate{Field: f, Until: gateUntil, Rule: "rank"})
			if err != nil || !changed {
				t.Fatalf("add: changed %v, %v", changed, err)
			}
			if !strings.Contains(string(out), tt.wantLine) {
				t.Fatalf("add: want %q in\n%s", tt.wantLine, out)
			}
			if _, d := hclsyntax.ParseConfig(out, "main.tf", hcl.InitialPos); d.HasErrors() {
				t.Fatalf("the gated file does not parse: %v\n%s", d, out)
			}
			assertOtherAttributesKept(t, src, out)
			listed, err := ListTFGates("infra/kafka/main.tf", out)
			if err != nil || len(listed) != 1 || listed[0].Field != f || !listed[0].Until.Equal(gateUntil) || listed[0].Rule != "rank" ||
				listed[0].Target != (Target{Kind: TargetKindTerraform, Name: "aws_autoscaling_group.consumer"}) {
				t.Fatalf("listed %+v, %v", listed, err)
			}
			again, changed, err := AddTFGate("infra/kafka/main.tf", out, Gate{Field: f})
			if err != nil || changed || string(again) != string(out) {
				t.Fatalf("adding the gate twice changed the file: %v %v", changed, err)
			}
			back, changed, err := RemoveTFGate("infra/kafka/main.tf", out, f)
			if err != nil || !changed {
				t.Fatalf("remove: changed %v, %v", changed, err)
			}
			if string(back) != string(src) {
				t.Fatalf("resume did not give back the file's bytes:\n%s\n--- want\n%s", back, src)
			}
		})
	}
}

// Two gates on one resource: each resume removes its own entry; the file's own entries stay.
func TestTFGatesShareALifecycleBlock(t *testing.T) {
	src := []byte(strings.Replace(asgTF, "%s", "\n  lifecycle {\n    ignore_changes = [load_balancers]\n  }\n", 1))
	a, b := tfField("/desired_capacity"), tfField("/max_size")
	out, _, err := AddTFGate("main.tf", src, Gate{Field: a, Rule: "rank"})
	if err != nil {
		t.Fatal(err)
	}
	out, _, err = AddTFGate("main.tf", out, Gate{Field: b, Rule: "owner"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "ignore_changes = [load_balancers, desired_capacity, max_size]") {
		t.Fatalf("both gates:\n%s", out)
	}
	if listed, _ := ListTFGates("main.tf", out); len(listed) != 2 {
		t.Fatalf("listed %+v", listed)
	}
	out, _, err = RemoveTFGate("main.tf", out, a)
	if err != nil || !strings.Contains(string(out), "ignore_changes = [load_balancers, max_size]") || !strings.Contains(string(out), `"field":"`+b.String()) {
		t.Fatalf("after the first resume (%v):\n%s", err, out)
	}
	out, _, err = RemoveTFGate("main.tf", out, b)
	if err != nil || string(out) != string(src) {
		t.Fatalf("after both resumes (%v):\n%s", err, out)
	}
	// A resume of a gate Parley never wrote leaves the file's own entry alone.
	lb := tfField("/load_balancers")
	if out, changed, err := RemoveTFGate("main.tf", src, lb); err != nil || changed || string(out) != string(src) {
		t.Fatalf("resume of the file's own entry: changed %v, %v", changed, err)
	}
	// An attribute the file ignores already needs no gate.
	if _, changed, err := AddTFGate("main.tf", src, Gate{Field: lb}); err != nil || changed {
		t.Fatalf("gate on an ignored attribute: changed %v, %v", changed, err)
	}
}

func TestTFGateRefusals(t *testing.T) {
	src := []byte(strings.Replace(asgTF, "%s", "", 1))
	all := []byte(strings.Replace(asgTF, "%s", "\n  lifecycle {\n    ignore_changes = all\n  }\n", 1))
	if _, changed, err := AddTFGate("main.tf", all, Gate{Field: tfField("/desired_capacity")}); err != nil || changed {
		t.Errorf("ignore_changes = all: changed %v, %v", changed, err)
	}
	for _, tt := range []struct {
		content []byte
		f       core.Field
		want    string
	}{
		{src, core.TFField("infra/kafka", "aws_autoscaling_group.other", "/desired_capacity"), "no resource aws_autoscaling_group.other"},
		{src, core.TFField("infra/kafka", "data.aws_ami.base", "/id"), "only a managed resource"},
		{src, core.K8sField("apps", "Deployment", "prod", "web", "/spec/replicas"), "not a Terraform attribute"},
		{src, tfField("/tag/3/value"), "no block tag number 3"},
		{[]byte("resource \"a\" \"b\" {\n  x = [\n}\n"), core.TFField(".", "a.b", "/x"), "main.tf"},
		{[]byte(strings.Replace(asgTF, "%s", "\n  lifecycle {\n    ignore_changes = local.ignored\n  }\n", 1)), tfField("/desired_capacity"), "not a list"},
		{[]byte(strings.Replace(asgTF, "%s", "\n  lifecycle { create_before_destroy = true }\n", 1)), tfField("/desired_capacity"), "one line"},
	} {
		if _, _, err := AddTFGate("main.tf", tt.content, Gate{Field: tt.f}); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v, want an error naming %q", tt.f, err, tt.want)
		}
	}
}

// assertOtherAttributesKept checks that every attribute of every block other than lifecycle has
// the same bytes before and after.
func assertOtherAttributesKept(t *testing.T, before, after []byte) {
	t.Helper()
	attrs := func(src []byte) map[string]string {
		f, d := hclsyntax.ParseConfig(src, "main.tf", hcl.InitialPos)
		if d.HasErrors() {
			t.Fatal(d)
		}
		out := map[string]string{}
		var walk func(b *hclsyntax.Body, prefix string)
		walk = func(b *hclsyntax.Body, prefix string) {
			for name, a := range b.Attributes {
				r := a.SrcRange
				out[prefix+name] = string(src[r.Start.Byte:r.End.Byte])
			}
			for i, blk := range b.Blocks {
				if blk.Type == "lifecycle" {
					continue
				}
				walk(blk.Body, prefix+blk.Type+strings.Join(blk.Labels, ".")+"["+string(rune('0'+i))+"].")
			}
		}
		walk(f.Body.(*hclsyntax.Body), "")
		return out
	}
	b, a := attrs(before), attrs(after)
	if len(a) != len(b) {
		t.Fatalf("attributes: %d before, %d after", len(b), len(a))
	}
	for k, v := range b {
		if a[k] != v {
			t.Errorf("attribute %s changed: %q -> %q", k, v, a[k])
		}
	}
}

// FuzzTFGateRoundTrip: on any file, a gate that was added can be removed, the result parses, every
// attribute outside lifecycle keeps its bytes, and a second yield and resume give those bytes back.
func FuzzTFGateRoundTrip(f *testing.F) {
	f.Add(strings.Replace(asgTF, "%s", "", 1), "/desired_capacity")
	f.Add(strings.Replace(asgTF, "%s", "\n  lifecycle {\n    ignore_changes = [\n      load_balancers, # x\n    ]\n  }\n", 1), "/tags/Name")
	f.Add(strings.Replace(asgTF, "%s", "\n  lifecycle {\n    prevent_destroy = true\n  }\n", 1), "/tag/0/value")
	f.Add("resource \"a\" \"b\" {\n  x = 1\n  lifecycle {\n    ignore_changes = [y,]\n  }\n}\n", "/x")
	f.Fuzz(func(t *testing.T, src, ptr string) {
		fld := tfField(ptr)
		if _, err := core.ParseField(fld.String()); err != nil || !strings.HasPrefix(ptr, "/") {
			return
		}
		out, changed, err := AddTFGate("main.tf", []byte(src), Gate{Field: fld, Rule: "rank"})
		if err != nil || !changed {
			return
		}
		if _, d := hclsyntax.ParseConfig(out, "main.tf", hcl.InitialPos); d.HasErrors() {
			t.Fatalf("the gated file does not parse: %v\n%s", d, out)
		}
		assertOtherAttributesKept(t, []byte(src), out)
		norm, changed, err := RemoveTFGate("main.tf", out, fld)
		if err != nil || !changed {
			t.Fatalf("a gate that was added cannot be removed: %v %v\n%s", changed, err, out)
		}
		assertOtherAttributesKept(t, []byte(src), norm)
		out2, _, err := AddTFGate("main.tf", norm, Gate{Field: fld, Rule: "rank"})
		if err != nil {
			t.Fatalf("re-adding: %v", err)
		}
		back, _, err := RemoveTFGate("main.tf", out2, fld)
		if err != nil || string(back) != string(norm) {
			t.Fatalf("yield+resume is not stable:\n%s\n---\n%s", norm, back)
		}
	})
}

// Adoption rewrites one attribute's value and nothing else: hclwrite's formatter does not run over
// the file (it would realign the tags map here).
func TestAdoptTFKeepsTheFilesLayout(t *testing.T) {
	src := strings.Replace(asgTF, "%s", "", 1)
	v, _ := core.JSONValue(9)
	out, changed, err := AdoptTF("main.tf", []byte(src), tfField("/desired_capacity"), v)
	if err != nil || !changed {
		t.Fatalf("changed %v, %v", changed, err)
	}
	if want := strings.Replace(src, "desired_capacity = 6", "desired_capacity = 9", 1); string(out) != want {
		t.Fatalf("got\n%s\nwant\n%s", out, want)
	}
}
