package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parleyhq/parley/internal/schematest"
)

func TestDiscoverDemo(t *testing.T) {
	dir, _ := demoRepo(t)
	code, out, errOut := runCLI(t, "discover", "--repo", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"origin: unknown (no origin remote): every source is taken to be this repository",
		"MANAGER", "FILE", "APPLIES",
		"Kustomization flux-system/apps", "clusters/prod/apps.yaml", "k8s/prod",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "problems:") || strings.Contains(out, "object:") {
		t.Errorf("the demo has no problems and no object was asked for:\n%s", out)
	}

	code, out, errOut = runCLI(t, "discover", "--repo", dir, "--json")
	if code != 0 {
		t.Fatalf("--json: exit %d: %s", code, errOut)
	}
	schematest.Validate(t, "discover.schema.json", []byte(out))
	var rep discoverReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Origin != "" || rep.Object != nil || len(rep.Problems) != 0 || len(rep.Managers) != 1 ||
		rep.Managers[0].target() != "Kustomization flux-system/apps" || strings.Join(rep.Managers[0].Paths, ",") != "k8s/prod" {
		t.Errorf("report: %+v", rep)
	}
	if !strings.Contains(out, `"problems": []`) || strings.Contains(out, "null") || strings.Contains(out, `"origin"`) {
		t.Errorf("--json: empty lists must be [], unknown origin left out:\n%s", out)
	}
}

func TestDiscoverObject(t *testing.T) {
	dir, git := demoRepo(t)

	// An object the demo's manifests define.
	code, out, errOut := runCLI(t, "discover", "--repo", dir, "--object", "k8s:apps/Deployment/prod/web")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"object: k8s:apps/Deployment/prod/web", "manifest: k8s/prod/web.yaml", "managers:", "Kustomization flux-system/apps (clusters/prod/apps.yaml)"} {
		if !strings.Contains(out, want) {
			t.Errorf("placed object: output lacks %q:\n%s", want, out)
		}
	}
	code, out, _ = runCLI(t, "discover", "--repo", dir, "--object", "k8s:apps/Deployment/prod/web", "--json")
	schematest.Validate(t, "discover.schema.json", []byte(out))
	var rep discoverReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 0 {
		t.Fatalf("exit %d, %v", code, err)
	}
	if o := rep.Object; o == nil || !o.Found || o.Field != "k8s:apps/Deployment/prod/web" || o.Manifest != "k8s/prod/web.yaml" || len(o.Managers) != 1 || len(o.RemoteCharts) != 0 {
		t.Errorf("placed object: %+v", rep.Object)
	}

	// An object nothing defines.
	code, out, _ = runCLI(t, "discover", "--repo", dir, "--object", "k8s:apps/Deployment/prod/nothing")
	if code != 0 || !strings.Contains(out, "no manifest, chart or remote chart release in this repository defines it") {
		t.Errorf("unknown object: exit %d:\n%s", code, out)
	}
	code, out, _ = runCLI(t, "discover", "--repo", dir, "--object", "k8s:apps/Deployment/prod/nothing", "--json")
	schematest.Validate(t, "discover.schema.json", []byte(out))
	if code != 0 || !strings.Contains(out, `"found": false`) || !strings.Contains(out, `"remote_charts": []`) || !strings.Contains(out, `"managers": []`) {
		t.Errorf("unknown object --json: exit %d:\n%s", code, out)
	}

	// An object a chart from a chart repository may render.
	writeFile(t, filepath.Join(dir, "clusters/prod/podinfo.yaml"), "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: podinfo\n  namespace: flux-system\n"+
		"spec:\n  interval: 10m\n  targetNamespace: prod\n  chart:\n    spec:\n      chart: podinfo\n      version: 6.x\n      sourceRef:\n        kind: HelmRepository\n        name: podinfo\n")
	git.Run("add", "-A")
	git.Run("commit", "--quiet", "-m", "Install podinfo")
	code, out, errOut = runCLI(t, "discover", "--repo", dir, "--object", "k8s:apps/Deployment/prod/podinfo")
	if code != 0 {
		t.Fatalf("remote chart: exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"HelmRelease flux-system/podinfo  clusters/prod/podinfo.yaml", // a remote chart applies no directory
		"it may come from these remote charts, installed into prod:",
		"podinfo from HelmRepository",
		"HelmRelease flux-system/podinfo (clusters/prod/podinfo.yaml)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("remote chart: output lacks %q:\n%s", want, out)
		}
	}
	if line := lineWith(out, "HelmRelease flux-system/podinfo  "); !strings.HasSuffix(strings.TrimSpace(line), " -") {
		t.Errorf("a manager applying no directory shows -: %q", line)
	}
	code, out, _ = runCLI(t, "discover", "--repo", dir, "--object", "k8s:apps/Deployment/prod/podinfo", "--json")
	schematest.Validate(t, "discover.schema.json", []byte(out))
	rep = discoverReport{}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 0 {
		t.Fatalf("exit %d, %v", code, err)
	}
	if o := rep.Object; o == nil || o.Found || o.Manifest != "" || len(o.RemoteCharts) != 1 || !strings.HasPrefix(o.RemoteCharts[0], "podinfo from HelmRepository") ||
		len(o.Managers) != 1 || o.Managers[0].target() != "HelmRelease flux-system/podinfo" || o.Managers[0].Paths == nil {
		t.Errorf("remote chart: %+v", rep.Object)
	}
	// The revision before the release: the object is unknown there.
	if code, out, _ := runCLI(t, "discover", "--repo", dir, "--rev", "HEAD~1", "--object", "k8s:apps/Deployment/prod/podinfo"); code != 0 ||
		!strings.Contains(out, "no manifest, chart or remote chart release") || strings.Contains(out, "HelmRelease") {
		t.Errorf("--rev HEAD~1: exit %d:\n%s", code, out)
	}
}

