package gitops

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"
	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/reconcile/internal/yamlvalue"
)

// Adoption into a Kustomize overlay: when an object's manifest lies in a base the overlay includes
// (and other overlays may share), the value is written as a patch of the overlay, never into the
// base. The overlay's own patch that already sets the field is edited when there is one; otherwise
// a JSON6902 patch is appended to the overlay kustomization's patches. Whatever is written, the
// overlay is built again with krusty, as Discover builds it, and the result must give the object
// the value and change nothing else.
//
// A patch of the overlay's patches list targets the object as the overlay receives it from its
// resources and components: kustomize runs an overlay's patches before its namePrefix, nameSuffix
// and namespace, and its selector matches a resource's original name or its current one. The
// target is therefore the name and namespace the object has when the overlay's resources (and
// components and generators) are built without the overlay's own transformers.

// overlayMarker is the annotation that identifies a manifest's documents across builds (in the
// in-memory copy only).
const overlayMarker = "parley.internal/overlay-doc"

// AdoptOverlayPatch writes v for field f (f names the object as the overlay builds it: its built
// namespace and name) into the overlay directory overlay: into the overlay's own patch that already
// sets that path of that object when there is one (a JSON6902 op with that path, or a strategic-merge
// patch document setting it — edit the value in place, comments kept), else as a new inline JSON6902
// patch entry appended to the overlay kustomization's `patches:` list:
//
//	patches:
//	  - target: {group: apps, version: v1, kind: Deployment, name: web}   # the name the object has before the overlay renames it
//	    patch: |-
//	      - op: replace            # add when the base does not set the path
//	        path: /spec/replicas
//	        value: 7
//
// The kustomization file is edited as YAML nodes (kyaml's encoder, its sequence indentation kept),
// keeping comments and order. files is the whole
// repository (path -> content). The result is verified by building the overlay again with krusty
// (the same way kustomizerender.go builds): the built object must have v at f's path and be
// otherwise unchanged; if not, an error says why and nothing is returned. Returns the changed files
// only (path -> new content); an empty map when the overlay already builds v.
//
// Only patch files inside the overlay directory are edited; a patch file outside it (shared like a
// base) is left alone, and a new patch is written instead. An object a generator makes
// (configMapGenerator, secretGenerator) is refused: its hashed name changes with its content.
//
// Each build runs with build (nil builds in this process, as InProcess): the overlay is the
// repository's, so where the repository is not trusted give a RenderProcess, whose budgets stop an
// overlay that fans out; ctx ends the builds.
func AdoptOverlayPatch(ctx context.Context, build KustomizeBuilder, files map[string][]byte, overlay string, f core.Field, v core.Value) (map[string][]byte, error) {
	if f.Scheme != core.SchemeKubernetes || f.Path == "" {
		return nil, fmt.Errorf("%s is not a Kubernetes object field", f)
	}
	if v.Absent() || v.IsExpr() {
		return nil, fmt.Errorf("%s: only a literal value can be adopted, not %s", f, v)
	}
	var decoded any
	if err := json.Unmarshal([]byte(v.JSON()), &decoded); err != nil {
		return nil, fmt.Errorf("%s: %w", f, err)
	}
	repo := map[string][]byte{}
	for name, content := range files {
		clean := path.Clean(strings.TrimPrefix(name, "/"))
		if clean == "." || clean == ".." || strings.HasPrefix(clean, "../") {
			continue
		}
		repo[clean] = content
	}
	overlay = repoDir(overlay)
	d := &discovery{
		ctx: ctx, kustomizer: build,
		files: repo, dirFiles: map[string][]string{}, subdirs: map[string][]string{},
		kustomize: map[string]*kustomizeFile{}, applications: map[string][]applying{},
		patchFiles: map[string]bool{}, builtFiles: map[string]bool{},
	}
	d.index()
	d.parse()
	kfile := (&walker{d: d}).kustomizationIn(overlay)
	if kfile == "" {
		return nil, fmt.Errorf("%s has no kustomization file: it is not a Kustomize overlay", overlay)
	}
	if d.kustomize[kfile].broken {
		return nil, fmt.Errorf("%s is not a readable kustomization", kfile)
	}
	if remote := d.remoteResource(kfile, map[string]bool{}); remote != "" {
		return nil, fmt.Errorf("%s uses the remote resource %s, which Parley does not fetch: the overlay cannot be built to check a patch", kfile, remote)
	}

	// The object as the overlay builds it today.
	before, err := overlayBuild(d, repo, overlay, kfile)
	if err != nil {
		return nil, err
	}
	obj, err := builtObject(before, f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", overlay, err)
	}
	if have, ok := valueAt(obj.node, f); ok && have.Equal(v) {
		return map[string][]byte{}, nil
	}
	if obj.doc < 0 && IsKustomizationFile(obj.file) {
		return nil, fmt.Errorf("%s is made by a generator of %s: its name is a hash of its content, so a patch cannot set %s without renaming it",
			objectName(f), obj.file, f.Path)
	}

	// The object as the overlay's patches see it: its name and namespace before the overlay's own
	// transformers, and its name as written in its manifest.
	pre, err := preOverlayObject(d, repo, overlay, kfile, obj)
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", overlay, objectName(f), err)
	}

	e := &overlayEdit{
		repo: repo, overlay: overlay, kfile: kfile, f: f, v: v, value: decoded,
		built: obj.node, names: map[string]bool{pre.name: true, pre.written: true},
	}
	var reasons []string
	try := func(what string, changes map[string][]byte) (map[string][]byte, bool) {
		next := maps.Clone(repo)
		maps.Copy(next, changes)
		after, err := overlayBuild(d, next, overlay, kfile)
		if err == nil {
			err = verifyOverlay(before, after, obj, f, v)
		}
		if err != nil {
			reasons = append(reasons, what+": "+err.Error())
			return nil, false
		}
		return changes, true
	}
	existing, err := e.existingPatches()
	if err != nil {
		return nil, err
	}
	for _, c := range existing {
		if out, ok := try(c.what, c.changes); ok {
			return out, nil
		}
	}
	op := "add"
	if _, ok := valueAt(obj.node, f); ok {
		op = "replace"
	}
	targets := []string{pre.name}
	if q := regexp.QuoteMeta(pre.name); q != pre.name {
		targets = append(targets, q) // kustomize reads a target name as a regular expression
	}
	for _, name := range targets {
		content, err := e.appendPatch(pre, name, op)
		if err != nil {
			return nil, err
		}
		if out, ok := try("a new patch of "+kfile, map[string][]byte{kfile: content}); ok {
			return out, nil
		}
	}
	return nil, fmt.Errorf("%s: no patch of the overlay sets %s of %s to %s and nothing else: %s",
		overlay, f.Path, objectName(f), v, strings.Join(reasons, "; "))
}

