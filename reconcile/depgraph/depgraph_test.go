package depgraph

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/core"
)

// loadRepo reads a directory of testdata into Build's input: slash paths relative to it.
func loadRepo(t testing.TB, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		files[filepath.ToSlash(rel)] = b
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func build(t testing.TB, files map[string][]byte) *Graph {
	t.Helper()
	g, errs := Build(files)
	for _, err := range errs {
		t.Errorf("Build: %v", err)
	}
	return g
}

func field(t testing.TB, s string) core.Field {
	t.Helper()
	f, err := core.ParseField(s)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// expect checks that the dependents of addr are exactly want (address -> Via), in order.
func expect(t *testing.T, g *Graph, addr string, want map[string]string) {
	t.Helper()
	got := g.Dependents(field(t, addr))
	seen := map[string]bool{}
	for i, d := range got {
		s := d.Field.String()
		if i > 0 && got[i-1].Field.String() >= s {
			t.Errorf("Dependents(%s): not sorted or repeated at %s", addr, s)
		}
		seen[s] = true
		via, ok := want[s]
		switch {
		case !ok:
			t.Errorf("Dependents(%s): unexpected %s (%s)", addr, s, d.Via)
		case d.Via != via:
			t.Errorf("Dependents(%s): %s via\n  %q, want\n  %q", addr, s, d.Via, via)
		}
		if _, err := core.ParseField(s); err != nil {
			t.Errorf("dependent %s does not parse: %v", s, err)
		}
	}
	for s := range want {
		if !seen[s] {
			t.Errorf("Dependents(%s): missing %s", addr, s)
		}
	}
}

func TestMaxConnections(t *testing.T) {
	g := build(t, loadRepo(t, "testdata/repo"))
	want := map[string]string{
		"tf:infra/db//aws_db_parameter_group.main#/parameter/0/value":     "var.max_connections is read by aws_db_parameter_group.main (parameter.0.value) in infra/db",
		"tf:infra/db//kubernetes_config_map.api#/data/POOL_MAX":           "var.max_connections is read by kubernetes_config_map.api (data.POOL_MAX) in infra/db",
		"tf:infra/db//aws_cloudwatch_metric_alarm.connections#/threshold": "var.max_connections is read by aws_cloudwatch_metric_alarm.connections (threshold) in infra/db",
		// The Terraform-managed ConfigMap, and the Deployment reading the key: the boundary a policy cares about.
		"k8s:core/ConfigMap/prod/db-pool#/data/POOL_MAX":                      "kubernetes_config_map.api (data.POOL_MAX) in infra/db is applied as ConfigMap prod/db-pool key POOL_MAX",
		"k8s:apps/Deployment/prod/api#/spec/template/spec/containers/0/env/2": "Deployment prod/api container api env DB_POOL_MAX from ConfigMap prod/db-pool key POOL_MAX",
	}
	// fielddiff reports the default; the variable as a whole, its type and its validation reach the same readers.
	for _, q := range []string{"tf:infra/db//var.max_connections#/default", "tf:infra/db//var.max_connections", "tf:infra/db//var.max_connections#/type"} {
		expect(t, g, q, want)
	}
	expect(t, g, "tf:infra/db//var.max_connections#/description", nil)

	// The parameter group's name is read by the instance (and so by what depends on the whole
	// instance); its parameters are not.
	expect(t, g, "tf:infra/db//aws_db_parameter_group.main#/name", map[string]string{
		"tf:infra/db//aws_db_instance.main#/parameter_group_name":          "aws_db_parameter_group.main.name is read by aws_db_instance.main (parameter_group_name) in infra/db",
		"tf:infra/db//aws_cloudwatch_metric_alarm.connections#/depends_on": "aws_db_instance.main is read by aws_cloudwatch_metric_alarm.connections (depends_on) in infra/db",
	})
	expect(t, g, "tf:infra/db//aws_db_parameter_group.main#/parameter/0/value", nil)
	// The whole parameter group reaches the readers of each of its fields.
	if got := g.Dependents(field(t, "tf:infra/db//aws_db_parameter_group.main")); len(got) != 2 {
		t.Errorf("Dependents(aws_db_parameter_group.main) = %v, want the instance and the alarm", got)
	}

	// depends_on names the whole instance: any field of it reaches the alarm; address only what reads it.
	expect(t, g, "tf:infra/db//aws_db_instance.main#/instance_class", map[string]string{
		"tf:infra/db//aws_cloudwatch_metric_alarm.connections#/depends_on": "aws_db_instance.main is read by aws_cloudwatch_metric_alarm.connections (depends_on) in infra/db",
	})
	expect(t, g, "tf:infra/db//aws_db_instance.main#/address", map[string]string{
		"tf:infra/db//aws_cloudwatch_metric_alarm.connections#/depends_on": "aws_db_instance.main is read by aws_cloudwatch_metric_alarm.connections (depends_on) in infra/db",
		"tf:infra/db//kubernetes_config_map.api#/data/HOST":                "aws_db_instance.main.address is read by kubernetes_config_map.api (data.HOST) in infra/db",
		"k8s:core/ConfigMap/prod/db-pool#/data/HOST":                       "kubernetes_config_map.api (data.HOST) in infra/db is applied as ConfigMap prod/db-pool key HOST",
	})
}

func TestModuleChain(t *testing.T) {
	g := build(t, loadRepo(t, "testdata/repo"))
	inModule := map[string]string{
		"tf:modules/db//aws_db_parameter_group.this#/parameter/0/value": "var.max_conn is read by aws_db_parameter_group.this (parameter.0.value) in modules/db",
		"tf:modules/db//local.pool":                                     "var.max_conn is read by local.pool in modules/db",
		"tf:modules/db//local.cfg#/pool":                                "local.pool is read by local.cfg (pool) in modules/db",
		"tf:modules/db//output.pool_size#/value":                        "local.cfg.pool is read by output.pool_size (value) in modules/db",
	}
	prod := map[string]string{
		"tf:envs/prod//module.db#/max_conn":           "var.db_max_conn is read by module.db (max_conn) in envs/prod",
		"tf:modules/db//var.max_conn":                 "module.db in envs/prod passes max_conn to var.max_conn of module modules/db",
		"tf:envs/prod//aws_ssm_parameter.pool#/value": "module.db.pool_size is read by aws_ssm_parameter.pool (value) in envs/prod",
	}
	for k, v := range inModule {
		prod[k] = v
	}
	// prod's variable flows through the shared module back to prod only, not to staging, which
	// calls the same module; local.cfg#/timeout and output.timeout do not read the pool.
	expect(t, g, "tf:envs/prod//var.db_max_conn#/default", prod)

	// A change inside the module (its default) has no call site: it reaches every caller.
	inModule["tf:envs/prod//aws_ssm_parameter.pool#/value"] = "module.db.pool_size is read by aws_ssm_parameter.pool (value) in envs/prod"
	inModule["tf:envs/staging//aws_ssm_parameter.pool#/value"] = "module.db.pool_size is read by aws_ssm_parameter.pool (value) in envs/staging"
	expect(t, g, "tf:modules/db//var.max_conn#/default", inModule)

	// staging's literal argument: staging only.
	expect(t, g, "tf:envs/staging//module.db#/max_conn", map[string]string{
		"tf:modules/db//var.max_conn":                                   "module.db in envs/staging passes max_conn to var.max_conn of module modules/db",
		"tf:modules/db//aws_db_parameter_group.this#/parameter/0/value": "var.max_conn is read by aws_db_parameter_group.this (parameter.0.value) in modules/db",
		"tf:modules/db//local.pool":                                     "var.max_conn is read by local.pool in modules/db",
		"tf:modules/db//local.cfg#/pool":                                "local.pool is read by local.cfg (pool) in modules/db",
		"tf:modules/db//output.pool_size#/value":                        "local.cfg.pool is read by output.pool_size (value) in modules/db",
		"tf:envs/staging//aws_ssm_parameter.pool#/value":                "module.db.pool_size is read by aws_ssm_parameter.pool (value) in envs/staging",
	})
	// Entering the local object literal: timeout is read by output.timeout only, which nobody reads.
	expect(t, g, "tf:modules/db//local.cfg#/timeout", map[string]string{
		"tf:modules/db//output.timeout#/value": "local.cfg.timeout is read by output.timeout (value) in modules/db",
	})
	// The whole local reaches the readers of each of its keys.
	if got := g.Dependents(field(t, "tf:modules/db//local.cfg")); len(got) != 4 {
		t.Errorf("Dependents(local.cfg) = %v, want both outputs and prod's and staging's readers", got)
	}
}

func TestKubernetes(t *testing.T) {
	g := build(t, loadRepo(t, "testdata/repo"))
	expect(t, g, "k8s:core/ConfigMap/prod/api-settings#/data/DB_POOL_SIZE", map[string]string{
		"k8s:apps/Deployment/prod/api#/spec/template/spec/containers/0/env/1": "Deployment prod/api container api env DB_POOL_SIZE from ConfigMap prod/api-settings key DB_POOL_SIZE",
	})
	// The volume lists only app.yaml; LOG_LEVEL is read by nobody (the env entry sets its own value).
	expect(t, g, "k8s:core/ConfigMap/prod/api-settings#/data/app.yaml", map[string]string{
		"k8s:apps/Deployment/prod/api#/spec/template/spec/volumes/1": "Deployment prod/api volume config mounts key app.yaml of ConfigMap prod/api-settings",
	})
	expect(t, g, "k8s:core/ConfigMap/prod/api-settings#/data/LOG_LEVEL", nil)
	secret := map[string]string{
		"k8s:apps/Deployment/prod/api#/spec/template/spec/containers/0/envFrom/0": "Deployment prod/api container api envFrom Secret prod/db-creds",
		"k8s:apps/Deployment/prod/api#/spec/template/spec/volumes/0":              "Deployment prod/api volume creds from Secret prod/db-creds",
	}
	expect(t, g, "k8s:core/Secret/prod/db-creds#/stringData/PASSWORD", secret)
	expect(t, g, "k8s:core/Secret/prod/db-creds#/data/PASSWORD", secret)
	expect(t, g, "k8s:core/Secret/prod/db-creds", secret)
	// Labels are read by no consumer.
	expect(t, g, "k8s:core/Secret/prod/db-creds#/metadata/labels/team", nil)
	// The core group may be written either way.
	if a, b := g.Dependents(core.K8sField("", "Secret", "prod", "db-creds", "")), g.Dependents(core.K8sField("core", "Secret", "prod", "db-creds", "")); len(a) != 2 || len(b) != 2 {
		t.Errorf("core group: %v, %v", a, b)
	}
}

func TestHPA(t *testing.T) {
	g := build(t, loadRepo(t, "testdata/repo"))
	expect(t, g, "k8s:apps/Deployment/prod/api#/spec/replicas", map[string]string{
		"k8s:autoscaling/HorizontalPodAutoscaler/prod/api#/spec/scaleTargetRef": "HorizontalPodAutoscaler prod/api scales Deployment prod/api (drives its spec.replicas)",
	})
	expect(t, g, "k8s:apps/Deployment/prod/api#/spec/template/spec/containers/0/resources/requests/cpu", map[string]string{
		"k8s:autoscaling/HorizontalPodAutoscaler/prod/api#/spec/metrics": "HorizontalPodAutoscaler prod/api measures utilization against Deployment prod/api container api resources.requests",
	})
	expect(t, g, "k8s:apps/Deployment/prod/api#/spec/template/spec/containers/0/image", nil)
}

func TestDefaultNamespace(t *testing.T) {
	g := build(t, map[string][]byte{"app.yaml": []byte(`
apiVersion: v1
kind: ConfigMap
metadata: {name: cfg}
data: {A: "1"}
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: nightly}
spec:
  jobTemplate:
    spec:
      template:
        spec:
          containers:
            - name: job
              envFrom: [{configMapRef: {name: cfg}}]
---
apiVersion: v1
kind: List
items:
  - apiVersion: apps/v1
    kind: StatefulSet
    metadata: {name: db, namespace: other}
    spec:
      template:
        spec:
          initContainers:
            - name: init
              env: [{name: A, valueFrom: {configMapKeyRef: {name: cfg, key: A}}}]
`)})
	want := map[string]string{
		"k8s:batch/CronJob/default/nightly#/spec/jobTemplate/spec/template/spec/containers/0/envFrom/0": "CronJob default/nightly container job envFrom ConfigMap default/cfg",
	}
	expect(t, g, "k8s:core/ConfigMap/default/cfg#/data/A", want)
	// A field as fielddiff reports it, without the namespace the manifest leaves out.
	if got := g.Dependents(core.K8sField("", "ConfigMap", "", "cfg", "/data/A")); len(got) != 1 {
		t.Errorf("Dependents without namespace = %v", got)
	}
	// The StatefulSet in namespace other reads other/cfg, which is not this ConfigMap.
	expect(t, g, "k8s:core/ConfigMap/other/cfg#/data/A", map[string]string{
		"k8s:apps/StatefulSet/other/db#/spec/template/spec/initContainers/0/env/0": "StatefulSet other/db container init env A from ConfigMap other/cfg key A",
	})
}

func TestTerraformReferences(t *testing.T) {
	g := build(t, map[string][]byte{"main.tf": []byte(`
variable "zones" { default = { a = "eu-west-1a" } }
variable "cidr" {}
data "aws_ami" "base" { owners = ["amazon"] }

resource "aws_instance" "web" {
  for_each      = var.zones
  ami           = data.aws_ami.base.id
  provider      = aws.west
  tags = {
    Name = "web-${each.key}"
    Zone = each.value
  }
  dynamic "ebs_block_device" {
    for_each = local.disks
    iterator = disk
    content {
      volume_size = disk.value.size
    }
  }
  lifecycle {
    ignore_changes = [tags.Owner]
  }
}

locals {
  disks = [{ size = 10 }]
  first = aws_instance.web["a"].private_ip
}

module "vpc" {
  source = "terraform-aws-modules/vpc/aws"
  cidr   = var.cidr
}

resource "aws_security_group" "sg" {
  vpc_id = module.vpc.vpc_id
}
`)})
	expect(t, g, "tf:.//var.zones#/default/a", map[string]string{
		"tf:.//aws_instance.web#/for_each":  "var.zones is read by aws_instance.web (for_each)",
		"tf:.//aws_instance.web#/tags/Name": "each.key is read by aws_instance.web (tags.Name)",
		"tf:.//aws_instance.web#/tags/Zone": "each.value is read by aws_instance.web (tags.Zone)",
	})
	expect(t, g, "tf:.//data.aws_ami.base#/id", map[string]string{
		"tf:.//aws_instance.web#/ami": "data.aws_ami.base.id is read by aws_instance.web (ami)",
	})
	expect(t, g, "tf:.//local.disks", map[string]string{
		"tf:.//aws_instance.web#/dynamic.ebs_block_device/0/for_each":              "local.disks is read by aws_instance.web (dynamic.ebs_block_device.0.for_each)",
		"tf:.//aws_instance.web#/dynamic.ebs_block_device/0/content/0/volume_size": "disk.value.size is read by aws_instance.web (dynamic.ebs_block_device.0.content.0.volume_size)",
	})
	// The instance key is not part of the address: fielddiff addresses the block.
	expect(t, g, "tf:.//aws_instance.web#/private_ip", map[string]string{
		"tf:.//local.first": `aws_instance.web["a"].private_ip is read by local.first`,
	})
	// A registry module is opaque: any argument may shape any output.
	expect(t, g, "tf:.//var.cidr", map[string]string{
		"tf:.//module.vpc#/cidr":              "var.cidr is read by module.vpc (cidr)",
		"tf:.//aws_security_group.sg#/vpc_id": "module.vpc.vpc_id is read by aws_security_group.sg (vpc_id)",
	})
	// provider and ignore_changes name things; they read no value.
	for _, f := range []string{"tf:.//aws.west", "tf:.//tags.Owner"} {
		expect(t, g, f, nil)
	}
}

func TestCycles(t *testing.T) {
	g, errs := Build(map[string][]byte{
		"main.tf": []byte(`
locals {
  a = local.b
  b = local.a
}
resource "x" "y" { v = x.z.v }
resource "x" "z" { v = x.y.v }
module "self" {
  source = "./"
  n      = var.n
}
variable "n" { default = module.self.o }
output "o" { value = var.n }
`),
		"k8s.yaml": []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n"),
	})
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	expect(t, g, "tf:.//local.a", map[string]string{"tf:.//local.b": "local.a is read by local.b"})
	expect(t, g, "tf:.//x.y#/v", map[string]string{"tf:.//x.z#/v": "x.y.v is read by x.z (v)"})
	// A module calling itself: every step is reached once, and the walk ends.
	expect(t, g, "tf:.//var.n", map[string]string{
		"tf:.//module.self#/n":  "var.n is read by module.self (n)",
		"tf:.//output.o#/value": "var.n is read by output.o (value)",
	})
}

func TestParseErrors(t *testing.T) {
	g, errs := Build(map[string][]byte{
		"infra/broken.tf":         []byte("resource \"a\" \"b\" {\n  x = \n"),
		"infra/main.tf":           []byte("variable \"v\" {}\nresource \"a\" \"c\" { x = var.v }\n"),
		"k8s/broken.yaml":         []byte("kind: ConfigMap\n  bad: [\n"),
		"chart/templates/cm.yaml": []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\n  {{- include \"x\" . }}\n"),
		"README.md":               []byte("kind of irrelevant"),
		"package.json":            []byte(`{"name": "x"}`),
	})
	if len(errs) != 3 {
		t.Fatalf("errors = %v, want three (broken.tf, the template, broken.yaml)", errs)
	}
	for i, want := range []string{"chart/templates/cm.yaml: document 1: a Helm or Go template", "infra/broken.tf:", "k8s/broken.yaml: document 1"} {
		if !strings.HasPrefix(errs[i].Error(), want) {
			t.Errorf("error %d = %v, want prefix %q", i, errs[i], want)
		}
	}
	expect(t, g, "tf:infra//var.v", map[string]string{"tf:infra//a.c#/x": "var.v is read by a.c (x) in infra"})
}

func TestConcurrentDependents(t *testing.T) {
	g := build(t, loadRepo(t, "testdata/repo"))
	want := len(g.Dependents(field(t, "tf:modules/db//var.max_conn")))
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				if got := len(g.Dependents(field(t, "tf:modules/db//var.max_conn"))); got != want {
					t.Errorf("got %d dependents, want %d", got, want)
					return
				}
			}
		})
	}
	wg.Wait()
	var nilGraph *Graph
	if nilGraph.Dependents(field(t, "tf:.//var.x")) != nil {
		t.Error("nil graph has dependents")
	}
}

