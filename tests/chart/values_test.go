package chart

import (
	"maps"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	"sigs.k8s.io/yaml"
)

// with returns good with the values of extra set (a shallow merge per top-level key).
func with(extra map[string]any) map[string]any {
	v := maps.Clone(good)
	for k, x := range extra {
		if m, ok := x.(map[string]any); ok {
			if old, ok := v[k].(map[string]any); ok {
				merged := maps.Clone(old)
				maps.Copy(merged, m)
				x = merged
			}
		}
		v[k] = x
	}
	return v
}

// TestValuesSchema: values.schema.json refuses a misspelt key and a value of the wrong type, in
// helm lint and at render time (helm install and template), naming the key; the chart's own
// defaults and a real install's values pass.
func TestValuesSchema(t *testing.T) {
	if _, err := render(t, good); err != nil {
		t.Fatalf("good values: %v", err)
	}
	for _, tc := range []struct {
		name  string
		extra map[string]any
		want  string
	}{
		{"a misspelt top-level key", map[string]any{"replicas": 2}, "replicas"},
		{"a misspelt budget", map[string]any{"budgets": map[string]any{"renderMemoryMiB": 256}}, "renderMemoryMiB"},
		{"a string for a number", map[string]any{"budgets": map[string]any{"renderParallel": "two"}}, "renderParallel"},
		{"a duration that is not one", map[string]any{"intake": map[string]any{"bodyTimeout": "30 seconds"}}, "bodyTimeout"},
		{"a write mode serve does not have", map[string]any{"writeMode": "push"}, "writeMode"},
		{"a memory limit that is no quantity", map[string]any{"resources": map[string]any{"limits": map[string]any{"memory": "lots"}}}, "memory"},
		{"ingress.enabled as a string", map[string]any{"ingress": map[string]any{"enabled": "yes"}}, "enabled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := render(t, with(tc.extra))
			if err == nil || !strings.Contains(err.Error(), "schema") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("render: error %v, want the schema naming %q", err, tc.want)
			}
			var lintErr bool
			for _, m := range lint.AllWithKubeVersion(chartDir, with(tc.extra), "parley", nil).Messages {
				lintErr = lintErr || (m.Severity >= support.ErrorSev && strings.Contains(m.Err.Error(), tc.want))
			}
			if !lintErr {
				t.Errorf("helm lint does not refuse it")
			}
		})
	}
}

