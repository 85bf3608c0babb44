package depgraph

import (
	"fmt"
	"strings"
	"testing"

	"github.com/parleyhq/parley/core"
)

// generatedRepo is a repository of 1,000 Terraform resources in ten modules (each reading the
// previous resource, a variable and a local, the modules called in a chain with outputs read back)
// and 100 Deployments, each with a ConfigMap and a Secret.
func generatedRepo() map[string][]byte {
	files := map[string][]byte{}
	const modules, perModule = 10, 100
	for m := range modules {
		var b strings.Builder
		fmt.Fprintf(&b, "variable \"size\" {\n  default = %d\n}\n\nlocals {\n  half = var.size / 2\n  tags = { team = \"t%d\", env = \"prod\" }\n}\n\n", m, m)
		for r := range perModule {
			fmt.Fprintf(&b, "resource \"aws_instance\" \"r%d\" {\n  instance_type = \"t3.micro\"\n  count = local.half\n  tags = merge(local.tags, { Name = \"r%d\" })\n", r, r)
			if r > 0 {
				fmt.Fprintf(&b, "  subnet_id = aws_instance.r%d.subnet_id\n  user_data = \"${aws_instance.r%d[0].id}-${var.size}\"\n", r-1, r-1)
			}
			b.WriteString("  root_block_device {\n    volume_size = var.size * 2\n  }\n}\n\n")
		}
		fmt.Fprintf(&b, "output \"last\" {\n  value = aws_instance.r%d.subnet_id\n}\n", perModule-1)
		if m+1 < modules {
			fmt.Fprintf(&b, "\nmodule \"next\" {\n  source = \"../m%d\"\n  size   = var.size + 1\n}\n\nresource \"aws_ssm_parameter\" \"next\" {\n  value = module.next.last\n}\n", m+1)
		}
		files[fmt.Sprintf("infra/m%d/main.tf", m)] = []byte(b.String())
	}
	var k strings.Builder
	for i := range 100 {
		fmt.Fprintf(&k, `---
apiVersion: v1
kind: ConfigMap
metadata: {name: cfg-%d, namespace: prod}
data: {A: "1", B: "2"}
---
apiVersion: v1
kind: Secret
metadata: {name: sec-%d, namespace: prod}
stringData: {P: x}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: app-%d, namespace: prod}
spec:
  template:
    spec:
      containers:
        - name: app
          env:
            - {name: A, valueFrom: {configMapKeyRef: {name: cfg-%d, key: A}}}
            - {name: P, valueFrom: {secretKeyRef: {name: sec-%d, key: P}}}
          envFrom: [{configMapRef: {name: cfg-%d}}]
      volumes:
        - {name: s, secret: {secretName: sec-%d}}
`, i, i, i, i, i, i, i)
	}
	files["k8s/prod/apps.yaml"] = []byte(k.String())
	return files
}

func TestGeneratedRepo(t *testing.T) {
	g := build(t, generatedRepo())
	// The root module's variable reaches every resource of every module down the chain.
	got := g.Dependents(core.TFField("infra/m0", "var.size", "/default"))
	if len(got) < 1000 {
		t.Errorf("var.size of the first module has %d dependents, want more than 1000", len(got))
	}
	if got := g.Dependents(core.K8sField("", "Secret", "prod", "sec-7", "/stringData/P")); len(got) != 2 {
		t.Errorf("sec-7 dependents = %v", got)
	}
}

func BenchmarkBuild(b *testing.B) {
	files := generatedRepo()
	size := 0
	for _, c := range files {
		size += len(c)
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	for b.Loop() {
		if _, errs := Build(files); len(errs) > 0 {
			b.Fatal(errs)
		}
	}
}

func BenchmarkDependents(b *testing.B) {
	g, errs := Build(generatedRepo())
	if len(errs) > 0 {
		b.Fatal(errs)
	}
	f := core.TFField("infra/m0", "var.size", "/default")
	b.ReportAllocs()
	for b.Loop() {
		g.Dependents(f)
	}
}
