package gitops

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strconv"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/reconcile/internal/yamlvalue"
)

// Manager is an Argo CD Application or ApplicationSet, or a Flux Kustomization, found in the repository.
type Manager struct {
	Target Target   // the managing object: Kind, Name, Namespace
	File   string   // repository-relative path of the YAML file holding it
	Paths  []string // repository-relative directories (slash-separated, "." for the root) whose manifests it applies
}

// Placement is where an object's manifest lives and which managers apply it.
type Placement struct {
	Manifest string    // repository-relative file defining the object
	Managers []Manager // every manager that applies this file, sorted by File then Target
	// Chart is the chart directory when Manifest is a Helm template that Discover rendered for a
	// release (a HelmRelease, an Argo CD Helm source): the object's fields come from the template
	// and the release's values, not from Manifest as written.
	Chart string
	// Built is the directory whose kustomization build defines the object as the cluster gets it
	// (name prefixes, patches and generators applied); Manifest is the file it comes from, or for a
	// generated object the kustomization that generates it.
	Built string
	// RemoteCharts is set by RemoteReleases: the charts from chart repositories that may render
	// the object; Manifest and Chart are empty then.
	RemoteCharts []string
}

// Inventory is what Discover found. Immutable, safe for concurrent use.
type Inventory struct {
	managers []Manager
	objects  map[objectKey]*placed
	remote   []remoteRelease   // releases of charts Parley does not fetch
	files    map[string][]byte // the repository's files, to render a release again (HelmValuesKey)
	helm     HelmRenderer      // what discovery rendered the charts with, to render them again
}

// objectKey is an object's identity as the cluster sees it once its manager applied it: the API
// version is not part of it, and the namespace is the one the object ends up in.
type objectKey struct {
	group, kind, namespace, name string
}

func (k objectKey) String() string {
	g := k.group
	if g == "" {
		g = core.CoreGroup
	}
	if k.namespace == "" {
		return g + "/" + k.kind + " " + k.name
	}
	return g + "/" + k.kind + " " + k.namespace + "/" + k.name
}

// placed is one object of the inventory: the file that defines it and the managers (indexes into
// Inventory.managers) that apply it.
type placed struct {
	file     string
	doc      int // index among the file's object documents
	managers []int
	chart    string       // set for an object rendered from a Helm chart
	built    string       // set for an object a kustomization build defines: the directory built
	release  *helmSource  // set for an object rendered from a chart: the release
	node     *yamlv3.Node // the rendered or built object
}

// Discover reads a repository's files (repository-relative slash path -> content; non-YAML files are ignored except as noted)
// and finds the managers and the Kubernetes objects each applies. A YAML file that does not parse does not stop discovery: it is
// reported in problems (each error names the file) and skipped.
//
// It follows what the tools themselves do, as far as the repository alone tells:
//
//   - A Flux Kustomization (kustomize.toolkit.fluxcd.io v1, v1beta2, v1beta1) applies spec.path,
//     relative to the repository root ("./apps/prod" is apps/prod, empty is the root). A directory
//     with a kustomization.yaml, kustomization.yml or Kustomization file is built from its
//     resources (and the older bases and components): files, and directories that have a
//     kustomization file of their own, recursively; remote URLs and paths outside the repository or
//     not in it are ignored. A directory without one is, like kustomize-controller's generator, every
//     YAML file under it, recursively, where a subdirectory with a kustomization file is built as
//     such instead. spec.targetNamespace and a kustomization's namespace set the namespace of the
//     namespaced objects below them; the outermost one wins, as kustomize applies them.
//   - An Argo CD Application (argoproj.io/v1alpha1) applies spec.source.path and every
//     spec.sources[].path, except remote Helm sources (those with chart) and sources that only
//     provide a ref; a directory holding Chart.yaml is rendered (below). A plain directory is the YAML files directly
//     in it, or under it with spec.source.directory.recurse (directory.include and exclude are
//     not applied); a kustomization file is followed as above, spec.source.kustomize.namespace
//     overriding like a kustomization's namespace. spec.destination.namespace fills in the
//     namespace of namespaced objects that have none; it overrides nothing.
//   - An ApplicationSet applies spec.template.spec's sources the same way. A templated path (one
//     holding "{{") is resolved against the git directory generators, also inside matrix and merge
//     generators: every repository directory that matches one of their directories[].path globs
//     (path.Match) and none of the exclude: true ones. The template's path and destination
//     namespace get {{path}}, {{path.basename}}, {{.path.path}} and {{.path.basename}}
//     substituted; a path still templated after that is taken to be the matched directory, and a
//     destination namespace still templated fills in nothing.
//   - A source is read from this repository unless its URL names another one (DiscoverFrom, when
//     the repository's own URL is known): an Argo CD source's repoURL, the spec.url of the Flux
//     GitRepository (in this repository) that a Kustomization or HelmRelease reads.
//   - A manager's directory with a kustomization file is built with the Kustomize API (see
//     buildKustomization): objects get the names, namespaces and contents the build gives them
//     (namePrefix, nameSuffix, patches, components, replacements, generators), each mapped to the
//     file it comes from. A kustomization using a remote resource, or one kustomize refuses, is
//     followed as written instead, as the rules above say, and reported.
//   - A Flux HelmRelease whose chart is in the repository (a GitRepository source), and an Argo CD
//     source whose path holds Chart.yaml, are rendered with the Helm SDK (see render): their objects
//     are placed at the template that renders them, applied by that manager. Charts from chart
//     repositories are not fetched, and their objects are not in the inventory.
//   - Files a kustomization uses as patches are not objects. Neither are the kustomization files,
//     Helm chart templates (files under the templates directory of a directory holding Chart.yaml,
//     which are not YAML before rendering), documents without apiVersion, kind or metadata.name,
//     nor List documents.
//   - Cluster-scoped kinds (Namespace, ClusterRole, CustomResourceDefinition and other built-in
//     ones, see clusterScoped) keep no namespace whatever the overrides.
//   - An object's identity is its group (from apiVersion), kind, namespace and name, the namespace
//     being the one it is applied into. An object no manager applies keeps the namespace of its
//     manifest. The Kustomizations and Applications are objects too.
//   - Only the first document defining an object counts. When two files (or two documents of one
//     file) define the same object, Locate gives the first by path order and Discover reports the
//     duplicate, naming both.
//
// problems are sorted by their text and without repeats, so that the same repository gives the
// same report.
func Discover(files map[string][]byte) (inv *Inventory, problems []error) {
	return DiscoverFrom(files, "")
}

