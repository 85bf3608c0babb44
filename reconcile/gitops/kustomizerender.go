package gitops

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/parleyhq/parley/reconcile/internal/yamlvalue"
	yamlv3 "go.yaml.in/yaml/v3"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// A directory a manager applies through a kustomization is built with the Kustomize API
// (sigs.k8s.io/kustomize/api v0.21.2, krusty), as kustomize-controller and Argo CD build it, so
// that each object is known under the identity it gets in the cluster: namePrefix and nameSuffix,
// namespace, patches, components, replacements and generators (a ConfigMap's hashed name) all
// applied. The build asks kustomize for origin annotations, which name the file each object
// comes from (or the kustomization whose generator made it). Nothing is fetched: a kustomization
// with a remote resource does not build, and Discover falls back to reading its files as
// written (and reports why).

// originAnnotation is where kustomize records an object's source with buildMetadata: [originAnnotations].
const originAnnotation = "config.kubernetes.io/origin"

// KustomizeJob is one kustomization to build: what a child process is given on standard input.
type KustomizeJob struct {
	Dir   string            `json:"dir"`   // the directory to build, repository-relative: what messages name
	Files map[string][]byte `json:"files"` // the repository's files, by repository path
}

// KustomizeBuilder builds a kustomization: kustomize's output, as YAML.
type KustomizeBuilder interface {
	BuildKustomization(ctx context.Context, job KustomizeJob) ([]byte, error)
}

// BuildKustomization implements KustomizeBuilder in the calling process: fast, and right for
// overlays the caller trusts, but an overlay tree that fans out is neither stopped nor bounded
// (krusty takes no context).
func (InProcess) BuildKustomization(_ context.Context, job KustomizeJob) ([]byte, error) {
	return buildJob(job)
}