// overlayBuild builds dir (whose kustomization is kfile) from files as Discover builds it, and
// returns its objects. base gives the parsed kustomizations and manifests of the repository.
func overlayBuild(base *discovery, files map[string][]byte, dir, kfile string) ([]builtDoc, error) {
	b := &discovery{ctx: base.ctx, kustomizer: base.kustomizer, files: files, kustomize: base.kustomize, docs: base.docs, builtFiles: map[string]bool{}}
	if !b.buildKustomization(dir, kfile, "", "", 0) {
		var msgs []string
		for _, p := range b.problems {
			msgs = append(msgs, strings.TrimSuffix(p.Error(), "; its files are read as written"))
		}
		if len(msgs) == 0 {
			msgs = append(msgs, kfile+": does not build with kustomize")
		}
		return nil, errors.New(strings.Join(msgs, "; "))
	}
	return b.built, nil
}

// builtObject is f's object among a build's objects. An object the build leaves without a
// namespace is found under the namespace its manager fills in.
func builtObject(docs []builtDoc, f core.Field) (*builtDoc, error) {
	want := objectKey{f.Group, f.Kind, f.Namespace, f.Name}
	var loose []*builtDoc
	for i := range docs {
		k := docs[i].key
		if k == want {
			return &docs[i], nil
		}
		if k.namespace == "" && k.group == want.group && k.kind == want.kind && k.name == want.name {
			loose = append(loose, &docs[i])
		}
	}
	if len(loose) == 1 {
		return loose[0], nil
	}
	return nil, fmt.Errorf("the overlay does not build %s", objectName(f))
}