// DiscoverFrom is Discover for a repository whose own URL is origin (its origin remote): a source
// naming another repository (an Argo CD source's repoURL, the URL of the Flux GitRepository a
// Kustomization or HelmRelease reads) is not read from this one, and Discover reports it. An
// origin that names no host (a local path) is unknown, as "" is: every source is then taken to be
// this repository.
func DiscoverFrom(files map[string][]byte, origin string) (inv *Inventory, problems []error) {
	return DiscoverWith(context.Background(), files, Options{Origin: origin})
}

// Options tune DiscoverWith.
type Options struct {
	// Origin is the repository's own URL, as DiscoverFrom takes it.
	Origin string
	// Helm renders the repository's charts. nil renders them in this process (InProcess), which
	// nothing can stop or bound: where the repository is not trusted, give a RenderProcess, and a
	// chart over its time or memory budget is reported as not rendered. A renderer that is also a
	// KustomizeBuilder (a RenderProcess is) builds the repository's kustomizations too, under the
	// same budgets, and an overlay over them is reported as not built; with any other, they are
	// built in this process.
	Helm HelmRenderer
}

// DiscoverWith is DiscoverFrom with its options; ctx stops the rendering of charts and the builds
// of kustomizations (a RenderProcess kills its workers when ctx ends, and what was not rendered or
// built is reported).
func DiscoverWith(ctx context.Context, files map[string][]byte, o Options) (inv *Inventory, problems []error) {
	if o.Helm == nil {
		o.Helm = InProcess{}
	}
	kustomizer, ok := o.Helm.(KustomizeBuilder)
	if !ok {
		kustomizer = InProcess{}
	}
	d := &discovery{
		ctx:          ctx,
		helm:         o.Helm,
		kustomizer:   kustomizer,
		self:         RepoKey(o.Origin),
		files:        map[string][]byte{},
		dirFiles:     map[string][]string{},
		subdirs:      map[string][]string{},
		kustomize:    map[string]*kustomizeFile{},
		applications: map[string][]applying{},
		patchFiles:   map[string]bool{},
		builtFiles:   map[string]bool{},
	}
	for name, content := range files {
		clean := path.Clean(strings.TrimPrefix(name, "/"))
		if clean == "." || clean == ".." || strings.HasPrefix(clean, "../") {
			d.problems = append(d.problems, fmt.Errorf("%s: not a repository-relative file path; skipped", name))
			continue
		}
		d.files[clean] = content
	}
	d.index()
	d.parse()
	d.apply()
	inv = d.build()
	sort.Slice(d.problems, func(i, j int) bool { return d.problems[i].Error() < d.problems[j].Error() })
	for _, p := range d.problems {
		if len(problems) == 0 || problems[len(problems)-1].Error() != p.Error() {
			problems = append(problems, p)
		}
	}
	return inv, problems
}

// Managers returns every manager found, sorted by File, then Target.
func (inv *Inventory) Managers() []Manager {
	out := make([]Manager, len(inv.managers))
	for i, m := range inv.managers {
		out[i] = m.clone()
	}
	return out
}

// Locate says which file defines the object holding obj (a Kubernetes field or object; its Path
// is ignored) and which managers apply it. It is false when no manifest defines the object. A
// query for namespace "default" also finds an object that has no namespace and gets none from
// its managers, since kubectl and Flux apply such an object there.
func (inv *Inventory) Locate(obj core.Field) (Placement, bool) {
	if obj.Scheme != core.SchemeKubernetes {
		return Placement{}, false
	}
	key := objectKey{obj.Group, obj.Kind, obj.Namespace, obj.Name}
	p := inv.objects[key]
	if p == nil && key.namespace == "default" && !clusterScoped(key.group, key.kind) {
		key.namespace = ""
		p = inv.objects[key]
	}
	if p == nil {
		return Placement{}, false
	}
	out := Placement{Manifest: p.file, Chart: p.chart, Built: p.built}
	for _, i := range p.managers {
		out.Managers = append(out.Managers, inv.managers[i].clone())
	}
	return out, true
}

// RenderedValue returns the value a chart renders for f (a field of an object Discover rendered
// from a Helm chart in the repository for a release): Git sets that field, through the chart and
// the release's values, though no manifest in Git spells it. It is false for anything else.
func (inv *Inventory) RenderedValue(f core.Field) (core.Value, bool) {
	if f.Scheme != core.SchemeKubernetes {
		return core.Value{}, false
	}
	p := inv.objects[objectKey{f.Group, f.Kind, f.Namespace, f.Name}]
	if p == nil || p.node == nil {
		return core.Value{}, false
	}
	return valueAt(p.node, f)
}