// With an origin remote, a source naming another repository is not read from this one, and
// discover says so; a source naming this one (in another URL form) is followed.
func TestDiscoverOrigin(t *testing.T) {
	dir, git := demoRepo(t)
	git.Run("remote", "add", "origin", "https://github.com/acme/infra.git")
	app := func(name, repoURL, path string) string {
		return "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: " + name + "\n  namespace: argocd\n" +
			"spec:\n  project: default\n  source:\n    repoURL: " + repoURL + "\n    path: " + path + "\n    targetRevision: main\n" +
			"  destination:\n    server: https://kubernetes.default.svc\n    namespace: prod\n"
	}
	writeFile(t, filepath.Join(dir, "argocd/other.yaml"), app("other", "https://github.com/acme/other.git", "apps/other"))
	writeFile(t, filepath.Join(dir, "argocd/self.yaml"), app("self", "git@github.com:acme/infra", "k8s/prod"))
	git.Run("add", "-A")
	git.Run("commit", "--quiet", "-m", "Argo CD applications")

	code, out, errOut := runCLI(t, "discover", "--repo", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"origin: https://github.com/acme/infra.git\n",
		"problems:\n  argocd/other.yaml: Application argocd/other: source apps/other reads https://github.com/acme/other.git, another repository",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if line := lineWith(out, "Application argocd/other"); !strings.HasSuffix(strings.TrimSpace(line), " -") {
		t.Errorf("the Application reading another repository applies nothing from this one: %q", line)
	}
	if line := lineWith(out, "Application argocd/self"); !strings.HasSuffix(strings.TrimSpace(line), " k8s/prod") {
		t.Errorf("the Application reading this repository applies k8s/prod: %q", line)
	}

	code, out, _ = runCLI(t, "discover", "--repo", dir, "--json", "--object", "k8s:apps/Deployment/prod/web")
	schematest.Validate(t, "discover.schema.json", []byte(out))
	var rep discoverReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 0 {
		t.Fatalf("exit %d, %v", code, err)
	}
	if rep.Origin != "https://github.com/acme/infra.git" || len(rep.Problems) != 1 || !strings.Contains(rep.Problems[0], "another repository") ||
		len(rep.Managers) != 3 || rep.Object == nil || len(rep.Object.Managers) != 2 {
		t.Errorf("report: %s", out)
	}

	// A directory inside the work tree names the repository too.
	if code, out, _ := runCLI(t, "discover", "--repo", filepath.Join(dir, "k8s")); code != 0 || !strings.Contains(out, "origin: https://github.com/acme/infra.git") {
		t.Errorf("--repo a subdirectory: exit %d:\n%s", code, out)
	}

	// An origin naming no host is unknown: every source is this repository's.
	git.Run("remote", "set-url", "origin", "/srv/git/infra")
	code, out, _ = runCLI(t, "discover", "--repo", dir)
	if code != 0 || !strings.Contains(out, "origin: unknown (the origin remote /srv/git/infra names no host)") || strings.Contains(out, "problems:") {
		t.Errorf("local origin: exit %d:\n%s", code, out)
	}
}

func TestDiscoverRefusesBadInput(t *testing.T) {
	dir, _ := demoRepo(t)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--object", "web"}, `--object "web"`},
		{[]string{"--object", "k8s:apps/Deployment/prod/web#/spec/replicas"}, "no #pointer"},
		{[]string{"--object", "tf:infra/kafka//aws_autoscaling_group.consumer"}, "not a Kubernetes object"},
		{[]string{"--rev", "no-such-branch"}, "--rev no-such-branch"},
		{[]string{"--repo", t.TempDir()}, "--repo"},
		{[]string{"extra"}, "unknown command"},
	} {
		args := append([]string{"discover"}, tt.args...)
		if tt.args[0] != "--repo" {
			args = append(args, "--repo", dir)
		}
		code, out, errOut := runCLI(t, args...)
		if code != exitUsage || !strings.Contains(errOut, tt.want) || out != "" {
			t.Errorf("%v: exit %d, want %d; stderr %q lacks %q; stdout %q", tt.args, code, exitUsage, errOut, tt.want, out)
		}
	}
}

