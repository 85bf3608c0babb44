package policy

import (
	"sort"

	"github.com/parleyhq/parley/core"
)

// GitClaims is what Git claims now, as the ledger answers: the claim on a field, and the fields
// matching a pattern.
type GitClaims interface {
	Current(f core.Field) (core.Claim, bool, error)
	Fields(p core.FieldPattern) ([]core.Field, error)
}

// Overlay is a GitLookup that answers with a change's new values first (a pull request's head, a
// Terraform plan), then Git's: a change that raises max_size and desired_capacity together is
// checked against its own max_size (and the change to max_size is itself judged by that field's
// rules). An absent value in Head is a field the change removes. Git may be nil.
type Overlay struct {
	Git  GitClaims
	Head map[core.Field]core.Value
}

// GitValue implements GitLookup.
func (o Overlay) GitValue(f core.Field) (core.Value, bool, error) {
	if v, ok := o.Head[f]; ok {
		return v, !v.Absent(), nil
	}
	if o.Git == nil {
		return core.Value{}, false, nil
	}
	c, ok, err := o.Git.Current(f)
	if err != nil || !ok {
		return core.Value{}, false, err
	}
	return c.Value, !c.Value.Absent(), nil
}

// GitFields implements GitLookup.
func (o Overlay) GitFields(p core.FieldPattern) ([]core.Field, error) {
	set := map[core.Field]bool{}
	if o.Git != nil {
		fs, err := o.Git.Fields(p)
		if err != nil {
			return nil, err
		}
		for _, f := range fs {
			set[f] = true
		}
	}
	for f, v := range o.Head {
		if p.Match(f) {
			set[f] = !v.Absent()
		}
	}
	var out []core.Field
	for f, present := range set {
		if present {
			out = append(out, f)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out, nil
}