// preObject is an object as an overlay's patches see it.
type preObject struct {
	apiVersion, kind string
	name, namespace  string // before the overlay's namePrefix, nameSuffix and namespace
	written          string // the name in its manifest
}

// transformKeys are the keys of a kustomization that transform what its resources, components and
// generators give: dropped to see the objects as the kustomization's patches receive them.
var transformKeys = map[string]bool{
	"namePrefix": true, "nameSuffix": true, "namespace": true, "commonLabels": true, "labels": true,
	"commonAnnotations": true, "patches": true, "patchesStrategicMerge": true, "patchesJson6902": true,
	"images": true, "imageTags": true, "replacements": true, "replicas": true, "transformers": true,
	"validators": true,
}

// preOverlayObject finds obj (built by the overlay) as the overlay receives it: the overlay is
// built once more without its own transformers, with each document of obj's manifest marked so
// that the object is recognised whatever its name became.
func preOverlayObject(d *discovery, repo map[string][]byte, overlay, kfile string, obj *builtDoc) (preObject, error) {
	marked, written, err := markDocuments(repo[obj.file])
	if err != nil {
		return preObject{}, fmt.Errorf("%s: %w", obj.file, err)
	}
	withMarks := maps.Clone(repo)
	withMarks[obj.file] = marked
	full, err := overlayBuild(d, withMarks, overlay, kfile)
	if err != nil {
		return preObject{}, err
	}
	doc := ""
	for _, b := range full {
		if b.key == obj.key {
			doc = marker(b.node)
		}
	}
	if doc == "" {
		return preObject{}, fmt.Errorf("cannot tell which document of %s it comes from", obj.file)
	}
	stripped, err := stripTransformers(repo[kfile])
	if err != nil {
		return preObject{}, fmt.Errorf("%s: %w", kfile, err)
	}
	withMarks[kfile] = stripped
	resources, err := overlayBuild(d, withMarks, overlay, kfile)
	if err != nil {
		return preObject{}, fmt.Errorf("its resources without the overlay: %w", err)
	}
	var found []builtDoc
	for _, b := range resources {
		if marker(b.node) == doc && b.key.group == obj.key.group && b.key.kind == obj.key.kind {
			found = append(found, b)
		}
	}
	if len(found) > 1 { // the manifest is included more than once: the one whose name the built name holds
		var named []builtDoc
		for _, b := range found {
			if strings.Contains(obj.key.name, b.key.name) {
				named = append(named, b)
			}
		}
		found = named
	}
	if len(found) != 1 {
		return preObject{}, fmt.Errorf("cannot tell which object of the overlay's resources it is (%d candidates)", len(found))
	}
	i, _ := strconv.Atoi(doc)
	var av struct {
		APIVersion string `yaml:"apiVersion"`
	}
	if checkTopKeys(found[0].node) == nil {
		_ = found[0].node.Decode(&av)
	}
	return preObject{
		apiVersion: av.APIVersion, kind: found[0].key.kind,
		name: found[0].key.name, namespace: found[0].key.namespace,
		written: written[i],
	}, nil
}

