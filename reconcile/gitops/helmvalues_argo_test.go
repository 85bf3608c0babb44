package gitops

import (
	"strings"
	"testing"

	"github.com/parleyhq/parley/core"
)

// A tiny chart in the repository: one Deployment whose replicas come from replicaCount.
var hvChart = map[string]string{
	"charts/web/Chart.yaml":                "apiVersion: v2\nname: web\nversion: 1.0.0\n",
	"charts/web/values.yaml":               "replicaCount: 1\n",
	"charts/web/templates/deployment.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Release.Name }}\nspec:\n  replicas: {{ .Values.replicaCount }}\n",
}

// hvApp is an Application named name in argocd installing into prod; source is its spec.source
// or spec.sources, indented under spec.
func hvApp(name, source string) string {
	return "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: " + name + "\n  namespace: argocd\nspec:\n  project: default\n" +
		source + "  destination:\n    server: https://kubernetes.default.svc\n    namespace: prod\n"
}

// hvSet is an ApplicationSet generating an Application per chart directory under charts/.
const hvSet = `apiVersion: argoproj.io/v1alpha1
kind: ApplicationSet
metadata:
  name: charts
  namespace: argocd
spec:
  generators:
    - git:
        repoURL: https://github.com/acme/infra
        directories:
          - path: charts/*
  template:
    metadata:
      name: '{{path.basename}}'
    spec:
      project: default
      source:
        repoURL: https://github.com/acme/infra
        path: '{{path}}'
        helm:
          valuesObject:
            image: nginx
      destination:
        server: https://kubernetes.default.svc
        namespace: prod
`

const hvFlux = `apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: web
  namespace: prod
spec:
  interval: 10m
  chart:
    spec:
      chart: ./charts/web
      sourceRef:
        kind: GitRepository
        name: flux-system
  values:
    replicaCount: 2
`

func hvRepo(extra map[string]string) map[string][]byte {
	files := map[string][]byte{}
	for k, v := range hvChart {
		files[k] = []byte(v)
	}
	for k, v := range extra {
		if v == "" {
			delete(files, k)
			continue
		}
		files[k] = []byte(v)
	}
	return files
}

var (
	hvReplicas = core.K8sField("apps", "Deployment", "prod", "web", "/spec/replicas")
	hvKey      = ValuesKey{"replicaCount"}
)