// valueAt returns the value at f's pointer in a rendered or built object.
func valueAt(obj *yamlv3.Node, f core.Field) (core.Value, bool) {
	n := obj
	for _, tok := range f.PointerTokens() {
		switch n.Kind {
		case yamlv3.MappingNode:
			n = field(n, tok)
		case yamlv3.SequenceNode:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(n.Content) {
				return core.Value{}, false
			}
			n = n.Content[i]
		default:
			return core.Value{}, false
		}
		if n == nil {
			return core.Value{}, false
		}
	}
	v, err := yamlvalue.NodeValue(n) // linear in a mapping's keys, unlike n.Decode (issue 34)
	if err != nil {
		return core.Value{}, false
	}
	val, err := core.JSONValue(v)
	if err != nil {
		return core.Value{}, false
	}
	return val, true
}

func (m Manager) clone() Manager {
	m.Paths = append([]string(nil), m.Paths...)
	return m
}

func lessTarget(a, b Target) bool {
	if a.Kind != b.Kind {
		return a.Kind < b.Kind
	}
	if a.Namespace != b.Namespace {
		return a.Namespace < b.Namespace
	}
	return a.Name < b.Name
}

// clusterScoped lists the built-in cluster-scoped kinds (by group, then kind), whose objects no
// namespace override touches. Custom resources are taken to be namespaced unless they are here.
var clusterScoped = func() func(group, kind string) bool {
	kinds := map[string][]string{
		"":                             {"Namespace", "Node", "PersistentVolume", "ComponentStatus"},
		"rbac.authorization.k8s.io":    {"ClusterRole", "ClusterRoleBinding"},
		"apiextensions.k8s.io":         {"CustomResourceDefinition"},
		"storage.k8s.io":               {"StorageClass", "CSIDriver", "CSINode", "VolumeAttachment"},
		"scheduling.k8s.io":            {"PriorityClass"},
		"networking.k8s.io":            {"IngressClass"},
		"node.k8s.io":                  {"RuntimeClass"},
		"admissionregistration.k8s.io": {"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"},
		"apiregistration.k8s.io":       {"APIService"},
		"certificates.k8s.io":          {"CertificateSigningRequest"},
		"flowcontrol.apiserver.k8s.io": {"FlowSchema", "PriorityLevelConfiguration"},
		"cert-manager.io":              {"ClusterIssuer"},
	}
	set := map[[2]string]bool{}
	for g, ks := range kinds {
		for _, k := range ks {
			set[[2]string{g, k}] = true
		}
	}
	return func(group, kind string) bool { return set[[2]string{group, kind}] }
}()

// kustomizationNames are the file names kustomize recognises, in the order it looks for them.
var kustomizationNames = []string{"kustomization.yaml", "kustomization.yml", "Kustomization"}

// IsKustomizationFile reports whether a repository path names a kustomization file.
func IsKustomizationFile(name string) bool {
	base := path.Base(name)
	for _, k := range kustomizationNames {
		if base == k {
			return true
		}
	}
	return false
}

func isYAML(name string) bool {
	return strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml") || IsKustomizationFile(name)
}

// discovery is the state of one Discover call.
type discovery struct {
	ctx      context.Context
	helm     HelmRenderer
	self     string // RepoKey of the repository's own URL; "" when unknown
	files    map[string][]byte
	names    []string            // YAML files, sorted
	dirs     map[string]bool     // every directory holding a file, and their parents; "." is the root
	dirFiles map[string][]string // YAML files directly in a directory, sorted
	subdirs  map[string][]string // directories directly in a directory, sorted

	kustomizer KustomizeBuilder // builds kustomizations; nil builds them in this process (InProcess)

	docs      map[string][]document // the object documents of each YAML file, in order
	kustomize map[string]*kustomizeFile
	managers  []managerDoc

	// applications: for each applied file, how each manager applies it.
	applications map[string][]applying
	patchFiles   map[string]bool
	built        []builtDoc      // objects of kustomization builds
	builtFiles   map[string]bool // files those objects come from: not objects of their own

	problems []error
}

type document struct {
	key  objectKey // as written in the manifest
	node *yamlv3.Node
}

// applying is one way a manager applies a file: the namespace its kustomizations or the
// manager override namespaced objects with, and the one it fills in for objects without one.
type applying struct {
	manager        int
	override, fill string
}

type managerDoc struct {
	Manager
	roots  []root          // unsorted, one per source
	helm   []*helmSource   // releases of charts in the repository it installs
	remote []remoteRelease // releases of charts from chart repositories it installs
	// gitSource is "namespace/name" of the Flux GitRepository a Kustomization or HelmRelease
	// reads, "" when none (another source kind, or none named).
	gitSource string
}

// remoteRelease is a release of a chart from a chart repository or an OCI registry, which Parley
// does not fetch: which objects it renders is unknown, only the namespace they go into.
type remoteRelease struct {
	manager   int    // index into the inventory's managers
	namespace string // where the release installs namespaced objects
	chart     string // what the release asks for, for messages: "podinfo from HelmRepository podinfo"
}

