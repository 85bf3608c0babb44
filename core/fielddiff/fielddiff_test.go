package fielddiff

import (
	"os"
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
  vpc_zone_identifier = ["subnet-0a1", "subnet-0b2"]

  tag {
    key                 = "team"
    value               = "data"
    propagate_at_launch = true
  }

  tag {
    key                 = "cost-center"
    value               = "cc-1234"
    propagate_at_launch = false
  }
}

resource "aws_cloudwatch_metric_alarm" "lag" {
  alarm_name          = "kafka-consumer-lag"
  comparison_operator = "GreaterThanThreshold"
  threshold           = 10000
  evaluation_periods  = 3
  alarm_actions       = [aws_autoscaling_policy.up.arn]
  dimensions = {
    AutoScalingGroupName = aws_autoscaling_group.consumer.name
  }
}

module "vpc" {
  source = "./modules/vpc"
  cidr   = "10.0.0.0/16"
}

resource "aws_instance" "worker" {
  count         = 3
  ami           = data.aws_ami.base.id
  instance_type = "m5.large"
  tags          = { Name = "worker-${count.index}" }
}

resource "aws_s3_bucket" "logs" {
  for_each = toset(["a", "b"])
  bucket   = "logs-${each.key}"
}

data "aws_ami" "base" {
  most_recent = true
  owners      = ["amazon"]
}

variable "region" {
  type    = string
  default = "eu-west-1"
}

locals {
  consumer_max = 16
}

