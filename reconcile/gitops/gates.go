package gitops

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	kustomizev1beta1 "github.com/fluxcd/kustomize-controller/api/v1beta1"
	kustomizev1beta2 "github.com/fluxcd/kustomize-controller/api/v1beta2"
	"sigs.k8s.io/kustomize/kyaml/kio"
	"sigs.k8s.io/kustomize/kyaml/yaml"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/parleyhq/parley/core"
)

// Annotation lists the gates Parley wrote on an Application, ApplicationSet or Kustomization.
const Annotation = "parley.dev/gates"

// syncOption is what makes Argo CD's sync respect ignoreDifferences, not only its diff.
const syncOption = "RespectIgnoreDifferences=true"

// FluxGateAnnotation, on a Flux Kustomization, chooses how Parley gates its fields: "ignore" for
// spec.ignore (kustomize-controller v1.9 and later, apiVersion v1 only), "patch" for a JSON6902
// remove patch (any version). Without it, a v1 Kustomization gets spec.ignore and a v1beta2 or
// v1beta1 one, whose controller predates spec.ignore, gets the patch.
const FluxGateAnnotation = "parley.dev/flux-gate"

// Gate forms: how a gate was written into a Flux Kustomization, recorded in the gate itself so
// that a resume removes what the yield wrote even if FluxGateAnnotation or the apiVersion changed
// in between.
const (
	// FormIgnore is spec.ignore (and, for Argo CD, spec.ignoreDifferences): the zero value, so
	// that gates written before forms existed read as what they are.
	FormIgnore = ""
	// FormPatch is a spec.patches entry (v1, v1beta2) whose patch is a JSON6902 list of remove
	// operations, one per gated pointer.
	FormPatch = "patch"
	// FormPatchesJSON6902 is the same as a v1beta1 spec.patchesJson6902 entry, whose patch is a
	// structured list rather than a string.
	FormPatchesJSON6902 = "patchesJson6902"
)

// Target names the Argo CD Application or ApplicationSet, or the Flux Kustomization, to edit.
type Target struct {
	Kind      string `json:"kind"` // Application, ApplicationSet or Kustomization
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
}

func (t Target) String() string {
	if t.Namespace == "" {
		return t.Kind + " " + t.Name
	}
	return t.Kind + " " + t.Namespace + "/" + t.Name
}

// Gate is one field a GitOps tool is told to leave alone.
type Gate struct {
	Field core.Field `json:"field"`
	Until time.Time  `json:"until,omitzero"` // zero: until resumed
	Rule  string     `json:"rule,omitempty"`
	// AddedSyncOption records that Parley added RespectIgnoreDifferences=true, so the last resume
	// removes it again and leaves a user's own option alone.
	AddedSyncOption bool `json:"added_sync_option,omitempty"`
	// Form is how the gate was written into a Flux Kustomization: FormIgnore, FormPatch or
	// FormPatchesJSON6902. AddGate sets it; a caller's value is ignored.
	Form string `json:"form,omitempty"`
	// EnableDriftDetection asks AddGate to turn a HelmRelease's drift detection on if it is not
	// (the policy's gitops.enable_helm_drift_detection). Not recorded.
	EnableDriftDetection bool `json:"-"`
	// EnabledDriftDetection records that Parley set spec.driftDetection.mode: enabled, and
	// DriftModeWas the mode before ("" when unset), so the last resume puts it back.
	EnabledDriftDetection bool   `json:"enabled_drift_detection,omitempty"`
	DriftModeWas          string `json:"drift_mode_was,omitempty"`
}