// root is a directory a manager applies, and how.
type root struct {
	dir       string
	override  string // Flux spec.targetNamespace
	kustomize string // Argo CD spec.source.kustomize.namespace: an override when the directory is a kustomization
	fill      string // Argo CD spec.destination.namespace
	recurse   bool   // Argo CD spec.source.directory.recurse
	generator bool   // Flux: a directory without a kustomization file is every YAML file under it
}

type kustomizeFile struct {
	Namespace             string   `yaml:"namespace"`
	Resources             []string `yaml:"resources"`
	Bases                 []string `yaml:"bases"`
	Components            []string `yaml:"components"`
	PatchesStrategicMerge []string `yaml:"patchesStrategicMerge"`
	Patches               []struct {
		Path string `yaml:"path"`
	} `yaml:"patches"`
	PatchesJSON6902 []struct {
		Path string `yaml:"path"`
	} `yaml:"patchesJson6902"`
	broken bool // present but unreadable: the directory builds nothing
}

type header struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name      string `yaml:"name"`
		Namespace string `yaml:"namespace"`
	} `yaml:"metadata"`
}

type fluxSpec struct {
	Path            string        `yaml:"path"`
	TargetNamespace string        `yaml:"targetNamespace"`
	SourceRef       fluxSourceRef `yaml:"sourceRef"`
}

type fluxSourceRef struct {
	Kind      string `yaml:"kind"`
	Name      string `yaml:"name"`
	Namespace string `yaml:"namespace"`
}

// gitRepository is "namespace/name" of the GitRepository ref names, "" for another kind; a ref
// without a namespace is in the namespace of the object holding it, as Flux reads it.
func (ref fluxSourceRef) gitRepository(ns string) string {
	if ref.Kind != "GitRepository" || ref.Name == "" {
		return ""
	}
	if ref.Namespace != "" {
		ns = ref.Namespace
	}
	return ns + "/" + ref.Name
}

type argoSource struct {
	RepoURL   string   `yaml:"repoURL"`
	Path      string   `yaml:"path"`
	Chart     string   `yaml:"chart"`
	Ref       string   `yaml:"ref"`
	Helm      argoHelm `yaml:"helm"`
	Directory struct {
		Recurse bool `yaml:"recurse"`
	} `yaml:"directory"`
	Kustomize struct {
		Namespace string `yaml:"namespace"`
	} `yaml:"kustomize"`
}

type argoAppSpec struct {
	Source      *argoSource  `yaml:"source"`
	Sources     []argoSource `yaml:"sources"`
	Destination struct {
		Namespace string `yaml:"namespace"`
	} `yaml:"destination"`
}

type argoGenerator struct {
	Git *struct {
		Directories []struct {
			Path    string `yaml:"path"`
			Exclude bool   `yaml:"exclude"`
		} `yaml:"directories"`
	} `yaml:"git"`
	Matrix *struct {
		Generators []argoGenerator `yaml:"generators"`
	} `yaml:"matrix"`
	Merge *struct {
		Generators []argoGenerator `yaml:"generators"`
	} `yaml:"merge"`
}

type argoSetSpec struct {
	Generators []argoGenerator `yaml:"generators"`
	Template   struct {
		Metadata struct {
			Name string `yaml:"name"`
		} `yaml:"metadata"`
		Spec argoAppSpec `yaml:"spec"`
	} `yaml:"template"`
}

func (d *discovery) problem(format string, args ...any) {
	d.problems = append(d.problems, fmt.Errorf(format, args...))
}

// index lists the YAML files and the directory tree.
func (d *discovery) index() {
	d.dirs = map[string]bool{".": true}
	for name := range d.files {
		for dir := path.Dir(name); !d.dirs[dir]; dir = path.Dir(dir) {
			d.dirs[dir] = true
			parent := path.Dir(dir)
			d.subdirs[parent] = append(d.subdirs[parent], dir)
		}
		if isYAML(name) && !d.helmTemplate(name) {
			d.names = append(d.names, name)
			d.dirFiles[path.Dir(name)] = append(d.dirFiles[path.Dir(name)], name)
		}
	}
	sort.Strings(d.names)
	for _, l := range d.dirFiles {
		sort.Strings(l)
	}
	for _, l := range d.subdirs {
		sort.Strings(l)
	}
}

// helmTemplate reports whether name is a template of a Helm chart: Go templates, not YAML, until
// Helm renders them, and never applied as they are.
func (d *discovery) helmTemplate(name string) bool {
	for dir := path.Dir(name); ; dir = path.Dir(dir) {
		if _, ok := d.files[path.Join(dir, "Chart.yaml")]; ok && strings.HasPrefix(name, path.Join(dir, "templates")+"/") {
			return true
		}
		if dir == "." {
			return false
		}
	}
}

// parse reads every YAML file: kustomization files as kustomize configuration, the others as
// Kubernetes objects, among them the managers.
func (d *discovery) parse() {
	d.docs = map[string][]document{}
	for _, name := range d.names {
		if IsKustomizationFile(name) {
			k := &kustomizeFile{}
			if err := unmarshalChecked(d.files[name], k); err != nil {
				d.problem("%s: not a readable kustomization, so its directory builds nothing: %w", name, err)
				k = &kustomizeFile{broken: true}
			}
			d.kustomize[name] = k
			continue
		}
		docs, err := readDocuments(d.files[name])
		if err != nil {
			d.problem("%s: %w; skipped", name, err)
			continue
		}
		seen := map[objectKey]bool{}
		for _, doc := range docs {
			if seen[doc.key] {
				d.problem("%s: defines %s twice; only the first counts", name, doc.key)
				continue
			}
			seen[doc.key] = true
			d.docs[name] = append(d.docs[name], doc)
			if err := d.readManager(name, doc); err != nil {
				d.problem("%s: %s %s/%s: %w; not followed", name, doc.key.kind, doc.key.namespace, doc.key.name, err)
			}
		}
	}
	d.dropForeignFlux()
	sort.Slice(d.managers, func(i, j int) bool {
		a, b := d.managers[i], d.managers[j]
		if a.File != b.File {
			return a.File < b.File
		}
		return lessTarget(a.Target, b.Target)
	})
}