// TestRenderMemoryLimitHoldsBudgets: a memory limit below (renderMemory + 130 MiB) x
// renderParallel + 256 MiB stops the render with a message naming the values and the limit to
// set; the defaults hold their own budgets.
func TestRenderMemoryLimitHoldsBudgets(t *testing.T) {
	limit := func(mem any, budgets map[string]any) map[string]any {
		extra := map[string]any{"resources": map[string]any{"requests": map[string]any{"memory": "128Mi"}}}
		if mem != nil {
			extra["resources"].(map[string]any)["limits"] = map[string]any{"memory": mem}
		}
		if budgets != nil {
			extra["budgets"] = budgets
		}
		return with(extra)
	}
	for _, tc := range []struct {
		name    string
		vals    map[string]any
		wantErr string
	}{
		{"the defaults", good, ""},
		{"the old default 512Mi", limit("512Mi", nil), "resources.limits.memory 512Mi (512 MiB) cannot hold the render budgets: (budgets.renderMemory 512 MiB + 130 MiB per worker) x budgets.renderParallel 2 = 1284 MiB, plus 256 MiB for the server = 1540 MiB. Raise the limit to at least 1540Mi"},
		{"just below", limit("1539Mi", nil), "cannot hold the render budgets"},
		{"exactly enough", limit("1540Mi", nil), ""},
		{"in gigabytes", limit("1.5G", nil), ""}, // 1430.5 MiB: below
		{"more parallelism than the default limit holds", limit("2Gi", map[string]any{"renderParallel": 4}), "x budgets.renderParallel 4 = 2568 MiB"},
		{"parallelism with its memory", limit("3Gi", map[string]any{"renderParallel": 4}), ""},
		{"smaller budgets in a small limit", limit("1Gi", map[string]any{"renderMemory": 250, "renderParallel": 2}), ""}, // 1016 MiB
		{"bytes", limit(2147483648, nil), ""},
		{"no limit", limit(nil, nil), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "in gigabytes" {
				tc.wantErr = "1.5G (1431 MiB) cannot hold"
			}
			_, err := render(t, tc.vals)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("error %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// TestRenderIngressAndServiceMonitor: neither is rendered by default; enabled, the Ingress routes
// the host to the http port only (never metrics), with TLS when a Secret is named, and the
// ServiceMonitor scrapes /metrics on the metrics port of this release's Service.
func TestRenderIngressAndServiceMonitor(t *testing.T) {
	out, err := render(t, good)
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(out["parley/templates/ingress.yaml"]) != "" || strings.TrimSpace(out["parley/templates/servicemonitor.yaml"]) != "" {
		t.Fatalf("rendered by default:\n%s\n%s", out["parley/templates/ingress.yaml"], out["parley/templates/servicemonitor.yaml"])
	}
	if _, err := render(t, with(map[string]any{"ingress": map[string]any{"enabled": true}})); err == nil || !strings.Contains(err.Error(), "ingress.host is required") {
		t.Errorf("an Ingress without a host: %v", err)
	}
	on := with(map[string]any{
		"ingress": map[string]any{"enabled": true, "host": "parley.example.com", "className": "nginx",
			"annotations": map[string]any{"cert-manager.io/cluster-issuer": "letsencrypt"}, "tls": map[string]any{"secretName": "parley-tls"}},
		"serviceMonitor": map[string]any{"enabled": true, "labels": map[string]any{"release": "prometheus"}},
	})
	if out, err = render(t, on); err != nil {
		t.Fatal(err)
	}
	var ing struct {
		Kind     string
		Metadata struct{ Annotations map[string]string }
		Spec     struct {
			IngressClassName string `json:"ingressClassName"`
			TLS              []struct {
				Hosts      []string
				SecretName string `json:"secretName"`
			}
			Rules []struct {
				Host string
				HTTP struct {
					Paths []struct {
						Path     string
						PathType string `json:"pathType"`
						Backend  struct {
							Service struct {
								Name string
								Port struct{ Name string }
							}
						}
					}
				}
			}
		}
	}
	if err := yaml.Unmarshal([]byte(out["parley/templates/ingress.yaml"]), &ing); err != nil {
		t.Fatalf("ingress: %v\n%s", err, out["parley/templates/ingress.yaml"])
	}
	if ing.Kind != "Ingress" || ing.Spec.IngressClassName != "nginx" || ing.Metadata.Annotations["cert-manager.io/cluster-issuer"] != "letsencrypt" ||
		len(ing.Spec.TLS) != 1 || ing.Spec.TLS[0].SecretName != "parley-tls" || ing.Spec.TLS[0].Hosts[0] != "parley.example.com" ||
		len(ing.Spec.Rules) != 1 || ing.Spec.Rules[0].Host != "parley.example.com" || len(ing.Spec.Rules[0].HTTP.Paths) != 1 {
		t.Fatalf("ingress: %+v", ing)
	}
	if b := ing.Spec.Rules[0].HTTP.Paths[0].Backend.Service; b.Name != "parley" || b.Port.Name != "http" {
		t.Errorf("the Ingress routes to %+v, want the Service's http port", b)
	}
	var sm struct {
		APIVersion string `json:"apiVersion"`
		Kind       string
		Metadata   struct{ Labels map[string]string }
		Spec       struct {
			Selector  struct{ MatchLabels map[string]string } `json:"selector"`
			Endpoints []struct{ Port, Path, Interval string }
		}
	}
	if err := yaml.Unmarshal([]byte(out["parley/templates/servicemonitor.yaml"]), &sm); err != nil {
		t.Fatalf("servicemonitor: %v", err)
	}
	var svc struct {
		Metadata struct{ Labels map[string]string }
	}
	if err := yaml.Unmarshal([]byte(out["parley/templates/service.yaml"]), &svc); err != nil {
		t.Fatal(err)
	}
	for k, v := range sm.Spec.Selector.MatchLabels {
		if svc.Metadata.Labels[k] != v {
			t.Errorf("the ServiceMonitor selects %s=%s; the Service has %q", k, v, svc.Metadata.Labels[k])
		}
	}
	if sm.APIVersion != "monitoring.coreos.com/v1" || sm.Metadata.Labels["release"] != "prometheus" ||
		len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != "metrics" || sm.Spec.Endpoints[0].Path != "/metrics" || sm.Spec.Endpoints[0].Interval != "30s" {
		t.Errorf("servicemonitor: %+v", sm)
	}
	for _, m := range lint.AllWithKubeVersion(chartDir, on, "parley", nil).Messages {
		if m.Severity >= support.WarningSev {
			t.Errorf("helm lint with the Ingress and the ServiceMonitor: %s", m)
		}
	}
}
