package fielddiff

import (
	"strings"
	"testing"

	"github.com/parleyhq/parley/core"
)

const deployment = `# web tier
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: prod
  labels: {app: web}
spec:
  replicas: 3 # the HPA owns this in production
  template:
    spec:
      containers:
        - name: web
          image: ghcr.io/acme/web:1.4.2
          args: ["--port", "8080"]
          resources:
            requests: {cpu: 250m, memory: 256Mi}
status:
  replicas: 3
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: web, namespace: prod}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  minReplicas: 3
  maxReplicas: 20
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: prod}
spec:
  ports: [{port: 80, targetPort: 8080}]
`

const asg = `resource "aws_autoscaling_group" "consumer" {
  name             = "kafka-consumer"
  min_size         = 4
  max_size         = 16
  desired_capacity = 6 # right-sized by the cost bot

  tag {
    key                 = "team"
    value               = "data"
    propagate_at_launch = true
  }
}

resource "aws_cloudwatch_metric_alarm" "lag" {
  alarm_name          = "kafka-consumer-lag"
  threshold           = 10000
  evaluation_periods  = 3
  alarm_actions       = [aws_autoscaling_policy.up.arn]
}

module "vpc" {
  source = "./modules/vpc"
  cidr   = "10.0.0.0/16"
}

resource "aws_instance" "worker" {
  count         = 3
  instance_type = "m5.large"
  tags          = { Name = "worker-${count.index}" }
}

resource "aws_s3_bucket" "logs" {
  for_each = toset(["a", "b"])
  bucket   = "logs-${each.key}"
}
`

func field(t *testing.T, s string) core.Field {
	t.Helper()
	f, err := core.ParseField(s)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func render(cs []Change) string {
	var b strings.Builder
	for _, c := range cs {
		b.WriteString(c.Field.String() + " " + c.Old.String() + " -> " + c.New.String() + "\n")
	}
	return b.String()
}

func TestDiff(t *testing.T) {
	cases := []struct {
		name, path, old, new string
		want                 string
	}{
		{"value change", "k8s/web.yaml", deployment, strings.Replace(deployment, "replicas: 3 #", "replicas: 5 #", 1),
			"k8s:apps/Deployment/prod/web#/spec/replicas 3 -> 5\n"},
		{"type change", "k8s/web.yaml", deployment, strings.Replace(deployment, "replicas: 3 #", `replicas: "3" #`, 1),
			"k8s:apps/Deployment/prod/web#/spec/replicas 3 -> \"3\"\n"},
		{"status and comments ignored", "k8s/web.yaml", deployment, strings.NewReplacer("# web tier", "# edited", "  replicas: 3\n", "  replicas: 9\n").Replace(deployment), ""},
		{"reformatted", "k8s/web.yaml", deployment, strings.Replace(deployment, "labels: {app: web}", "labels:\n    app: \"web\"", 1), ""},
		{"reordered documents", "k8s/web.yaml", deployment, strings.Join(reverse(strings.Split(deployment, "---\n")), "---\n"), ""},
		{"list of scalars is one value", "k8s/web.yaml", deployment, strings.Replace(deployment, `"8080"]`, `"9090"]`, 1),
			"k8s:apps/Deployment/prod/web#/spec/template/spec/containers/0/args [\"--port\",\"8080\"] -> [\"--port\",\"9090\"]\n"},
		{"list of objects by index", "k8s/web.yaml", deployment, strings.Replace(deployment, "web:1.4.2", "web:1.4.3", 1),
			"k8s:apps/Deployment/prod/web#/spec/template/spec/containers/0/image \"ghcr.io/acme/web:1.4.2\" -> \"ghcr.io/acme/web:1.4.3\"\n"},
		{"added field", "k8s/web.yaml", deployment, strings.Replace(deployment, "  maxReplicas: 20\n", "  maxReplicas: 20\n  behavior: {}\n", 1),
			"k8s:autoscaling/HorizontalPodAutoscaler/prod/web#/spec/behavior (absent) -> {}\n"},
		{"removed object", "k8s/web.yaml", deployment, strings.Split(deployment, "---\n")[0] + "---\n" + strings.Split(deployment, "---\n")[2],
			"k8s:autoscaling/HorizontalPodAutoscaler/prod/web#/spec/maxReplicas 20 -> (absent)\n" +
				"k8s:autoscaling/HorizontalPodAutoscaler/prod/web#/spec/minReplicas 3 -> (absent)\n" +
				"k8s:autoscaling/HorizontalPodAutoscaler/prod/web#/spec/scaleTargetRef/apiVersion \"apps/v1\" -> (absent)\n" +
				"k8s:autoscaling/HorizontalPodAutoscaler/prod/web#/spec/scaleTargetRef/kind \"Deployment\" -> (absent)\n" +
				"k8s:autoscaling/HorizontalPodAutoscaler/prod/web#/spec/scaleTargetRef/name \"web\" -> (absent)\n"},
		{"version is not identity", "k8s/web.yaml", deployment, strings.Replace(deployment, "autoscaling/v2", "autoscaling/v2beta2", 1), ""},
		{"tf value change", "infra/kafka/main.tf", asg, strings.Replace(asg, "desired_capacity = 6", "desired_capacity = 8", 1),
			"tf:infra/kafka//aws_autoscaling_group.consumer#/desired_capacity 6 -> 8\n"},
		{"tf comment and whitespace", "infra/kafka/main.tf", asg, strings.NewReplacer("# right-sized by the cost bot", "", "[aws_autoscaling_policy.up.arn]", "[\n    aws_autoscaling_policy.up.arn, # scale out\n  ]").Replace(asg), ""},
		{"tf expression change", "infra/kafka/main.tf", asg, strings.Replace(asg, "policy.up.arn", "policy.out.arn", 1),
			"tf:infra/kafka//aws_cloudwatch_metric_alarm.lag#/alarm_actions ${[aws_autoscaling_policy.up.arn]} -> ${[aws_autoscaling_policy.out.arn]}\n"},
		{"tf nested block", "infra/kafka/main.tf", asg, strings.Replace(asg, `value               = "data"`, `value = "platform"`, 1),
			"tf:infra/kafka//aws_autoscaling_group.consumer#/tag/0/value \"data\" -> \"platform\"\n"},
		{"tf count and object literal", "infra/kafka/main.tf", asg, strings.NewReplacer("count         = 3", "count = 4", `Name = "worker-`, `Name = "w-`).Replace(asg),
			"tf:infra/kafka//aws_instance.worker#/count 3 -> 4\n" +
				"tf:infra/kafka//aws_instance.worker#/tags/Name ${\"worker-${count.index}\"} -> ${\"w-${count.index}\"}\n"},
		{"tf module argument", "main.tf", asg, strings.Replace(asg, "10.0.0.0/16", "10.1.0.0/16", 1),
			"tf:.//module.vpc#/cidr \"10.0.0.0/16\" -> \"10.1.0.0/16\"\n"},
		{"unsupported file", "README.md", "a", "b", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Diff(c.path, []byte(c.old), []byte(c.new))
			if err != nil {
				t.Fatal(err)
			}
			if r := render(got); r != c.want {
				t.Errorf("got\n%s\nwant\n%s", r, c.want)
			}
		})
	}
}