func hvValue(t *testing.T, s string) core.Value {
	t.Helper()
	v, err := core.ParseJSONValue([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestHelmValuesTarget(t *testing.T) {
	app := func(source string) map[string]string { return map[string]string{"apps/web.yaml": hvApp("web", source)} }
	for _, tt := range []struct {
		name  string
		files map[string]string
		want  ValuesTarget
		err   string // part of the error wanted instead
	}{
		{
			name: "valuesObject sets the key: it wins over every values file",
			files: hvMerge(app("  source:\n    path: charts/web\n    helm:\n      valueFiles: [values-prod.yaml]\n      valuesObject:\n        replicaCount: 4\n"),
				map[string]string{"charts/web/values-prod.yaml": "replicaCount: 2\n"}),
			want: ValuesTarget{File: "apps/web.yaml", Kind: ValuesInObject, Target: Target{"Application", "web", "argocd"}, Source: -1},
		},
		{
			name: "helm.values sets the key: a YAML string is not rewritten",
			files: hvMerge(app("  source:\n    path: charts/web\n    helm:\n      valueFiles: [values-prod.yaml]\n      values: |\n        replicaCount: 4\n"),
				map[string]string{"charts/web/values-prod.yaml": "replicaCount: 2\n"}),
			err: "the key replicaCount is set in Application argocd/web's spec.source.helm.values, a YAML string",
		},
		{
			name: "the last listed values file that sets the key",
			files: hvMerge(app("  source:\n    path: charts/web\n    helm:\n      valueFiles: [values-a.yaml, ../shared/values-b.yaml, values-c.yaml]\n"),
				map[string]string{"charts/web/values-a.yaml": "replicaCount: 2\n", "charts/shared/values-b.yaml": "replicaCount: 3\n", "charts/web/values-c.yaml": "image: nginx\n"}),
			want: ValuesTarget{File: "charts/shared/values-b.yaml", Kind: ValuesInFile, Target: Target{"Application", "web", "argocd"}, Source: -1},
		},
		{
			name: "no values of the release set it, the source has a valuesObject",
			files: hvMerge(app("  source:\n    path: charts/web\n    helm:\n      valueFiles: [values-prod.yaml]\n      valuesObject:\n        image: nginx\n"),
				map[string]string{"charts/web/values-prod.yaml": "image: nginx\n"}),
			want: ValuesTarget{File: "apps/web.yaml", Kind: ValuesInObject, Target: Target{"Application", "web", "argocd"}, Source: -1},
		},
		{
			name:  "no values files: a valuesObject is created, not the chart's shared values.yaml edited",
			files: app("  source:\n    path: charts/web\n"),
			want:  ValuesTarget{File: "apps/web.yaml", Kind: ValuesInObject, Target: Target{"Application", "web", "argocd"}, Source: -1},
		},
		{
			name: "values files that do not set it: the last one",
			files: hvMerge(app("  source:\n    path: charts/web\n    helm:\n      valueFiles: [values-a.yaml, values-b.yaml]\n"),
				map[string]string{"charts/web/values-a.yaml": "image: nginx\n", "charts/web/values-b.yaml": "# prod\n"}),
			want: ValuesTarget{File: "charts/web/values-b.yaml", Kind: ValuesInFile, Target: Target{"Application", "web", "argocd"}, Source: -1},
		},
		{
			name: "the chart's values.yaml, listed in valueFiles",
			files: hvMerge(app("  source:\n    path: charts/web\n    helm:\n      valueFiles: [values.yaml, values-prod.yaml]\n"),
				map[string]string{"charts/web/values-prod.yaml": "image: nginx\n"}),
			want: ValuesTarget{File: "charts/web/values.yaml", Kind: ValuesInFile, Target: Target{"Application", "web", "argocd"}, Source: -1},
		},
		{
			name: "spec.sources[1], after a ref source",
			files: app("  sources:\n    - repoURL: https://github.com/acme/values\n      ref: values\n    - repoURL: https://github.com/acme/infra\n      path: charts/web\n" +
				"      helm:\n        valuesObject:\n          replicaCount: 4\n"),
			want: ValuesTarget{File: "apps/web.yaml", Kind: ValuesInObject, Target: Target{"Application", "web", "argocd"}, Source: 1},
		},
		{
			name: "a values file two releases list is not written: the valuesObject is created",
			files: map[string]string{
				"apps/web.yaml":      hvApp("web", "  source:\n    path: charts/web\n    helm:\n      valueFiles: [../common.yaml]\n"),
				"apps/api.yaml":      hvApp("api", "  source:\n    path: charts/web\n    helm:\n      valueFiles: [../common.yaml]\n"),
				"charts/common.yaml": "replicaCount: 2\n",
			},
			want: ValuesTarget{File: "apps/web.yaml", Kind: ValuesInObject, Target: Target{"Application", "web", "argocd"}, Source: -1},
		},
		{
			name:  "helm.values without the key and no values file: a valuesObject would silence it",
			files: app("  source:\n    path: charts/web\n    helm:\n      values: |\n        image: nginx\n"),
			err:   "a helm.valuesObject next to it would make Argo CD ignore it",
		},
		{
			name:  "an ApplicationSet generating one Application from the repository",
			files: map[string]string{"apps/set.yaml": hvSet},
			want:  ValuesTarget{File: "apps/set.yaml", Kind: ValuesInObject, Target: Target{"ApplicationSet", "charts", "argocd"}, Source: -1},
		},
		{
			name: "an ApplicationSet template shared by several generated Applications",
			files: map[string]string{"apps/set.yaml": hvSet,
				"charts/api/Chart.yaml": "apiVersion: v2\nname: api\nversion: 1.0.0\n", "charts/api/templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: api\n"},
			err: "writing it would change them all",
		},
		{
			name:  "a Flux HelmRelease: its spec.values",
			files: map[string]string{"flux/web.yaml": hvFlux},
			want:  ValuesTarget{File: "flux/web.yaml", Kind: ValuesInHelmRelease, Target: Target{KindHelmRelease, "web", "prod"}, Source: -1},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			inv, problems := Discover(hvRepo(tt.files))
			if len(problems) > 0 {
				t.Fatalf("problems: %v", problems)
			}
			got, err := inv.HelmValuesTarget(hvReplicas, hvKey)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("got %+v, %v; want an error with %q", got, err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %+v, %v\nwant %+v", got, err, tt.want)
			}
		})
	}
	inv, _ := Discover(hvRepo(map[string]string{"apps/web.yaml": hvApp("web", "  source:\n    path: charts/web\n")}))
	if _, err := inv.HelmValuesTarget(core.K8sField("apps", "Deployment", "prod", "nope", "/spec/replicas"), hvKey); err == nil || !strings.Contains(err.Error(), "Deployment prod/nope is not rendered from a chart") {
		t.Fatalf("an object no chart renders: %v", err)
	}
}

// Argo CD ignores helm.values once helm.valuesObject is set (ApplicationSourceHelm.ValuesYAML):
// so does the rendering, and the key goes into the valuesObject.
func TestArgoHelmValuesObjectHidesValues(t *testing.T) {
	inv, problems := Discover(hvRepo(map[string]string{"apps/web.yaml": hvApp("web",
		"  source:\n    path: charts/web\n    helm:\n      values: |\n        replicaCount: 5\n      valuesObject:\n        image: nginx\n")}))
	if len(problems) > 0 {
		t.Fatalf("problems: %v", problems)
	}
	if v, ok := inv.RenderedValue(hvReplicas); !ok || v.JSON() != "1" {
		t.Fatalf("rendered replicas %s %v, want the chart's 1", v, ok)
	}
	vt, err := inv.HelmValuesTarget(hvReplicas, hvKey)
	if err != nil || vt.Kind != ValuesInObject {
		t.Fatalf("%+v %v", vt, err)
	}
}

func hvMerge(a, b map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

func TestAdoptValuesFile(t *testing.T) {
	const values = "# Defaults for production.\nreplicaCount: 1 # the HPA scales from here\n\nimage:\n  repository: nginx\n  tag: \"1.0\"\n\nresources: {}\n"
	for _, tt := range []struct {
		name, in string
		key      ValuesKey
		value    string
		want     string // "" when unchanged
		err      string
	}{
		{"a scalar is written over in place, comments and blank lines kept", values, hvKey, "3",
			"# Defaults for production.\nreplicaCount: 3 # the HPA scales from here\n\nimage:\n  repository: nginx\n  tag: \"1.0\"\n\nresources: {}\n", ""},
		{"a quoted string", values, ValuesKey{"image", "tag"}, `"2.0"`,
			"# Defaults for production.\nreplicaCount: 1 # the HPA scales from here\n\nimage:\n  repository: nginx\n  tag: \"2.0\"\n\nresources: {}\n", ""},
		{"a plain string over a quoted one", values, ValuesKey{"image", "tag"}, `"v2"`,
			"# Defaults for production.\nreplicaCount: 1 # the HPA scales from here\n\nimage:\n  repository: nginx\n  tag: v2\n\nresources: {}\n", ""},
		{"after characters of several bytes", "café: ☕ # a cup\nreplicaCount: 1 # ünchanged comment\n\nimage: nginx\n", hvKey, "4",
			"café: ☕ # a cup\nreplicaCount: 4 # ünchanged comment\n\nimage: nginx\n", ""},
		{"a key of several bytes", "größe: 1 # x\n\nimage: nginx\n", ValuesKey{"größe"}, "2", "größe: 2 # x\n\nimage: nginx\n", ""},
		{"already there", values, ValuesKey{"image", "tag"}, `"1.0"`, "", ""},
		{"a number where a string was is a change", "replicaCount: \"3\"\n", hvKey, "3", "replicaCount: 3\n", ""},
		{"nested maps are created", "replicaCount: 1 # c\n", ValuesKey{"resources", "requests", "cpu"}, `"250m"`,
			"replicaCount: 1 # c\nresources:\n  requests:\n    cpu: 250m\n", ""},
		{"into an empty flow map", "resources: {}\n", ValuesKey{"resources", "limits", "memory"}, `"1Gi"`,
			"resources:\n  limits:\n    memory: 1Gi\n", ""},
		{"in place of a null", "resources: # set per environment\nimage: nginx\n", ValuesKey{"resources", "cpu"}, `"1"`,
			"resources: # set per environment\n  cpu: \"1\"\nimage: nginx\n", ""},
		{"a map value", "replicaCount: 1\n", ValuesKey{"autoscaling"}, `{"enabled":true,"max":5}`,
			"replicaCount: 1\nautoscaling:\n  enabled: true\n  max: 5\n", ""},
		{"an empty file", "", hvKey, "3", "replicaCount: 3\n", ""},
		{"a file of comments", "# nothing set here yet", hvKey, "3", "# nothing set here yet\nreplicaCount: 3\n", ""},
		{"a document marker is kept", "---\nimage: nginx\n", hvKey, "3", "---\nimage: nginx\nreplicaCount: 3\n", ""},
		{"an intermediate key holds a scalar", "image: nginx\n", ValuesKey{"image", "tag"}, `"2.0"`, "", "image holds the scalar \"nginx\", not a map"},
		{"an intermediate key holds a list", "image: [a]\n", ValuesKey{"image", "tag"}, `"2.0"`, "", "image holds a list, not a map"},
		{"not a map", "- a\n", hvKey, "3", "", "not a map of values"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, changed, err := AdoptValuesFile("charts/web/values.yaml", []byte(tt.in), tt.key, hvValue(t, tt.value))
			switch {
			case tt.err != "":
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err %v, want %q", err, tt.err)
				}
				return
			case err != nil:
				t.Fatal(err)
			case tt.want == "":
				if changed || string(out) != tt.in {
					t.Fatalf("changed %v:\n%s", changed, out)
				}
				return
			case !changed || string(out) != tt.want:
				t.Fatalf("changed %v, got:\n%s\nwant:\n%s", changed, out, tt.want)
			}
			again, changed, err := AdoptValuesFile("charts/web/values.yaml", out, tt.key, hvValue(t, tt.value))
			if err != nil || changed || string(again) != string(out) {
				t.Fatalf("adopting again: %v %v\n%s", changed, err, again)
			}
		})
	}
	if _, _, err := AdoptValuesFile("v.yaml", []byte("a: 1\n"), ValuesKey{"a"}, core.ExprValue("var.x")); err == nil || !strings.Contains(err.Error(), "only a literal value") {
		t.Fatalf("an expression: %v", err)
	}
}

func TestAdoptArgoHelmValue(t *testing.T) {
	app := Target{"Application", "web", "argocd"}
	for _, tt := range []struct {
		name   string
		in     string
		t      Target
		source int
		want   string // the file after; "" for an error
		err    string
	}{
		{
			name:   "spec.source's valuesObject, the value replaced",
			in:     "# The web shop.\n" + hvApp("web", "  source:\n    path: charts/web\n    helm:\n      valuesObject:\n        replicaCount: 1 # HPA\n        image: nginx\n"),
			t:      app,
			source: -1,
			want:   "# The web shop.\n" + hvApp("web", "  source:\n    path: charts/web\n    helm:\n      valuesObject:\n        replicaCount: 3 # HPA\n        image: nginx\n"),
		},
		{
			name:   "spec.source without helm: helm.valuesObject created",
			in:     hvApp("web", "  source:\n    path: charts/web\n"),
			t:      app,
			source: -1,
			want:   hvApp("web", "  source:\n    path: charts/web\n    helm:\n      valuesObject:\n        replicaCount: 3\n"),
		},
		{
			name: "spec.sources[1]",
			in:   hvApp("web", "  sources:\n  - repoURL: https://github.com/acme/values\n    ref: values\n  - path: charts/web\n    helm:\n      valueFiles:\n      - values-prod.yaml\n"),
			t:    app, source: 1,
			want: hvApp("web", "  sources:\n  - repoURL: https://github.com/acme/values\n    ref: values\n  - path: charts/web\n    helm:\n      valueFiles:\n      - values-prod.yaml\n      valuesObject:\n        replicaCount: 3\n"),
		},
		{
			name: "an ApplicationSet's template",
			in:   hvSet, t: Target{"ApplicationSet", "charts", "argocd"}, source: -1,
			want: strings.Replace(hvSet, "            image: nginx\n", "            image: nginx\n            replicaCount: 3\n", 1),
		},
		{
			name: "the other document of the file is left alone",
			in:   hvApp("api", "  source:\n    path: charts/web\n") + "---\n" + hvApp("web", "  source:\n    path: charts/web\n"),
			t:    app, source: -1,
			want: hvApp("api", "  source:\n    path: charts/web\n") + "---\n" + hvApp("web", "  source:\n    path: charts/web\n    helm:\n      valuesObject:\n        replicaCount: 3\n"),
		},
		{
			name: "helm.values is not silenced",
			in:   hvApp("web", "  source:\n    path: charts/web\n    helm:\n      values: |\n        replicaCount: 1\n"),
			t:    app, source: -1,
			err: "a helm.valuesObject next to it would make Argo CD ignore it",
		},
		{
			name: "no such source",
			in:   hvApp("web", "  source:\n    path: charts/web\n"),
			t:    app, source: 2,
			err: "no spec.sources[2]",
		},
		{
			name: "not an Argo CD object",
			in:   hvFlux, t: Target{KindHelmRelease, "web", "prod"}, source: -1,
			err: "only into an Application or an ApplicationSet",
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, changed, err := AdoptArgoHelmValue("apps/web.yaml", []byte(tt.in), tt.t, tt.source, hvKey, hvValue(t, "3"))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil || !changed || string(out) != tt.want {
				t.Fatalf("changed %v, err %v, got:\n%s\nwant:\n%s", changed, err, out, tt.want)
			}
			again, changed, err := AdoptArgoHelmValue("apps/web.yaml", out, tt.t, tt.source, hvKey, hvValue(t, "3"))
			if err != nil || changed || string(again) != string(out) {
				t.Fatalf("adopting again: %v %v\n%s", changed, err, again)
			}
		})
	}
}

