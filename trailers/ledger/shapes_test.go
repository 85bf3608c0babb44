package ledger_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/internal/gittest"
)

// TestLedgerFollowsRealShapes builds a repository with the shapes real GitOps repositories have
// and holds the ledger's history of chosen fields to an oracle that does not share its parser:
// at every first-parent commit the oracle reads every YAML file with `git show`, decodes each
// document with sigs.k8s.io/yaml (what kubectl, Argo CD and Flux use), finds the object and
// walks the field's pointer; a field's history is the commits where that value differs from the
// parent's. The shapes: a multi-document file changed in its middle document, a Flux HelmRelease
// bumped by Renovate, a Kustomize base and overlay patch, a Helm template, a generated CRD, YAML
// anchors and merge keys, duplicate keys, CRLF and a byte order mark, renames with and without a
// change, a file deleted and re-added, an empty and a comments-only file.
func TestLedgerFollowsRealShapes(t *testing.T) {
	r := gittest.Init(t, time.Date(2026, 6, 1, 9, 0, 0, 0, time.UTC), time.Hour).As("Dana Okafor", "dana@parley.example")
	renovate := r.As("renovate[bot]", "29139614+renovate[bot]@users.noreply.github.com")

	install := func(replicas int, image string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web-config, namespace: apps}\ndata: {LOG_LEVEL: info}\n" +
			"---\n# the web server\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: apps\nspec:\n" +
			fmt.Sprintf("  replicas: %d\n  template:\n    spec:\n      containers:\n        - name: web\n          image: %s\n", replicas, image) +
			"---\napiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: apps}\nspec:\n  ports: [{port: 80}]\n"
	}
	helmRelease := func(chart, tag string, replicas int) string {
		return "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: podinfo\n  namespace: podinfo\nspec:\n" +
			"  interval: 30m\n  chart:\n    spec:\n      chart: podinfo\n" + fmt.Sprintf("      version: %s\n", chart) +
			"      sourceRef: {kind: HelmRepository, name: podinfo, namespace: flux-system}\n  values:\n" +
			fmt.Sprintf("    replicaCount: %d\n    image:\n      repository: ghcr.io/stefanprodan/podinfo\n      tag: %s\n", replicas, tag)
	}
	kustomization := func(tag string) string {
		return "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [deployment.yaml]\n" +
			"images:\n  - name: nginx\n    newTag: \"" + tag + "\"\n"
	}
	patch := func(replicas int) string {
		return fmt.Sprintf("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: api, namespace: prod}\nspec:\n  replicas: %d\n", replicas)
	}
	crd := func(description string) string {
		var b strings.Builder
		b.WriteString("apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: widgets.example.com\nspec:\n" +
			"  group: example.com\n  names: {kind: Widget, plural: widgets}\n  scope: Namespaced\n  versions:\n    - name: v1\n" +
			"      served: true\n      storage: true\n      schema:\n        openAPIV3Schema:\n          type: object\n          properties:\n")
		for i := range 60 {
			fmt.Fprintf(&b, "            field%02d:\n              type: string\n              description: field number %d\n", i, i)
		}
		b.WriteString("            size:\n              type: integer\n              description: " + description + "\n")
		return b.String()
	}
	anchors := func(team string) string {
		return "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: worker\n  namespace: apps\n  labels: &labels\n" +
			"    team: " + team + "\n    tier: backend\nspec:\n  template:\n    metadata:\n      labels:\n        <<: *labels\n        app: worker\n"
	}
	template := func(n int) string {
		return "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Release.Name }}\nspec:\n  replicas: {{ .Values.replicas | default " +
			fmt.Sprint(n) + " }}\n"
	}
	crlfBOM := func(level string) string {
		return "\ufeff" + strings.ReplaceAll("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: windows, namespace: apps}\ndata:\n  level: "+level+"\n", "\n", "\r\n")
	}
	dupes := func(last string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: dupes, namespace: apps}\ndata:\n  mode: first\n  mode: " + last + "\n"
	}
	db := "apiVersion: v1\nkind: Service\nmetadata: {name: db, namespace: apps}\nspec:\n  ports: [{port: 5432}]\n"

	// The history, oldest first.
	r.Write("apps/install.yaml", install(2, "nginx:1.25"))
	r.Write("clusters/prod/podinfo.yaml", helmRelease("6.5.0", "6.5.0", 2))
	r.Write("apps/base/kustomization.yaml", kustomization("1.25"))
	r.Write("apps/overlays/prod/replicas.yaml", patch(2))
	r.Write("charts/web/templates/deployment.yaml", template(1))
	r.Write("crds/widgets.yaml", crd("how big"))
	r.Write("apps/worker.yaml", anchors("payments"))
	r.Write("apps/windows.yaml", crlfBOM("info"))
	r.Write("apps/db.yaml", db)
	r.Write("apps/dupes.yaml", dupes("second"))
	r.Write("apps/empty.yaml", "")
	r.Write("apps/comments.yaml", "# nothing here yet\n# apiVersion: v1\n")
	r.Commit("Initial\n")
	r.Write("apps/install.yaml", install(3, "nginx:1.25")) // only the middle document changes
	r.Commit("Scale web\n")
	renovate.Write("clusters/prod/podinfo.yaml", helmRelease("6.5.0", "6.5.1", 2))
	renovate.Commit("fix(container): update podinfo to 6.5.1\n")
	renovate.Write("clusters/prod/podinfo.yaml", helmRelease("6.6.0", "6.6.0", 2))
	renovate.Commit("feat(helm): update chart podinfo to 6.6.0\n")
	r.Write("apps/base/kustomization.yaml", kustomization("1.27"))
	r.Write("apps/overlays/prod/replicas.yaml", patch(4))
	r.Commit("Newer nginx, more api\n")
	r.Write("charts/web/templates/deployment.yaml", template(2))
	r.Commit("Chart default\n")
	r.Write("crds/widgets.yaml", crd("how big, in widgets"))
	r.Commit("Regenerate CRDs\n")
	r.Write("apps/worker.yaml", anchors("platform")) // the anchor changes; the merged label follows
	r.Commit("Hand worker over\n")
	r.Write("apps/windows.yaml", crlfBOM("debug"))
	r.Write("apps/dupes.yaml", dupes("third"))
	r.Commit("Debug the Windows job\n")
	r.Run("mv", "apps/install.yaml", "apps/web.yaml") // a rename alone changes nothing
	r.Commit("Rename\n")
	r.Run("mv", "apps/web.yaml", "apps/web-app.yaml")
	r.Write("apps/web-app.yaml", install(3, "nginx:1.27"))
	r.Commit("Rename and bump\n")
	r.Run("rm", "-q", "apps/db.yaml")
	r.Commit("Drop db\n")
	r.Write("apps/db.yaml", db)
	r.Commit("Bring db back\n")
	renovate.Write("clusters/prod/podinfo.yaml", helmRelease("6.6.0", "6.6.1", 3))
	renovate.Commit("fix(container): update podinfo to 6.6.1\n")
	r.Write("apps/empty.yaml", "# still empty\n")
	r.Commit("Comment\n")

	l := openLedger(t, r.Dir)
	update(t, l, "main")
	commits := strings.Fields(r.Run("rev-list", "--first-parent", "--reverse", "main"))
	git := &oracle{t: t, r: r}

	for _, c := range []struct {
		kind, namespace, name, pointer string
		changes                        int // the oracle's count, as a check on the oracle itself
	}{
		{"Deployment", "apps", "web", "/spec/replicas", 2},
		{"Deployment", "apps", "web", "/spec/template/spec/containers/0/image", 2},
		{"ConfigMap", "apps", "web-config", "/data/LOG_LEVEL", 1},
		{"HelmRelease", "podinfo", "podinfo", "/spec/values/image/tag", 4},
		{"HelmRelease", "podinfo", "podinfo", "/spec/chart/spec/version", 2},
		{"HelmRelease", "podinfo", "podinfo", "/spec/values/replicaCount", 2},
		{"Deployment", "prod", "api", "/spec/replicas", 2},
		{"CustomResourceDefinition", "", "widgets.example.com", "/spec/versions/0/schema/openAPIV3Schema/properties/size/description", 2},
		{"CustomResourceDefinition", "", "widgets.example.com", "/spec/versions/0/schema/openAPIV3Schema/properties/field07/description", 1},
		{"Deployment", "apps", "worker", "/metadata/labels/team", 2},
		{"Deployment", "apps", "worker", "/spec/template/metadata/labels/team", 2},
		{"Deployment", "apps", "worker", "/spec/template/metadata/labels/tier", 1},
		{"ConfigMap", "apps", "windows", "/data/level", 2},
		{"Service", "apps", "db", "/spec/ports/0/port", 3},
		{"ConfigMap", "apps", "dupes", "/data/mode", 2}, // a repeated key: the last one counts, for kubectl as here
	} {
		t.Run(c.kind+"/"+c.name+c.pointer, func(t *testing.T) {
			want := git.history(commits, c.kind, c.namespace, c.name, c.pointer)
			if len(want) != c.changes {
				t.Fatalf("the oracle found %d changes, the fixture makes %d: %v", len(want), c.changes, want)
			}
			f := fieldOf(c.kind, c.namespace, c.name, c.pointer)
			hist, err := l.History(f)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, cl := range hist {
				got = append(got, cl.Evidence.Commit[:8]+"="+cl.Value.String())
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s\n ledger:     %v\n git log -p: %v", f, got, want)
			}
		})
	}

	// The Kustomization has no name: it is its directory's.
	kf, err := core.ParseField("k8s:kustomize.config.k8s.io/Kustomization/apps%2Fbase#/images/0/newTag")
	if err != nil {
		t.Fatal(err)
	}
	if hist, _ := l.History(kf); len(hist) != 2 || hist[1].Value.String() != `"1.27"` {
		t.Errorf("Kustomization images: %v", hist)
	}

	// The Helm template: one problem per version, no fields; the empty and comments-only files:
	// neither.
	probs, err := l.Problems()
	if err != nil {
		t.Fatal(err)
	}
	var templateProblems int
	for _, p := range probs {
		switch p.Path {
		case "charts/web/templates/deployment.yaml":
			templateProblems++
			if !strings.Contains(p.Message, "template") {
				t.Errorf("template problem does not say template: %s", p)
			}
		default:
			t.Errorf("unexpected problem: %s", p)
		}
	}
	if templateProblems != 2 {
		t.Errorf("%d problems for the template's 2 versions, want 2", templateProblems)
	}
}