// readDocuments returns the Kubernetes objects of a (multi-document) YAML file, skipping
// documents that are not objects.
func readDocuments(content []byte) ([]document, error) {
	dec := yamlv3.NewDecoder(bytes.NewReader(content))
	var out []document
	for {
		var n yamlv3.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if len(n.Content) == 0 || n.Content[0].Kind != yamlv3.MappingNode {
			continue // empty document, or not an object
		}
		var h header
		if err := checkHeaderKeys(n.Content[0]); err != nil {
			return nil, fmt.Errorf("document %d: %w", len(out)+1, err)
		}
		if err := n.Decode(&h); err != nil {
			return nil, fmt.Errorf("document %d: %w", len(out)+1, err)
		}
		if h.APIVersion == "" || h.Kind == "" || h.Metadata.Name == "" || strings.HasSuffix(h.Kind, "List") {
			continue
		}
		group, _ := splitAPIVersion(h.APIVersion)
		out = append(out, document{
			key:  objectKey{group, h.Kind, h.Metadata.Namespace, h.Metadata.Name},
			node: n.Content[0],
		})
	}
}

// readManager records doc as a manager if it is one.
func (d *discovery) readManager(file string, doc document) error {
	spec := field(doc.node, "spec")
	m := managerDoc{Manager: Manager{
		Target: Target{Kind: doc.key.kind, Name: doc.key.name, Namespace: doc.key.namespace},
		File:   file,
	}}
	switch {
	case doc.key.kind == "Kustomization" && doc.key.group == "kustomize.toolkit.fluxcd.io":
		var s fluxSpec
		if spec != nil {
			if err := decodeSpec(spec, &s); err != nil {
				return fmt.Errorf("spec: %w", err)
			}
		}
		m.roots = []root{{dir: repoDir(s.Path), override: s.TargetNamespace, generator: true}}
		m.gitSource = s.SourceRef.gitRepository(doc.key.namespace)
	case doc.key.kind == KindHelmRelease && doc.key.group == helmGroup:
		h, err := d.fluxHelmRelease(file, doc)
		if r, ok := fluxRemoteChart(doc); ok {
			m.remote = append(m.remote, r)
		}
		var ref struct {
			Chart struct {
				Spec struct {
					SourceRef fluxSourceRef `yaml:"sourceRef"`
				} `yaml:"spec"`
			} `yaml:"chart"`
		}
		if spec != nil && decodeSpec(spec, &ref) == nil {
			m.gitSource = ref.Chart.Spec.SourceRef.gitRepository(doc.key.namespace)
		}
		if err != nil {
			d.problem("%s: HelmRelease %s/%s: %v", file, doc.key.namespace, doc.key.name, err)
		} else {
			m.helm = append(m.helm, h)
			m.roots = []root{{dir: h.chartDir}}
		}
	case doc.key.kind == "Application" && doc.key.group == "argoproj.io":
		var s argoAppSpec
		if spec != nil {
			if err := decodeSpec(spec, &s); err != nil {
				return fmt.Errorf("spec: %w", err)
			}
		}
		m.remote = append(m.remote, s.remoteCharts()...)
		for _, src := range s.sources() {
			if strings.Contains(src.Path, "{{") {
				return fmt.Errorf("path %q is templated, which only an ApplicationSet resolves", src.Path)
			}
			if d.foreign(src.RepoURL) {
				d.problem("%s: Application %s/%s: source %s reads %s, another repository: its objects are not read from this one", file, doc.key.namespace, doc.key.name, src.Path, src.RepoURL)
				continue
			}
			m.roots = append(m.roots, root{dir: repoDir(src.Path), fill: s.Destination.Namespace, recurse: src.Directory.Recurse, kustomize: src.Kustomize.Namespace})
			if _, chart := d.files[path.Join(repoDir(src.Path), "Chart.yaml")]; chart {
				h, err := d.argoHelmSource(doc.key.name, src, s.Destination.Namespace)
				if err != nil {
					d.problem("%s: Application %s/%s: Helm source %s: %v; its objects are not rendered", file, doc.key.namespace, doc.key.name, src.Path, err)
					continue
				}
				m.helm = append(m.helm, h)
			}
		}
	case doc.key.kind == "ApplicationSet" && doc.key.group == "argoproj.io":
		var s argoSetSpec
		if spec != nil {
			if err := decodeSpec(spec, &s); err != nil {
				return fmt.Errorf("spec: %w", err)
			}
		}
		m.roots = d.setRoots(s)
		for _, src := range s.Template.Spec.sources() {
			if d.foreign(src.RepoURL) {
				d.problem("%s: ApplicationSet %s/%s: source %s reads %s, another repository: its objects are not read from this one", file, doc.key.namespace, doc.key.name, src.Path, src.RepoURL)
			}
		}
		if ns := literal(s.Template.Spec.Destination.Namespace); ns != "" {
			m.remote = append(m.remote, s.Template.Spec.remoteCharts()...)
		}
		// A generated Application whose path holds a chart renders it, released under the
		// Application's name (the template's, with the generator's parameters filled in).
		for _, r := range m.roots {
			if _, chart := d.files[path.Join(r.dir, "Chart.yaml")]; !chart {
				continue
			}
			app := literal(substitutePath(s.Template.Metadata.Name, r.dir))
			if app == "" {
				d.problem("%s: ApplicationSet %s/%s: the generated Application's name %q is templated beyond the git generator's parameters; the chart %s is not rendered",
					file, doc.key.namespace, doc.key.name, s.Template.Metadata.Name, r.dir)
				continue
			}
			for _, src := range s.Template.Spec.sources() {
				if repoDir(substitutePath(src.Path, r.dir)) != r.dir && !strings.Contains(substitutePath(src.Path, r.dir), "{{") {
					continue
				}
				h, err := d.argoHelmSource(app, argoSource{Path: r.dir, Helm: src.Helm}, r.fill)
				if err != nil {
					d.problem("%s: ApplicationSet %s/%s: Helm source %s: %v; its objects are not rendered", file, doc.key.namespace, doc.key.name, r.dir, err)
					continue
				}
				m.helm = append(m.helm, h)
				break
			}
		}
	default:
		return nil
	}
	d.managers = append(d.managers, m)
	return nil
}