// TestModuleFanOut: modules that call the next one twice, twenty levels deep, are 2^20 module
// instances; Dependents stays bounded and still reaches the last module's readers.
func TestModuleFanOut(t *testing.T) {
	files := map[string][]byte{}
	const depth = 20
	for i := range depth {
		src := "variable \"x\" {}\nresource \"r\" \"r\" { v = var.x }\noutput \"o\" { value = var.x }\n"
		if i+1 < depth {
			src += fmt.Sprintf("module \"a\" {\n  source = \"../m%d\"\n  x = var.x\n}\nmodule \"b\" {\n  source = \"../m%d\"\n  x = module.a.o\n}\nresource \"r\" \"out\" { v = module.b.o }\n", i+1, i+1)
		}
		files[fmt.Sprintf("m%d/main.tf", i)] = []byte(src)
	}
	g := build(t, files)
	start := time.Now()
	got := g.Dependents(field(t, "tf:m0//var.x"))
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("Dependents took %v", d)
	}
	seen := map[string]bool{}
	for _, d := range got {
		seen[d.Field.String()] = true
	}
	for _, want := range []string{"tf:m19//r.r#/v", "tf:m0//r.out#/v", "tf:m18//r.out#/v"} {
		if !seen[want] {
			t.Errorf("missing %s among %d dependents", want, len(got))
		}
	}
}
