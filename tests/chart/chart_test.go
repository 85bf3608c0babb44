package chart

import (
	"path/filepath"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	"sigs.k8s.io/yaml"
)

var chartDir = filepath.Join("..", "..", "charts", "parley")

// good are the values a real install sets.
var good = map[string]any{
	"github": map[string]any{"appID": 12345},
	"events": map[string]any{"fluxHMACSecret": map[string]any{"name": "parley-events", "key": "flux-hmac"}},
	"gitops": map[string]any{"repository": "acme/infra"},
}

func TestLint(t *testing.T) {
	res := lint.AllWithKubeVersion(chartDir, good, "parley", nil)
	for _, m := range res.Messages {
		if m.Severity >= support.WarningSev {
			t.Errorf("helm lint: %s", m)
		}
	}
}

func render(t *testing.T, vals map[string]any) (map[string]string, error) {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatalf("load chart: %v", err)
	}
	// ToRenderValues checks the values against values.schema.json, as helm install and template do.
	rv, err := chartutil.ToRenderValues(ch, vals, chartutil.ReleaseOptions{Name: "parley", Namespace: "parley", IsInstall: true}, chartutil.DefaultCapabilities)
	if err != nil {
		return nil, err
	}
	return engine.Render(ch, rv)
}

func TestRender(t *testing.T) {
	out, err := render(t, good)
	if err != nil {
		t.Fatal(err)
	}
	var dep struct {
		Kind string
		Spec struct {
			Replicas int
			Strategy struct{ Type string }
			Template struct {
				Spec struct {
					Containers []struct {
						Args []string
						Env  []struct {
							Name      string
							Value     string
							ValueFrom *struct {
								SecretKeyRef struct{ Name, Key string }
							} `json:"valueFrom"`
						}
						Ports          []struct{ Name string }
						LivenessProbe  struct{ HTTPGet struct{ Path, Port string } } `json:"livenessProbe"`
						ReadinessProbe struct{ HTTPGet struct{ Path, Port string } } `json:"readinessProbe"`
						VolumeMounts   []struct{ MountPath string }                  `json:"volumeMounts"`
					}
					Volumes []struct {
						Name string
						PVC  *struct{ ClaimName string } `json:"persistentVolumeClaim"`
					}
				}
			}
		}
	}
	if err := yaml.Unmarshal([]byte(out["parley/templates/deployment.yaml"]), &dep); err != nil {
		t.Fatalf("deployment: %v\n%s", err, out["parley/templates/deployment.yaml"])
	}
	if dep.Kind != "Deployment" || dep.Spec.Replicas != 1 || dep.Spec.Strategy.Type != "Recreate" {
		t.Errorf("deployment must be one replica, Recreate (single-writer store): %+v", dep.Spec)
	}
	c := dep.Spec.Template.Spec.Containers[0]
	env := map[string]string{}
	secrets := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
		if e.ValueFrom != nil {
			secrets[e.Name] = e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key
		}
	}
	if env["PARLEY_APP_ID"] != "12345" || env["PARLEY_STORE"] != "/var/lib/parley/parley.db" ||
		env["PARLEY_GITOPS_REPOSITORY"] != "acme/infra" || env["PARLEY_DRIFT_STATE"] != "/var/lib/parley/drift.db" ||
		env["PARLEY_COMMIT_AUTHOR"] != "Parley <parley@users.noreply.github.com>" {
		t.Errorf("env = %v", env)
	}
	for name, ref := range map[string]string{"PARLEY_PRIVATE_KEY": "parley-github-app/private-key.pem",
		"PARLEY_WEBHOOK_SECRETS": "parley-github-app/webhook-secrets", "PARLEY_FLUX_HMAC_SECRET": "parley-events/flux-hmac"} {
		if secrets[name] != ref {
			t.Errorf("%s from secret %q, want %q", name, secrets[name], ref)
		}
	}
	if _, ok := secrets["PARLEY_ARGOCD_TOKEN"]; ok {
		t.Errorf("a disabled event source must not reference a secret")
	}
	// The probes go to the metrics port, whose listener the intake's connection caps do not
	// count: they answer while a flood holds the http port.
	if c.LivenessProbe.HTTPGet.Path != "/healthz" || c.ReadinessProbe.HTTPGet.Path != "/readyz" ||
		c.LivenessProbe.HTTPGet.Port != "metrics" || c.ReadinessProbe.HTTPGet.Port != "metrics" || env["PARLEY_METRICS_LISTEN"] != ":9090" {
		t.Errorf("probes: %+v %+v", c.LivenessProbe, c.ReadinessProbe)
	}
	// The intake's limits, with serve's defaults.
	for name, want := range map[string]string{"PARLEY_READ_HEADER_TIMEOUT": "10s", "PARLEY_BODY_TIMEOUT": "30s",
		"PARLEY_WRITE_TIMEOUT": "2m", "PARLEY_IDLE_TIMEOUT": "60s", "PARLEY_MAX_CONNECTIONS": "1024",
		"PARLEY_MAX_CONNECTIONS_PER_CLIENT": "64", "PARLEY_AUTH_FAILURES_PER_MINUTE": "30", "PARLEY_EVENT_MAX_AGE": "24h",
		"PARLEY_EVENT_MAX_FUTURE": "5m", "PARLEY_DELIVERY_RETENTION": "168h", "PARLEY_DEAD_LETTER_RETENTION": "720h",
		"PARLEY_UNAUTHENTICATED_BODY_BUDGET": "134217728"} {
		if env[name] != want {
			t.Errorf("%s = %q, want %q", name, env[name], want)
		}
	}
	if _, ok := env["PARLEY_TRUSTED_PROXIES"]; ok {
		t.Error("no proxy is trusted unless the values name one")
	}
	// The budgets of what a repository may make the server read and render, with serve's defaults
	// (a large number as an integer, not Helm's float).
	for name, want := range map[string]string{"PARLEY_MAX_FILE_SIZE": "8388608", "PARLEY_MAX_FIELDS_PER_FILE": "20000",
		"PARLEY_MAX_FIELDS": "50000", "PARLEY_MAX_VALUE_SIZE": "65536", "PARLEY_RENDER_TIMEOUT": "30s", "PARLEY_RENDER_MEMORY": "512",
		"PARLEY_RENDER_PARALLEL": "2"} {
		if env[name] != want {
			t.Errorf("%s = %q, want %q", name, env[name], want)
		}
	}
	if len(c.Ports) != 2 || c.Ports[1].Name != "metrics" {
		t.Errorf("ports: %+v", c.Ports)
	}
	var pvc bool
	for _, v := range dep.Spec.Template.Spec.Volumes {
		pvc = pvc || (v.Name == "data" && v.PVC != nil && v.PVC.ClaimName == "parley")
	}
	if !pvc {
		t.Errorf("the store volume must be the chart's PVC: %+v", dep.Spec.Template.Spec.Volumes)
	}
	if !strings.Contains(out["parley/templates/pvc.yaml"], "kind: PersistentVolumeClaim") {
		t.Errorf("pvc not rendered")
	}
	if strings.TrimSpace(out["parley/templates/pdb.yaml"]) != "" {
		t.Errorf("one replica needs no disruption budget:\n%s", out["parley/templates/pdb.yaml"])
	}
	if !strings.Contains(out["parley/templates/service.yaml"], "name: metrics") {
		t.Errorf("service lacks the metrics port")
	}
}

