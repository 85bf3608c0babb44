package gitops

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"sigs.k8s.io/kustomize/kyaml/kio"
	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/parleyhq/parley/core"
)

// Annotation lists the gates Parley wrote on an Application, ApplicationSet or Kustomization.
const Annotation = "parley.dev/gates"

// syncOption is what makes Argo CD's sync respect ignoreDifferences, not only its diff.
const syncOption = "RespectIgnoreDifferences=true"

// Target names the Argo CD Application or ApplicationSet, or the Flux Kustomization, to edit.
type Target struct {
	Kind      string // Application, ApplicationSet or Kustomization
	Name      string
	Namespace string
}

func (t Target) String() string { return t.Kind + " " + t.Namespace + "/" + t.Name }

// Gate is one field a GitOps tool is told to leave alone.
type Gate struct {
	Field core.Field `json:"field"`
	Until time.Time  `json:"until,omitzero"` // zero: until resumed
	Rule  string     `json:"rule,omitempty"`
	// AddedSyncOption records that Parley added RespectIgnoreDifferences=true, so the last resume
	// removes it again and leaves a user's own option alone.
	AddedSyncOption bool `json:"addedSyncOption,omitempty"`
}

// Listed is a gate found in a file, with the object that holds it.
type Listed struct {
	Gate
	Target Target
}

// AddGate adds a yield gate for g.Field to the target object in content. changed is false when
// the gate is already there.
func AddGate(path string, content []byte, t Target, g Gate) (out []byte, changed bool, err error) {
	if g.Field.Scheme != core.SchemeKubernetes || g.Field.Path == "" {
		return nil, false, fmt.Errorf("%s: only Kubernetes object fields can be gated (got %s); Terraform has no GitOps sync to pause", path, g.Field)
	}
	if _, err := core.ParseField(g.Field.String()); err != nil {
		return nil, false, fmt.Errorf("%s: cannot gate an invalid field: %w", path, err)
	}
	if !utf8.ValidString(g.Field.String()) {
		return nil, false, fmt.Errorf("%s: cannot gate %q: not valid UTF-8 (Kubernetes field names are)", path, g.Field.String())
	}
	return edit(path, content, t, func(obj *yaml.RNode, gates []Gate) ([]Gate, bool, error) {
		for _, x := range gates {
			if x.Field == g.Field {
				if x.Until.Equal(g.Until) && x.Rule == g.Rule {
					return gates, false, nil
				}
			}
		}
		var err error
		switch t.Kind {
		case "Application", "ApplicationSet":
			var added bool
			if added, err = addArgo(obj, t, g.Field); err == nil {
				g.AddedSyncOption = added || syncOptionAddedBefore(gates)
			}
		case "Kustomization":
			err = addFlux(obj, g.Field)
		default:
			err = fmt.Errorf("cannot gate fields through a %s", t.Kind)
		}
		if err != nil {
			return nil, false, err
		}
		kept := gates[:0]
		for _, x := range gates {
			if x.Field != g.Field {
				kept = append(kept, x)
			}
		}
		return append(kept, g), true, nil
	})
}

// RemoveGate removes the gate on f from the target object: the pointer from its entry, the entry
// once empty, and the sync option once no gate Parley added remains. changed is false when there
// was no such gate.
func RemoveGate(path string, content []byte, t Target, f core.Field) (out []byte, changed bool, err error) {
	return edit(path, content, t, func(obj *yaml.RNode, gates []Gate) ([]Gate, bool, error) {
		var kept []Gate
		var gone *Gate
		for i, x := range gates {
			if x.Field == f {
				gone = &gates[i]
				continue
			}
			kept = append(kept, x)
		}
		if gone == nil {
			return gates, false, nil
		}
		var err error
		switch t.Kind {
		case "Application", "ApplicationSet":
			err = removeArgo(obj, t, f, gone.AddedSyncOption && !syncOptionAddedBefore(kept))
			for i := range kept { // the option now belongs to the remaining gates, if any
				kept[i].AddedSyncOption = kept[i].AddedSyncOption || gone.AddedSyncOption
			}
		case "Kustomization":
			err = removeFlux(obj, f)
		}
		return kept, true, err
	})
}

