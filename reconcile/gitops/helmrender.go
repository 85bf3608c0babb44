package gitops

import (
	"context"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"
	"helm.sh/helm/v3/pkg/chartutil"
)

// A chart that lives in the repository is rendered with the Helm SDK (helm.sh/helm/v3 v3.22.0),
// as helm-controller or Argo CD's repo server would render it for the release: its templates,
// the release's values over the chart's, the release name and namespace. Nothing is fetched:
// a chart from a chart repository or an OCI registry, or a dependency that is not unpacked in the
// chart's charts/ directory, is not rendered, and its objects are not in the inventory.

// helmSource is a release of a chart: what a HelmRelease or an Argo CD Helm source asks Helm for.
type helmSource struct {
	chartDir    string         // repository directory holding Chart.yaml
	releaseName string         // the release's name
	namespace   string         // the namespace namespaced objects without one go into
	values      map[string]any // the release's values, over the chart's values.yaml

	// Where an Argo CD source's values come from (argo is false for a Flux HelmRelease, whose
	// values are its spec.values): the repository paths of its in-repository helm.valueFiles in
	// order, its helm.values string (parsed) and its helm.valuesObject, each nil when unset.
	argo         bool
	valueFiles   []string
	valuesString map[string]any
	hasValues    bool // helm.values is set
	valuesObject map[string]any
	hasObject    bool // helm.valuesObject is set; Argo CD then ignores helm.values
	// source is which source of the Application (of the ApplicationSet's template) it is: an index
	// into spec.sources, -1 for spec.source, or sourceUnknown when discovery did not say; then
	// HelmValuesTarget finds it in the manager's document.
	source int
}

// sourceUnknown is a helmSource's source before it is resolved against the Application.
const sourceUnknown = -2

// fluxHelmSpec is the part of a HelmRelease (helm.toolkit.fluxcd.io/v2) discovery reads.
type fluxHelmSpec struct {
	ReleaseName     string `yaml:"releaseName"`
	TargetNamespace string `yaml:"targetNamespace"`
	Chart           struct {
		Spec struct {
			Chart     string `yaml:"chart"`
			SourceRef struct {
				Kind string `yaml:"kind"`
			} `yaml:"sourceRef"`
		} `yaml:"spec"`
	} `yaml:"chart"`
	ChartRef *struct {
		Kind string `yaml:"kind"`
	} `yaml:"chartRef"`
	Values     map[string]any `yaml:"values"`
	ValuesFrom []any          `yaml:"valuesFrom"`
}

// argoHelm is an Argo CD source's helm section.
type argoHelm struct {
	ReleaseName  string         `yaml:"releaseName"`
	ValueFiles   []string       `yaml:"valueFiles"`
	Values       string         `yaml:"values"`
	ValuesObject map[string]any `yaml:"valuesObject"`
	Parameters   []struct {
		Name  string `yaml:"name"`
		Value string `yaml:"value"`
	} `yaml:"parameters"`
}

// fluxHelmRelease reads a HelmRelease: the release of a chart in this repository, or why it is
// not rendered.
func (d *discovery) fluxHelmRelease(file string, doc document) (*helmSource, error) {
	var s fluxHelmSpec
	if spec := field(doc.node, "spec"); spec != nil {
		if err := decodeSpec(spec, &s); err != nil {
			return nil, fmt.Errorf("spec: %w", err)
		}
	}
	if s.ChartRef != nil {
		return nil, fmt.Errorf("its chart comes from a %s (spec.chartRef), which Parley does not fetch: its objects are not rendered", s.ChartRef.Kind)
	}
	if k := s.Chart.Spec.SourceRef.Kind; k != "GitRepository" {
		return nil, fmt.Errorf("its chart %q comes from a %s, which Parley does not fetch: its objects are not rendered", s.Chart.Spec.Chart, k)
	}
	dir := repoDir(s.Chart.Spec.Chart)
	if _, ok := d.files[path.Join(dir, "Chart.yaml")]; !ok {
		return nil, fmt.Errorf("its chart %s has no Chart.yaml in this repository: its objects are not rendered", dir)
	}
	if len(s.ValuesFrom) > 0 {
		d.problem("%s: HelmRelease %s/%s: spec.valuesFrom is read from the cluster, which Parley cannot; rendered with spec.values only", file, doc.key.namespace, doc.key.name)
	}
	ns := doc.key.namespace
	if s.TargetNamespace != "" {
		ns = s.TargetNamespace
	}
	name := s.ReleaseName
	if name == "" {
		// helm-controller's default: the HelmRelease's name, prefixed with the target namespace.
		name = doc.key.name
		if s.TargetNamespace != "" {
			name = s.TargetNamespace + "-" + doc.key.name
		}
	}
	return &helmSource{chartDir: dir, releaseName: name, namespace: ns, values: s.Values}, nil
}

