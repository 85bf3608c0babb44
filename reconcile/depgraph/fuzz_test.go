package depgraph

import (
	"testing"

	"github.com/parleyhq/parley/core"
)

// FuzzBuild checks that Build never panics on arbitrary file content, whatever it makes of it, and
// that every answer is well formed: sorted, without repeats, never the field asked about, and made
// of addresses that parse.
func FuzzBuild(f *testing.F) {
	f.Add([]byte("variable \"x\" { default = 1 }\nresource \"a\" \"b\" {\n  v = var.x\n  dynamic \"d\" {\n    for_each = local.l\n    content { w = d.value }\n  }\n}\nlocals { l = [a.b.v] }\n"),
		[]byte("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec: {template: {spec: {containers: [{name: c, env: [{name: E, valueFrom: {configMapKeyRef: {name: m, key: k}}}]}]}}}\n"))
	f.Add([]byte("module \"m\" {\n  source = \"./m\"\n  n = var.n\n}\noutput \"o\" { value = module.m.o[0][\"k\"] }\n"),
		[]byte("apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata: {name: h}\nspec: {scaleTargetRef: {kind: Deployment, name: d}, metrics: [{type: Resource}]}\n"))
	f.Add([]byte("resource \"kubernetes_config_map\" \"c\" {\n  metadata { name = \"m\" }\n  data = { k = aws_x.y[*].id }\n}\n"),
		[]byte("kind: List\napiVersion: v1\nitems: [{apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {volumes: [{projected: {sources: [{secret: {name: s}}]}}]}}]\n"))
	f.Add([]byte("resource \"a\" \"b\" {\n  x = \n"), []byte("a: &a [*a, *a]\nkind: x\n"))
	f.Fuzz(func(t *testing.T, tf, manifest []byte) {
		g, _ := Build(map[string][]byte{
			"infra/main.tf":    tf,
			"infra/m/main.tf":  tf,
			"k8s/app.yaml":     manifest,
			"k8s/../list.json": manifest,
		})
		queries := []core.Field{core.TFField("infra", "var.x", ""), core.K8sField("", "ConfigMap", "", "m", "")}
		for obj, edges := range g.from {
			queries = append(queries, obj)
			for _, e := range edges {
				queries = append(queries, e.from)
			}
			if len(queries) > 50 {
				break
			}
		}
		for _, q := range queries {
			ds := g.Dependents(q)
			for i, d := range ds {
				if i > 0 && ds[i-1].Field.String() >= d.Field.String() {
					t.Fatalf("Dependents(%s) not sorted or repeated: %v", q, ds)
				}
				if d.Field == normalize(q) {
					t.Fatalf("Dependents(%s) holds the field itself", q)
				}
				if d.Via == "" {
					t.Fatalf("Dependents(%s): %s without Via", q, d.Field)
				}
				if back, err := core.ParseField(d.Field.String()); err != nil || back != d.Field {
					t.Fatalf("dependent %#v does not round-trip: %v, %#v", d.Field, err, back)
				}
			}
		}
	})
}