func TestDiscoverHasHelp(t *testing.T) {
	cmd, _, err := newRootCmd().Find([]string{"discover"})
	if err != nil {
		t.Fatal(err)
	}
	if cmd.Short == "" || cmd.Long == "" || cmd.Example == "" {
		t.Error("discover lacks Short, Long or Example")
	}
	if code, out, _ := runCLI(t, "discover", "--help"); code != 0 || !strings.Contains(out, "Examples:") || !strings.Contains(out, "--object") {
		t.Errorf("discover --help: exit %d\n%s", code, out)
	}
}

// The schema is not vacuous: nulls, Go-cased keys, a placement without a manifest, and a manifest
// for an object not found fail it.
func TestDiscoverSchemaRefusesWrongShapes(t *testing.T) {
	m := `{"kind":"Kustomization","name":"apps","namespace":"flux-system","file":"clusters/prod/apps.yaml","paths":["k8s/prod"]}`
	schematest.Validate(t, "discover.schema.json", []byte(`{"managers":[`+m+`],"problems":[]}`))
	for _, doc := range []string{
		`{"managers":null,"problems":[]}`,
		`{"managers":[],"problems":[],"origin":""}`,
		`{"managers":[{"Kind":"Kustomization","Name":"apps","File":"a.yaml","Paths":[]}],"problems":[]}`,
		`{"managers":[{"kind":"Kustomization","name":"apps","file":"a.yaml"}],"problems":[]}`,
		`{"managers":[],"problems":[],"object":{"field":"k8s:apps/Deployment/prod/web","found":true,"remote_charts":[],"managers":[]}}`,
		`{"managers":[],"problems":[],"object":{"field":"k8s:apps/Deployment/prod/web","found":false,"manifest":"a.yaml","remote_charts":[],"managers":[]}}`,
		`{"managers":[],"problems":[],"object":{"field":"k8s:apps/Deployment/prod/web","found":false,"remote_charts":null,"managers":[]}}`,
	} {
		if schematest.Check("discover.schema.json", []byte(doc)) == nil {
			t.Errorf("discover.schema.json accepts %s", doc)
		}
	}
}

// lineWith returns the first line of s containing sub, "" when none does.
func lineWith(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}