func TestRenderRefusesMissingAppID(t *testing.T) {
	_, err := render(t, map[string]any{})
	if err == nil || !strings.Contains(err.Error(), "github.appID is required") {
		t.Fatalf("want a clear error for a missing App ID, got %v", err)
	}
}

// TestRenderRoutes: the clusters and AWS accounts of the values reach parley serve as
// PARLEY_CLUSTERS and PARLEY_AWS_ACCOUNTS, in the form app/config reads; none set, neither is.
func TestRenderRoutes(t *testing.T) {
	env := func(t *testing.T, vals map[string]any) map[string]string {
		t.Helper()
		out, err := render(t, vals)
		if err != nil {
			t.Fatal(err)
		}
		var dep struct {
			Spec struct {
				Template struct {
					Spec struct {
						Containers []struct {
							Env []struct{ Name, Value string }
						}
					}
				}
			}
		}
		if err := yaml.Unmarshal([]byte(out["parley/templates/deployment.yaml"]), &dep); err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for _, e := range dep.Spec.Template.Spec.Containers[0].Env {
			m[e.Name] = e.Value
		}
		return m
	}
	if e := env(t, good); e["PARLEY_CLUSTERS"] != "" || e["PARLEY_AWS_ACCOUNTS"] != "" {
		t.Errorf("no routes configured, yet %q / %q", e["PARLEY_CLUSTERS"], e["PARLEY_AWS_ACCOUNTS"])
	}
	routed := map[string]any{
		"github": map[string]any{"appID": 12345},
		"gitops": map[string]any{
			"clusters": map[string]any{
				"prod-us": map[string]any{"repository": "acme/prod-us", "branch": "release"},
				"prod-eu": map[string]any{"repository": "acme/prod-eu"},
			},
			"awsAccounts": map[string]any{"123456789012": map[string]any{"repository": "acme/infra"}},
		},
	}
	e := env(t, routed)
	if e["PARLEY_CLUSTERS"] != "prod-eu=acme/prod-eu,prod-us=acme/prod-us@release" || e["PARLEY_AWS_ACCOUNTS"] != "123456789012=acme/infra" {
		t.Errorf("PARLEY_CLUSTERS=%q PARLEY_AWS_ACCOUNTS=%q", e["PARLEY_CLUSTERS"], e["PARLEY_AWS_ACCOUNTS"])
	}
	routed["gitops"].(map[string]any)["clusters"] = map[string]any{"prod-eu": map[string]any{"branch": "main"}}
	if _, err := render(t, routed); err == nil || !strings.Contains(err.Error(), `cluster "prod-eu" needs a repository`) {
		t.Errorf("a cluster without a repository: %v", err)
	}
}

