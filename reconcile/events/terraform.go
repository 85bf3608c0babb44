package events

import (
	"fmt"
	"sort"
	"strings"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/core/fielddiff"
)

// TFIndex is a TerraformIndex over a repository's .tf files: resources are found by the literal
// value of a top-level attribute (name = "kafka-consumer"). Attributes set by an expression
// (name = var.name) cannot be matched. It is immutable once built and safe for concurrent use.
type TFIndex struct {
	byAttr map[string]core.Field // type \x00 attr \x00 canonical value -> resource; ambiguous keys map to the zero Field
	values map[core.Field]core.Value
}

var (
	_ TerraformIndex  = (*TFIndex)(nil)
	_ TerraformValues = (*TFIndex)(nil)
)

// TFIndexFromFiles parses the .tf files among files (repository-relative path -> content) with
// fielddiff; other files are skipped. A file that does not parse is an error naming it.
func TFIndexFromFiles(files map[string][]byte) (*TFIndex, error) {
	paths := make([]string, 0, len(files))
	for p := range files {
		if strings.HasSuffix(p, ".tf") {
			paths = append(paths, p)
		}
	}
	sort.Strings(paths)
	ix := &TFIndex{byAttr: map[string]core.Field{}, values: map[core.Field]core.Value{}}
	for _, p := range paths {
		snap, err := fielddiff.Parse(p, files[p])
		if err != nil {
			return nil, fmt.Errorf("terraform index: %s: %w", p, err)
		}
		for _, f := range snap.Fields() {
			v, _ := snap.Get(f)
			ix.values[f] = v
			rtype, ok := resourceType(f.Resource)
			toks := f.PointerTokens()
			if !ok || len(toks) != 1 || v.IsExpr() {
				continue
			}
			key := rtype + "\x00" + toks[0] + "\x00" + v.JSON()
			if old, dup := ix.byAttr[key]; dup && old != f.Object() {
				ix.byAttr[key] = core.Field{} // two resources share the value: refuse to guess
				continue
			}
			ix.byAttr[key] = f.Object()
		}
	}
	return ix, nil
}

// resourceType is "aws_autoscaling_group" for "aws_autoscaling_group.consumer"; data sources,
// modules, variables and locals are not resources.
func resourceType(addr string) (string, bool) {
	t, _, ok := strings.Cut(addr, ".")
	if !ok || t == "data" || t == "module" || t == "var" || t == "local" || t == "output" {
		return "", false
	}
	return t, true
}

// FindResource implements TerraformIndex. A value shared by two resources of the type finds none.
func (ix *TFIndex) FindResource(resourceType, attr string, v core.Value) (core.Field, bool) {
	f, ok := ix.byAttr[resourceType+"\x00"+attr+"\x00"+v.JSON()]
	return f, ok && !f.IsZero()
}

// Value implements TerraformValues.
func (ix *TFIndex) Value(f core.Field) (core.Value, bool) {
	v, ok := ix.values[f]
	return v, ok
}
