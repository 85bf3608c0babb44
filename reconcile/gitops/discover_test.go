package gitops

import (
	"context"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	yamlv3 "go.yaml.in/yaml/v3"

	"github.com/parleyhq/parley/core"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/discover")

// readRepo loads a repository tree from testdata as Discover takes it.
func readRepo(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		files[filepath.ToSlash(rel)] = b
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// report is the golden form of an inventory: every manager, every object under the identity it
// is applied with, and the problems.
type report struct {
	Managers []reportManager `yaml:"managers"`
	Objects  []reportObject  `yaml:"objects"`
	Problems []string        `yaml:"problems"`
}

type reportManager struct {
	Target string   `yaml:"target"`
	File   string   `yaml:"file"`
	Paths  []string `yaml:"paths,flow"`
}

type reportObject struct {
	Object   string   `yaml:"object"`
	Manifest string   `yaml:"manifest"`
	Managers []string `yaml:"managers,omitempty"`
}

func managerName(m Manager) string { return m.Target.String() + " in " + m.File }

func makeReport(inv *Inventory, problems []error) report {
	var r report
	for _, m := range inv.Managers() {
		r.Managers = append(r.Managers, reportManager{Target: m.Target.String(), File: m.File, Paths: m.Paths})
	}
	for k := range inv.objects {
		p, ok := inv.Locate(core.K8sField(k.group, k.kind, k.namespace, k.name, ""))
		if !ok {
			panic("an indexed object cannot be located: " + k.String())
		}
		o := reportObject{Object: k.String(), Manifest: p.Manifest}
		for _, m := range p.Managers {
			o.Managers = append(o.Managers, managerName(m))
		}
		r.Objects = append(r.Objects, o)
	}
	sort.Slice(r.Objects, func(i, j int) bool { return r.Objects[i].Object < r.Objects[j].Object })
	for _, p := range problems {
		r.Problems = append(r.Problems, p.Error())
	}
	return r
}

func TestDiscoverGolden(t *testing.T) {
	inv, problems := Discover(readRepo(t, "testdata/discover/repo"))
	got, err := yamlv3.Marshal(makeReport(inv, problems))
	if err != nil {
		t.Fatal(err)
	}
	golden := "testdata/discover/expected.yaml"
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("inventory differs from %s (go test -run TestDiscoverGolden -update rewrites it):\n%s", golden, got)
	}
}

func TestDiscoverLocate(t *testing.T) {
	inv, _ := Discover(readRepo(t, "testdata/discover/repo"))
	const (
		fluxApps  = "Kustomization flux-system/apps in clusters/prod/apps.yaml"
		fluxInfra = "Kustomization flux-system/infra in clusters/prod/apps.yaml"
		argoAPI   = "Application argocd/api in clusters/prod/argo-api.yaml"
		argoSet   = "ApplicationSet argocd/apps in clusters/prod/appset.yaml"
	)
	cases := []struct {
		name     string
		field    core.Field
		manifest string // "" when it must not be found
		managers []string
	}{
		{"kustomization namespace applies to a listed file", core.K8sField("apps", "Deployment", "prod", "web", "/spec/replicas"), "apps/prod/web.yaml", []string{fluxApps}},
		{"second document of a file", core.K8sField("", "Service", "prod", "web", ""), "apps/prod/web.yaml", []string{fluxApps}},
		{"listed subdirectory with its own kustomization", core.K8sField("apps", "Deployment", "prod", "worker", "/spec/replicas"), "apps/prod/worker/deployment.yaml", []string{fluxApps}},
		{"the namespace as written is not the applied one", core.K8sField("apps", "Deployment", "", "web", ""), "", nil},
		{"a patch file is not an object", core.K8sField("apps", "Deployment", "prod", "web", ""), "apps/prod/web.yaml", []string{fluxApps}},
		{"wrong group", core.K8sField("extensions", "Deployment", "prod", "web", ""), "", nil},
		{"targetNamespace overrides a written namespace", core.K8sField("", "ConfigMap", "platform", "settings", "/data/LOG_LEVEL"), "infra/loose/settings.yaml", []string{fluxInfra}},
		{"targetNamespace beats an inner kustomization namespace", core.K8sField("apps", "StatefulSet", "platform", "prometheus", "/spec/replicas"), "infra/monitoring/prometheus.yaml", []string{fluxInfra}},
		{"the inner namespace lost", core.K8sField("apps", "StatefulSet", "monitoring", "prometheus", ""), "", nil},
		{"cluster-scoped kinds keep no namespace", core.K8sField("apiextensions.k8s.io", "CustomResourceDefinition", "", "widgets.acme.io", ""), "infra/crds.yaml", []string{fluxInfra}},
		{"Argo CD destination namespace fills in", core.K8sField("apps", "Deployment", "api", "api", "/spec/replicas"), "argo/api/deployment.yaml", []string{argoAPI}},
		{"Argo CD does not fill a Namespace's namespace", core.K8sField("", "Namespace", "", "api", ""), "argo/api/namespace.yaml", []string{argoAPI}},
		{"Argo CD without recurse leaves subdirectories alone", core.K8sField("batch", "CronJob", "", "cleanup", ""), "argo/api/sub/cron.yaml", nil},
		{"default finds an object with no namespace", core.K8sField("batch", "CronJob", "default", "cleanup", ""), "argo/api/sub/cron.yaml", nil},
		{"default does not find an object given a namespace", core.K8sField("apps", "Deployment", "default", "api", ""), "", nil},
		{"ApplicationSet git directory generator", core.K8sField("apps", "Deployment", "staging", "web", "/spec/replicas"), "apps/staging/web.yaml", []string{argoSet}},
		{"unmanaged object", core.K8sField("", "ConfigMap", "", "loose", "/data"), "unmanaged.yaml", nil},
		{"managers are objects too", core.K8sField("kustomize.toolkit.fluxcd.io", "Kustomization", "flux-system", "apps", "/spec/path"), "clusters/prod/apps.yaml", nil},
		{"so are applications", core.K8sField("argoproj.io", "ApplicationSet", "argocd", "apps", ""), "clusters/prod/appset.yaml", nil},
		{"Helm templates are not manifests", core.K8sField("apps", "Deployment", "", "{{ .Release.Name }}", ""), "", nil},
		{"Terraform is not located", core.TFField("infra", "aws_instance.web", "/count"), "", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, ok := inv.Locate(c.field)
			if c.manifest == "" {
				if ok {
					t.Fatalf("Locate(%s) found %+v, want nothing", c.field, p)
				}
				return
			}
			if !ok || p.Manifest != c.manifest {
				t.Fatalf("Locate(%s) = %q, %v; want %q", c.field, p.Manifest, ok, c.manifest)
			}
			var got []string
			for _, m := range p.Managers {
				got = append(got, managerName(m))
			}
			if strings.Join(got, "\n") != strings.Join(c.managers, "\n") {
				t.Errorf("Locate(%s) managers %q, want %q", c.field, got, c.managers)
			}
		})
	}
}