// UnmarshalJSON reads a gate, also in the annotation Parley wrote before its JSON became snake_case
// ("addedSyncOption"), so gates written by earlier versions still resume exactly.
func (g *Gate) UnmarshalJSON(b []byte) error {
	type plain Gate // without this method
	var w struct {
		plain
		OldAddedSyncOption bool `json:"addedSyncOption"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*g = Gate(w.plain)
	g.AddedSyncOption = g.AddedSyncOption || w.OldAddedSyncOption
	return nil
}

// Listed is a gate found in a file, with the object that holds it.
type Listed struct {
	Gate
	Target Target `json:"target"`
}

// AddGate adds a yield gate for g.Field to the target object in content. changed is false when
// the gate is already there.
//
// For a Flux Kustomization the form follows FluxGateAnnotation and the apiVersion (see
// FluxGateAnnotation). The remove patch form takes the field out of what kustomize-controller
// applies; that is safe only once another manager (the HPA, say) co-owns the field, since
// Server-Side Apply deletes or resets a field that a manager stops applying and nobody else
// owns. spec.ignore has no such caveat. A gate already written in another form is moved to the
// current one. After the edit the Kustomization is decoded with kustomize-controller's own API
// types (strictly, as the API server would) and must hold the gate, or AddGate refuses.
//
// In a Terraform file (.tf) the gate is the resource's lifecycle ignore_changes (AddTFGate); t is
// then the resource.
func AddGate(path string, content []byte, t Target, g Gate) (out []byte, changed bool, err error) {
	if isTerraform(path) {
		return AddTFGate(path, content, g)
	}
	if g.Field.Scheme != core.SchemeKubernetes || g.Field.Path == "" {
		return nil, false, fmt.Errorf("%s: only Kubernetes object fields can be gated in YAML (got %s); a Terraform attribute is gated in its .tf file", path, g.Field)
	}
	if _, err := core.ParseField(g.Field.String()); err != nil {
		return nil, false, fmt.Errorf("%s: cannot gate an invalid field: %w", path, err)
	}
	if f := g.Field; !utf8.ValidString(f.Group + f.Kind + f.Namespace + f.Name + f.Path) {
		return nil, false, fmt.Errorf("%s: cannot gate %s: not valid UTF-8 (Kubernetes field names are)", path, g.Field)
	}
	g.Form = FormIgnore
	fn := func(obj *yaml.RNode, gates []Gate) ([]Gate, bool, error) {
		var err error
		if t.Kind == "Kustomization" {
			if g.Form, err = fluxForm(obj); err != nil {
				return nil, false, err
			}
		}
		for _, x := range gates {
			if x.Field == g.Field && x.Until.Equal(g.Until) && x.Rule == g.Rule && x.Form == g.Form {
				return gates, false, nil
			}
		}
		switch t.Kind {
		case "Application", "ApplicationSet":
			var added bool
			if added, err = addArgo(obj, t, g.Field); err == nil {
				g.AddedSyncOption = added || syncOptionAddedBefore(gates)
			}
		case KindHelmRelease:
			if g.EnableDriftDetection && !driftDetectionEnabledBefore(gates) {
				g.EnabledDriftDetection, g.DriftModeWas, err = enableHelmDriftDetection(obj)
			}
			if err == nil {
				err = addHelmIgnore(obj, g.Field)
			}
		case "Kustomization":
			for _, x := range gates {
				if x.Field == g.Field && x.Form != g.Form {
					if err := removeFlux(obj, x.Form, x.Field); err != nil {
						return nil, false, err
					}
				}
			}
			err = addFlux(obj, g.Form, g.Field)
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
	}
	verify := func(n *yaml.RNode) error {
		switch t.Kind {
		case "Kustomization":
			k, err := decodeFlux(n)
			if err != nil {
				return err
			}
			return k.holds(g.Form, g.Field)
		case KindHelmRelease:
			h, err := decodeHelm(n)
			if err != nil {
				return err
			}
			return h.holds(g.Field)
		}
		return nil
	}
	return edit(path, content, t, fn, verify)
}

// RemoveGate removes the gate on f from the target object: the pointer from its entry, the entry
// once empty, and the sync option once no gate Parley added remains. changed is false when there
// was no such gate. A Flux gate is removed in the form it was written in (Gate.Form), and the
// edited Kustomization must still decode with kustomize-controller's API types.
func RemoveGate(path string, content []byte, t Target, f core.Field) (out []byte, changed bool, err error) {
	if isTerraform(path) {
		return RemoveTFGate(path, content, f)
	}
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
			err = removeFlux(obj, gone.Form, f)
		case KindHelmRelease:
			if gone.EnabledDriftDetection {
				if len(kept) > 0 { // the remaining gates still need it on; the last one puts it back
					kept[0].EnabledDriftDetection, kept[0].DriftModeWas = true, gone.DriftModeWas
				} else {
					err = restoreHelmDriftMode(obj, gone.DriftModeWas)
				}
			}
			if err == nil {
				err = removeHelmIgnore(obj, f)
			}
		}
		return kept, true, err
	}, nil)
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
	if isTerraform(path) {
		return ListTFGates(path, content)
	}
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

// edit applies fn to the target object and rewrites the file only if fn changed something. A
// Kustomization must decode with kustomize-controller's types before and after the edit, and
// verify, if not nil, checks the decoded result: Parley never writes what the controller rejects.
func edit(path string, content []byte, t Target, fn func(*yaml.RNode, []Gate) ([]Gate, bool, error), verify func(*yaml.RNode) error) ([]byte, bool, error) {
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
		if err := decodeTyped(t.Kind, n); err != nil {
			return nil, false, fmt.Errorf("%s: %s: not gated, as found in the file: %w", path, t, err)
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
		err = decodeTyped(t.Kind, n)
		if err == nil && verify != nil {
			err = verify(n)
		}
		if err != nil {
			return nil, false, fmt.Errorf("%s: %s: refusing the edit, which the controller would not take as meant: %w", path, t, err)
		}
		out, err := writeNodes(nodes)
		if err != nil {
			return nil, false, fmt.Errorf("%s: %w", path, err)
		}
		return out, true, nil
	}
	return nil, false, fmt.Errorf("%s: no %s in the file", path, t)
}

// decodeTyped decodes a Flux object with its controller's API types, strictly; other kinds pass.
func decodeTyped(kind string, n *yaml.RNode) error {
	var err error
	switch kind {
	case "Kustomization":
		_, err = decodeFlux(n)
	case KindHelmRelease:
		_, err = decodeHelm(n)
	}
	return err
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
	list, err := lookupCreate(obj, yaml.SequenceNode, append(spec, "ignoreDifferences")...)
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
	ptrs, err := lookupCreate(entry, yaml.SequenceNode, "jsonPointers")
	if err != nil {
		return false, err
	}
	if !hasScalar(ptrs, f.Path) {
		if err := ptrs.PipeE(yaml.Append(yaml.NewStringRNode(f.Path).YNode())); err != nil {
			return false, err
		}
	}
	opts, err := lookupCreate(obj, yaml.SequenceNode, append(spec, "syncPolicy", "syncOptions")...)
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

// addFlux writes the gate on f into a Kustomization in the given form.
func addFlux(obj *yaml.RNode, form string, f core.Field) error {
	switch form {
	case FormIgnore:
		return addFluxIgnore(obj, f)
	case FormPatch:
		return addFluxPatch(obj, f)
	case FormPatchesJSON6902:
		return addFluxJSON6902(obj, f)
	}
	return fmt.Errorf("unknown gate form %q", form)
}

// removeFlux removes the gate on f from a Kustomization, in the form it was written in.
func removeFlux(obj *yaml.RNode, form string, f core.Field) error {
	switch form {
	case FormIgnore:
		return removeFluxIgnore(obj, f)
	case FormPatch:
		return removeFluxPatch(obj, f)
	case FormPatchesJSON6902:
		return removeFluxJSON6902(obj, f)
	}
	return fmt.Errorf("unknown gate form %q in annotation %s", form, Annotation)
}

// fluxForm says how to gate a Kustomization's fields now, from FluxGateAnnotation and the
// apiVersion.
func fluxForm(obj *yaml.RNode) (string, error) {
	group, version := splitAPIVersion(obj.GetApiVersion())
	if group != fluxGroup {
		return "", fmt.Errorf("apiVersion %q is not a Flux Kustomization (%s)", obj.GetApiVersion(), fluxGroup)
	}
	want := obj.GetAnnotations()[FluxGateAnnotation]
	if want != "" && want != "ignore" && want != "patch" {
		return "", fmt.Errorf("annotation %s: %q is neither ignore nor patch", FluxGateAnnotation, want)
	}
	switch version {
	case "v1":
		if want == "patch" {
			return FormPatch, nil
		}
		return FormIgnore, nil
	case "v1beta2", "v1beta1":
		if want == "ignore" {
			return "", fmt.Errorf("annotation %s: ignore: spec.ignore needs apiVersion %s/v1 (kustomize-controller v1.9 or later), not %s", FluxGateAnnotation, fluxGroup, version)
		}
		if version == "v1beta1" {
			return FormPatchesJSON6902, nil
		}
		return FormPatch, nil
	}
	return "", fmt.Errorf("apiVersion %q: unknown Kustomization version", obj.GetApiVersion())
}

// fluxTarget is the selector Parley writes for f's object: group, kind, name and namespace as far
// as they are set, no version (kustomize matches any) and no label or annotation selector.
func fluxTarget(f core.Field) (*yaml.RNode, error) {
	target := yaml.NewMapRNode(nil)
	for _, kv := range [][2]string{{"group", groupOf(f)}, {"kind", f.Kind}, {"name", f.Name}, {"namespace", f.Namespace}} {
		if kv[1] != "" {
			if err := target.PipeE(yaml.SetField(kv[0], yaml.NewStringRNode(kv[1]))); err != nil {
				return nil, err
			}
		}
	}
	return target, nil
}

// exactTarget reports whether an entry's target selects exactly f's object the way fluxTarget
// writes it: a selector with a version or a label selector is someone else's.
func exactTarget(e *yaml.RNode, f core.Field) bool {
	tg, _ := e.Pipe(yaml.Lookup("target"))
	if tg == nil || tg.YNode().Kind != yaml.MappingNode {
		return false
	}
	fields, _ := tg.Fields()
	for _, k := range fields {
		switch k {
		case "group", "kind", "name", "namespace":
		default:
			return false
		}
	}
	return str(tg, "group") == groupOf(f) && str(tg, "kind") == f.Kind && str(tg, "name") == f.Name && str(tg, "namespace") == f.Namespace
}

func addFluxIgnore(obj *yaml.RNode, f core.Field) error {
	return addIgnoreRule(obj, []string{"spec", "ignore"}, f)
}

// addIgnoreRule adds f's pointer to the list of ignore rules at path (Kustomization spec.ignore,
// HelmRelease spec.driftDetection.ignore): to the rule selecting exactly f's object, or a new one.
func addIgnoreRule(obj *yaml.RNode, path []string, f core.Field) error {
	list, err := lookupCreate(obj, yaml.SequenceNode, path...)
	if err != nil {
		return err
	}
	// Only an entry that selects exactly the object takes the pointer: a version or label
	// selector could make it miss the object.
	entry, err := findEntry(list, func(e *yaml.RNode) bool { return exactTarget(e, f) })
	if err != nil {
		return err
	}
	if entry == nil {
		entry = yaml.NewMapRNode(nil)
		if err := entry.PipeE(yaml.SetField("paths", yaml.NewListRNode())); err != nil {
			return err
		}
		target, err := fluxTarget(f)
		if err != nil {
			return err
		}
		if err := entry.PipeE(yaml.SetField("target", target)); err != nil {
			return err
		}
		if err := list.PipeE(yaml.Append(entry.YNode())); err != nil {
			return err
		}
	}
	paths, err := lookupCreate(entry, yaml.SequenceNode, "paths")
	if err != nil {
		return err
	}
	if hasScalar(paths, f.Path) {
		return nil
	}
	return paths.PipeE(yaml.Append(yaml.NewStringRNode(f.Path).YNode()))
}

func removeFluxIgnore(obj *yaml.RNode, f core.Field) error {
	return removeIgnoreRule(obj, []string{"spec", "ignore"}, f)
}

// removeIgnoreRule removes f's pointer from the rule at path selecting exactly f's object, the rule
// once empty, and the list once empty.
func removeIgnoreRule(obj *yaml.RNode, path []string, f core.Field) error {
	list, err := obj.Pipe(yaml.Lookup(path...))
	if err != nil || list == nil {
		return err
	}
	keep := list.YNode().Content[:0]
	for _, e := range list.YNode().Content {
		en := yaml.NewRNode(e)
		if e.Kind == yaml.MappingNode && exactTarget(en, f) {
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
		return clearField(obj, path[:len(path)-1], path[len(path)-1])
	}
	return nil
}

// removeOps renders the JSON6902 patch text of a FormPatch entry: one remove operation per
// pointer, in order. A pointer that is not a plain YAML scalar is written as a JSON string, which
// YAML reads the same.
func removeOps(ptrs []string) string {
	var b strings.Builder
	for _, p := range ptrs {
		b.WriteString("- op: remove\n  path: ")
		if plainPointer(p) {
			b.WriteString(p)
		} else {
			q, _ := json.Marshal(p) // a string always marshals
			b.Write(q)
		}
		b.WriteString("\n")
	}
	return b.String()
}

func plainPointer(p string) bool {
	if p == "" {
		return false
	}
	for _, c := range p {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '/', c == '_', c == '.', c == '~', c == '-':
		default:
			return false
		}
	}
	return true
}

// parseRemoves reads JSON6902 patch text and returns the paths of its remove operations, and
// whether the text is nothing but those, exactly as removeOps writes them: only then is the entry
// Parley's to change.
func parseRemoves(text string) (paths []string, parleys bool) {
	var ops []map[string]any
	if err := unmarshalChecked([]byte(text), &ops); err != nil {
		return nil, false
	}
	parleys = len(ops) > 0
	for _, op := range ops {
		p, isString := op["path"].(string)
		if op["op"] == "remove" && isString {
			paths = append(paths, p)
		}
		if op["op"] != "remove" || !isString || len(op) != 2 {
			parleys = false
		}
	}
	return paths, parleys && removeOps(paths) == text
}

// parleyPatch reports whether a spec.patches entry is Parley's remove patch for f's object.
func parleyPatch(e *yaml.RNode, f core.Field) bool {
	fields, _ := e.Fields()
	if len(fields) != 2 || !exactTarget(e, f) {
		return false
	}
	p, _ := e.Pipe(yaml.Lookup("patch"))
	if p == nil || p.YNode().Kind != yaml.ScalarNode {
		return false
	}
	_, ok := parseRemoves(p.YNode().Value)
	return ok
}

func addFluxPatch(obj *yaml.RNode, f core.Field) error {
	list, err := lookupCreate(obj, yaml.SequenceNode, "spec", "patches")
	if err != nil {
		return err
	}
	entry, err := findEntry(list, func(e *yaml.RNode) bool { return parleyPatch(e, f) })
	if err != nil {
		return err
	}
	if entry == nil {
		target, err := fluxTarget(f)
		if err != nil {
			return err
		}
		patch := yaml.NewStringRNode(removeOps([]string{f.Path}))
		patch.YNode().Style = yaml.LiteralStyle
		entry = yaml.NewMapRNode(nil)
		if err := entry.PipeE(yaml.SetField("target", target)); err != nil {
			return err
		}
		if err := entry.PipeE(yaml.SetField("patch", patch)); err != nil {
			return err
		}
		return list.PipeE(yaml.Append(entry.YNode()))
	}
	p, _ := entry.Pipe(yaml.Lookup("patch"))
	ptrs, _ := parseRemoves(p.YNode().Value)
	for _, x := range ptrs {
		if x == f.Path {
			return nil
		}
	}
	p.YNode().Value = removeOps(append(ptrs, f.Path))
	return nil
}

func removeFluxPatch(obj *yaml.RNode, f core.Field) error {
	list, err := obj.Pipe(yaml.Lookup("spec", "patches"))
	if err != nil || list == nil || list.YNode().Kind != yaml.SequenceNode {
		return err
	}
	keep := list.YNode().Content[:0]
	for _, e := range list.YNode().Content {
		en := yaml.NewRNode(e)
		if e.Kind == yaml.MappingNode && parleyPatch(en, f) {
			p, _ := en.Pipe(yaml.Lookup("patch"))
			ptrs, _ := parseRemoves(p.YNode().Value)
			left := ptrs[:0]
			for _, x := range ptrs {
				if x != f.Path {
					left = append(left, x)
				}
			}
			if len(left) == 0 {
				continue
			}
			p.YNode().Value = removeOps(left)
		}
		keep = append(keep, e)
	}
	list.YNode().Content = keep
	if len(keep) == 0 {
		return clearField(obj, []string{"spec"}, "patches")
	}
	return nil
}

// parleyJSON6902 reports whether a v1beta1 spec.patchesJson6902 entry is Parley's for f's object:
// its target is exactly the object and its patch holds only remove operations.
func parleyJSON6902(e *yaml.RNode, f core.Field) bool {
	fields, _ := e.Fields()
	if len(fields) != 2 || !exactTarget(e, f) {
		return false
	}
	ops, _ := e.Pipe(yaml.Lookup("patch"))
	if ops == nil || ops.YNode().Kind != yaml.SequenceNode {
		return false
	}
	for _, op := range ops.YNode().Content {
		on := yaml.NewRNode(op)
		if op.Kind != yaml.MappingNode || len(op.Content) != 4 || str(on, "op") != "remove" || str(on, "path") == "" {
			return false
		}
	}
	return true
}

func addFluxJSON6902(obj *yaml.RNode, f core.Field) error {
	list, err := lookupCreate(obj, yaml.SequenceNode, "spec", "patchesJson6902")
	if err != nil {
		return err
	}
	entry, err := findEntry(list, func(e *yaml.RNode) bool { return parleyJSON6902(e, f) })
	if err != nil {
		return err
	}
	if entry == nil {
		target, err := fluxTarget(f)
		if err != nil {
			return err
		}
		entry = yaml.NewMapRNode(nil)
		if err := entry.PipeE(yaml.SetField("target", target)); err != nil {
			return err
		}
		if err := entry.PipeE(yaml.SetField("patch", yaml.NewListRNode())); err != nil {
			return err
		}
		if err := list.PipeE(yaml.Append(entry.YNode())); err != nil {
			return err
		}
	}
	ops, err := entry.Pipe(yaml.Lookup("patch"))
	if err != nil {
		return err
	}
	for _, op := range ops.YNode().Content {
		if str(yaml.NewRNode(op), "path") == f.Path {
			return nil
		}
	}
	op := yaml.NewMapRNode(nil)
	if err := op.PipeE(yaml.SetField("op", yaml.NewStringRNode("remove"))); err != nil {
		return err
	}
	if err := op.PipeE(yaml.SetField("path", yaml.NewStringRNode(f.Path))); err != nil {
		return err
	}
	return ops.PipeE(yaml.Append(op.YNode()))
}

func removeFluxJSON6902(obj *yaml.RNode, f core.Field) error {
	list, err := obj.Pipe(yaml.Lookup("spec", "patchesJson6902"))
	if err != nil || list == nil || list.YNode().Kind != yaml.SequenceNode {
		return err
	}
	keep := list.YNode().Content[:0]
	for _, e := range list.YNode().Content {
		en := yaml.NewRNode(e)
		if e.Kind == yaml.MappingNode && parleyJSON6902(en, f) {
			ops, _ := en.Pipe(yaml.Lookup("patch"))
			left := ops.YNode().Content[:0]
			for _, op := range ops.YNode().Content {
				if str(yaml.NewRNode(op), "path") != f.Path {
					left = append(left, op)
				}
			}
			ops.YNode().Content = left
			if len(left) == 0 {
				continue
			}
		}
		keep = append(keep, e)
	}
	list.YNode().Content = keep
	if len(keep) == 0 {
		return clearField(obj, []string{"spec"}, "patchesJson6902")
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

// lookupCreate is kyaml's LookupCreate that fails, naming the path, where kyaml gives nothing: a
// step on the way that is not a map (syncPolicy: a string), or an existing node of another kind.
func lookupCreate(n *yaml.RNode, kind yaml.Kind, path ...string) (*yaml.RNode, error) {
	got, err := n.Pipe(yaml.LookupCreate(kind, path...))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", strings.Join(path, "."), err)
	}
	if got == nil || got.YNode().Kind != kind {
		want := map[yaml.Kind]string{yaml.SequenceNode: "a list", yaml.MappingNode: "a map"}[kind]
		return nil, fmt.Errorf("%s cannot be written: it, or a key on the way to it, is not %s", strings.Join(path, "."), orText(want, "of the expected kind"))
	}
	return got, nil
}

func orText(s, fallback string) string {
	if s == "" {
		return fallback
	}
	return s
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

// fluxGroup is the API group of Flux Kustomizations.
const fluxGroup = "kustomize.toolkit.fluxcd.io"

// fluxTyped is a Kustomization as kustomize-controller's own API types decode it, reduced to the
// per-field rules the gate forms write: each a target and the pointers it covers.
type fluxTyped struct {
	apiVersion string
	ignore     []fluxRule // spec.ignore (v1)
	patches    []fluxRule // remove operations of spec.patches (v1, v1beta2)
	json6902   []fluxRule // remove operations of spec.patchesJson6902 (v1beta2, v1beta1)
}

type fluxRule struct {
	group, version, kind, name, namespace string
	selectors                             bool // a label or annotation selector narrows the target
	paths                                 []string
}

// decodeFlux decodes a Kustomization with the types of github.com/fluxcd/kustomize-controller/api
// (v1.9.4, which ships v1, v1beta2 and v1beta1), strictly: an unknown or mistyped field fails, as
// the API server's schema validation would fail it.
func decodeFlux(n *yaml.RNode) (fluxTyped, error) {
	// The reader's bookkeeping annotations (config.kubernetes.io/index and the like) stay: they
	// are strings in a map of strings, which decodes whatever they say.
	s, err := n.String()
	if err != nil {
		return fluxTyped{}, err
	}
	av := n.GetApiVersion()
	out := fluxTyped{apiVersion: av}
	strict := func(v any) error {
		if err := sigsyaml.UnmarshalStrict([]byte(s), v); err != nil {
			return fmt.Errorf("does not decode as a %s Kustomization (kustomize-controller API v1.9.4): %w", av, err)
		}
		return nil
	}
	switch av {
	case fluxGroup + "/v1":
		var k kustomizev1.Kustomization
		if err := strict(&k); err != nil {
			return out, err
		}
		for _, r := range k.Spec.Ignore {
			rule := fluxRule{paths: r.Paths}
			if t := r.Target; t != nil {
				rule.group, rule.version, rule.kind, rule.name, rule.namespace = t.Group, t.Version, t.Kind, t.Name, t.Namespace
				rule.selectors = t.LabelSelector != "" || t.AnnotationSelector != ""
			}
			out.ignore = append(out.ignore, rule)
		}
		for _, p := range k.Spec.Patches {
			rule := fluxRule{paths: removePaths(p.Patch)}
			if t := p.Target; t != nil {
				rule.group, rule.version, rule.kind, rule.name, rule.namespace = t.Group, t.Version, t.Kind, t.Name, t.Namespace
				rule.selectors = t.LabelSelector != "" || t.AnnotationSelector != ""
			}
			out.patches = append(out.patches, rule)
		}
	case fluxGroup + "/v1beta2":
		var k kustomizev1beta2.Kustomization
		if err := strict(&k); err != nil {
			return out, err
		}
		for _, p := range k.Spec.Patches {
			rule := fluxRule{paths: removePaths(p.Patch)}
			if t := p.Target; t != nil {
				rule.group, rule.version, rule.kind, rule.name, rule.namespace = t.Group, t.Version, t.Kind, t.Name, t.Namespace
				rule.selectors = t.LabelSelector != "" || t.AnnotationSelector != ""
			}
			out.patches = append(out.patches, rule)
		}
		for _, p := range k.Spec.PatchesJSON6902 {
			t := p.Target
			rule := fluxRule{group: t.Group, version: t.Version, kind: t.Kind, name: t.Name, namespace: t.Namespace,
				selectors: t.LabelSelector != "" || t.AnnotationSelector != ""}
			for _, op := range p.Patch {
				if op.Op == "remove" {
					rule.paths = append(rule.paths, op.Path)
				}
			}
			out.json6902 = append(out.json6902, rule)
		}
	case fluxGroup + "/v1beta1":
		var k kustomizev1beta1.Kustomization
		if err := strict(&k); err != nil {
			return out, err
		}
		for _, p := range k.Spec.PatchesJSON6902 {
			t := p.Target
			rule := fluxRule{group: t.Group, version: t.Version, kind: t.Kind, name: t.Name, namespace: t.Namespace,
				selectors: t.LabelSelector != "" || t.AnnotationSelector != ""}
			for _, op := range p.Patch {
				if op.Op == "remove" {
					rule.paths = append(rule.paths, op.Path)
				}
			}
			out.json6902 = append(out.json6902, rule)
		}
	default:
		return out, fmt.Errorf("apiVersion %q is not one of kustomize-controller's Kustomization versions (%s/v1, v1beta2, v1beta1)", av, fluxGroup)
	}
	return out, nil
}

// removePaths returns the paths of the remove operations in a spec.patches patch, which
// kustomize reads as JSON6902 when it is a YAML or JSON list (otherwise it is a strategic merge
// patch, which removes nothing this way).
func removePaths(patch string) []string {
	var ops []struct {
		Op   string `json:"op"`
		Path string `json:"path"`
	}
	if sigsyaml.Unmarshal([]byte(patch), &ops) != nil {
		return nil
	}
	var out []string
	for _, op := range ops {
		if op.Op == "remove" {
			out = append(out, op.Path)
		}
	}
	return out
}

// holds reports, as an error, whether the decoded Kustomization lacks the gate on f in the given
// form: a rule whose target is exactly f's object (no version, no label or annotation selector)
// covering f's pointer.
func (k fluxTyped) holds(form string, f core.Field) error {
	rules, where := k.ignore, "spec.ignore"
	switch form {
	case FormPatch:
		rules, where = k.patches, "spec.patches"
	case FormPatchesJSON6902:
		rules, where = k.json6902, "spec.patchesJson6902"
	}
	for _, r := range rules {
		if r.group == f.Group && r.version == "" && r.kind == f.Kind && r.name == f.Name && r.namespace == f.Namespace && !r.selectors {
			for _, p := range r.paths {
				if p == f.Path {
					return nil
				}
			}
		}
	}
	return fmt.Errorf("decoded as %s, its %s has no rule for %s", k.apiVersion, where, f)
}