// TestRenderEventSecrets: a cluster's or AWS account's eventSecret is mounted as a file and named
// to parley serve in PARLEY_CLUSTER_EVENT_SECRET_FILES / PARLEY_AWS_ACCOUNT_EVENT_SECRET_FILES, the
// form app/config reads; without any, there is neither the volume nor the variables.
func TestRenderEventSecrets(t *testing.T) {
	type deployment struct {
		Spec struct {
			Template struct {
				Spec struct {
					Containers []struct {
						Env          []struct{ Name, Value string }
						VolumeMounts []struct{ Name, MountPath string }
					}
					Volumes []struct {
						Name      string
						Projected *struct {
							Sources []struct {
								Secret struct {
									Name  string
									Items []struct{ Key, Path string }
								}
							}
						}
					}
				}
			}
		}
	}
	decode := func(vals map[string]any) (deployment, map[string]string) {
		t.Helper()
		out, err := render(t, vals)
		if err != nil {
			t.Fatal(err)
		}
		var dep deployment
		if err := yaml.Unmarshal([]byte(out["parley/templates/deployment.yaml"]), &dep); err != nil {
			t.Fatal(err)
		}
		env := map[string]string{}
		for _, e := range dep.Spec.Template.Spec.Containers[0].Env {
			env[e.Name] = e.Value
		}
		return dep, env
	}
	dep, env := decode(good)
	if env["PARLEY_CLUSTER_EVENT_SECRET_FILES"] != "" || len(dep.Spec.Template.Spec.Volumes) != 2 {
		t.Errorf("no event secrets, yet %q and volumes %+v", env["PARLEY_CLUSTER_EVENT_SECRET_FILES"], dep.Spec.Template.Spec.Volumes)
	}
	dep, env = decode(map[string]any{
		"github": map[string]any{"appID": 12345},
		"gitops": map[string]any{
			"clusters": map[string]any{
				"prod-eu": map[string]any{"repository": "acme/prod-eu", "eventSecret": map[string]any{"name": "parley-prod-eu"}},
				"prod-us": map[string]any{"repository": "acme/prod-us"},
			},
			"awsAccounts": map[string]any{"123456789012": map[string]any{"repository": "acme/infra", "eventSecret": map[string]any{"name": "parley-aws", "key": "token"}}},
		},
	})
	if env["PARLEY_CLUSTER_EVENT_SECRET_FILES"] != "prod-eu=/etc/parley/event-secrets/cluster/prod-eu" ||
		env["PARLEY_AWS_ACCOUNT_EVENT_SECRET_FILES"] != "123456789012=/etc/parley/event-secrets/aws-account/123456789012" {
		t.Errorf("env %q / %q", env["PARLEY_CLUSTER_EVENT_SECRET_FILES"], env["PARLEY_AWS_ACCOUNT_EVENT_SECRET_FILES"])
	}
	mounted := false
	for _, m := range dep.Spec.Template.Spec.Containers[0].VolumeMounts {
		mounted = mounted || (m.Name == "event-secrets" && m.MountPath == "/etc/parley/event-secrets")
	}
	var sources []string
	for _, v := range dep.Spec.Template.Spec.Volumes {
		if v.Name == "event-secrets" && v.Projected != nil {
			for _, s := range v.Projected.Sources {
				for _, i := range s.Secret.Items {
					sources = append(sources, s.Secret.Name+":"+i.Key+"->"+i.Path)
				}
			}
		}
	}
	if !mounted || strings.Join(sources, ",") != "parley-aws:token->aws-account/123456789012,parley-prod-eu:event-secret->cluster/prod-eu" {
		t.Errorf("mounted %v, sources %v", mounted, sources)
	}
}

