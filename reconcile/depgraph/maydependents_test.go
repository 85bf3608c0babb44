package depgraph

import (
	"strings"
	"testing"

	"github.com/parleyhq/parley/core"
)

// TestMayHaveDependentsCoversEveryEdge: every Kubernetes field an edge of the test repositories
// starts from, every path that holds it and every path inside it, may have dependents; a field
// MayHaveDependents rules out has none in any of the graphs. A new kind of edge that the
// predicate does not know fails here rather than going unjudged in parley review.
func TestMayHaveDependentsCoversEveryEdge(t *testing.T) {
	hpaCron := map[string][]byte{"app.yaml": []byte(`
apiVersion: batch/v1
kind: CronJob
metadata: {name: nightly, namespace: prod}
spec:
  jobTemplate:
    spec:
      template:
        spec:
          containers:
            - {name: job, image: job:1, resources: {requests: {cpu: 100m}}}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: nightly, namespace: prod}
spec:
  scaleTargetRef: {apiVersion: batch/v1, kind: CronJob, name: nightly}
  metrics: [{type: Resource, resource: {name: cpu}}]
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: custom, namespace: prod}
spec:
  scaleTargetRef: {apiVersion: example.com/v1, kind: Widget, name: custom}
`)}
	for name, files := range map[string]map[string][]byte{"testdata/repo": loadRepo(t, "testdata/repo"), "hpa and cronjob": hpaCron} {
		g := build(t, files)
		var fields []core.Field
		for _, es := range g.from {
			for _, e := range es {
				if e.from.Scheme != core.SchemeKubernetes {
					continue
				}
				fields = append(fields, e.from, e.from.Child("x"))
				for p := e.from.Path; p != ""; p = p[:strings.LastIndexByte(p, '/')] {
					f := e.from
					f.Path = p
					fields = append(fields, f)
				}
			}
		}
		if len(fields) == 0 {
			t.Fatalf("%s: no Kubernetes edges", name)
		}
		for _, f := range fields {
			if len(g.Dependents(f)) > 0 && !MayHaveDependents(f) {
				t.Errorf("%s: %s has dependents %v, but MayHaveDependents says it has none", name, f, g.Dependents(f))
			}
		}
	}
	for _, s := range []string{
		"k8s:apps/Deployment/prod/api#/spec/template/spec/containers/0/image",
		"k8s:helm.toolkit.fluxcd.io/HelmRelease/default/atuin#/spec/values/controllers/atuin/containers/app/image/tag",
		"k8s:helm.toolkit.fluxcd.io/HelmRelease/monitoring/kube-prometheus-stack#/spec/chart/spec/version",
	} {
		f, err := core.ParseField(s)
		if err != nil {
			t.Fatal(err)
		}
		if MayHaveDependents(f) {
			t.Errorf("%s: MayHaveDependents is true; no edge starts from an image or a chart version", s)
		}
	}
}
