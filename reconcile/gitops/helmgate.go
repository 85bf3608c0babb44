package gitops

import (
	"fmt"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"sigs.k8s.io/kustomize/kyaml/yaml"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/parleyhq/parley/core"
)

// A Flux HelmRelease has its own per-field pause: spec.driftDetection.ignore, a list of rules of
// JSON pointers and a target selector, the HelmRelease counterpart of a Kustomization's spec.ignore
// (helm-controller's v2 API). Parley writes and removes its rules there exactly as it does
// spec.ignore: one rule per object, selecting it by group, kind, name and namespace, recorded in
// the parley.dev/gates annotation.
//
// helm-controller corrects drift only when spec.driftDetection.mode is "enabled"; with "warn" or
// the default "disabled" it reverts nothing, so the rule changes nothing until drift detection is
// enabled. Parley turns it on only where the policy allows (gitops { enable_helm_drift_detection =
// true }), recording the mode it found so that the last resume puts it back.

// KindHelmRelease is a Flux HelmRelease's kind.
const KindHelmRelease = "HelmRelease"

const helmGroup = "helm.toolkit.fluxcd.io"

var helmIgnorePath = []string{"spec", "driftDetection", "ignore"}

// helmTyped is a HelmRelease as helm-controller's API types decode it: its drift detection mode
// and ignore rules.
type helmTyped struct {
	mode  string
	rules []fluxRule
}

// decodeHelm decodes a HelmRelease with github.com/fluxcd/helm-controller/api v2 (v1.6.0),
// strictly, as the API server's schema would.
func decodeHelm(n *yaml.RNode) (helmTyped, error) {
	if av := n.GetApiVersion(); av != helmGroup+"/v2" {
		return helmTyped{}, fmt.Errorf("apiVersion %q: Parley gates HelmReleases of %s/v2 (helm-controller v1.x)", av, helmGroup)
	}
	s, err := n.String()
	if err != nil {
		return helmTyped{}, err
	}
	var hr helmv2.HelmRelease
	if err := sigsyaml.UnmarshalStrict([]byte(s), &hr); err != nil {
		return helmTyped{}, fmt.Errorf("does not decode as a %s/v2 HelmRelease (helm-controller API v1.6.0): %w", helmGroup, err)
	}
	var out helmTyped
	if dd := hr.Spec.DriftDetection; dd != nil {
		out.mode = string(dd.Mode)
		for _, r := range dd.Ignore {
			rule := fluxRule{paths: r.Paths}
			if t := r.Target; t != nil {
				rule.group, rule.version, rule.kind, rule.name, rule.namespace = t.Group, t.Version, t.Kind, t.Name, t.Namespace
				rule.selectors = t.LabelSelector != "" || t.AnnotationSelector != ""
			}
			out.rules = append(out.rules, rule)
		}
	}
	return out, nil
}

// holds reports, as an error, whether the decoded HelmRelease lacks a rule for f's pointer whose
// target is exactly f's object.
func (h helmTyped) holds(f core.Field) error {
	for _, r := range h.rules {
		if r.group == f.Group && r.version == "" && r.kind == f.Kind && r.name == f.Name && r.namespace == f.Namespace && !r.selectors {
			for _, p := range r.paths {
				if p == f.Path {
					return nil
				}
			}
		}
	}
	return fmt.Errorf("decoded as a HelmRelease, its spec.driftDetection.ignore has no rule for %s", f)
}

// HelmDriftMode returns the spec.driftDetection.mode of the HelmRelease t in content ("disabled"
// when unset): whether helm-controller reverts drift at all.
func HelmDriftMode(path string, content []byte, t Target) (string, error) {
	nodes, err := readNodes(content)
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	for _, n := range nodes {
		if n.GetKind() == t.Kind && n.GetName() == t.Name && n.GetNamespace() == t.Namespace {
			h, err := decodeHelm(n)
			if err != nil {
				return "", fmt.Errorf("%s: %s: %w", path, t, err)
			}
			if h.mode == "" {
				return string(helmv2.DriftDetectionDisabled), nil
			}
			return h.mode, nil
		}
	}
	return "", fmt.Errorf("%s: no %s in the file", path, t)
}

func addHelmIgnore(obj *yaml.RNode, f core.Field) error { return addIgnoreRule(obj, helmIgnorePath, f) }

// removeHelmIgnore removes f's pointer, then the rule, the list and a driftDetection left empty.
func removeHelmIgnore(obj *yaml.RNode, f core.Field) error {
	if err := removeIgnoreRule(obj, helmIgnorePath, f); err != nil {
		return err
	}
	if dd, _ := obj.Pipe(yaml.Lookup("spec", "driftDetection")); dd != nil && dd.YNode().Kind == yaml.MappingNode && len(dd.YNode().Content) == 0 {
		return clearField(obj, []string{"spec"}, "driftDetection")
	}
	return nil
}

func driftDetectionEnabledBefore(gates []Gate) bool {
	for _, g := range gates {
		if g.EnabledDriftDetection {
			return true
		}
	}
	return false
}

// enableHelmDriftDetection sets spec.driftDetection.mode: enabled unless it is; it returns whether
// it changed the mode and the mode it found ("" when unset).
func enableHelmDriftDetection(obj *yaml.RNode) (changed bool, was string, err error) {
	dd, err := lookupCreate(obj, yaml.MappingNode, "spec", "driftDetection")
	if err != nil {
		return false, "", err
	}
	was = str(dd, "mode")
	if was == string(helmv2.DriftDetectionEnabled) {
		return false, "", nil
	}
	return true, was, dd.PipeE(yaml.SetField("mode", yaml.NewStringRNode(string(helmv2.DriftDetectionEnabled))))
}

// restoreHelmDriftMode puts spec.driftDetection.mode back as Parley found it.
func restoreHelmDriftMode(obj *yaml.RNode, was string) error {
	dd, err := obj.Pipe(yaml.Lookup("spec", "driftDetection"))
	if err != nil || dd == nil {
		return err
	}
	if was == "" {
		_, err = dd.Pipe(yaml.Clear("mode"))
		return err
	}
	return dd.PipeE(yaml.SetField("mode", yaml.NewStringRNode(was)))
}