provider "aws" {
  region = var.region
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
		{"removed field", "k8s/web.yaml", deployment, strings.Replace(deployment, "          args: [\"--port\", \"8080\"]\n", "", 1),
			"k8s:apps/Deployment/prod/web#/spec/template/spec/containers/0/args [\"--port\",\"8080\"] -> (absent)\n"},
		{"added object", "k8s/web.yaml", deployment, deployment + "---\n" + configMap,
			"k8s:core/ConfigMap/prod/checkout-settings#/data/DB_POOL_SIZE (absent) -> \"20\"\n" +
				"k8s:core/ConfigMap/prod/checkout-settings#/data/FEATURE_FLAGS (absent) -> \"fast-checkout,new-cart\"\n" +
				"k8s:core/ConfigMap/prod/checkout-settings#/data/LOG_LEVEL (absent) -> \"info\"\n" +
				"k8s:core/ConfigMap/prod/checkout-settings#/metadata/labels/app.kubernetes.io~1name (absent) -> \"checkout\"\n"},
		{"configmap value", "k8s/cm.yaml", configMap, strings.Replace(configMap, "LOG_LEVEL: info", "LOG_LEVEL: debug", 1),
			"k8s:core/ConfigMap/prod/checkout-settings#/data/LOG_LEVEL \"info\" -> \"debug\"\n"},
		{"configmap yes is a boolean", "k8s/cm.yaml", configMap, strings.Replace(configMap, "LOG_LEVEL: info", "LOG_LEVEL: yes", 1),
			"k8s:core/ConfigMap/prod/checkout-settings#/data/LOG_LEVEL \"info\" -> true\n"},
		{"flux kustomization", "clusters/prod/apps.yaml", fluxKustomization, strings.NewReplacer("interval: 10m", "interval: 5m", "prune: true", "prune: false").Replace(fluxKustomization),
			"k8s:kustomize.toolkit.fluxcd.io/Kustomization/flux-system/apps#/spec/interval \"10m\" -> \"5m\"\n" +
				"k8s:kustomize.toolkit.fluxcd.io/Kustomization/flux-system/apps#/spec/prune true -> false\n"},
		{"flux list of objects", "clusters/prod/apps.yaml", fluxKustomization, strings.Replace(fluxKustomization, "name: infra-controllers", "name: infra-configs", 1),
			"k8s:kustomize.toolkit.fluxcd.io/Kustomization/flux-system/apps#/spec/dependsOn/0/name \"infra-controllers\" -> \"infra-configs\"\n"},
		{"argo cd application", "argocd/checkout.yaml", argoApplication, strings.Replace(argoApplication, "targetRevision: v2.8.1", "targetRevision: v2.9.0", 1),
			"k8s:argoproj.io/Application/argocd/checkout#/spec/source/targetRevision \"v2.8.1\" -> \"v2.9.0\"\n"},
		{"argo cd list of scalars", "argocd/checkout.yaml", argoApplication, strings.Replace(argoApplication, "- CreateNamespace=true", "- CreateNamespace=false", 1),
			"k8s:argoproj.io/Application/argocd/checkout#/spec/syncPolicy/syncOptions [\"CreateNamespace=true\",\"ServerSideApply=true\"] -> [\"CreateNamespace=false\",\"ServerSideApply=true\"]\n"},
		{"kustomize kustomization is named by its directory", "apps/checkout/kustomization.yaml", kustomization, strings.Replace(kustomization, "newTag: 2.8.1", "newTag: 2.9.0", 1),
			"k8s:kustomize.config.k8s.io/Kustomization/apps%2Fcheckout#/images/0/newTag \"2.8.1\" -> \"2.9.0\"\n"},
		{"json manifest", "k8s/cm.json", `{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"x": "1"}}`, `{"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": "a"}, "data": {"x": "2"}}`,
			"k8s:core/ConfigMap/a#/data/x \"1\" -> \"2\"\n"},
		{"tf second tag block", "infra/kafka/main.tf", asg, strings.Replace(asg, `"cc-1234"`, `"cc-9999"`, 1),
			"tf:infra/kafka//aws_autoscaling_group.consumer#/tag/1/value \"cc-1234\" -> \"cc-9999\"\n"},
		{"tf removed tag block", "infra/kafka/main.tf", asg, strings.Replace(asg, "  tag {\n    key                 = \"team\"\n    value               = \"data\"\n    propagate_at_launch = true\n  }\n", "", 1),
			"tf:infra/kafka//aws_autoscaling_group.consumer#/tag/0/key \"team\" -> \"cost-center\"\n" +
				"tf:infra/kafka//aws_autoscaling_group.consumer#/tag/0/propagate_at_launch true -> false\n" +
				"tf:infra/kafka//aws_autoscaling_group.consumer#/tag/0/value \"data\" -> \"cc-1234\"\n" +
				"tf:infra/kafka//aws_autoscaling_group.consumer#/tag/1/key \"cost-center\" -> (absent)\n" +
				"tf:infra/kafka//aws_autoscaling_group.consumer#/tag/1/propagate_at_launch false -> (absent)\n" +
				"tf:infra/kafka//aws_autoscaling_group.consumer#/tag/1/value \"cc-1234\" -> (absent)\n"},
		{"tf type change", "infra/kafka/main.tf", asg, strings.Replace(asg, "min_size         = 4", `min_size = "4"`, 1),
			"tf:infra/kafka//aws_autoscaling_group.consumer#/min_size 4 -> \"4\"\n"},
		{"tf list of scalars", "infra/kafka/main.tf", asg, strings.Replace(asg, `"subnet-0b2"]`, `"subnet-0b2", "subnet-0c3"]`, 1),
			"tf:infra/kafka//aws_autoscaling_group.consumer#/vpc_zone_identifier [\"subnet-0a1\",\"subnet-0b2\"] -> [\"subnet-0a1\",\"subnet-0b2\",\"subnet-0c3\"]\n"},
		{"tf added and removed attribute", "infra/kafka/main.tf", asg, strings.Replace(asg, "  evaluation_periods  = 3\n", "  datapoints_to_alarm = 2\n", 1),
			"tf:infra/kafka//aws_cloudwatch_metric_alarm.lag#/datapoints_to_alarm (absent) -> 2\n" +
				"tf:infra/kafka//aws_cloudwatch_metric_alarm.lag#/evaluation_periods 3 -> (absent)\n"},
		{"tf for_each", "infra/kafka/main.tf", asg, strings.Replace(asg, `toset(["a", "b"])`, `toset(["a","b","c"])`, 1),
			"tf:infra/kafka//aws_s3_bucket.logs#/for_each ${toset([\"a\", \"b\"])} -> ${toset([\"a\", \"b\", \"c\"])}\n"},
		{"tf for_each reformatted", "infra/kafka/main.tf", asg, strings.Replace(asg, `toset(["a", "b"])`, "toset([\n    \"a\",\n    \"b\", # second\n  ])", 1), ""},
		{"tf data variable local", "infra/kafka/main.tf", asg, strings.NewReplacer(`owners      = ["amazon"]`, `owners = ["self"]`, `"eu-west-1"`, `"eu-central-1"`, "consumer_max = 16", "consumer_max = 24").Replace(asg),
			"tf:infra/kafka//data.aws_ami.base#/owners [\"amazon\"] -> [\"self\"]\n" +
				"tf:infra/kafka//local.consumer_max 16 -> 24\n" +
				"tf:infra/kafka//var.region#/default \"eu-west-1\" -> \"eu-central-1\"\n"},
		{"tf provider blocks set no field", "infra/kafka/main.tf", asg, strings.Replace(asg, "region = var.region", "region = \"us-east-1\"", 1), ""},
		{"tf reordered resources", "infra/kafka/main.tf", asg, strings.Join(reverse(strings.SplitAfter(asg, "\n}\n")), ""), ""},
		{"tf removed resource", "infra/kafka/main.tf", asg, strings.Replace(asg, "module \"vpc\" {\n  source = \"./modules/vpc\"\n  cidr   = \"10.0.0.0/16\"\n}\n", "", 1),
			"tf:infra/kafka//module.vpc#/cidr \"10.0.0.0/16\" -> (absent)\n" +
				"tf:infra/kafka//module.vpc#/source \"./modules/vpc\" -> (absent)\n"},
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
			checkChanges(t, got)
			back, err := Diff(c.path, []byte(c.new), []byte(c.old))
			if err != nil {
				t.Fatal(err)
			}
			if len(back) != len(got) {
				t.Fatalf("reverse diff has %d changes, forward %d", len(back), len(got))
			}
			for i := range got {
				if back[i].Field != got[i].Field || back[i].Old != got[i].New || back[i].New != got[i].Old {
					t.Errorf("reverse diff does not swap Old and New: %+v vs %+v", back[i], got[i])
				}
			}
		})
	}
}