// buildJob is krusty's build of a job, as kustomize-controller builds it: in memory, nothing
// fetched, loads anywhere in the repository.
func buildJob(job KustomizeJob) ([]byte, error) {
	fs := filesys.MakeFsInMemory()
	for _, name := range slices.Sorted(maps.Keys(job.Files)) {
		if err := fs.WriteFile("/"+name, job.Files[name]); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	opts := krusty.MakeDefaultOptions()
	opts.LoadRestrictions = types.LoadRestrictionsNone // as kustomize-controller builds
	m, err := krusty.MakeKustomizer(opts).Run(fs, path.Join("/", job.Dir))
	if err != nil {
		return nil, err
	}
	return m.AsYaml()
}

// builtDoc is one object a kustomization builds.
type builtDoc struct {
	key     objectKey
	file    string // the file it comes from, or the kustomization whose generator made it
	doc     int    // its index among that file's documents; -1 for a generated object
	manager int
	root    string // the directory built
	node    *yamlv3.Node
}

// buildKustomization builds dir for a manager, with the discovery's KustomizeBuilder, and records
// its objects; false when it does not build (the caller reads the files as written instead).
func (d *discovery) buildKustomization(dir, kfile, override, fill string, manager int) bool {
	if remote := d.remoteResource(kfile, map[string]bool{}); remote != "" {
		d.problem("%s: uses the remote resource %s, which Parley does not fetch; its files are read as written", kfile, remote)
		return false
	}
	// Origin annotations, asked for in the top kustomization only (the copy the job holds).
	k, err := unmarshalStringMap(d.files[kfile])
	if err != nil || k == nil {
		return false // the walker reports the unreadable kustomization
	}
	meta, _ := k["buildMetadata"].([]any)
	k["buildMetadata"] = append(meta, types.OriginAnnotations)
	kb, err := yamlv3.Marshal(k)
	if err != nil {
		return false
	}
	job := KustomizeJob{Dir: dir, Files: maps.Clone(d.files)}
	job.Files[kfile] = kb
	build, ctx := d.kustomizer, d.ctx
	if build == nil {
		build = InProcess{}
	}
	if ctx == nil {
		ctx = context.Background()
	}
	out, err := build.BuildKustomization(ctx, job)
	switch {
	case errors.Is(err, ErrNotBuilt): // the worker's budget or the caller stopped it: not kustomize's verdict
		d.problem("%v; its files are read as written", err)
		return false
	case err != nil:
		d.problem("%s: does not build with kustomize (%v); its files are read as written", kfile, err)
		return false
	}
	docs, err := readDocuments(out)
	if err != nil {
		d.problem("%s: the build does not parse: %v", kfile, err)
		return false
	}
	for _, doc := range docs {
		origin := takeOrigin(doc.node)
		file, generated := originFile(dir, origin)
		key := doc.key
		switch {
		case clusterScoped(key.group, key.kind):
		case override != "":
			key.namespace = override
		case key.namespace == "":
			key.namespace = fill
		}
		b := builtDoc{key: key, file: file, doc: -1, manager: manager, root: dir, node: doc.node}
		d.builtFiles[file] = true
		if !generated {
			b.doc = d.sourceDoc(file, doc.key)
		}
		d.built = append(d.built, b)
	}
	return true
}

// remoteResource returns a remote resource of the kustomization or of any local one it uses, or "":
// kustomize would fetch it (with git, over the network), which Parley never does.
func (d *discovery) remoteResource(kfile string, seen map[string]bool) string {
	if seen[kfile] {
		return ""
	}
	seen[kfile] = true
	k := d.kustomize[kfile]
	if k == nil {
		return ""
	}
	// kustomize also loads patches, generator files and the like over HTTP: a URL or SSH remote in
	// any entry that names something to load keeps it from being built. Comments (a schema URL for
	// the editor) and values (an annotation holding a link) load nothing.
	if r := remoteLoad(d.files[kfile]); r != "" {
		return r
	}
	dir := path.Dir(kfile)
	for _, list := range [][]string{k.Resources, k.Bases, k.Components} {
		for _, entry := range list {
			if isRemote(entry) {
				return entry
			}
			p := path.Join(dir, entry)
			for _, name := range kustomizationNames {
				if r := d.remoteResource(path.Join(p, name), seen); r != "" {
					return r
				}
			}
		}
	}
	return ""
}

var remoteRef = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^\s"']*|git@[^\s"']+`)

// loadKeys are the kustomization keys whose strings name something kustomize loads.
var loadKeys = map[string]bool{"resources": true, "bases": true, "components": true, "patches": true, "path": true,
	"patchesStrategicMerge": true, "patchesJson6902": true, "files": true, "envs": true, "env": true, "generators": true,
	"transformers": true, "validators": true, "crds": true, "openapi": true, "replacements": true, "configurations": true}

// remoteLoad returns a remote reference among the strings a kustomization loads, or "".
func remoteLoad(content []byte) string {
	root, err := yamlvalue.Unmarshal(content)
	if err != nil {
		return ""
	}
	var walk func(v any, loading bool) string
	walk = func(v any, loading bool) string {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if r := walk(e, loading || loadKeys[k]); r != "" {
					return r
				}
			}
		case []any:
			for _, e := range x {
				if r := walk(e, loading); r != "" {
					return r
				}
			}
		case string:
			if _, after, ok := strings.Cut(x, "="); ok && !strings.Contains(x, "://") {
				x = after // a generator's key=path
			}
			if loading && !strings.Contains(x, "\n") {
				if m := remoteRef.FindString(x); m != "" {
					return m
				}
			}
		}
		return ""
	}
	return walk(root, false)
}

// isRemote reports whether a kustomization entry names something outside the repository.
func isRemote(entry string) bool {
	return strings.Contains(entry, "://") || strings.HasPrefix(entry, "git@") || strings.HasPrefix(entry, "github.com/") ||
		strings.HasPrefix(entry, "gitlab.com/") || strings.HasPrefix(entry, "bitbucket.org/")
}

// takeOrigin removes the origin annotation from a built object and returns it.
func takeOrigin(obj *yamlv3.Node) string {
	ann := field(field(obj, "metadata"), "annotations")
	if ann == nil || ann.Kind != yamlv3.MappingNode {
		return ""
	}
	for i := 0; i+1 < len(ann.Content); i += 2 {
		if ann.Content[i].Value == originAnnotation {
			v := ann.Content[i+1].Value
			ann.Content = append(ann.Content[:i], ann.Content[i+2:]...)
			if len(ann.Content) == 0 {
				meta := field(obj, "metadata")
				for j := 0; j+1 < len(meta.Content); j += 2 {
					if meta.Content[j].Value == "annotations" {
						meta.Content = append(meta.Content[:j], meta.Content[j+2:]...)
						break
					}
				}
			}
			return v
		}
	}
	return ""
}