func syncOptionAddedBefore(gates []Gate) bool {
	for _, g := range gates {
		if g.AddedSyncOption {
			return true
		}
	}
	return false
}

// readNodes parses a (multi-document) YAML file, remembering each document's sequence
// indentation so that writeNodes keeps it: a file is rewritten in its own style, and a yield
// followed by a resume gives back its bytes.
func readNodes(content []byte) ([]*yaml.RNode, error) {
	return (&kio.ByteReader{Reader: bytes.NewReader(content), PreserveSeqIndent: true}).Read()
}

func writeNodes(nodes []*yaml.RNode) ([]byte, error) {
	var buf bytes.Buffer
	err := kio.ByteWriter{Writer: &buf}.Write(nodes)
	return buf.Bytes(), err
}

// ListGates returns every gate recorded in the file's objects.
func ListGates(path string, content []byte) ([]Listed, error) {
	nodes, err := readNodes(content)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var out []Listed
	for _, n := range nodes {
		gates, err := readGates(n)
		if err != nil {
			return nil, fmt.Errorf("%s: %s %s: %w", path, n.GetKind(), n.GetName(), err)
		}
		for _, g := range gates {
			out = append(out, Listed{Gate: g, Target: Target{Kind: n.GetKind(), Name: n.GetName(), Namespace: n.GetNamespace()}})
		}
	}
	return out, nil
}

func readGates(n *yaml.RNode) ([]Gate, error) {
	raw := n.GetAnnotations()[Annotation]
	if raw == "" {
		return nil, nil
	}
	var gates []Gate
	if err := json.Unmarshal([]byte(raw), &gates); err != nil {
		return nil, fmt.Errorf("annotation %s: %w", Annotation, err)
	}
	return gates, nil
}

// edit applies fn to the target object and rewrites the file only if fn changed something.
func edit(path string, content []byte, t Target, fn func(*yaml.RNode, []Gate) ([]Gate, bool, error)) ([]byte, bool, error) {
	nodes, err := readNodes(content)
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", path, err)
	}
	for _, n := range nodes {
		if n.GetKind() != t.Kind || n.GetName() != t.Name || n.GetNamespace() != t.Namespace {
			continue
		}
		gates, err := readGates(n)
		if err != nil {
			return nil, false, fmt.Errorf("%s: %s: %w", path, t, err)
		}
		gates, changed, err := fn(n, gates)
		if err != nil {
			return nil, false, fmt.Errorf("%s: %s: %w", path, t, err)
		}
		if !changed {
			return content, false, nil
		}
		if err := writeGates(n, gates); err != nil {
			return nil, false, fmt.Errorf("%s: %s: %w", path, t, err)
		}
		out, err := writeNodes(nodes)
		if err != nil {
			return nil, false, fmt.Errorf("%s: %w", path, err)
		}
		return out, true, nil
	}
	return nil, false, fmt.Errorf("%s: no %s in the file", path, t)
}

func writeGates(n *yaml.RNode, gates []Gate) error {
	if len(gates) == 0 {
		_, err := n.Pipe(yaml.ClearAnnotation(Annotation))
		if err == nil {
			// Drop an annotations map Parley's annotation leaves empty.
			if m, _ := n.Pipe(yaml.Lookup("metadata", "annotations")); m != nil && len(m.YNode().Content) == 0 {
				_, err = n.Pipe(yaml.Lookup("metadata"), yaml.Clear("annotations"))
			}
		}
		return err
	}
	sort.Slice(gates, func(i, j int) bool { return gates[i].Field.String() < gates[j].Field.String() })
	b, err := json.Marshal(gates)
	if err != nil {
		return err
	}
	return n.PipeE(yaml.SetAnnotation(Annotation, string(b)))
}

// argoSpec is where an Application's spec lives: spec, or spec.template.spec for an ApplicationSet.
func argoSpec(obj *yaml.RNode, t Target) ([]string, error) {
	if t.Kind == "ApplicationSet" {
		return []string{"spec", "template", "spec"}, nil
	}
	return []string{"spec"}, nil
}

func groupOf(f core.Field) string { return f.Group }