// remoteCharts returns the releases of the Application's chart sources (a chart from a chart
// repository or an OCI registry), installed into the destination namespace.
func (s argoAppSpec) remoteCharts() []remoteRelease {
	var all []argoSource
	if s.Source != nil {
		all = append(all, *s.Source)
	}
	all = append(all, s.Sources...)
	var out []remoteRelease
	for _, src := range all {
		if src.Chart == "" || strings.Contains(src.Chart, "{{") {
			continue
		}
		out = append(out, remoteRelease{namespace: s.Destination.Namespace, chart: src.Chart + " from " + src.RepoURL})
	}
	return out
}

// fluxRemoteChart reads a HelmRelease whose chart comes from a HelmRepository or an OCI registry
// (spec.chart with such a sourceRef, or spec.chartRef).
func fluxRemoteChart(doc document) (remoteRelease, bool) {
	var s fluxHelmSpec
	if spec := field(doc.node, "spec"); spec == nil || decodeSpec(spec, &s) != nil {
		return remoteRelease{}, false
	}
	ns := doc.key.namespace
	if s.TargetNamespace != "" {
		ns = s.TargetNamespace
	}
	switch {
	case s.ChartRef != nil:
		return remoteRelease{namespace: ns, chart: "the chart of " + s.ChartRef.Kind + " (spec.chartRef)"}, true
	case s.Chart.Spec.SourceRef.Kind != "" && s.Chart.Spec.SourceRef.Kind != "GitRepository":
		return remoteRelease{namespace: ns, chart: s.Chart.Spec.Chart + " from " + s.Chart.Spec.SourceRef.Kind}, true
	}
	return remoteRelease{}, false
}

// RemoteReleases finds, for an object no manifest or chart in the repository defines, the
// releases that may install it: the HelmReleases and Applications that install a chart from a
// chart repository or an OCI registry into the object's namespace. Parley does not fetch such
// charts, so which release renders the object is not known; a gate on each of them targets the
// object by kind, namespace and name, so it pauses the one that installs it and matches nothing in
// the others. The Placement has no Manifest; RemoteCharts names the charts. It is false for a
// cluster-scoped object, and when no such release installs into the namespace.
func (inv *Inventory) RemoteReleases(obj core.Field) (Placement, bool) {
	if inv == nil || obj.Scheme != core.SchemeKubernetes || obj.Namespace == "" || clusterScoped(obj.Group, obj.Kind) {
		return Placement{}, false
	}
	var out Placement
	seen := map[int]bool{}
	for _, r := range inv.remote {
		if r.namespace != obj.Namespace {
			continue
		}
		out.RemoteCharts = append(out.RemoteCharts, r.chart)
		if !seen[r.manager] {
			seen[r.manager] = true
			out.Managers = append(out.Managers, inv.managers[r.manager].clone())
		}
	}
	return out, len(out.Managers) > 0
}

// sources returns the sources that apply manifests from Git: not Helm charts, not ref-only ones.
func (s argoAppSpec) sources() []argoSource {
	var all []argoSource
	if s.Source != nil {
		all = append(all, *s.Source)
	}
	all = append(all, s.Sources...)
	var out []argoSource
	for _, src := range all {
		if src.Chart != "" || (src.Path == "" && src.Ref != "") {
			continue
		}
		out = append(out, src)
	}
	return out
}