// End to end: the key HelmValuesKey finds, written where HelmValuesTarget says, makes the chart
// render the adopted value.
func TestAdoptHelmValueAtTheSource(t *testing.T) {
	for _, tt := range []struct {
		name  string
		files map[string]string
		kind  string
	}{
		{"spec.source's valuesObject", map[string]string{"apps/web.yaml": hvApp("web", "  source:\n    path: charts/web\n    helm:\n      valuesObject:\n        replicaCount: 2\n")}, ValuesInObject},
		{"a valuesObject created", map[string]string{"apps/web.yaml": hvApp("web", "  source:\n    path: charts/web\n")}, ValuesInObject},
		{"spec.sources[1]", map[string]string{"apps/web.yaml": hvApp("web", "  sources:\n    - repoURL: https://github.com/acme/values\n      ref: values\n    - path: charts/web\n")}, ValuesInObject},
		{"a values file", map[string]string{
			"apps/web.yaml":               hvApp("web", "  source:\n    path: charts/web\n    helm:\n      valueFiles: [values-prod.yaml, values-eu.yaml]\n"),
			"charts/web/values-prod.yaml": "# production\nreplicaCount: 2\n\nimage: nginx\n",
			"charts/web/values-eu.yaml":   "region: eu\n",
		}, ValuesInFile},
		{"a values file that does not set it yet", map[string]string{
			"apps/web.yaml":               hvApp("web", "  source:\n    path: charts/web\n    helm:\n      valueFiles: [values-prod.yaml]\n"),
			"charts/web/values-prod.yaml": "image: nginx\n",
		}, ValuesInFile},
		{"an ApplicationSet's template", map[string]string{"apps/set.yaml": hvSet}, ValuesInObject},
		{"a HelmRelease", map[string]string{"flux/web.yaml": hvFlux}, ValuesInHelmRelease},
	} {
		t.Run(tt.name, func(t *testing.T) {
			files := hvRepo(tt.files)
			inv, problems := Discover(files)
			if len(problems) > 0 {
				t.Fatalf("problems: %v", problems)
			}
			want := hvValue(t, "7")
			key, mapping, _, err := inv.HelmValuesKey(hvReplicas, want)
			if err != nil || key.String() != "replicaCount" {
				t.Fatalf("HelmValuesKey: %v %v %v", key, mapping, err)
			}
			vt, err := inv.HelmValuesTarget(hvReplicas, key)
			if err != nil || vt.Kind != tt.kind {
				t.Fatalf("HelmValuesTarget: %+v %v, want %s", vt, err, tt.kind)
			}
			var out []byte
			var changed bool
			switch vt.Kind {
			case ValuesInFile:
				out, changed, err = AdoptValuesFile(vt.File, files[vt.File], key, want)
			case ValuesInObject:
				out, changed, err = AdoptArgoHelmValue(vt.File, files[vt.File], vt.Target, vt.Source, key, want)
			case ValuesInHelmRelease:
				out, changed, err = AdoptHelmValue(vt.File, files[vt.File], vt.Target, key, want)
			}
			if err != nil || !changed {
				t.Fatalf("writing %+v: %v %v", vt, changed, err)
			}
			files[vt.File] = out
			inv, problems = Discover(files)
			if len(problems) > 0 {
				t.Fatalf("problems after: %v", problems)
			}
			if v, ok := inv.RenderedValue(hvReplicas); !ok || !v.Equal(want) {
				t.Fatalf("after writing %s the chart renders %s (%v), want %s:\n%s", vt.File, v, ok, want, out)
			}
		})
	}
}