func TestDiscoverProblems(t *testing.T) {
	_, problems := Discover(readRepo(t, "testdata/discover/repo"))
	var all []string
	for _, p := range problems {
		all = append(all, p.Error())
	}
	text := strings.Join(all, "\n")
	for _, want := range []string{
		"broken.yaml: ",
		"apps/staging/web2.yaml",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("problems lack %q:\n%s", want, text)
		}
	}
	for _, never := range []string{"replicas-patch.yaml", "charts/mychart", "README.md", "missing.yaml"} {
		if strings.Contains(text, never) {
			t.Errorf("problems mention %q, which is no problem:\n%s", never, text)
		}
	}
}

// TestDiscoverCases covers rules one small repository at a time.
func TestDiscoverCases(t *testing.T) {
	flux := func(name, path, extra string) string {
		return "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: " + name +
			"\n  namespace: flux-system\nspec:\n  path: " + path + "\n" + extra
	}
	deploy := func(name, ns string) string {
		s := "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: " + name + "\n"
		if ns != "" {
			s += "  namespace: " + ns + "\n"
		}
		return s
	}
	type want struct {
		field    core.Field
		manifest string // "" when not found
		managers int
	}
	cases := []struct {
		name     string
		files    map[string]string
		paths    map[string][]string // manager name -> Paths
		want     []want
		problems []string
	}{
		{
			name: "empty Flux path is the root, and the generator recurses",
			files: map[string]string{
				"flux.yaml":       flux("all", `""`, ""),
				"a/b/c/deep.yaml": deploy("deep", "x"),
			},
			paths: map[string][]string{"all": {"."}},
			want: []want{
				{core.K8sField("apps", "Deployment", "x", "deep", ""), "a/b/c/deep.yaml", 1},
				// The Kustomization applies its own file too, since it lies under the root.
				{core.K8sField("kustomize.toolkit.fluxcd.io", "Kustomization", "flux-system", "all", ""), "flux.yaml", 1},
			},
		},
		{
			name: "a kustomization's resources may go up and sideways, and form cycles",
			files: map[string]string{
				"flux.yaml":                       flux("app", "./overlays/prod", ""),
				"overlays/prod/kustomization.yml": "namespace: prod\nresources: [../../base, ../../../outside]\n",
				"base/Kustomization":              "resources: [deploy.yaml, ../overlays/prod]\n",
				"base/deploy.yaml":                deploy("app", ""),
			},
			paths: map[string][]string{"app": {"overlays/prod"}},
			want: []want{
				{core.K8sField("apps", "Deployment", "prod", "app", ""), "base/deploy.yaml", 1},
				{core.K8sField("apps", "Deployment", "", "app", ""), "", 0},
			},
			// kustomize refuses the cycle (and so would kustomize-controller); the files are read as written.
			problems: []string{"overlays/prod/kustomization.yml: does not build with kustomize"},
		},
		{
			name: "an overlay's name prefix, namespace, patch, component and generator: objects under the identity they get",
			files: map[string]string{
				"flux.yaml": flux("staging", "./overlays/staging", ""),
				"overlays/staging/kustomization.yaml": "namePrefix: staging-\nnamespace: staging\nresources: [../../base]\n" +
					"components: [../../components/debug]\npatches:\n  - path: replicas.yaml\n" +
					"configMapGenerator:\n  - name: settings\n    literals: [LOG_LEVEL=debug]\n",
				"overlays/staging/replicas.yaml":      "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: app\nspec:\n  replicas: 1\n",
				"components/debug/kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\nresources: [job.yaml]\n",
				"components/debug/job.yaml":           "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: debug\n",
				"base/kustomization.yaml":             "resources: [deploy.yaml]\n",
				"base/deploy.yaml":                    deploy("app", ""),
			},
			paths: map[string][]string{"staging": {"overlays/staging"}},
			want: []want{
				{core.K8sField("apps", "Deployment", "staging", "staging-app", ""), "base/deploy.yaml", 1},
				{core.K8sField("batch", "Job", "staging", "staging-debug", ""), "components/debug/job.yaml", 1},
				{core.K8sField("", "ConfigMap", "staging", "staging-settings-47668c6k28", ""), "overlays/staging/kustomization.yaml", 1},
				// Not under the names the files give, nor the patch as an object of its own.
				{core.K8sField("apps", "Deployment", "staging", "app", ""), "", 0},
				{core.K8sField("apps", "Deployment", "", "app", ""), "", 0},
			},
		},
		{
			name: "a kustomization at the repository root is built too",
			files: map[string]string{
				"clusters/flux.yaml": flux("root", "./", ""),
				"kustomization.yaml": "namePrefix: root-\nresources: [app/deploy.yaml]\n",
				"app/deploy.yaml":    deploy("app", "apps"),
			},
			paths: map[string][]string{"root": {"."}},
			want: []want{
				{core.K8sField("apps", "Deployment", "apps", "root-app", ""), "app/deploy.yaml", 1},
			},
		},
		{
			name: "an ApplicationSet's git directory generator over charts: each generated Application renders its chart",
			files: map[string]string{
				"set.yaml": "apiVersion: argoproj.io/v1alpha1\nkind: ApplicationSet\nmetadata:\n  name: charts\n  namespace: argocd\n" +
					"spec:\n  generators:\n    - git:\n        directories:\n          - path: charts/*\n" +
					"  template:\n    metadata:\n      name: '{{path.basename}}'\n    spec:\n      source:\n        path: '{{path}}'\n" +
					"        helm:\n          valuesObject:\n            replicas: 2\n      destination:\n        namespace: shop\n",
				"charts/cart/Chart.yaml":          "apiVersion: v2\nname: cart\nversion: 0.1.0\n",
				"charts/cart/templates/app.yaml":  "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Release.Name }}-api\nspec:\n  replicas: {{ .Values.replicas }}\n",
				"charts/front/Chart.yaml":         "apiVersion: v2\nname: front\nversion: 0.1.0\n",
				"charts/front/templates/app.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Release.Name }}-web\nspec:\n  replicas: 1\n",
			},
			paths: map[string][]string{"charts": {"charts/cart", "charts/front"}},
			want: []want{
				{core.K8sField("apps", "Deployment", "shop", "cart-api", ""), "charts/cart/templates/app.yaml", 1},
				{core.K8sField("apps", "Deployment", "shop", "front-web", ""), "charts/front/templates/app.yaml", 1},
			},
		},
		{
			name: "one base under two overlays is two objects",
			files: map[string]string{
				"flux.yaml":                          flux("prod", "./overlays/prod", "") + "---\n" + flux("dev", "./overlays/dev", ""),
				"overlays/prod/kustomization.yaml":   "namespace: prod\nresources: [../../base]\n",
				"overlays/dev/kustomization.yaml":    "namespace: dev\nresources: [../../base]\n",
				"base/kustomization.yaml":            "resources: [deploy.yaml, plain]\n",
				"base/deploy.yaml":                   deploy("app", ""),
				"base/plain/not-a-kustomization.yml": deploy("never", ""),
			},
			paths: map[string][]string{"prod": {"overlays/prod"}, "dev": {"overlays/dev"}},
			want: []want{
				{core.K8sField("apps", "Deployment", "prod", "app", ""), "base/deploy.yaml", 1},
				{core.K8sField("apps", "Deployment", "dev", "app", ""), "base/deploy.yaml", 1},
				{core.K8sField("apps", "Deployment", "", "never", ""), "base/plain/not-a-kustomization.yml", 0},
			},
			problems: []string{"base/kustomization.yaml: resource plain is a directory without a kustomization file",
				"overlays/dev/kustomization.yaml: does not build with kustomize", "overlays/prod/kustomization.yaml: does not build with kustomize"},
		},
		{
			name: "two managers applying one file",
			files: map[string]string{
				"flux.yaml":   flux("one", "./apps", "") + "---\n" + flux("two", "apps", ""),
				"apps/a.yaml": deploy("a", "x"),
			},
			paths: map[string][]string{"one": {"apps"}, "two": {"apps"}},
			want:  []want{{core.K8sField("apps", "Deployment", "x", "a", ""), "apps/a.yaml", 2}},
		},
		{
			name: "Argo CD recurse, multiple sources, a remote chart skipped, a chart in the repository rendered",
			files: map[string]string{
				"app.yaml": `apiVersion: argoproj.io/v1alpha1
kind: Application
metadata:
  name: multi
  namespace: argocd
spec:
  sources:
    - repoURL: https://charts.example.com
      chart: redis
    - repoURL: https://github.com/acme/infra
      ref: values
    - repoURL: https://github.com/acme/infra
      path: deep
      directory:
        recurse: true
    - repoURL: https://github.com/acme/infra
      path: chart
  destination:
    namespace: team
`,
				"deep/x/y/d.yaml":           deploy("d", ""),
				"chart/Chart.yaml":          "apiVersion: v2\nname: chart\nversion: 0.1.0\n",
				"chart/values.yaml":         "replicas: 1\n",
				"chart/templates/_x.tpl":    "{{ define \"x\" }}app: {{ .Release.Name }}{{ end }}\n",
				"chart/templates/x.yaml":    "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Release.Name }}-web\n  labels:\n    {{ include \"x\" . }}\nspec:\n  replicas: {{ .Values.replicas }}\n",
				"chart/templates/NOTES.txt": "Installed {{ .Release.Name }}.\n",
			},
			paths: map[string][]string{"multi": {"chart", "deep"}},
			want: []want{
				{core.K8sField("apps", "Deployment", "team", "d", ""), "deep/x/y/d.yaml", 1},
				// The chart's Deployment, under the name the release gives it, in the destination namespace.
				{core.K8sField("apps", "Deployment", "team", "multi-web", ""), "chart/templates/x.yaml", 1},
			},
		},
		{
			name: "ApplicationSet literal path, and a templated path resolved inside a matrix",
			files: map[string]string{
				"set.yaml": `apiVersion: argoproj.io/v1alpha1
kind: ApplicationSet
metadata:
  name: lit
  namespace: argocd
spec:
  generators:
    - list:
        elements: [{cluster: a}]
  template:
    spec:
      source:
        path: ./shared
      destination:
        namespace: '{{cluster}}'
---
apiVersion: argoproj.io/v1alpha1
kind: ApplicationSet
metadata:
  name: svc
  namespace: argocd
spec:
  goTemplate: true
  generators:
    - matrix:
        generators:
          - git:
              directories:
                - path: services/*
                - path: services/old
                  exclude: true
          - list:
              elements: [{env: prod}]
  template:
    spec:
      source:
        path: '{{.path.path}}/deploy'
      destination:
        namespace: '{{ .path.basename }}'
`,
				"shared/s.yaml":              deploy("s", ""),
				"services/a/deploy/d.yaml":   deploy("a", ""),
				"services/old/deploy/d.yaml": deploy("old", ""),
			},
			paths: map[string][]string{"lit": {"shared"}, "svc": {"services/a/deploy"}},
			want: []want{
				// A templated destination namespace fills in nothing.
				{core.K8sField("apps", "Deployment", "", "s", ""), "shared/s.yaml", 1},
				{core.K8sField("apps", "Deployment", "a", "a", ""), "services/a/deploy/d.yaml", 1},
				{core.K8sField("apps", "Deployment", "", "old", ""), "services/old/deploy/d.yaml", 0},
			},
		},
		{
			name: "Argo CD kustomize namespace overrides, destination namespace only fills",
			files: map[string]string{
				"app.yaml": `apiVersion: argoproj.io/v1alpha1
kind: Application
metadata:
  name: kz
  namespace: argocd
spec:
  source:
    path: kz
    kustomize:
      namespace: forced
  destination:
    namespace: filled
---
apiVersion: argoproj.io/v1alpha1
kind: Application
metadata:
  name: plain
  namespace: argocd
spec:
  source:
    path: plain
    kustomize:
      namespace: unused
  destination:
    namespace: filled
`,
				"kz/kustomization.yaml": "resources: [a.yaml]\n",
				"kz/a.yaml":             deploy("a", "written"),
				"plain/b.yaml":          deploy("b", "written") + "---\n" + deploy("c", ""),
			},
			paths: map[string][]string{"kz": {"kz"}, "plain": {"plain"}},
			want: []want{
				{core.K8sField("apps", "Deployment", "forced", "a", ""), "kz/a.yaml", 1},
				{core.K8sField("apps", "Deployment", "written", "b", ""), "plain/b.yaml", 1},
				{core.K8sField("apps", "Deployment", "filled", "c", ""), "plain/b.yaml", 1},
				{core.K8sField("apps", "Deployment", "default", "c", ""), "", 0},
			},
		},
		{
			name: "an override that merges two documents of one file",
			files: map[string]string{
				"flux.yaml":       flux("merge", "./ns", "  targetNamespace: one\n"),
				"ns/objects.yaml": deploy("d", "a") + "---\n" + deploy("d", "b"),
			},
			paths: map[string][]string{"merge": {"ns"}},
			want: []want{
				{core.K8sField("apps", "Deployment", "one", "d", ""), "ns/objects.yaml", 1},
			},
			problems: []string{"ns/objects.yaml: documents 1 and 2 both become apps/Deployment one/d once applied"},
		},
		{
			name: "duplicates inside one file and a manager with a bad spec",
			files: map[string]string{
				"twice.yaml": deploy("t", "x") + "---\n" + deploy("t", "x"),
				"bad.yaml":   "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: bad\n  namespace: flux-system\nspec:\n  path: [not, a, string]\n",
			},
			paths: map[string][]string{},
			want: []want{
				{core.K8sField("apps", "Deployment", "x", "t", ""), "twice.yaml", 0},
				{core.K8sField("kustomize.toolkit.fluxcd.io", "Kustomization", "flux-system", "bad", ""), "bad.yaml", 0},
			},
			problems: []string{"twice.yaml: defines apps/Deployment x/t twice", "bad.yaml: Kustomization flux-system/bad: spec:"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			files := map[string][]byte{}
			for k, v := range c.files {
				files[k] = []byte(v)
			}
			inv, problems := Discover(files)
			got := map[string][]string{}
			for _, m := range inv.Managers() {
				got[m.Target.Name] = m.Paths
			}
			if len(got) != len(c.paths) {
				t.Errorf("managers %v, want %v", got, c.paths)
			}
			for name, paths := range c.paths {
				if strings.Join(got[name], ",") != strings.Join(paths, ",") {
					t.Errorf("manager %s applies %q, want %q", name, got[name], paths)
				}
			}
			for _, w := range c.want {
				p, ok := inv.Locate(w.field)
				if w.manifest == "" {
					if ok {
						t.Errorf("Locate(%s) = %+v, want nothing", w.field, p)
					}
					continue
				}
				if !ok || p.Manifest != w.manifest || len(p.Managers) != w.managers {
					t.Errorf("Locate(%s) = %+v, %v; want %s with %d managers", w.field, p, ok, w.manifest, w.managers)
				}
			}
			var text []string
			for _, p := range problems {
				text = append(text, p.Error())
			}
			if len(text) != len(c.problems) {
				t.Errorf("problems %q, want %d", text, len(c.problems))
			}
			for _, want := range c.problems {
				if !strings.Contains(strings.Join(text, "\n"), want) {
					t.Errorf("problems %q lack %q", text, want)
				}
			}
		})
	}
}

