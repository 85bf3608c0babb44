package gitops

import (
	"strings"
	"testing"

	"github.com/parleyhq/parley/core"
)

const deployment = `# The web tier.
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: prod
spec:
  replicas: 3 # the HPA owns this
  template:
    spec:
      containers:
        - name: web
          image: registry.example.com/web:1.4.2 # pinned
---
apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: prod
spec:
  ports:
    - port: 80
`

const asg = `# Kafka consumers.
resource "aws_autoscaling_group" "consumer" {
  name             = "kafka-consumer"
  min_size         = 4
  max_size         = 16
  desired_capacity = 6 # right-sized in November

  tag {
    key   = "team"
    value = "data"
  }
}
`

func changedLines(a, b string) []string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	if len(al) != len(bl) {
		return []string{"line count changed"}
	}
	var out []string
	for i := range al {
		if al[i] != bl[i] {
			out = append(out, bl[i])
		}
	}
	return out
}

func TestAdoptYAMLChangesOneLine(t *testing.T) {
	v, _ := core.JSONValue(7)
	out, changed, err := AdoptYAML("k8s/web.yaml", []byte(deployment), replicas, v)
	if err != nil || !changed {
		t.Fatal(changed, err)
	}
	if d := changedLines(deployment, string(out)); len(d) != 1 || d[0] != "  replicas: 7 # the HPA owns this" {
		t.Errorf("changed lines %q\n%s", d, out)
	}
	again, changed, err := AdoptYAML("k8s/web.yaml", out, replicas, v)
	if err != nil || changed || string(again) != string(out) {
		t.Errorf("adopting the same value again changed the file: %v", err)
	}
	img := core.K8sField("apps", "Deployment", "prod", "web", "/spec/template/spec/containers/0/image")
	out, _, err = AdoptYAML("k8s/web.yaml", []byte(deployment), img, core.StringValue("registry.example.com/web:1.4.3"))
	if err != nil {
		t.Fatal(err)
	}
	if d := changedLines(deployment, string(out)); len(d) != 1 || !strings.Contains(d[0], "web:1.4.3 # pinned") {
		t.Errorf("image: changed lines %q", d)
	}
	for _, bad := range []struct {
		f    core.Field
		v    core.Value
		want string
	}{
		{core.K8sField("apps", "Deployment", "prod", "api", "/spec/replicas"), v, "no Deployment prod/api"},
		{core.K8sField("apps", "Deployment", "prod", "web", "/spec/strategy/rollingUpdate/maxSurge"), v, "does not create structure"},
		{core.K8sField("apps", "Deployment", "prod", "web", "/spec/template/spec/containers/5/image"), v, "does not create structure"},
		{replicas, core.ExprValue("var.n"), "only a literal"},
	} {
		if _, _, err := AdoptYAML("k8s/web.yaml", []byte(deployment), bad.f, bad.v); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: %v, want %q", bad.f, err, bad.want)
		}
	}
	if _, _, err := AdoptYAML("k8s/bad.yaml", []byte("a: [b\n"), replicas, v); err == nil || !strings.Contains(err.Error(), "k8s/bad.yaml") {
		t.Errorf("unparseable file: %v", err)
	}
}

func TestAdoptTFChangesOneAttribute(t *testing.T) {
	f := core.TFField("infra/kafka", "aws_autoscaling_group.consumer", "/desired_capacity")
	v, _ := core.JSONValue(8)
	out, changed, err := AdoptTF("infra/kafka/main.tf", []byte(asg), f, v)
	if err != nil || !changed {
		t.Fatal(changed, err)
	}
	if d := changedLines(asg, string(out)); len(d) != 1 || d[0] != "  desired_capacity = 8 # right-sized in November" {
		t.Errorf("changed lines %q\n%s", d, out)
	}
	if _, changed, _ := AdoptTF("infra/kafka/main.tf", out, f, v); changed {
		t.Error("adopting the same value again changed the file")
	}
	tag := core.TFField("infra/kafka", "aws_autoscaling_group.consumer", "/tag/0/value")
	out, _, err = AdoptTF("infra/kafka/main.tf", []byte(asg), tag, core.StringValue("platform"))
	if err != nil {
		t.Fatal(err)
	}
	if d := changedLines(asg, string(out)); len(d) != 1 || !strings.Contains(d[0], `value = "platform"`) {
		t.Errorf("nested block: changed lines %q", d)
	}
	for _, bad := range []struct {
		f    core.Field
		want string
	}{
		{core.TFField("infra/kafka", "aws_autoscaling_group.other", "/desired_capacity"), "no aws_autoscaling_group.other"},
		{core.TFField("infra/kafka", "aws_autoscaling_group.consumer", "/health_check_type"), "not set in Git"},
		{core.TFField("infra/kafka", "aws_autoscaling_group.consumer", "/tag/3/value"), "no block tag number 3"},
	} {
		if _, _, err := AdoptTF("infra/kafka/main.tf", []byte(asg), bad.f, v); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: %v, want %q", bad.f, err, bad.want)
		}
	}
}

func FuzzGateRoundTrip(f *testing.F) {
	f.Add(application, "/spec/replicas")
	f.Add(kustomization, "/metadata/labels/team")
	f.Fuzz(func(t *testing.T, doc, ptr string) {
		if !strings.HasPrefix(ptr, "/") || strings.ContainsAny(ptr, "\\x00") {
			return
		}
		for _, tgt := range []Target{{"Application", "web", "argocd"}, {"Kustomization", "apps", "flux-system"}, {KindHelmRelease, "web", "flux-system"}} {
			fld := core.K8sField("apps", "Deployment", "prod", "web", ptr)
			out, changed, err := AddGate("x.yaml", []byte(doc), tgt, Gate{Field: fld})
			if err != nil || !changed {
				continue
			}
			norm, _, err := RemoveGate("x.yaml", out, tgt, fld)
			if err != nil {
				t.Fatalf("a gate that was added cannot be removed: %v", err)
			}
			// A second yield and resume on the resumed file must give back those bytes exactly.
			out2, _, err := AddGate("x.yaml", norm, tgt, Gate{Field: fld})
			if err != nil {
				t.Fatalf("re-adding: %v", err)
			}
			back, _, err := RemoveGate("x.yaml", out2, tgt, fld)
			if err != nil || string(back) != string(norm) {
				t.Fatalf("yield+resume is not stable:\n%s\n---\n%s", norm, back)
			}
		}
	})
}