// TestRenderReplicasNeedPostgreSQL: more than one replica is refused on the SQLite store, and
// with the PostgreSQL store renders that many replicas updated one by one, the store's URL from
// its Secret, no volume claim, and a PodDisruptionBudget.
func TestRenderReplicasNeedPostgreSQL(t *testing.T) {
	vals := func(replicas int, secret string) map[string]any {
		return map[string]any{
			"github":       map[string]any{"appID": 12345},
			"replicaCount": replicas,
			"store":        map[string]any{"postgres": map[string]any{"secret": map[string]any{"name": secret, "key": "dsn"}}},
		}
	}
	if _, err := render(t, vals(3, "")); err == nil || !strings.Contains(err.Error(), "replicaCount > 1 needs the PostgreSQL store") {
		t.Fatalf("three replicas on SQLite: %v", err)
	}
	if _, err := render(t, vals(0, "")); err == nil || !strings.Contains(err.Error(), "replicaCount must be at least 1") {
		t.Fatalf("no replica: %v", err)
	}
	out, err := render(t, vals(3, "parley-postgres"))
	if err != nil {
		t.Fatal(err)
	}
	var dep struct {
		Spec struct {
			Replicas int
			Strategy struct {
				Type          string
				RollingUpdate struct{ MaxUnavailable int } `json:"rollingUpdate"`
			}
			Template struct {
				Spec struct {
					Containers []struct {
						Env []struct {
							Name      string
							Value     string
							ValueFrom *struct {
								SecretKeyRef struct{ Name, Key string }
							} `json:"valueFrom"`
						}
					}
					Volumes []struct {
						Name     string
						EmptyDir *struct{}                   `json:"emptyDir"`
						PVC      *struct{ ClaimName string } `json:"persistentVolumeClaim"`
					}
				}
			}
		}
	}
	if err := yaml.Unmarshal([]byte(out["parley/templates/deployment.yaml"]), &dep); err != nil {
		t.Fatal(err)
	}
	if dep.Spec.Replicas != 3 || dep.Spec.Strategy.Type != "RollingUpdate" || dep.Spec.Strategy.RollingUpdate.MaxUnavailable != 0 {
		t.Errorf("replicas %d, strategy %+v: want 3, rolling one by one", dep.Spec.Replicas, dep.Spec.Strategy)
	}
	env := map[string]string{}
	for _, e := range dep.Spec.Template.Spec.Containers[0].Env {
		env[e.Name] = e.Value
		if e.ValueFrom != nil {
			env[e.Name] = "secret:" + e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key
		}
	}
	if env["PARLEY_STORE"] != "secret:parley-postgres/dsn" || env["PARLEY_DATA_DIR"] != "/var/lib/parley" || env["PARLEY_LEASE"] != "5m" {
		t.Errorf("env %v", env)
	}
	if _, ok := env["PARLEY_DRIFT_STATE"]; ok {
		t.Error("PARLEY_DRIFT_STATE is a SQLite file: serve refuses it with PostgreSQL")
	}
	for _, v := range dep.Spec.Template.Spec.Volumes {
		if v.Name == "data" && (v.PVC != nil || v.EmptyDir == nil) {
			t.Errorf("replicas share no volume: data is %+v", v)
		}
	}
	if strings.TrimSpace(out["parley/templates/pvc.yaml"]) != "" {
		t.Errorf("a volume claim with PostgreSQL:\n%s", out["parley/templates/pvc.yaml"])
	}
	var pdb struct {
		Kind string
		Spec struct {
			MaxUnavailable int `json:"maxUnavailable"`
			Selector       struct {
				MatchLabels map[string]string `json:"matchLabels"`
			}
		}
	}
	if err := yaml.Unmarshal([]byte(out["parley/templates/pdb.yaml"]), &pdb); err != nil {
		t.Fatal(err)
	}
	if pdb.Kind != "PodDisruptionBudget" || pdb.Spec.MaxUnavailable != 1 || pdb.Spec.Selector.MatchLabels["app.kubernetes.io/instance"] != "parley" {
		t.Errorf("pod disruption budget %+v", pdb)
	}
	// One replica on PostgreSQL (a first step before scaling): no budget that would block drains.
	if out, err := render(t, vals(1, "parley-postgres")); err != nil || strings.TrimSpace(out["parley/templates/pdb.yaml"]) != "" {
		t.Errorf("one replica: %v\n%s", err, out["parley/templates/pdb.yaml"])
	}
}