func TestDiscoverStopsALoopingChart(t *testing.T) {
	dir, git := demoRepo(t)
	writeFile(t, filepath.Join(dir, "releases/loop.yaml"), "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: loop\n  namespace: prod\n"+
		"spec:\n  chart:\n    spec:\n      chart: ./charts/loop\n      sourceRef:\n        kind: GitRepository\n        name: infra\n")
	writeFile(t, filepath.Join(dir, "charts/loop/Chart.yaml"), "apiVersion: v2\nname: loop\nversion: 0.1.0\n")
	writeFile(t, filepath.Join(dir, "charts/loop/templates/cm.yaml"),
		"{{- range until 100000 }}{{- range until 100000 }}{{- end }}{{- end }}\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: loop\n")
	git.Run("add", "-A")
	git.Run("commit", "--quiet", "-m", "A chart that loops")

	code, out, errOut := runCLI(t, "discover", "--repo", dir, "--render-timeout", "2s")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	want := "releases/loop.yaml: HelmRelease prod/loop: chart charts/loop: not rendered: stopped after 2s, the time Parley gives a chart to render; its objects are not in the inventory"
	if !strings.Contains(out, want) {
		t.Errorf("output lacks %q:\n%s", want, out)
	}
}

func TestDiscoverNamesFilesAboveTheBudget(t *testing.T) {
	dir, git := demoRepo(t)
	writeFile(t, filepath.Join(dir, "k8s/prod/big.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big\n  namespace: prod\ndata:\n  x: \""+strings.Repeat("x", 3000)+"\"\n")
	git.Run("add", "-A")
	git.Run("commit", "--quiet", "-m", "A large file")
	code, out, errOut := runCLI(t, "discover", "--repo", dir, "--max-file-size", "2048", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	schematest.Validate(t, "discover.schema.json", []byte(out))
	if want := `"k8s/prod/big.yaml: 3.1 kB, above the 2 KiB Parley reads; not judged"`; !strings.Contains(out, want) {
		t.Errorf("output lacks %s:\n%s", want, out)
	}
}

// writeFanningOverlay adds to the repository at dir an overlay tree that fans out, k8s/fan/prod,
// applied by a Flux Kustomization: each of 23 levels names both kustomizations of the level below,
// so the base is built 2^23 times.
func writeFanningOverlay(t *testing.T, dir string) {
	t.Helper()
	writeFile(t, filepath.Join(dir, "k8s/fan/base/cm.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fan\ndata:\n  a: b\n")
	writeFile(t, filepath.Join(dir, "k8s/fan/base/kustomization.yaml"), "resources: [cm.yaml]\n")
	for i := 1; i <= 23; i++ {
		below := "[../../base]"
		if i > 1 {
			below = fmt.Sprintf("[../../l%d/a, ../../l%d/b]", i-1, i-1)
		}
		for _, s := range []string{"a", "b"} {
			writeFile(t, filepath.Join(dir, fmt.Sprintf("k8s/fan/l%d/%s/kustomization.yaml", i, s)), "nameSuffix: -"+s+"\nresources: "+below+"\n")
		}
	}
	writeFile(t, filepath.Join(dir, "k8s/fan/prod/kustomization.yaml"), "namespace: prod\nresources: [../l23/a, ../l23/b]\n")
	writeFile(t, filepath.Join(dir, "clusters/fan.yaml"), "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: fan\n  namespace: flux-system\n"+
		"spec:\n  interval: 10m\n  path: ./k8s/fan/prod\n  sourceRef:\n    kind: GitRepository\n    name: flux-system\n")
}

// The overlay tree that fans out is stopped at the render budget, named, and read as written;
// discover still answers, exit 0.
func TestDiscoverStopsAnOverlayThatFansOut(t *testing.T) {
	dir, git := demoRepo(t)
	writeFanningOverlay(t, dir)
	git.Run("add", "-A")
	git.Run("commit", "--quiet", "-m", "An overlay tree that fans out")

	code, out, errOut := runCLI(t, "discover", "--repo", dir, "--render-timeout", "2s")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	want := "k8s/fan/prod: not built: stopped after 2s, the time Parley gives a kustomize build; its files are read as written"
	if !strings.Contains(out, want) {
		t.Errorf("output lacks %q:\n%s", want, out)
	}
}