// markDocuments annotates each object document of a manifest with its index, and returns the
// documents' names by index.
func markDocuments(content []byte) ([]byte, map[int]string, error) {
	docs, err := decodeDocs(content)
	if err != nil {
		return nil, nil, err
	}
	names := map[int]string{}
	for i, doc := range docs {
		root := docRoot(doc)
		meta := field(root, "metadata")
		if meta == nil || meta.Kind != yamlv3.MappingNode {
			continue
		}
		if n := field(meta, "name"); n != nil {
			names[i] = n.Value
		}
		ann := field(meta, "annotations")
		if ann == nil || ann.Kind != yamlv3.MappingNode {
			ann = &yamlv3.Node{Kind: yamlv3.MappingNode, Tag: "!!map"}
			setKeyNode(meta, "annotations", ann)
		}
		setKeyNode(ann, overlayMarker, &yamlv3.Node{Kind: yamlv3.ScalarNode, Tag: "!!str", Value: strconv.Itoa(i), Style: yamlv3.DoubleQuotedStyle})
	}
	var buf bytes.Buffer
	enc := yamlv3.NewEncoder(&buf)
	for _, doc := range docs {
		if err := enc.Encode(doc); err != nil {
			return nil, nil, err
		}
	}
	if err := enc.Close(); err != nil {
		return nil, nil, err
	}
	return buf.Bytes(), names, nil
}

// marker is the overlayMarker annotation of a built object, or "".
func marker(obj *yamlv3.Node) string {
	if n := field(field(field(obj, "metadata"), "annotations"), overlayMarker); n != nil {
		return n.Value
	}
	return ""
}

// stripTransformers drops a kustomization's own transformers, keeping what gives it objects.
func stripTransformers(content []byte) ([]byte, error) {
	k, err := unmarshalStringMap(content)
	if err != nil {
		return nil, err
	}
	for key := range k {
		if transformKeys[key] {
			delete(k, key)
		}
	}
	return yamlv3.Marshal(k)
}

// overlayEdit is one adoption into an overlay.
type overlayEdit struct {
	repo           map[string][]byte
	overlay, kfile string
	f              core.Field
	v              core.Value
	value          any
	built          *yamlv3.Node    // the object as the overlay builds it now
	names          map[string]bool // the names a strategic-merge patch of the overlay may give it
}

// patchEdit is one way to write the value: the files it changes.
type patchEdit struct {
	what    string
	changes map[string][]byte
}

// existingPatches returns an edit for each patch of the overlay that sets f's path (or a path
// holding it) of an object like f's: a candidate only, which the build confirms or not.
func (e *overlayEdit) existingPatches() ([]patchEdit, error) {
	kdocs, err := decodeDocs(e.repo[e.kfile])
	if err != nil || len(kdocs) == 0 {
		return nil, fmt.Errorf("%s: not a readable kustomization", e.kfile)
	}
	var out []patchEdit
	for _, section := range []string{"patches", "patchesJson6902", "patchesStrategicMerge"} {
		list := field(docRoot(kdocs[0]), section)
		if list == nil || list.Kind != yamlv3.SequenceNode {
			continue
		}
		for i, entry := range list.Content {
			var text *yamlv3.Node // an inline patch
			file := ""
			targeted := false
			switch entry.Kind {
			case yamlv3.ScalarNode: // patchesStrategicMerge: a file, or an inline patch
				if strings.Contains(entry.Value, "\n") {
					text = entry
				} else {
					file = entry.Value
				}
			case yamlv3.MappingNode:
				targeted = field(entry, "target") != nil
				if p := field(entry, "patch"); p != nil && p.Kind == yamlv3.ScalarNode {
					text = p
				} else if p := field(entry, "path"); p != nil && p.Kind == yamlv3.ScalarNode {
					file = p.Value
				}
			}
			what := fmt.Sprintf("%s %s entry %d", e.kfile, section, i+1)
			switch {
			case text != nil:
				edited, ok, err := e.editPatch([]byte(text.Value), targeted)
				if err != nil || !ok {
					continue
				}
				old := text.Value
				s := string(edited)
				if !strings.HasSuffix(old, "\n") {
					s = strings.TrimRight(s, "\n")
				}
				text.Value = s
				content, err := encodeDocs(kdocs, e.repo[e.kfile])
				text.Value = old
				if err != nil {
					return nil, fmt.Errorf("%s: %w", e.kfile, err)
				}
				out = append(out, patchEdit{what: what, changes: map[string][]byte{e.kfile: content}})
			case file != "":
				p := path.Join(e.overlay, file)
				content, ok := e.repo[p]
				if !ok || !inside(p, e.overlay) || path.Ext(p) == ".json" {
					continue // a patch shared with other builds, or JSON, is not rewritten
				}
				edited, ok, err := e.editPatch(content, targeted)
				if err != nil || !ok {
					continue
				}
				out = append(out, patchEdit{what: what + " (" + p + ")", changes: map[string][]byte{p: edited}})
			}
		}
	}
	return out, nil
}