// TestRenderDetailsPages: the details pages' settings reach parley serve, the client secret and
// the session secret from Secrets; a partial configuration is refused.
func TestRenderDetailsPages(t *testing.T) {
	details := map[string]any{"publicURL": "https://parley.example.com", "oauth": map[string]any{"clientID": "Iv1.abc",
		"clientSecret": map[string]any{"name": "parley-oauth", "key": "client-secret"}}, "sessionSecret": map[string]any{"name": "parley-oauth", "key": "session"}}
	out, err := render(t, map[string]any{"github": map[string]any{"appID": 12345}, "details": details})
	if err != nil {
		t.Fatal(err)
	}
	dep := out["parley/templates/deployment.yaml"]
	for _, want := range []string{
		`{name: PARLEY_PUBLIC_URL, value: "https://parley.example.com"}`,
		`{name: PARLEY_OAUTH_CLIENT_ID, value: "Iv1.abc"}`,
		"name: PARLEY_OAUTH_CLIENT_SECRET\n              valueFrom:\n                secretKeyRef: {name: \"parley-oauth\", key: \"client-secret\"}",
		"name: PARLEY_SESSION_SECRET\n              valueFrom:\n                secretKeyRef: {name: \"parley-oauth\", key: \"session\"}",
	} {
		if !strings.Contains(dep, want) {
			t.Errorf("deployment lacks %q", want)
		}
	}
	if out, _ := render(t, good); strings.Contains(out["parley/templates/deployment.yaml"], "PARLEY_PUBLIC_URL") {
		t.Error("the details pages are on without being configured")
	}
	partial := map[string]any{"publicURL": "https://parley.example.com"}
	if _, err := render(t, map[string]any{"github": map[string]any{"appID": 12345}, "details": partial}); err == nil || !strings.Contains(err.Error(), "set all three or none") {
		t.Errorf("a partial configuration: %v", err)
	}
}

// TestRenderTrustedProxies: the proxies the values trust reach serve as one comma-separated
// PARLEY_TRUSTED_PROXIES.
func TestRenderTrustedProxies(t *testing.T) {
	out, err := render(t, map[string]any{"github": map[string]any{"appID": 12345},
		"intake": map[string]any{"trustedProxies": []any{"10.0.0.0/8", "2001:db8::/32"}}})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{name: PARLEY_TRUSTED_PROXIES, value: "10.0.0.0/8,2001:db8::/32"}`; !strings.Contains(out["parley/templates/deployment.yaml"], want) {
		t.Errorf("deployment lacks %s", want)
	}
}
