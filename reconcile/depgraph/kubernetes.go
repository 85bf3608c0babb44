package depgraph

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/core/fielddiff"
	"github.com/parleyhq/parley/reconcile/internal/yamlvalue"
)

// k8sObject is a manifest's object as far as dependencies go.
type k8sObject struct {
	id  core.Field // group, kind, namespace, name; Path ""
	obj map[string]any
}

// podSpecPaths is where each workload kind keeps its pod spec.
var podSpecPaths = map[string][]string{
	"Deployment":  {"spec", "template", "spec"},
	"StatefulSet": {"spec", "template", "spec"},
	"DaemonSet":   {"spec", "template", "spec"},
	"ReplicaSet":  {"spec", "template", "spec"},
	"Job":         {"spec", "template", "spec"},
	"CronJob":     {"spec", "jobTemplate", "spec", "template", "spec"},
	"Pod":         {"spec"},
}

// readManifests reads the Kubernetes objects of a YAML or JSON file. A file that cannot hold an
// object (no "kind" in it) is skipped; one that does not parse is reported.
func (b *builder) readManifests(p string, content []byte) {
	if !bytes.Contains(content, []byte("kind")) {
		return
	}
	defer func() {
		if r := recover(); r != nil {
			b.errs = append(b.errs, fmt.Errorf("%s: parsing failed: %v", p, r))
		}
	}()
	// yaml.v3 builds each document whole, about 150 bytes of memory per byte: a file past the
	// budgets fielddiff refuses it under (an 8 MiB file of small keys held 500 MB and more) is not
	// read here either.
	if err := fielddiff.CheckYAMLBudgets(p, content); err != nil {
		b.errs = append(b.errs, err)
		return
	}
	// Not yaml.v3's Decode into an any: it compares every key of a mapping with every other, so
	// one ConfigMap of 90,000 keys took 47 s (issue 34). yamlvalue gives the same values in
	// linear time.
	dec := yamlvalue.NewDecoder(content)
	var objs []k8sObject
	for doc := 1; ; doc++ {
		v, err := dec.Decode()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			msg := fmt.Errorf("%s: document %d: %w", p, doc, err)
			if bytes.Contains(content, []byte("{{")) {
				msg = fmt.Errorf("%s: document %d: a Helm or Go template ({{ ... }}), not a manifest: %w", p, doc, err)
			}
			b.errs = append(b.errs, msg)
			return // the decoder cannot resynchronise; keep nothing of a broken file
		}
		root, ok := asMap(v)
		if !ok {
			continue
		}
		items := []any{root}
		if kind := str(root["kind"]); strings.HasSuffix(kind, "List") {
			if list, ok := root["items"].([]any); ok {
				items = list
			}
		}
		for _, it := range items {
			m, ok := asMap(it)
			if !ok {
				continue
			}
			if o, ok := identify(m); ok {
				objs = append(objs, o)
			}
		}
	}
	b.objects = append(b.objects, objs...)
}

func identify(m map[string]any) (k8sObject, bool) {
	apiVersion, kind := str(m["apiVersion"]), str(m["kind"])
	meta, _ := asMap(m["metadata"])
	name := str(meta["name"])
	if apiVersion == "" || kind == "" || name == "" {
		return k8sObject{}, false
	}
	group := groupOf(apiVersion)
	ns := str(meta["namespace"])
	if ns == "" {
		ns = "default"
	}
	return k8sObject{id: core.K8sField(group, kind, ns, name, ""), obj: m}, true
}

// groupOf is the API group of an apiVersion: "apps" for apps/v1, "" (the core group) for v1.
func groupOf(apiVersion string) string {
	g, _, ok := strings.Cut(apiVersion, "/")
	if !ok || g == core.CoreGroup {
		return ""
	}
	return g
}

// asMap returns a YAML mapping as map[string]any; keys that are not strings are written as text.
func asMap(v any) (map[string]any, bool) {
	switch m := v.(type) {
	case map[string]any:
		return m, true
	case map[any]any:
		out := make(map[string]any, len(m))
		for k, v := range m {
			out[str(k)] = v
		}
		return out, true
	}
	return nil, false
}

// str returns a scalar as text ("" for anything else).
func str(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case int:
		return strconv.Itoa(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case uint64:
		return strconv.FormatUint(v, 10)
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	case bool:
		return strconv.FormatBool(v)
	}
	return ""
}