// TestInventoryIsImmutable checks that what the accessors return is a copy, and that concurrent
// readers are safe (go test -race).
func TestInventoryIsImmutable(t *testing.T) {
	inv, _ := Discover(readRepo(t, "testdata/discover/repo"))
	ms := inv.Managers()
	ms[0].Paths[0] = "changed"
	ms[0].File = "changed"
	if again := inv.Managers(); again[0].Paths[0] == "changed" || again[0].File == "changed" {
		t.Error("Managers returns the inventory's own slices")
	}
	web := core.K8sField("apps", "Deployment", "prod", "web", "")
	p, _ := inv.Locate(web)
	p.Managers[0].Paths[0] = "changed"
	if q, _ := inv.Locate(web); q.Managers[0].Paths[0] == "changed" {
		t.Error("Locate returns the inventory's own slices")
	}
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 100; j++ {
				inv.Locate(web)
				inv.Managers()
			}
		}()
	}
	wg.Wait()
}

// FuzzDiscover feeds Discover the test repository with one file replaced or added: whatever the
// bytes, discovery must not panic, every problem must name a file, and every object it indexed
// must be locatable.
func FuzzDiscover(f *testing.F) {
	base := map[string][]byte{}
	err := filepath.WalkDir("testdata/discover/repo", func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel("testdata/discover/repo", p)
		base[filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil {
		f.Fatal(err)
	}
	for _, name := range []string{"clusters/prod/apps.yaml", "apps/prod/kustomization.yaml", "clusters/prod/appset.yaml"} {
		f.Add(name, string(base[name]))
	}
	f.Add("x/Kustomization", "resources: [.., ../.., /etc, '']\nnamespace: [a]\n")
	f.Fuzz(func(t *testing.T, name, content string) {
		files := map[string][]byte{}
		for k, v := range base {
			files[k] = v
		}
		files[name] = []byte(content)
		inv, problems := Discover(files)
		for _, p := range problems {
			if !strings.Contains(p.Error(), ":") && !strings.Contains(p.Error(), " and ") {
				t.Errorf("problem names no file: %v", p)
			}
		}
		for k := range inv.objects {
			if _, ok := inv.Locate(core.K8sField(k.group, k.kind, k.namespace, k.name, "")); !ok {
				t.Errorf("%s is indexed but not located", k)
			}
		}
		inv.Managers()
	})
}

// A URL in a comment (an editor's schema) or in a value kustomize does not load (an annotation)
// fetches nothing: such a kustomization is built.
func TestDiscoverBuildsDespiteURLsThatLoadNothing(t *testing.T) {
	files := map[string][]byte{
		"flux.yaml": []byte("apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: app\n" +
			"  namespace: flux-system\nspec:\n  path: ./app\n"),
		"app/kustomization.yaml": []byte("# yaml-language-server: $schema=https://json.schemastore.org/kustomization\n" +
			"apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamePrefix: x-\n" +
			"commonAnnotations:\n  docs: https://wiki.example.com/app\nresources: [deploy.yaml]\n"),
		"app/deploy.yaml": []byte("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: prod\n"),
	}
	inv, problems := Discover(files)
	if len(problems) > 0 {
		t.Fatalf("problems %v", problems)
	}
	if pl, ok := inv.Locate(core.K8sField("apps", "Deployment", "prod", "x-web", "")); !ok || pl.Built != "app" {
		t.Fatalf("x-web: %+v %v", pl, ok)
	}
}

// A kustomization that would make kustomize fetch something (a remote base, a patch by URL) is
// never built: Parley reads no network.
func TestDiscoverFetchesNothing(t *testing.T) {
	for _, k := range []string{
		"resources:\n  - https://github.com/acme/shared//base?ref=v1\n  - deploy.yaml\n",
		"resources: [deploy.yaml]\npatches:\n  - path: http://127.0.0.1:1/patch.yaml\n",
		"resources: [deploy.yaml]\ncomponents:\n  - git@github.com:acme/components.git//debug\n",
	} {
		files := map[string][]byte{
			"flux.yaml": []byte("apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: app\n" +
				"  namespace: flux-system\nspec:\n  path: ./app\n"),
			"app/kustomization.yaml": []byte(k),
			"app/deploy.yaml":        []byte("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: prod\n"),
		}
		inv, problems := Discover(files)
		found := false
		for _, p := range problems {
			found = found || strings.Contains(p.Error(), "which Parley does not fetch")
		}
		if !found {
			t.Errorf("%q: problems %v, want the remote named", k, problems)
		}
		if pl, ok := inv.Locate(core.K8sField("apps", "Deployment", "prod", "web", "")); !ok || pl.Built != "" {
			t.Errorf("%q: the files are read as written instead: %+v %v", k, pl, ok)
		}
	}
}

// BenchmarkDiscoverRepo times Discover on a real repository's files (what a drift snapshot
// derives once per commit): PARLEY_BENCH_REPO=/path/to/repo go test ./reconcile/gitops -bench DiscoverRepo -run '^$'
func BenchmarkDiscoverRepo(b *testing.B) {
	dir := os.Getenv("PARLEY_BENCH_REPO")
	if dir == "" {
		b.Skip("set PARLEY_BENCH_REPO to a repository (a snapshot from the search tool's fetch)")
	}
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" {
				return filepath.SkipDir
			}
			return nil
		}
		n := strings.ToLower(d.Name())
		if strings.HasSuffix(n, ".yaml") || strings.HasSuffix(n, ".yml") || strings.HasSuffix(n, ".tpl") || n == "kustomization" {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(dir, p)
			files[filepath.ToSlash(rel)] = data
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	// In this process (as before issue 24), and in render workers (as parley serve and discover run
	// it since): a RenderProcess of its own per Discover, as one `parley discover` has, so that each
	// pays its workers' starts ("workers" counts them).
	b.Run("in-process", func(b *testing.B) {
		for b.Loop() {
			inv, _ := DiscoverWith(context.Background(), files, Options{})
			b.ReportMetric(float64(len(inv.Managers())), "managers")
		}
	})
	b.Run("worker", func(b *testing.B) {
		for b.Loop() {
			p := testWorker(time.Minute, 512<<20)
			pids := starts(p)
			inv, _ := DiscoverWith(context.Background(), files, Options{Helm: p})
			p.Close()
			b.ReportMetric(float64(len(inv.Managers())), "managers")
			b.ReportMetric(float64(len(*pids)), "workers")
		}
	})
}

// FuzzGeneratorInputs: whatever a kustomization says, the inputs named are repository paths inside
// the repository, never remote and never escaping it.
func FuzzGeneratorInputs(f *testing.F) {
	f.Add("apps/jobs/kustomization.yaml", "configMapGenerator:\n  - name: s\n    files: [a.sh, key=./b/c.txt]\n    envs: [x.env]\nsecretGenerator:\n  - name: t\n    env: ../shared/s.env\n")
	f.Add("kustomization.yaml", "configMapGenerator:\n  - files: [../../etc/passwd, https://example.com/x, /abs]\n")
	f.Fuzz(func(t *testing.T, kfile, content string) {
		for _, p := range GeneratorInputs(kfile, []byte(content)) {
			if p == ".." || strings.HasPrefix(p, "../") || strings.HasPrefix(p, "/") || strings.Contains(p, "://") {
				t.Fatalf("%q names %q", content, p)
			}
		}
	})
}

func TestRemoteReleases(t *testing.T) {
	inv, _ := Discover(map[string][]byte{
		"hr.yaml": []byte("apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: podinfo\n  namespace: flux-system\n" +
			"spec:\n  targetNamespace: web\n  chart:\n    spec:\n      chart: podinfo\n      sourceRef:\n        kind: HelmRepository\n        name: podinfo\n"),
		"oci.yaml": []byte("apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: nginx\n  namespace: web\n" +
			"spec:\n  chartRef:\n    kind: OCIRepository\n    name: nginx\n"),
		"app.yaml": []byte("apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: redis\n  namespace: argocd\n" +
			"spec:\n  sources:\n  - repoURL: https://charts.example.com\n    chart: redis\n  - repoURL: https://github.com/acme/values\n    ref: values\n" +
			"  destination:\n    namespace: cache\n"),
		"web.yaml": []byte("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: known\n  namespace: web\n"),
	})
	pl, ok := inv.RemoteReleases(core.K8sField("apps", "Deployment", "web", "podinfo", ""))
	if !ok || len(pl.Managers) != 2 || pl.Managers[0].Target.Name != "podinfo" || pl.Managers[1].Target.Name != "nginx" || pl.Manifest != "" ||
		strings.Join(pl.RemoteCharts, "; ") != "podinfo from HelmRepository; the chart of OCIRepository (spec.chartRef)" {
		t.Fatalf("web: %+v %v", pl, ok)
	}
	if pl, ok := inv.RemoteReleases(core.K8sField("apps", "StatefulSet", "cache", "redis-master", "")); !ok || len(pl.Managers) != 1 || pl.Managers[0].Target.Kind != "Application" {
		t.Fatalf("cache: %+v %v", pl, ok)
	}
	for _, f := range []core.Field{core.K8sField("apps", "Deployment", "other", "x", ""), core.K8sField("rbac.authorization.k8s.io", "ClusterRole", "", "x", "")} {
		if _, ok := inv.RemoteReleases(f); ok {
			t.Errorf("%s: no remote release installs there", f)
		}
	}
	var none *Inventory
	if _, ok := none.RemoteReleases(core.K8sField("apps", "Deployment", "web", "x", "")); ok {
		t.Error("a nil inventory has no releases")
	}
}