// checkChanges asserts what every Diff result must satisfy: sorted by address, every field
// round-trips through its text form, and literal values are already in core's canonical form.
func checkChanges(t *testing.T, cs []Change) {
	t.Helper()
	for i, c := range cs {
		if i > 0 && cs[i-1].Field.String() >= c.Field.String() {
			t.Errorf("changes not sorted: %s before %s", cs[i-1].Field, c.Field)
		}
		if c.Old == c.New {
			t.Errorf("%s: change without a difference", c.Field)
		}
		if c.Addr != c.Field.String() {
			t.Errorf("%s: Addr is %q", c.Field, c.Addr)
		}
		back, err := core.ParseField(c.Field.String())
		if err != nil || back != c.Field {
			t.Errorf("field %s does not round-trip: %v %+v", c.Field, err, back)
		}
		for _, v := range []core.Value{c.Old, c.New} {
			if v.JSON() == "" {
				continue
			}
			if canon, err := core.ParseJSONValue([]byte(v.JSON())); err != nil || canon != v {
				t.Errorf("%s: value %s is not canonical (core says %s, %v)", c.Field, v, canon, err)
			}
		}
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

const configMap = `apiVersion: v1
kind: ConfigMap
metadata:
  name: checkout-settings
  namespace: prod
  labels:
    app.kubernetes.io/name: checkout
data:
  LOG_LEVEL: info
  DB_POOL_SIZE: "20"
  FEATURE_FLAGS: fast-checkout,new-cart
`

const fluxKustomization = `apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: apps
  namespace: flux-system
spec:
  interval: 10m
  retryInterval: 1m
  path: ./apps/production
  prune: true
  wait: true
  sourceRef:
    kind: GitRepository
    name: flux-system
  dependsOn:
    - name: infra-controllers
  postBuild:
    substitute:
      cluster_env: production
`

const argoApplication = `apiVersion: argoproj.io/v1alpha1
kind: Application
metadata:
  name: checkout
  namespace: argocd
  finalizers: [resources-finalizer.argocd.argoproj.io]
spec:
  project: shop
  source:
    repoURL: https://github.com/acme/deploy.git
    targetRevision: v2.8.1
    path: charts/checkout
    helm:
      valueFiles: [values-prod.yaml]
  destination:
    server: https://kubernetes.default.svc
    namespace: shop
  ignoreDifferences:
    - group: apps
      kind: Deployment
      jsonPointers: [/spec/replicas]
  syncPolicy:
    automated: {prune: true, selfHeal: true}
    syncOptions:
      - CreateNamespace=true
      - ServerSideApply=true
`

const kustomization = `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: shop
resources:
  - deployment.yaml
  - service.yaml
images:
  - name: ghcr.io/acme/checkout
    newTag: 2.8.1
replicas:
  - name: checkout
    count: 4
`

const prometheusRule = `apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata: {name: checkout, namespace: monitoring}
spec:
  groups:
    - name: checkout
      rules:
        - alert: CheckoutDown
          expr: up{job="checkout"} == 0
          for: 5m
          annotations:
            summary: "{{ $labels.instance }} is down"
            description: |
              {{ $labels.instance }} has been down for 5 minutes.
`

// TestYAML11 pins how scalars and keys are read. The expectations are what sigs.k8s.io/yaml v1.6.0
// (YAMLToJSON, the conversion kubectl, Argo CD and Flux use) produces for the same input.
func TestYAML11(t *testing.T) {
	cases := []struct{ scalar, value, key string }{
		{"yes", "true", "true"}, {"Yes", "true", "true"}, {"y", "true", "true"}, {"n", "false", "false"},
		{"on", "true", "true"}, {"OFF", "false", "false"}, {"'yes'", `"yes"`, "yes"}, {"!!str on", `"on"`, "on"},
		{"0777", "511", "511"}, {"0o17", "15", "15"}, {"0x1F", "31", "31"}, {"1_000", "1000", "1000"},
		{"+12", "12", "12"}, {"-0", "0", "0"}, {"0b101", "5", "5"},
		{"1e3", "1000", "1000"}, {"1.0", "1", "1"}, {".5", "0.5", "0.5"}, {"99999999999999999999", "100000000000000000000", "1e+20"},
		{"2024-01-02", `"2024-01-02"`, "2024-01-02"}, {"1:20", `"1:20"`, "1:20"}, {"'3'", `"3"`, "3"},
		{"!!int \"3\"", "3", "3"}, {"!!binary aGVsbG8=", `"hello"`, "hello"}, {"=", `"="`, "="},
		{"~", "null", ""}, {"null", "null", ""},
	}
	const hdr = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata:\n  "
	for _, c := range cases {
		s, err := Parse("a.yaml", []byte(hdr+"v: "+c.scalar+"\n"))
		if err != nil {
			t.Errorf("value %s: %v", c.scalar, err)
			continue
		}
		if v, _ := s.Get(field(t, "k8s:core/ConfigMap/a#/data/v")); v.JSON() != c.value {
			t.Errorf("value %s = %s, want %s", c.scalar, v, c.value)
		}
		s, err = Parse("a.yaml", []byte(hdr+c.scalar+": x\n"))
		if c.key == "" {
			if err == nil || !strings.Contains(err.Error(), "line 5") {
				t.Errorf("key %s: error %v, want one at line 5", c.scalar, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("key %s: %v", c.scalar, err)
			continue
		}
		f := core.K8sField("", "ConfigMap", "", "a", "").Child("data", c.key)
		if v, ok := s.Get(f); !ok || v.JSON() != `"x"` {
			t.Errorf("key %s: want key %q, fields %v", c.scalar, c.key, s.Fields())
		}
	}
	for _, bad := range []string{"+.inf", ".nan", "18446744073709551616"} {
		if _, err := Parse("a.yaml", []byte(hdr+"v: "+bad+"\n")); err != nil {
			if !strings.Contains(err.Error(), "a.yaml: document 1, ConfigMap a: line 5") {
				t.Errorf("value %s: error %v does not say where", bad, err)
			}
		} else if bad != "18446744073709551616" { // too big for uint64: YAML reads it as a float
			t.Errorf("value %s: no error", bad)
		}
	}
}

func TestMergeKeys(t *testing.T) {
	src := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata:\n" +
		"  b: &b {x: \"1\", q: \"2\"}\n  o: &o {q: \"3\", r: \"4\"}\n" +
		"  list:\n    <<: [*b, *o]\n    w: \"5\"\n" + // earlier mappings in a merge list win
		"  before:\n    x: \"9\"\n    <<: *b\n" + // a merge overwrites keys written before it, as in YAML 1.1 readers
		"  after:\n    <<: *b\n    x: \"9\"\n"
	s, err := Parse("a.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	for ptr, want := range map[string]string{"/data/list/q": `"2"`, "/data/list/r": `"4"`, "/data/list/w": `"5"`, "/data/before/x": `"1"`, "/data/after/x": `"9"`} {
		if v, ok := s.Get(core.K8sField("", "ConfigMap", "", "a", ptr)); !ok || v.JSON() != want {
			t.Errorf("%s = %v, want %s", ptr, v, want)
		}
	}
}

func TestTemplates(t *testing.T) {
	helm := []string{
		"apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ include \"x.fullname\" . }}\nspec:\n  replicas: 1\n",
		"{{- if .Values.enabled }}\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n{{- end }}\n",
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  labels:\n    {{- include \"x.labels\" . | nindent 4 }}\n",
		"replicas: {{ .Values.replicas }}\n",
	}
	for _, src := range helm {
		_, err := Parse("charts/x/templates/d.yaml", []byte(src))
		if err == nil || !strings.Contains(err.Error(), "charts/x/templates/d.yaml: document 1") || !strings.Contains(err.Error(), "template") {
			t.Errorf("%q: error %v, want a template error naming the file", src, err)
		}
	}
	// {{ }} inside strings is text: alert annotations, ApplicationSet templates.
	s, err := Parse("monitoring/checkout.yaml", []byte(prometheusRule))
	if err != nil {
		t.Fatal(err)
	}
	v, ok := s.Get(field(t, "k8s:monitoring.coreos.com/PrometheusRule/monitoring/checkout#/spec/groups/0/rules/0/annotations/summary"))
	if !ok || v.JSON() != `"{{ $labels.instance }} is down"` {
		t.Errorf("annotation = %v, %v", v, ok)
	}
}

func TestErrorPositions(t *testing.T) {
	cases := []struct{ path, src, want string }{
		{"k8s/bad.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\ndata: [unclosed\n", "k8s/bad.yaml: document 2: yaml: line 7:"},
		{"k8s/dup.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: x}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: x}\n", "k8s/dup.yaml: document 2, line 5: ConfigMap x/a is already defined in document 1"},
		{"k8s/noname.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {}\n", "k8s/noname.yaml: document 1, line 1: v1 ConfigMap has no metadata.name"},
		{"k8s/inf.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata:\n  x: .inf\n", "k8s/inf.yaml: document 1, ConfigMap a: line 5: .inf is not a JSON number"},
		{"infra/bad.tf", "resource \"a\" \"b\" {\n  x = \n}\n", "infra/bad.tf:2:7: Invalid expression"},
		{"infra/dup.tf", "resource \"a\" \"b\" {}\n\nresource \"a\" \"b\" {}\n", "infra/dup.tf: a.b is defined twice: at infra/dup.tf:1:1 and at infra/dup.tf:3:1"},
		{"infra/dup.tf", "locals {\n  a = 1\n}\nlocals {\n  a = 2\n}\n", "local.a is defined twice: at infra/dup.tf:2:3 and at infra/dup.tf:5:3"},
		{"infra/twice.tf", "resource \"a\" \"b\" {\n  x = {\"0\" = {y = 1}}\n  x {\n    y = 2\n  }\n}\n", "infra/twice.tf: field tf:infra//a.b#/x/0/y is set twice"},
	}
	for _, c := range cases {
		_, err := Parse(c.path, []byte(c.src))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.path, err, c.want)
		}
	}
}

func TestSnapshot(t *testing.T) {
	var empty *Snapshot
	if _, ok := empty.Get(field(t, "k8s:core/ConfigMap/a#/data/x")); ok || empty.Fields() != nil || empty.Len() != 0 {
		t.Error("a nil snapshot must be empty")
	}
	s, err := Parse("infra/kafka/main.tf", []byte(asg))
	if err != nil {
		t.Fatal(err)
	}
	fields := s.Fields()
	if len(fields) != s.Len() || len(DiffSnapshots(nil, s)) != s.Len() || len(DiffSnapshots(s, nil)) != s.Len() {
		t.Fatalf("%d fields, Len %d", len(fields), s.Len())
	}
	for i, f := range fields {
		if i > 0 && fields[i-1].String() >= f.String() {
			t.Errorf("fields not sorted: %s before %s", fields[i-1], f)
		}
		if _, ok := s.Get(f); !ok {
			t.Errorf("Get(%s) finds nothing", f)
		}
	}
	if v, ok := s.Get(field(t, "tf:infra/kafka//aws_cloudwatch_metric_alarm.lag#/dimensions/AutoScalingGroupName")); !ok || v.Expr() != "aws_autoscaling_group.consumer.name" {
		t.Errorf("object literal with a reference = %v, %v", v, ok)
	}
	if _, ok := s.Get(field(t, "tf:infra/kafka//aws_autoscaling_group.consumer#/tag/2/key")); ok {
		t.Error("a third tag block was found")
	}
	if s, err := Parse("main.tf", []byte("resource \"a\" \"b\" {\n  tags = {x = 1, x = 2}\n}\n")); err != nil || s.Len() != 1 {
		t.Errorf("repeated object key: %v, %d fields", err, s.Len())
	} else if v, _ := s.Get(field(t, "tf:.//a.b#/tags/x")); v.JSON() != "2" {
		t.Errorf("repeated object key: the last one wins, got %s", v)
	}
	if s, err := Parse("README.md", []byte("# hi")); err != nil || s.Len() != 0 || Supported("README.md") || !Supported("a/B.YML") || !Supported("x.tf") {
		t.Error("unsupported files give an empty snapshot")
	}
}

func TestAliasBomb(t *testing.T) {
	src := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n" +
		"a: &a [{x: 1}, {x: 1}, {x: 1}, {x: 1}, {x: 1}, {x: 1}, {x: 1}, {x: 1}, {x: 1}]\n" +
		"b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\n" +
		"d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\ne: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]\n" +
		"f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]\ng: [*f, *f, *f, *f, *f, *f, *f, *f, *f]\n"
	if _, err := Parse("bomb.yaml", []byte(src)); err == nil || !strings.Contains(err.Error(), "aliases") {
		t.Errorf("alias expansion: error %v", err)
	}
}

func TestTFValues(t *testing.T) {
	cases := []struct{ expr, json, expr2 string }{
		{`4`, `4`, ""}, {`4.0`, `4`, ""}, {`0.1`, `0.1`, ""}, {`1e300`, `1e+300`, ""}, {`-0`, `0`, ""},
		{`"4"`, `"4"`, ""}, {`true`, `true`, ""}, {`null`, `null`, ""}, {`[1, null, "a<b"]`, `[1,null,"a\u003cb"]`, ""},
		{`"${"a"}b"`, `"ab"`, ""}, {`2 * 8`, `16`, ""}, {"<<EOT\nline\nEOT\n", `"line\n"`, ""},
		{`var.n`, "", "var.n"}, {`max(4,  var.n)`, "", "max(4, var.n)"}, {`"w-${count.index}"`, "", `"w-${count.index}"`},
		{"[\n    1, # one\n    var.n,\n  ]", "", "[1, var.n]"}, {`local.m["k"]`, "", `local.m["k"]`},
	}
	for _, c := range cases {
		s, err := Parse("main.tf", []byte("resource \"a\" \"b\" {\n  x = "+c.expr+"\n}\n"))
		if err != nil {
			t.Errorf("%s: %v", c.expr, err)
			continue
		}
		v, ok := s.Get(field(t, "tf:.//a.b#/x"))
		if !ok || v.JSON() != c.json || v.Expr() != c.expr2 {
			t.Errorf("%s = json %q expr %q, want json %q expr %q", c.expr, v.JSON(), v.Expr(), c.json, c.expr2)
		}
	}
}

// TestDocumentedAddresses keeps docs/addresses.md honest: every example address parses and is
// written back exactly as documented.
func TestDocumentedAddresses(t *testing.T) {
	doc, err := os.ReadFile("../../docs/addresses.md")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(doc), "\n") {
		addr, _, _ := strings.Cut(line, " ")
		if !strings.HasPrefix(addr, "k8s:") && !strings.HasPrefix(addr, "tf:") || strings.ContainsAny(addr, "*<") {
			continue // prose, grammar lines and patterns
		}
		n++
		f, err := core.ParseField(addr)
		if err != nil {
			t.Errorf("documented address %s: %v", addr, err)
		} else if f.String() != addr {
			t.Errorf("documented address %s is written %s", addr, f)
		}
	}
	if n < 15 {
		t.Errorf("found %d example addresses in docs/addresses.md", n)
	}
}