func dig(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := asMap(v)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

func list(v any) []any {
	l, _ := v.([]any)
	return l
}

func describeObject(f core.Field) string { return f.Kind + " " + f.Namespace + "/" + f.Name }

// kubernetes adds the edges of the objects read.
func (b *builder) kubernetes() {
	workloads := map[core.Field]k8sObject{}
	for _, o := range b.objects {
		if _, ok := podSpecPaths[o.id.Kind]; ok {
			workloads[o.id] = o
		}
	}
	for _, o := range b.objects {
		if specPath, ok := podSpecPaths[o.id.Kind]; ok {
			b.podSpec(o, specPath)
		}
		if o.id.Kind == "HorizontalPodAutoscaler" {
			b.hpa(o, workloads)
		}
	}
}

// dataFields are the fields of a ConfigMap or Secret that a consumer of all its keys reads.
func dataFields(kind string) []string {
	if kind == "Secret" {
		return []string{"data", "stringData"}
	}
	return []string{"data", "binaryData"}
}

func (b *builder) podSpec(o k8sObject, specPath []string) {
	spec := dig(o.obj, specPath...)
	base := o.id.Child(specPath...)
	who := describeObject(o.id)
	ns := o.id.Namespace
	for _, group := range []string{"containers", "initContainers"} {
		for i, c := range list(dig(spec, group)) {
			cname := str(dig(c, "name"))
			cf := base.Child(group, strconv.Itoa(i))
			for j, env := range list(dig(c, "env")) {
				envName := str(dig(env, "name"))
				to := cf.Child("env", strconv.Itoa(j))
				for _, ref := range []struct{ key, kind string }{{"configMapKeyRef", "ConfigMap"}, {"secretKeyRef", "Secret"}} {
					r := dig(env, "valueFrom", ref.key)
					name, key := str(dig(r, "name")), str(dig(r, "key"))
					if name == "" || key == "" {
						continue
					}
					src := core.K8sField("", ref.kind, ns, name, "")
					via := fmt.Sprintf("%s container %s env %s from %s key %s", who, cname, envName, describeObject(src), key)
					b.add(src.Child("data", key), to, via)
					if ref.kind == "Secret" {
						b.add(src.Child("stringData", key), to, via)
					}
				}
			}
			for j, ef := range list(dig(c, "envFrom")) {
				to := cf.Child("envFrom", strconv.Itoa(j))
				for _, ref := range []struct{ key, kind string }{{"configMapRef", "ConfigMap"}, {"secretRef", "Secret"}} {
					name := str(dig(ef, ref.key, "name"))
					if name == "" {
						continue
					}
					src := core.K8sField("", ref.kind, ns, name, "")
					via := fmt.Sprintf("%s container %s envFrom %s", who, cname, describeObject(src))
					for _, d := range dataFields(ref.kind) {
						b.add(src.Child(d), to, via)
					}
				}
			}
		}
	}
	for k, vol := range list(dig(spec, "volumes")) {
		vname := str(dig(vol, "name"))
		to := base.Child("volumes", strconv.Itoa(k))
		b.volumeSource(dig(vol, "configMap"), "ConfigMap", "name", ns, to, who+" volume "+vname)
		b.volumeSource(dig(vol, "secret"), "Secret", "secretName", ns, to, who+" volume "+vname)
		for l, s := range list(dig(vol, "projected", "sources")) {
			pto := to.Child("projected", "sources", strconv.Itoa(l))
			b.volumeSource(dig(s, "configMap"), "ConfigMap", "name", ns, pto, who+" projected volume "+vname)
			b.volumeSource(dig(s, "secret"), "Secret", "name", ns, pto, who+" projected volume "+vname)
		}
	}
}

// volumeSource adds the edges of a volume (or projected source) reading a ConfigMap or Secret:
// the keys its items list, or all of its data.
func (b *builder) volumeSource(v any, kind, nameKey, ns string, to core.Field, who string) {
	name := str(dig(v, nameKey))
	if name == "" {
		return
	}
	src := core.K8sField("", kind, ns, name, "")
	items := list(dig(v, "items"))
	if len(items) == 0 {
		via := who + " from " + describeObject(src)
		for _, d := range dataFields(kind) {
			b.add(src.Child(d), to, via)
		}
		return
	}
	for _, it := range items {
		key := str(dig(it, "key"))
		if key == "" {
			continue
		}
		via := who + " mounts key " + key + " of " + describeObject(src)
		for _, d := range dataFields(kind) {
			b.add(src.Child(d, key), to, via)
		}
	}
}

// hpa: the HPA drives its target's replicas, represented as the HPA depending on the target; its
// Resource metrics are measured against the target's containers' requests.
func (b *builder) hpa(o k8sObject, workloads map[core.Field]k8sObject) {
	ref := dig(o.obj, "spec", "scaleTargetRef")
	kind, name := str(dig(ref, "kind")), str(dig(ref, "name"))
	if kind == "" || name == "" {
		return
	}
	target := core.K8sField(groupOf(str(dig(ref, "apiVersion"))), kind, o.id.Namespace, name, "")
	who := describeObject(o.id)
	b.add(target.Child("spec", "replicas"), o.id.Child("spec", "scaleTargetRef"),
		fmt.Sprintf("%s scales %s (drives its spec.replicas)", who, describeObject(target)))
	resourceMetric := false
	for _, m := range list(dig(o.obj, "spec", "metrics")) {
		if t := str(dig(m, "type")); t == "Resource" || t == "ContainerResource" {
			resourceMetric = true
		}
	}
	w, ok := workloads[target]
	if !resourceMetric || !ok {
		return
	}
	specPath := podSpecPaths[kind]
	for i, c := range list(dig(w.obj, slices.Concat(specPath, []string{"containers"})...)) {
		from := target.Child(specPath...).Child("containers", strconv.Itoa(i), "resources", "requests")
		b.add(from, o.id.Child("spec", "metrics"), fmt.Sprintf("%s measures utilization against %s container %s resources.requests",
			who, describeObject(target), str(dig(c, "name"))))
	}
}
