package depgraph

import (
	"path"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/parleyhq/parley/core"
)

// Graph is what depends on what in one repository revision. Immutable, safe for concurrent use.
type Graph struct {
	// from holds, for each object or resource (a Field with an empty Path), the edges whose source
	// is a field of it.
	from map[core.Field][]edge
}

// Dependent is a field or object that depends on the field asked about, and why.
type Dependent struct {
	Field core.Field
	// Via explains the last step that reached Field, naming the field it was reached from, e.g.
	// "aws_db_instance.main.max_connections is read by kubernetes_config_map.api (data.DB_POOL_MAX)".
	Via string
}

type edgeKind uint8

const (
	plain edgeKind = iota
	enter          // into a module through a call site: the argument becomes the child's variable
	exit           // out of a module to a reader in the calling module, through a call site
)

// edge says that to reads from.
type edge struct {
	from, to core.Field
	via      string
	kind     edgeKind
	site     string // the call site of an enter or exit edge: "DIR//module.NAME"
}

// maxStack bounds the call sites a traversal remembers; deeper (only a module calling itself gets
// there) it forgets them all and continues conservatively, reaching every caller. maxStates bounds
// the (field, call sites) pairs one Dependents call visits with their call sites: past it (modules
// calling each other many times over, many levels deep) new steps forget theirs too, so the walk
// stays linear in the fields.
const (
	maxStack  = 32
	maxStates = 1 << 16
)

// Build reads a repository's Terraform and Kubernetes files (repository-relative slash paths to
// contents) into a Graph. Files of other kinds are skipped. Problems, such as a file that does not
// parse, are returned, sorted by file, and the rest of the repository is still read.
func Build(files map[string][]byte) (*Graph, []error) {
	b := &builder{}
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	// Parsing is most of the work and each file parses alone: parse in parallel, into one builder
	// per file, and merge in path order so that errors and edges come out the same every time.
	parsed := make([]*builder, len(paths))
	tfs := make([]tfFile, len(paths))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(paths)) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < len(paths); i = int(next.Add(1) - 1) {
				p, fb := paths[i], &builder{}
				switch path.Ext(cleanPath(p)) {
				case ".tf":
					tfs[i], _ = fb.parseTF(p, files[p])
				case ".yaml", ".yml", ".json":
					fb.readManifests(p, files[p])
				}
				parsed[i] = fb
			}
		})
	}
	wg.Wait()
	tf := map[string][]tfFile{} // module dir -> files
	for i, p := range paths {
		b.errs = append(b.errs, parsed[i].errs...)
		b.objects = append(b.objects, parsed[i].objects...)
		if tfs[i].body != nil {
			dir := path.Dir(cleanPath(p))
			tf[dir] = append(tf[dir], tfs[i])
		}
	}
	b.terraform(tf)
	b.kubernetes()

	g := &Graph{from: make(map[core.Field][]edge)}
	seen := make(map[edge]bool, len(b.edges))
	for _, e := range b.edges {
		if seen[e] {
			continue // the same reference twice (var.x + var.x)
		}
		seen[e] = true
		k := e.from.Object()
		g.from[k] = append(g.from[k], e)
	}
	return g, b.errs
}

func cleanPath(p string) string {
	p = path.Clean("/" + strings.ReplaceAll(p, "\\", "/"))
	return strings.TrimPrefix(p, "/")
}

type builder struct {
	edges   []edge
	errs    []error
	objects []k8sObject
}

func (b *builder) add(from, to core.Field, via string) {
	b.edges = append(b.edges, edge{from: from, to: to, via: via})
}

// overlaps reports whether one pointer is the other or inside it.
func overlaps(a, b string) bool {
	if len(a) > len(b) {
		a, b = b, a
	}
	return a == "" || a == b || strings.HasPrefix(b, a) && b[len(a)] == '/'
}

// namespacedKinds are the kinds Build reads, all namespaced: a query without a namespace means
// "default", as kubectl applies it.
var namespacedKinds = map[string]bool{
	"ConfigMap": true, "Secret": true, "Deployment": true, "StatefulSet": true, "DaemonSet": true,
	"ReplicaSet": true, "Job": true, "CronJob": true, "Pod": true, "HorizontalPodAutoscaler": true,
}