// setRoots resolves an ApplicationSet template's sources against its git directory generators.
func (d *discovery) setRoots(s argoSetSpec) []root {
	var include, exclude []string
	var walk func([]argoGenerator)
	walk = func(gs []argoGenerator) {
		for _, g := range gs {
			if g.Git != nil {
				for _, dir := range g.Git.Directories {
					if dir.Exclude {
						exclude = append(exclude, dir.Path)
					} else {
						include = append(include, dir.Path)
					}
				}
			}
			if g.Matrix != nil {
				walk(g.Matrix.Generators)
			}
			if g.Merge != nil {
				walk(g.Merge.Generators)
			}
		}
	}
	walk(s.Generators)
	var matched []string
	for dir := range d.dirs {
		if dir != "." && globAny(include, dir) && !globAny(exclude, dir) {
			matched = append(matched, dir)
		}
	}
	sort.Strings(matched)
	spec := s.Template.Spec
	var out []root
	for _, src := range spec.sources() {
		if d.foreign(src.RepoURL) {
			continue // another repository's paths (readManager reports the source)
		}
		if !strings.Contains(src.Path, "{{") {
			out = append(out, root{dir: repoDir(src.Path), fill: literal(spec.Destination.Namespace), recurse: src.Directory.Recurse, kustomize: literal(src.Kustomize.Namespace)})
			continue
		}
		for _, dir := range matched {
			p := substitutePath(src.Path, dir)
			if strings.Contains(p, "{{") {
				p = dir
			}
			out = append(out, root{dir: repoDir(p), fill: literal(substitutePath(spec.Destination.Namespace, dir)), recurse: src.Directory.Recurse, kustomize: literal(substitutePath(src.Kustomize.Namespace, dir))})
		}
	}
	return out
}

// literal returns s unless it is still templated, which says nothing Discover can use.
func literal(s string) string {
	if strings.Contains(s, "{{") {
		return ""
	}
	return s
}

func globAny(patterns []string, dir string) bool {
	for _, p := range patterns {
		if ok, _ := path.Match(repoDir(p), dir); ok {
			return true
		}
	}
	return false
}

// substitutePath fills in the git directory generator's parameters, in both the legacy
// ({{path}}) and the Go template ({{.path.path}}) syntax.
func substitutePath(s, dir string) string {
	if !strings.Contains(s, "{{") {
		return s
	}
	vals := map[string]string{
		"path": dir, ".path.path": dir, ".path": dir,
		"path.basename": path.Base(dir), ".path.basename": path.Base(dir),
	}
	var b strings.Builder
	for {
		i := strings.Index(s, "{{")
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		j := strings.Index(s[i:], "}}")
		if j < 0 {
			b.WriteString(s)
			return b.String()
		}
		expr := strings.TrimSpace(strings.Trim(s[i+2:i+j], "-"))
		b.WriteString(s[:i])
		if v, ok := vals[expr]; ok {
			b.WriteString(v)
		} else {
			b.WriteString(s[i : i+j+2]) // unknown parameter: stays templated
		}
		s = s[i+j+2:]
	}
}

// repoDir turns a path as a manager spells it ("./apps/prod", "/apps", "") into a clean
// repository-relative one ("apps/prod", "apps", ".").
func repoDir(p string) string {
	c := path.Clean("/" + p)
	if c == "/" {
		return "."
	}
	return c[1:]
}

// apply walks each manager's roots and records which files it applies, and how.
func (d *discovery) apply() {
	for i, m := range d.managers {
		seen := map[string]bool{}
		for _, r := range m.roots {
			if !seen[r.dir] {
				seen[r.dir] = true
				d.managers[i].Paths = append(d.managers[i].Paths, r.dir)
			}
			w := walker{d: d, manager: i, fill: r.fill, visited: map[string]bool{}}
			override := r.override
			if r.kustomize != "" && w.kustomizationIn(r.dir) != "" {
				override = r.kustomize // Argo CD passes it to kustomize, which overrides every namespace
			}
			w.dir(r.dir, override, r)
		}
		sort.Strings(d.managers[i].Paths)
	}
}

type walker struct {
	d       *discovery
	manager int
	fill    string
	visited map[string]bool // directory and override already walked: kustomizations may form cycles
	// noAdd: a kustomization build placed the objects; the walk only marks its patch files.
	noAdd bool
	// depth counts the kustomizations being followed: only the outermost is built, as its
	// controller builds it; what it includes is part of that build.
	depth int
}

func (w *walker) add(file, override string) {
	if w.noAdd {
		return
	}
	if _, ok := w.d.docs[file]; !ok {
		return // not a manifest of objects
	}
	a := applying{manager: w.manager, override: override, fill: w.fill}
	for _, x := range w.d.applications[file] {
		if x == a {
			return
		}
	}
	w.d.applications[file] = append(w.d.applications[file], a)
}

// kustomizationIn returns the kustomization file of a directory, if it has one.
func (w *walker) kustomizationIn(dir string) string {
	for _, k := range kustomizationNames {
		if _, ok := w.d.kustomize[path.Join(dir, k)]; ok {
			return path.Join(dir, k)
		}
	}
	return ""
}

// dir applies a manager's root directory.
func (w *walker) dir(dir, override string, r root) {
	key := dir + "\x00" + override
	if w.visited[key] {
		return
	}
	w.visited[key] = true
	if k := w.kustomizationIn(dir); k != "" {
		if w.depth == 0 && !w.d.kustomize[k].broken && w.d.buildKustomization(dir, k, override, w.fill, w.manager) {
			w.noAdd = true
			w.kustomization(k, override)
			w.noAdd = false
			return
		}
		w.kustomization(k, override)
		return
	}
	if !r.generator {
		if _, helm := w.d.files[path.Join(dir, "Chart.yaml")]; helm {
			return // Argo CD renders it with Helm: no manifest in Git defines its objects
		}
	}
	for _, f := range w.d.dirFiles[dir] {
		if !IsKustomizationFile(f) {
			w.add(f, override)
		}
	}
	switch {
	case r.generator:
		// kustomize-controller's generator: every subdirectory, built as a kustomization if it has one.
		for _, sub := range w.d.subdirs[dir] {
			w.dir(sub, override, r)
		}
	case r.recurse:
		// Argo CD's recursive directory: every YAML file below, kustomization files or not.
		for _, sub := range w.d.subdirs[dir] {
			w.plain(sub, override)
		}
	}
}