func reverse(s []string) []string {
	out := make([]string, len(s))
	for i := range s {
		out[len(s)-1-i] = strings.TrimSuffix(s[i], "\n") + "\n"
	}
	return out
}

func TestAddedFileAndRoundTrip(t *testing.T) {
	for _, in := range []struct{ path, src string }{{"k8s/web.yaml", deployment}, {"infra/kafka/main.tf", asg}} {
		changes, err := Diff(in.path, nil, []byte(in.src))
		if err != nil {
			t.Fatal(err)
		}
		if len(changes) < 10 {
			t.Fatalf("%s: only %d fields", in.path, len(changes))
		}
		for _, c := range changes {
			if !c.Old.Absent() || c.New.Absent() {
				t.Errorf("%s: added file must only add fields: %+v", in.path, c)
			}
			back, err := core.ParseField(c.Field.String())
			if err != nil || back != c.Field {
				t.Errorf("field %s does not round-trip: %v %+v", c.Field, err, back)
			}
		}
		removed, _ := Diff(in.path, []byte(in.src), nil)
		if len(removed) != len(changes) {
			t.Errorf("%s: removing the file removes %d fields, adding adds %d", in.path, len(removed), len(changes))
		}
	}
	s, _ := Parse("infra/kafka/main.tf", []byte(asg))
	if v, ok := s.Get(field(t, "tf:infra/kafka//aws_autoscaling_group.consumer#/max_size")); !ok || v.JSON() != "16" {
		t.Errorf("max_size = %v, %v", v, ok)
	}
	if v, ok := s.Get(field(t, "tf:infra/kafka//aws_s3_bucket.logs#/for_each")); !ok || v.Expr() != `toset(["a", "b"])` {
		t.Errorf("for_each = %v, %v", v, ok)
	}
}

func TestListAndObjects(t *testing.T) {
	list := "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: cfg, namespace: prod}\n  data: {LOG_LEVEL: info}\n"
	s, err := Parse("cm.yaml", []byte(list))
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := s.Get(field(t, "k8s:core/ConfigMap/prod/cfg#/data/LOG_LEVEL")); !ok || v.JSON() != `"info"` {
		t.Errorf("List item not read: %v %v", v, ok)
	}
	notObjects := "resources: [web.yaml]\n---\nfoo: bar\n---\n"
	if s, err := Parse("kustomization.yaml", []byte(notObjects)); err != nil || s.Len() != 0 {
		t.Errorf("documents without apiVersion/kind are not objects: %v, %d fields", err, s.Len())
	}
	anchors := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata:\n  base: &b {x: \"1\"}\n  derived:\n    <<: *b\n    y: \"2\"\n"
	s, err = Parse("a.yaml", []byte(anchors))
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := s.Get(field(t, "k8s:core/ConfigMap/a#/data/derived/x")); !ok || v.JSON() != `"1"` {
		t.Errorf("merge key not applied: %v %v", v, ok)
	}
}

func TestErrors(t *testing.T) {
	cases := []struct{ path, src, want string }{
		{"chart/templates/d.yaml", "replicas: {{ .Values.replicas }}\n", "template"},
		{"k8s/bad.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\nkey: [unclosed\n", "k8s/bad.yaml: document 2"},
		{"k8s/dup.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n", "already defined in document 1"},
		{"k8s/noname.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {}\n", "no metadata.name"},
		{"infra/bad.tf", "resource \"a\" \"b\" {\n  x = \n}\n", "infra/bad.tf:"},
		{"infra/dup.tf", "resource \"a\" \"b\" {}\nresource \"a\" \"b\" {}\n", "a.b is defined twice"},
	}
	for _, c := range cases {
		_, err := Parse(c.path, []byte(c.src))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one mentioning %q", c.path, err, c.want)
		}
	}
}