// editPatch sets the value in a patch's text (JSON6902 operations or strategic-merge documents)
// where it sets f's path; false when it sets no such path.
func (e *overlayEdit) editPatch(content []byte, targeted bool) ([]byte, bool, error) {
	docs, err := decodeDocs(content)
	if err != nil {
		return nil, false, err
	}
	newNode, err := valueNode(e.value)
	if err != nil {
		return nil, false, err
	}
	toks := e.f.PointerTokens()
	changed := false
	for _, doc := range docs {
		root := docRoot(doc)
		switch {
		case root == nil:
		case root.Kind == yamlv3.SequenceNode: // JSON6902 operations
			for _, op := range root.Content {
				kind, p, val := field(op, "op"), field(op, "path"), field(op, "value")
				if kind == nil || p == nil || val == nil || (kind.Value != "add" && kind.Value != "replace") {
					continue
				}
				opToks := core.SplitPointer(p.Value)
				if len(opToks) > len(toks) || !slices.Equal(opToks, toks[:len(opToks)]) {
					continue
				}
				if len(opToks) == len(toks) {
					setNodeValue(op, "value", val, newNode)
					changed = true
					continue
				}
				if parent, last := walkPlain(val, toks[len(opToks):]); parent != nil {
					setChild(parent, last, newNode)
					changed = true
				}
			}
		case root.Kind == yamlv3.MappingNode: // a strategic-merge patch
			if !e.smpTargets(root, targeted) {
				continue
			}
			if parent, last := e.walkSMP(root, toks); parent != nil {
				setChild(parent, last, newNode)
				changed = true
			}
		}
	}
	if !changed {
		return nil, false, nil
	}
	out, err := encodeDocs(docs, content)
	return out, err == nil, err
}

// smpTargets reports whether a strategic-merge patch document may patch f's object: its kind and
// group, and its name (the object's name in its manifest or as the overlay receives it) unless the
// patch entry has a target of its own.
func (e *overlayEdit) smpTargets(doc *yamlv3.Node, targeted bool) bool {
	kind, av := field(doc, "kind"), field(doc, "apiVersion")
	if kind == nil || kind.Value != e.f.Kind || av == nil {
		return false
	}
	if g, _ := splitAPIVersion(av.Value); g != e.f.Group {
		return false
	}
	if targeted {
		return true
	}
	name := field(field(doc, "metadata"), "name")
	return name != nil && e.names[name.Value]
}

// walkSMP follows f's path in a strategic-merge patch, mapping a list index to the patch's element
// with the same merge key as the built object's element; it returns the parent of the field and
// the field's token when the patch sets it.
func (e *overlayEdit) walkSMP(doc *yamlv3.Node, toks []string) (*yamlv3.Node, string) {
	n, built := doc, e.built
	for i, tok := range toks {
		last := i == len(toks)-1
		switch n.Kind {
		case yamlv3.MappingNode:
			if last {
				if field(n, tok) == nil {
					return nil, ""
				}
				return n, tok
			}
			n, built = field(n, tok), field(built, tok)
		case yamlv3.SequenceNode:
			idx, err := strconv.Atoi(tok)
			if err != nil || built == nil || built.Kind != yamlv3.SequenceNode || idx < 0 || idx >= len(built.Content) {
				return nil, ""
			}
			elem := built.Content[idx]
			j := -1
			if elem.Kind == yamlv3.MappingNode {
				for _, key := range []string{"name", "mountPath", "containerPort", "devicePath", "ip", "port"} {
					bv := field(elem, key)
					if bv == nil {
						continue
					}
					for k, pe := range n.Content {
						if pv := field(pe, key); pv != nil && pv.Value == bv.Value {
							j = k
						}
					}
					break
				}
			} else if idx < len(n.Content) { // a list of scalars: the patch replaces it whole
				j = idx
			}
			if j < 0 {
				return nil, ""
			}
			if last {
				return n, strconv.Itoa(j)
			}
			n, built = n.Content[j], elem
		default:
			return nil, ""
		}
		if n == nil {
			return nil, ""
		}
	}
	return nil, ""
}