func addArgo(obj *yaml.RNode, t Target, f core.Field) (addedOption bool, err error) {
	spec, _ := argoSpec(obj, t)
	list, err := obj.Pipe(yaml.LookupCreate(yaml.SequenceNode, append(spec, "ignoreDifferences")...))
	if err != nil {
		return false, err
	}
	entry, err := findEntry(list, func(e *yaml.RNode) bool {
		return str(e, "group") == groupOf(f) && str(e, "kind") == f.Kind && str(e, "name") == f.Name && str(e, "namespace") == f.Namespace
	})
	if err != nil {
		return false, err
	}
	if entry == nil {
		entry = yaml.NewMapRNode(nil)
		if err := entry.PipeE(yaml.SetField("group", yaml.NewStringRNode(groupOf(f)))); err != nil {
			return false, err
		}
		for _, kv := range [][2]string{{"kind", f.Kind}, {"name", f.Name}, {"namespace", f.Namespace}} {
			if kv[1] != "" {
				if err := entry.PipeE(yaml.SetField(kv[0], yaml.NewStringRNode(kv[1]))); err != nil {
					return false, err
				}
			}
		}
		if err := entry.PipeE(yaml.SetField("jsonPointers", yaml.NewListRNode())); err != nil {
			return false, err
		}
		if err := list.PipeE(yaml.Append(entry.YNode())); err != nil {
			return false, err
		}
	}
	ptrs, err := entry.Pipe(yaml.LookupCreate(yaml.SequenceNode, "jsonPointers"))
	if err != nil {
		return false, err
	}
	if !hasScalar(ptrs, f.Path) {
		if err := ptrs.PipeE(yaml.Append(yaml.NewStringRNode(f.Path).YNode())); err != nil {
			return false, err
		}
	}
	opts, err := obj.Pipe(yaml.LookupCreate(yaml.SequenceNode, append(spec, "syncPolicy", "syncOptions")...))
	if err != nil {
		return false, err
	}
	if hasScalar(opts, syncOption) {
		return false, nil
	}
	return true, opts.PipeE(yaml.Append(yaml.NewStringRNode(syncOption).YNode()))
}

func removeArgo(obj *yaml.RNode, t Target, f core.Field, dropOption bool) error {
	spec, _ := argoSpec(obj, t)
	list, err := obj.Pipe(yaml.Lookup(append(spec, "ignoreDifferences")...))
	if err != nil || list == nil {
		return err
	}
	keep := list.YNode().Content[:0]
	for _, e := range list.YNode().Content {
		en := yaml.NewRNode(e)
		if str(en, "group") == groupOf(f) && str(en, "kind") == f.Kind && str(en, "name") == f.Name && str(en, "namespace") == f.Namespace {
			if ptrs, _ := en.Pipe(yaml.Lookup("jsonPointers")); ptrs != nil {
				removeScalar(ptrs, f.Path)
				if len(ptrs.YNode().Content) == 0 && onlyIdentity(en) {
					continue // nothing but the object and its (now no) pointers: drop the entry
				}
			}
		}
		keep = append(keep, e)
	}
	list.YNode().Content = keep
	if len(keep) == 0 {
		if err := clearField(obj, spec, "ignoreDifferences"); err != nil {
			return err
		}
	}
	if dropOption {
		if opts, _ := obj.Pipe(yaml.Lookup(append(spec, "syncPolicy", "syncOptions")...)); opts != nil {
			removeScalar(opts, syncOption)
			if len(opts.YNode().Content) == 0 {
				if err := clearField(obj, append(spec, "syncPolicy"), "syncOptions"); err != nil {
					return err
				}
				if sp, _ := obj.Pipe(yaml.Lookup(append(spec, "syncPolicy")...)); sp != nil && len(sp.YNode().Content) == 0 {
					return clearField(obj, spec, "syncPolicy")
				}
			}
		}
	}
	return nil
}