// plain applies every YAML file under dir, as Argo CD's recursive directory source does.
func (w *walker) plain(dir, override string) {
	for _, f := range w.d.dirFiles[dir] {
		if !IsKustomizationFile(f) {
			w.add(f, override)
		}
	}
	for _, sub := range w.d.subdirs[dir] {
		w.plain(sub, override)
	}
}

// kustomization follows a kustomization file's resources.
func (w *walker) kustomization(file, override string) {
	w.depth++
	defer func() { w.depth-- }()
	k := w.d.kustomize[file]
	if k.broken {
		return
	}
	if override == "" {
		override = k.Namespace // an outer kustomization's namespace, or the manager's, wins
	}
	dir := path.Dir(file)
	for _, p := range k.PatchesStrategicMerge {
		w.d.patchFiles[path.Join(dir, p)] = true
	}
	for _, p := range k.Patches {
		if p.Path != "" {
			w.d.patchFiles[path.Join(dir, p.Path)] = true
		}
	}
	for _, p := range k.PatchesJSON6902 {
		if p.Path != "" {
			w.d.patchFiles[path.Join(dir, p.Path)] = true
		}
	}
	for _, list := range [][]string{k.Resources, k.Bases, k.Components} {
		for _, entry := range list {
			if isRemote(entry) {
				continue // remote: not in this repository
			}
			p := path.Join(dir, entry)
			if p == ".." || strings.HasPrefix(p, "../") {
				continue
			}
			if _, ok := w.d.files[p]; ok {
				w.add(p, override)
				continue
			}
			if !w.d.dirs[p] {
				continue
			}
			if w.kustomizationIn(p) == "" {
				w.d.problem("%s: resource %s is a directory without a kustomization file, which kustomize refuses; ignored", file, entry)
				continue
			}
			w.dir(p, override, root{})
		}
	}
}

// build indexes every object under the identity it gets once applied.
func (d *discovery) build() *Inventory {
	inv := &Inventory{objects: map[objectKey]*placed{}, files: d.files, helm: d.helm}
	for i, m := range d.managers {
		inv.managers = append(inv.managers, m.Manager)
		for _, r := range m.remote {
			r.manager = i
			inv.remote = append(inv.remote, r)
		}
	}
	for _, name := range d.names {
		if d.patchFiles[name] {
			continue
		}
		for i, doc := range d.docs[name] {
			apps := d.applications[name]
			if len(apps) == 0 {
				if d.builtFiles[name] {
					continue // a build placed its objects under the identity they get
				}
				d.place(inv, doc.key, name, i, -1)
				continue
			}
			for _, a := range apps {
				d.place(inv, applied(doc.key, a), name, i, a.manager)
			}
		}
	}
	d.placeBuilt(inv)
	for i, m := range d.managers {
		for _, h := range m.helm {
			docs, err := d.render(h)
			if err != nil {
				d.problem("%s: %s %s/%s: %v; its objects are not in the inventory", m.File, m.Target.Kind, m.Target.Namespace, m.Target.Name, err)
				continue
			}
			perTemplate := map[string]int{}
			for _, r := range docs {
				d.placeRendered(inv, r, perTemplate[r.template], i, h)
				perTemplate[r.template]++
			}
		}
	}
	for _, p := range inv.objects {
		sort.Ints(p.managers) // managers are sorted by File, then Target
	}
	return inv
}

// placeRendered indexes an object a chart rendered for a manager's release.
func (d *discovery) placeRendered(inv *Inventory, r renderedDoc, doc, manager int, h *helmSource) {
	p := inv.objects[r.doc.key]
	if p == nil {
		inv.objects[r.doc.key] = &placed{file: r.template, doc: doc, managers: []int{manager}, chart: h.chartDir, node: r.doc.node, release: h}
		return
	}
	if p.file != r.template || p.doc != doc {
		d.problem("%s and %s both define %s; %s counts", p.file, r.template, r.doc.key, p.file)
		return
	}
	for _, m := range p.managers {
		if m == manager {
			return
		}
	}
	p.managers = append(p.managers, manager)
}

// applied is the identity an object gets when a manager applies it.
func applied(k objectKey, a applying) objectKey {
	switch {
	case clusterScoped(k.group, k.kind):
	case a.override != "":
		k.namespace = a.override
	case k.namespace == "":
		k.namespace = a.fill
	}
	return k
}

func (d *discovery) place(inv *Inventory, key objectKey, file string, doc, manager int) {
	p := inv.objects[key]
	if p == nil {
		p = &placed{file: file, doc: doc}
		inv.objects[key] = p
	}
	if p.file != file {
		// Files are visited in path order, so p.file is the first. Several managers applying
		// both files report the same clash: Discover keeps one.
		d.problem("%s and %s both define %s; %s counts", p.file, file, key, p.file)
		return
	}
	if p.doc != doc {
		// Two documents written in different namespaces that an override puts in the same one.
		d.problem("%s: documents %d and %d both become %s once applied; the first counts", file, p.doc+1, doc+1, key)
		return
	}
	if manager < 0 {
		return
	}
	for _, m := range p.managers {
		if m == manager {
			return
		}
	}
	p.managers = append(p.managers, manager)
}

// field returns the value of a mapping's key, or nil.
func field(m *yamlv3.Node, key string) *yamlv3.Node {
	if m == nil || m.Kind != yamlv3.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}