// walkPlain follows tokens inside a JSON value; it returns the parent of the last one when it exists.
func walkPlain(n *yamlv3.Node, toks []string) (*yamlv3.Node, string) {
	for i, tok := range toks {
		last := i == len(toks)-1
		var next *yamlv3.Node
		switch n.Kind {
		case yamlv3.MappingNode:
			next = field(n, tok)
		case yamlv3.SequenceNode:
			idx, err := strconv.Atoi(tok)
			if err == nil && idx >= 0 && idx < len(n.Content) {
				next = n.Content[idx]
			}
		}
		if next == nil {
			return nil, ""
		}
		if last {
			return n, tok
		}
		n = next
	}
	return nil, ""
}

// setChild sets a mapping's key or a sequence's element to a value.
func setChild(parent *yamlv3.Node, tok string, v *yamlv3.Node) {
	if parent.Kind == yamlv3.SequenceNode {
		i, _ := strconv.Atoi(tok)
		cur := parent.Content[i]
		if cur.Kind == yamlv3.ScalarNode && v.Kind == yamlv3.ScalarNode {
			cur.Value, cur.Tag, cur.Style = v.Value, v.Tag, v.Style
			return
		}
		parent.Content[i] = v
		return
	}
	setNodeValue(parent, tok, field(parent, tok), v)
}

// setNodeValue sets a mapping's key, keeping the old node (and its comments) for a scalar.
func setNodeValue(m *yamlv3.Node, key string, cur, v *yamlv3.Node) {
	if cur != nil && cur.Kind == yamlv3.ScalarNode && v.Kind == yamlv3.ScalarNode {
		cur.Value, cur.Tag, cur.Style = v.Value, v.Tag, v.Style
		return
	}
	if cur != nil {
		v.HeadComment, v.LineComment, v.FootComment = cur.HeadComment, cur.LineComment, cur.FootComment
	}
	setKeyNode(m, key, v)
}

// setKeyNode sets or appends a mapping's key.
func setKeyNode(m *yamlv3.Node, key string, v *yamlv3.Node) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content[i+1] = v
			return
		}
	}
	m.Content = append(m.Content, &yamlv3.Node{Kind: yamlv3.ScalarNode, Tag: "!!str", Value: key}, v)
}

// appendPatch returns the kustomization with a JSON6902 patch setting the value appended to its
// patches, targeting the object under name.
func (e *overlayEdit) appendPatch(pre preObject, name, op string) ([]byte, error) {
	kdocs, err := decodeDocs(e.repo[e.kfile])
	if err != nil || len(kdocs) == 0 || docRoot(kdocs[0]) == nil || docRoot(kdocs[0]).Kind != yamlv3.MappingNode {
		return nil, fmt.Errorf("%s: not a readable kustomization", e.kfile)
	}
	root := docRoot(kdocs[0])
	str := func(s string) *yamlv3.Node { return &yamlv3.Node{Kind: yamlv3.ScalarNode, Tag: "!!str", Value: s} }
	group, version := splitAPIVersion(pre.apiVersion)
	target := &yamlv3.Node{Kind: yamlv3.MappingNode, Tag: "!!map", Style: yamlv3.FlowStyle}
	if group != "" {
		target.Content = append(target.Content, str("group"), str(group))
	}
	target.Content = append(target.Content, str("version"), str(version), str("kind"), str(pre.kind), str("name"), str(name))
	if pre.namespace != "" {
		target.Content = append(target.Content, str("namespace"), str(pre.namespace))
	}
	val, err := valueNode(e.value)
	if err != nil {
		return nil, err
	}
	var ptr strings.Builder
	for _, t := range e.f.PointerTokens() {
		ptr.WriteString("/" + core.EscapePointerToken(t))
	}
	ops := &yamlv3.Node{Kind: yamlv3.SequenceNode, Tag: "!!seq", Content: []*yamlv3.Node{{
		Kind: yamlv3.MappingNode, Tag: "!!map",
		Content: []*yamlv3.Node{str("op"), str(op), str("path"), str(ptr.String()), str("value"), val},
	}}}
	text, err := yaml.Marshal(ops)
	if err != nil {
		return nil, err
	}
	entry := &yamlv3.Node{Kind: yamlv3.MappingNode, Tag: "!!map", Content: []*yamlv3.Node{
		str("target"), target,
		str("patch"), {Kind: yamlv3.ScalarNode, Tag: "!!str", Style: yamlv3.LiteralStyle, Value: strings.TrimRight(string(text), "\n")},
	}}
	list := field(root, "patches")
	if list == nil || list.Kind != yamlv3.SequenceNode {
		list = &yamlv3.Node{Kind: yamlv3.SequenceNode, Tag: "!!seq"}
		setKeyNode(root, "patches", list)
	}
	list.Style = 0 // block style, even for an empty flow list
	list.Content = append(list.Content, entry)
	return encodeDocs(kdocs, e.repo[e.kfile])
}

