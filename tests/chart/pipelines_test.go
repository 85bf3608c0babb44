package chart

import (
	"strings"
	"testing"
)

// TestRenderPipelines: the firehose and pubsub values become serve's blocks in the configuration
// file serve is started with, the streams' access keys mounted where access_key_file points,
// with the admission webhook off and on.
func TestRenderPipelines(t *testing.T) {
	vals := func(admission bool) map[string]any {
		return map[string]any{
			"github": map[string]any{"appID": 12345},
			"gitops": map[string]any{"clusters": map[string]any{"prod-eks": map[string]any{"repository": "acme/eks"}, "prod-gke": map[string]any{"repository": "acme/gke"}}},
			"pipelines": map[string]any{
				"firehose": map[string]any{"prod-eks": map[string]any{"accessKeySecret": map[string]any{"name": "parley-firehose"}}},
				"pubsub":   map[string]any{"prod-gke": map[string]any{"audience": "https://parley.example.com/events/pubsub/prod-gke", "serviceAccount": "push@acme.iam.gserviceaccount.com"}},
			},
			"admission": map[string]any{"enabled": admission, "cluster": "prod-eks"},
		}
	}
	for _, admission := range []bool{false, true} {
		out, err := render(t, vals(admission))
		if err != nil {
			t.Fatal(err)
		}
		cm, path := out["parley/templates/pipelines.yaml"], "/etc/parley/pipelines/parley.hcl"
		if admission {
			cm, path = out["parley/templates/admission.yaml"], "/etc/parley/admission/parley.hcl"
		}
		dep := out["parley/templates/deployment.yaml"]
		for _, want := range []string{`firehose "prod-eks" {`, `access_key_file = "/etc/parley/event-secrets/firehose/prod-eks"`, `pubsub "prod-gke" {`,
			`audience        = "https://parley.example.com/events/pubsub/prod-gke"`, `service_account = "push@acme.iam.gserviceaccount.com"`} {
			if !strings.Contains(cm, want) {
				t.Errorf("admission %v: the configuration lacks %s:\n%s", admission, want, cm)
			}
		}
		for _, want := range []string{`"--config", "` + path + `"`, `path: "firehose/prod-eks"`, `name: "parley-firehose"`, `key: "access-key"`} {
			if !strings.Contains(dep, want) {
				t.Errorf("admission %v: the deployment lacks %s:\n%s", admission, want, dep)
			}
		}
	}
	bad := vals(false)
	bad["pipelines"].(map[string]any)["firehose"] = map[string]any{"staging": map[string]any{"accessKeySecret": map[string]any{"name": "x"}}}
	if _, err := render(t, bad); err == nil || !strings.Contains(err.Error(), `pipelines.firehose "staging": add it to gitops.clusters`) {
		t.Errorf("a stream of no cluster: %v", err)
	}
}