// argoHelmSource reads an Argo CD source whose path is a chart in this repository. As Argo CD's
// repo server does, it passes Helm the source's valueFiles in order, then helm.valuesObject, or
// helm.values (a YAML string) when there is no valuesObject: Argo CD ignores helm.values once
// helm.valuesObject is set (ApplicationSourceHelm.ValuesYAML).
func (d *discovery) argoHelmSource(app string, src argoSource, destNS string) (*helmSource, error) {
	dir := repoDir(src.Path)
	h := &helmSource{chartDir: dir, namespace: destNS, argo: true, source: sourceUnknown}
	vals := map[string]any{}
	for _, vf := range src.Helm.ValueFiles {
		p := path.Join(dir, vf)
		b, ok := d.files[p]
		if !ok {
			return nil, fmt.Errorf("value file %s is not in the repository", p)
		}
		m, err := unmarshalStringMap(b)
		if err != nil {
			return nil, fmt.Errorf("value file %s: %w", p, err)
		}
		vals = chartutil.CoalesceTables(m, vals)
		h.valueFiles = append(h.valueFiles, p)
	}
	if src.Helm.Values != "" {
		var err error
		if h.valuesString, err = unmarshalStringMap([]byte(src.Helm.Values)); err != nil {
			return nil, fmt.Errorf("helm.values: %w", err)
		}
		h.hasValues = true
	}
	switch {
	case src.Helm.ValuesObject != nil:
		h.valuesObject, h.hasObject = src.Helm.ValuesObject, true
		vals = chartutil.CoalesceTables(cloneValues(src.Helm.ValuesObject), vals)
	case h.valuesString != nil:
		vals = chartutil.CoalesceTables(cloneValues(h.valuesString), vals)
	}
	if len(src.Helm.Parameters) > 0 {
		return nil, fmt.Errorf("helm.parameters are not applied by Parley's rendering")
	}
	h.releaseName = src.Helm.ReleaseName
	if h.releaseName == "" {
		h.releaseName = app
	}
	h.values = vals
	return h, nil
}

// cloneValues copies a values tree deeply, keeping its scalars' types (CoalesceTables writes into
// its first argument).
func cloneValues(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = cloneValue(v)
	}
	return out
}

func cloneValue(v any) any {
	switch c := v.(type) {
	case map[string]any:
		return cloneValues(c)
	case []any:
		out := make([]any, len(c))
		for i, e := range c {
			out[i] = cloneValue(e)
		}
		return out
	}
	return v
}

// renderedDoc is one object a chart renders, with the template that produced it.
type renderedDoc struct {
	template string // repository path of the template
	doc      document
}

// render renders a release of a chart in the repository with the discovery's HelmRenderer.
func (d *discovery) render(h *helmSource) ([]renderedDoc, error) {
	prefix := h.chartDir + "/"
	if h.chartDir == "." {
		prefix = ""
	}
	job := HelmJob{Chart: h.chartDir, Files: map[string][]byte{}, Release: h.releaseName, Namespace: h.namespace}
	for name, b := range d.files {
		if strings.HasPrefix(name, prefix) {
			job.Files[strings.TrimPrefix(name, prefix)] = b
		}
	}
	values, err := yamlv3.Marshal(h.values)
	if err != nil {
		return nil, fmt.Errorf("values for chart %s: %w", h.chartDir, err)
	}
	job.Values = string(values)
	helm, ctx := d.helm, d.ctx
	if helm == nil { // a discovery made to render again (HelmValuesKey) from an Inventory of old
		helm = InProcess{}
	}
	if ctx == nil {
		ctx = context.Background()
	}
	out, err := helm.RenderHelm(ctx, job)
	if err != nil {
		return nil, err
	}
	var docs []renderedDoc
	for _, n := range slices.Sorted(maps.Keys(out)) {
		if !strings.HasSuffix(n, ".yaml") && !strings.HasSuffix(n, ".yml") {
			continue // NOTES.txt and the like
		}
		if strings.HasPrefix(path.Base(n), "_") || strings.TrimSpace(out[n]) == "" {
			continue
		}
		// Engine keys are <chart name>/templates/...; subcharts <chart>/charts/<sub>/templates/...
		rel := n
		if i := strings.IndexByte(n, '/'); i >= 0 {
			rel = n[i+1:]
		}
		tmpl := path.Join(h.chartDir, rel)
		parsed, err := readDocuments([]byte(out[n]))
		if err != nil {
			return nil, fmt.Errorf("chart %s: %s renders YAML that does not parse: %w", h.chartDir, tmpl, err)
		}
		for _, doc := range parsed {
			if doc.key.namespace == "" && !clusterScoped(doc.key.group, doc.key.kind) {
				doc.key.namespace = h.namespace
			}
			docs = append(docs, renderedDoc{template: tmpl, doc: doc})
		}
	}
	return docs, nil
}