// originFile turns an origin annotation (relative to the built directory) into a repository path;
// generated is true for an object a generator made (the path is then its kustomization's).
func originFile(dir, origin string) (file string, generated bool) {
	var o struct {
		Path         string `yaml:"path"`
		ConfiguredIn string `yaml:"configuredIn"`
	}
	_ = unmarshalChecked([]byte(origin), &o)
	p := o.Path
	if p == "" {
		p, generated = o.ConfiguredIn, true
	}
	if p == "" {
		return path.Join(dir, "kustomization.yaml"), true
	}
	return repoDir(path.Join(dir, p)), generated
}

// sourceDoc finds the document of file that an object built as key came from: same group and
// kind, the longest name the built name contains (a prefix or suffix may have been added).
func (d *discovery) sourceDoc(file string, key objectKey) int {
	best, bestLen := -1, -1
	for i, doc := range d.docs[file] {
		if doc.key.group == key.group && doc.key.kind == key.kind && strings.Contains(key.name, doc.key.name) && len(doc.key.name) > bestLen {
			best, bestLen = i, len(doc.key.name)
		}
	}
	return best
}

// placeBuilt indexes the objects kustomizations built, after the files read as written.
func (d *discovery) placeBuilt(inv *Inventory) {
	sort.SliceStable(d.built, func(i, j int) bool { return d.built[i].file < d.built[j].file })
	generated := map[string]int{}
	for _, b := range d.built {
		doc := b.doc
		if doc < 0 { // a generated object: a distinct negative index per kustomization
			generated[b.file]++
			doc = -generated[b.file]
		}
		p := inv.objects[b.key]
		if p == nil {
			inv.objects[b.key] = &placed{file: b.file, doc: doc, managers: []int{b.manager}, node: b.node, built: b.root}
			continue
		}
		if p.file != b.file || p.doc != doc {
			d.problem("%s and %s both define %s; %s counts", p.file, b.file, b.key, p.file)
			continue
		}
		if !containsInt(p.managers, b.manager) {
			p.managers = append(p.managers, b.manager)
		}
	}
}

func containsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// inside reports whether file lies in dir or below it.
func inside(file, dir string) bool {
	return dir == "." || file == dir || strings.HasPrefix(file, dir+"/")
}

// GeneratorInputs lists the repository files a kustomization's generators read (configMapGenerator
// and secretGenerator files, envs and env), so that a snapshot can load them besides the manifests:
// without them the kustomization does not build. Remote and escaping paths are left out.
func GeneratorInputs(kfile string, content []byte) []string {
	var k struct {
		Generators []struct {
			Files []string `yaml:"files"`
			Envs  []string `yaml:"envs"`
			Env   string   `yaml:"env"`
		} `yaml:"configMapGenerator"`
		Secrets []struct {
			Files []string `yaml:"files"`
			Envs  []string `yaml:"envs"`
			Env   string   `yaml:"env"`
		} `yaml:"secretGenerator"`
	}
	if unmarshalChecked(content, &k) != nil {
		return nil
	}
	dir := path.Dir(kfile)
	var out []string
	add := func(p string) {
		if _, after, ok := strings.Cut(p, "="); ok {
			p = after // key=path
		}
		if p == "" || isRemote(p) || remoteRef.MatchString(p) {
			return
		}
		full := path.Join(dir, p)
		if full == ".." || strings.HasPrefix(full, "../") || strings.HasPrefix(p, "/") || strings.HasPrefix(full, "/") {
			return
		}
		out = append(out, full)
	}
	for _, g := range k.Generators {
		for _, f := range append(append([]string(nil), g.Files...), g.Envs...) {
			add(f)
		}
		add(g.Env)
	}
	for _, g := range k.Secrets {
		for _, f := range append(append([]string(nil), g.Files...), g.Envs...) {
			add(f)
		}
		add(g.Env)
	}
	sort.Strings(out)
	return out
}