func normalize(f core.Field) core.Field {
	switch f.Scheme {
	case core.SchemeKubernetes:
		if f.Group == core.CoreGroup {
			f.Group = ""
		}
		if f.Namespace == "" && namespacedKinds[f.Kind] {
			f.Namespace = "default"
		}
	case core.SchemeTerraform:
		f = core.TFField(f.Module, f.Resource, f.Path)
	}
	return f
}

// Dependents returns the fields and objects that depend on f (directly and transitively, without
// repeats, sorted by String()), each with why. f itself is never among them, even on a cycle.
func (g *Graph) Dependents(f core.Field) []Dependent {
	if g == nil {
		return nil
	}
	f = normalize(f)
	if f.Scheme == core.SchemeTerraform && strings.HasPrefix(f.Resource, "var.") &&
		(f.Path == "/description" || strings.HasPrefix(f.Path, "/description/")) {
		return nil // documentation: no reader sees it
	}
	type state struct {
		f     core.Field
		stack string // call sites entered, each preceded by \x00
	}
	seen := map[state]bool{{f: f}: true}
	found := map[core.Field]string{}
	queue := []state{{f: f}}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		for _, e := range g.from[s.f.Object()] {
			if !overlaps(e.from.Path, s.f.Path) {
				continue
			}
			next := state{f: e.to, stack: s.stack}
			if len(seen) > maxStates {
				next.stack = ""
			}
			switch e.kind {
			case enter:
				if strings.Count(s.stack, "\x00") >= maxStack {
					next.stack = ""
				} else {
					next.stack += "\x00" + e.site
				}
			case exit:
				if next.stack != "" {
					i := strings.LastIndexByte(next.stack, 0)
					if next.stack[i+1:] != e.site {
						continue // flowed in from another call site
					}
					next.stack = next.stack[:i]
				}
			}
			if seen[next] {
				continue
			}
			seen[next] = true
			queue = append(queue, next)
			if _, ok := found[e.to]; !ok && e.to != f {
				found[e.to] = e.via
			}
		}
	}
	type keyed struct {
		key string
		d   Dependent
	}
	sorted := make([]keyed, 0, len(found))
	for d, via := range found {
		sorted = append(sorted, keyed{d.String(), Dependent{Field: d, Via: via}})
	}
	slices.SortFunc(sorted, func(a, b keyed) int { return strings.Compare(a.key, b.key) })
	out := make([]Dependent, len(sorted))
	for i, k := range sorted {
		out[i] = k.d
	}
	return out
}

// MayHaveDependents reports whether a field can have dependents in any repository: false means
// Dependents returns none for it whatever Build read, so a caller judging one field (a pull
// request bumping an image tag) need not read and parse the whole tree to learn that. Terraform
// fields, ConfigMaps and Secrets, and whole objects may; of other Kubernetes objects only the
// fields an HorizontalPodAutoscaler reads, spec.replicas and the pod template's containers'
// resources.requests (and the paths that hold them), may. It must follow every edge Build adds
// from a Kubernetes field (TestMayHaveDependentsCoversEveryEdge).
func MayHaveDependents(f core.Field) bool {
	f = normalize(f)
	if f.Scheme != core.SchemeKubernetes || f.Path == "" || f.Kind == "ConfigMap" || f.Kind == "Secret" {
		return true
	}
	path := strings.Split(f.Path[1:], "/")
	if segmentsOverlap(path, []string{"spec", "replicas"}) {
		return true
	}
	specPath, ok := podSpecPaths[f.Kind]
	for _, sp := range [][]string{specPath, nil} { // the root too for kinds not known to hold a pod
		if sp == nil && ok {
			continue
		}
		if segmentsOverlap(path, slices.Concat(sp, []string{"containers", "*", "resources", "requests"})) {
			return true
		}
	}
	return false
}

// segmentsOverlap is overlaps for pointer segments, where "*" in pattern matches any one segment.
func segmentsOverlap(path, pattern []string) bool {
	for i := range min(len(path), len(pattern)) {
		if pattern[i] != "*" && pattern[i] != path[i] {
			return false
		}
	}
	return true
}