func addFlux(obj *yaml.RNode, f core.Field) error {
	list, err := obj.Pipe(yaml.LookupCreate(yaml.SequenceNode, "spec", "ignore"))
	if err != nil {
		return err
	}
	match := func(e *yaml.RNode) bool {
		tg, _ := e.Pipe(yaml.Lookup("target"))
		return tg != nil && str(tg, "group") == groupOf(f) && str(tg, "kind") == f.Kind && str(tg, "name") == f.Name && str(tg, "namespace") == f.Namespace
	}
	entry, err := findEntry(list, match)
	if err != nil {
		return err
	}
	if entry == nil {
		entry = yaml.NewMapRNode(nil)
		if err := entry.PipeE(yaml.SetField("paths", yaml.NewListRNode())); err != nil {
			return err
		}
		target := yaml.NewMapRNode(nil)
		for _, kv := range [][2]string{{"group", groupOf(f)}, {"kind", f.Kind}, {"name", f.Name}, {"namespace", f.Namespace}} {
			if kv[1] != "" {
				if err := target.PipeE(yaml.SetField(kv[0], yaml.NewStringRNode(kv[1]))); err != nil {
					return err
				}
			}
		}
		if err := entry.PipeE(yaml.SetField("target", target)); err != nil {
			return err
		}
		if err := list.PipeE(yaml.Append(entry.YNode())); err != nil {
			return err
		}
	}
	paths, err := entry.Pipe(yaml.LookupCreate(yaml.SequenceNode, "paths"))
	if err != nil {
		return err
	}
	if hasScalar(paths, f.Path) {
		return nil
	}
	return paths.PipeE(yaml.Append(yaml.NewStringRNode(f.Path).YNode()))
}

func removeFlux(obj *yaml.RNode, f core.Field) error {
	list, err := obj.Pipe(yaml.Lookup("spec", "ignore"))
	if err != nil || list == nil {
		return err
	}
	keep := list.YNode().Content[:0]
	for _, e := range list.YNode().Content {
		en := yaml.NewRNode(e)
		tg, _ := en.Pipe(yaml.Lookup("target"))
		if tg != nil && str(tg, "group") == groupOf(f) && str(tg, "kind") == f.Kind && str(tg, "name") == f.Name && str(tg, "namespace") == f.Namespace {
			if paths, _ := en.Pipe(yaml.Lookup("paths")); paths != nil {
				removeScalar(paths, f.Path)
				if len(paths.YNode().Content) == 0 {
					continue
				}
			}
		}
		keep = append(keep, e)
	}
	list.YNode().Content = keep
	if len(keep) == 0 {
		return clearField(obj, []string{"spec"}, "ignore")
	}
	return nil
}

func clearField(obj *yaml.RNode, parent []string, field string) error {
	p, err := obj.Pipe(yaml.Lookup(parent...))
	if err != nil || p == nil {
		return err
	}
	_, err = p.Pipe(yaml.Clear(field))
	return err
}

func findEntry(list *yaml.RNode, match func(*yaml.RNode) bool) (*yaml.RNode, error) {
	for _, e := range list.YNode().Content {
		if e.Kind != yaml.MappingNode {
			return nil, fmt.Errorf("an entry of %s is not a mapping", strings.Join(list.FieldPath(), "."))
		}
		if en := yaml.NewRNode(e); match(en) {
			return en, nil
		}
	}
	return nil, nil
}

func str(n *yaml.RNode, field string) string {
	v, _ := n.Pipe(yaml.Lookup(field))
	if v == nil {
		return ""
	}
	return yaml.GetValue(v)
}

func hasScalar(list *yaml.RNode, s string) bool {
	for _, e := range list.YNode().Content {
		if e.Value == s {
			return true
		}
	}
	return false
}

func removeScalar(list *yaml.RNode, s string) {
	keep := list.YNode().Content[:0]
	for _, e := range list.YNode().Content {
		if e.Value != s {
			keep = append(keep, e)
		}
	}
	list.YNode().Content = keep
}

// onlyIdentity reports whether an ignoreDifferences entry holds nothing but the object's identity
// and jsonPointers: an entry with jqPathExpressions or managedFieldsManagers is the user's to keep.
func onlyIdentity(e *yaml.RNode) bool {
	fields, _ := e.Fields()
	for _, f := range fields {
		switch f {
		case "group", "kind", "name", "namespace", "jsonPointers":
		default:
			return false
		}
	}
	return true
}