// verifyOverlay checks a build against the one before: f's object has v at f's path and is
// otherwise unchanged, and every other object is unchanged.
func verifyOverlay(before, after []builtDoc, obj *builtDoc, f core.Field, v core.Value) error {
	var got *builtDoc
	for i := range after {
		if after[i].key == obj.key {
			got = &after[i]
		}
	}
	if got == nil {
		return fmt.Errorf("the overlay no longer builds %s", obj.key)
	}
	if have, ok := valueAt(got.node, f); !ok {
		return fmt.Errorf("the overlay builds %s without %s (a later transformer of the kustomization may drop it)", obj.key, f.Path)
	} else if !have.Equal(v) {
		return fmt.Errorf("the overlay builds %s with %s = %s (a later transformer of the kustomization, such as replicas or images, may set it)", obj.key, f.Path, have)
	}
	if !onlyFieldDiffers(obj.node, got.node, f) {
		return fmt.Errorf("the patch changes more of %s than %s", obj.key, f.Path)
	}
	others := func(docs []builtDoc) map[objectKey]string {
		m := map[objectKey]string{}
		for _, b := range docs {
			if b.key == obj.key {
				continue
			}
			x, _ := yamlvalue.NodeValue(b.node)
			j, _ := json.Marshal(x)
			m[b.key] = string(j)
		}
		return m
	}
	a, b := others(before), others(after)
	for k, j := range a {
		if b[k] != j {
			return fmt.Errorf("the patch changes %s too", k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			return fmt.Errorf("the overlay builds a new object %s", k)
		}
	}
	return nil
}

// decodeDocs parses a (multi-document) YAML text into document nodes, comments kept.
func decodeDocs(content []byte) ([]*yamlv3.Node, error) {
	dec := yamlv3.NewDecoder(bytes.NewReader(content))
	var out []*yamlv3.Node
	for {
		var n yamlv3.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		out = append(out, &n)
	}
}

// docRoot is a document's top node.
func docRoot(doc *yamlv3.Node) *yamlv3.Node {
	if doc == nil || doc.Kind != yamlv3.DocumentNode || len(doc.Content) == 0 {
		return nil
	}
	return doc.Content[0]
}

// encodeDocs writes documents in the sequence indentation of the text they were read from.
func encodeDocs(docs []*yamlv3.Node, original []byte) ([]byte, error) {
	var buf bytes.Buffer
	style := yaml.SequenceIndentStyle(yaml.DeriveSeqIndentStyle(string(original)))
	enc := yaml.NewEncoderWithOptions(&buf, &yaml.EncoderOptions{SeqIndent: style})
	for _, doc := range docs {
		if err := enc.Encode(doc); err != nil {
			return nil, err
		}
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