// oracle reads a repository's files with git, each once.
type oracle struct {
	t       *testing.T
	r       *gittest.Runner
	files   map[string][]string // commit -> paths
	content map[string]string   // commit:path -> content
}

// value returns the field's value at commit as canonical JSON, "(absent)" when no file holds
// it, reading every YAML file of the commit with git and sigs.k8s.io/yaml.
func (o *oracle) value(commit, kind, namespace, name, pointer string) string {
	o.t.Helper()
	if o.files == nil {
		o.files, o.content = map[string][]string{}, map[string]string{}
	}
	if _, ok := o.files[commit]; !ok {
		o.files[commit] = strings.Fields(o.r.Run("ls-tree", "-r", "--name-only", commit))
	}
	for _, path := range o.files[commit] {
		if !strings.HasSuffix(path, ".yaml") {
			continue
		}
		content, ok := o.content[commit+":"+path]
		if !ok {
			content = o.r.Run("show", commit+":"+path)
			o.content[commit+":"+path] = content
		}
		for _, doc := range strings.Split(strings.ReplaceAll(content, "\r\n", "\n"), "\n---") {
			js, err := yaml.YAMLToJSON([]byte(strings.TrimPrefix(doc, "\ufeff")))
			if err != nil {
				continue // templates: not manifests
			}
			var obj map[string]any
			if json.Unmarshal(js, &obj) != nil || obj["kind"] != kind {
				continue
			}
			meta, _ := obj["metadata"].(map[string]any)
			ns, _ := meta["namespace"].(string)
			if meta["name"] != name || ns != namespace {
				continue
			}
			var v any = obj
			for _, tok := range strings.Split(pointer, "/")[1:] {
				switch node := v.(type) {
				case map[string]any:
					v = node[tok]
				case []any:
					var i int
					fmt.Sscan(tok, &i)
					v = node[i]
				}
			}
			if v == nil {
				return "(absent)"
			}
			var b bytes.Buffer
			enc := json.NewEncoder(&b)
			enc.SetEscapeHTML(false)
			enc.Encode(v)
			return strings.TrimSpace(b.String())
		}
	}
	return "(absent)"
}

// history lists commit=value wherever the field's value differs from the first parent's.
func (o *oracle) history(commits []string, kind, namespace, name, pointer string) []string {
	var out []string
	prev := "(absent)"
	for _, c := range commits {
		v := o.value(c, kind, namespace, name, pointer)
		if v != prev {
			out = append(out, c[:8]+"="+v)
		}
		prev = v
	}
	return out
}

// fieldOf builds the field's address from the object's kind as the manifests spell apiVersion.
func fieldOf(kind, namespace, name, pointer string) core.Field {
	group := map[string]string{"Deployment": "apps", "HelmRelease": "helm.toolkit.fluxcd.io",
		"CustomResourceDefinition": "apiextensions.k8s.io", "ConfigMap": "", "Service": ""}[kind]
	return core.K8sField(group, kind, namespace, name, pointer)
}
