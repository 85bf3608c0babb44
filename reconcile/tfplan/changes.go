package tfplan

import (
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	tfjson "github.com/hashicorp/terraform-json"

	"github.com/parleyhq/parley/core"
)

// Action is what a plan does to a resource, as a change reports it.
type Action string

// Actions.
const (
	ActionCreate  Action = "create"
	ActionUpdate  Action = "update"
	ActionDelete  Action = "delete"
	ActionReplace Action = "replace" // ["delete","create"] or ["create","delete"]
	// ActionDrift is a change Terraform found made outside Terraform (resource_drift).
	ActionDrift Action = "drift"
)

// Placeholders printed instead of values.
const (
	// Sensitive stands for a sensitive value in every output.
	Sensitive = "(sensitive)"
	// KnownAfterApply is the expression of a value Terraform only knows once it applies the plan.
	KnownAfterApply = "(known after apply)"
)

// Change is one attribute a plan changes.
type Change struct {
	Field   core.Field
	Address string // the resource instance's address in the plan, e.g. module.kafka.aws_autoscaling_group.consumer
	Action  Action
	// Old and New are the values before and after; absent when the attribute is unset (null or an
	// empty collection). New is the expression KnownAfterApply when Terraform only knows it after
	// applying. For a Sensitive change they are the real values: print Redacted() instead.
	Old, New  core.Value
	Unknown   bool // New is known only after apply
	Sensitive bool // before_sensitive or after_sensitive marks the value (or something above it)
}

// Redacted returns the change as it may be printed: a sensitive change's present values become
// the string Sensitive.
func (c Change) Redacted() Change {
	if !c.Sensitive {
		return c
	}
	if !c.Old.Absent() {
		c.Old = core.StringValue(Sensitive)
	}
	if !c.New.Absent() && !c.Unknown {
		c.New = core.StringValue(Sensitive)
	}
	return c
}

// String describes the change in one line; sensitive values are redacted.
func (c Change) String() string {
	r := c.Redacted()
	n := r.New.String()
	if c.Unknown {
		n = KnownAfterApply
	}
	return fmt.Sprintf("%s %s: %s -> %s", c.Action, c.Address, r.Old, n)
}

// Result is what a plan changes.
type Result struct {
	FormatVersion    string
	TerraformVersion string
	Timestamp        time.Time // when the plan was made; zero when the plan does not say
	// Changes are the attributes resource_changes change, in the plan's resource order and by
	// pointer within a resource.
	Changes []Change
	// Drift are the attributes resource_drift reports changed outside Terraform.
	Drift []Change
	// Notes say what could not be mapped or judged as asked: module calls whose source is not a
	// local path, actions Parley does not judge, replacements that change no attribute.
	Notes []string
	// Unjudged is true when a note is about a change the plan makes and Parley does not judge (a
	// forget, an action it does not know, a change without an address): the verdicts do not cover
	// the whole plan, so it cannot pass on them alone (Result.Conclusion).
	Unjudged bool
}

// Conclusion is the plan's conclusion: Conclusion of its judgements, but at best action_required
// when part of the plan was not judged, since what Parley cannot judge never passes.
func (r Result) Conclusion(js []Judgement) string {
	c := Conclusion(js)
	if r.Unjudged && (c == "success" || c == "neutral") {
		return "action_required"
	}
	return c
}

// Options says where the plan's configuration lives in the repository.
type Options struct {
	// ModuleDir is the root module's directory relative to the repository root, "." (the default)
	// for the root: the directory terraform plan ran in. Resources of a module called with a local
	// source ("./modules/x") are addressed in that module's directory.
	ModuleDir string
}

// maxDepth bounds how deep a value is flattened; below it the rest is one value.
const maxDepth = 64

// Extract lists the attributes p changes. It does not fail on odd entries (a missing change, an
// unknown action): they are skipped with a note.
func Extract(p *tfjson.Plan, o Options) (Result, error) {
	dir := o.ModuleDir
	if dir == "" {
		dir = "."
	}
	dir = path.Clean(strings.ReplaceAll(dir, "\\", "/"))
	if path.IsAbs(dir) || dir == ".." || strings.HasPrefix(dir, "../") {
		return Result{}, fmt.Errorf("module directory %q is not inside the repository (want a path relative to its root, such as infra/kafka)", o.ModuleDir)
	}
	res := Result{FormatVersion: p.FormatVersion, TerraformVersion: p.TerraformVersion}
	if t, err := time.Parse(time.RFC3339, p.Timestamp); err == nil {
		res.Timestamp = t.UTC()
	}
	m := mapper{dir: dir, noted: map[string]bool{}, res: &res}
	if p.Config != nil {
		m.root = p.Config.RootModule
	}
	for _, rc := range p.ResourceChanges {
		if c := m.resource(rc, false); c != nil {
			res.Changes = append(res.Changes, c...)
		}
	}
	for _, rc := range p.ResourceDrift {
		if c := m.resource(rc, true); c != nil {
			res.Drift = append(res.Drift, c...)
		}
	}
	return res, nil
}

type mapper struct {
	dir   string
	root  *tfjson.ConfigModule
	noted map[string]bool
	res   *Result
}

func (m *mapper) note(key, format string, args ...any) {
	if m.noted[key] {
		return
	}
	m.noted[key] = true
	m.res.Notes = append(m.res.Notes, fmt.Sprintf(format, args...))
}

// resource lists the attribute changes of one resource change.
func (m *mapper) resource(rc *tfjson.ResourceChange, drift bool) []Change {
	if rc == nil || rc.Change == nil {
		return nil
	}
	if rc.Mode == tfjson.DataResourceMode {
		return nil // data sources are read, not written
	}
	if rc.Address == "" {
		m.note("no-address", "a resource change without an address was skipped: not judged")
		m.res.Unjudged = true
		return nil
	}
	if rc.DeposedKey != "" {
		return nil // a deposed object of an earlier replacement: it is destroyed, not configured
	}
	a := rc.Change.Actions
	var act Action
	switch {
	case drift && (a.Update() || a.Delete()):
		act = ActionDrift
	case a.NoOp() || a.Read() || len(a) == 0:
		return nil
	case a.Create():
		act = ActionCreate
	case a.Update():
		act = ActionUpdate
	case a.Delete():
		act = ActionDelete
	case a.Replace():
		act = ActionReplace
	case a.Forget():
		m.note("forget:"+rc.Address, "%s: removed from the state without being destroyed (forget): not judged", rc.Address)
		m.res.Unjudged = true
		return nil
	default:
		m.note("action:"+rc.Address, "%s: actions %v are not judged", rc.Address, actionList(a))
		m.res.Unjudged = true
		return nil
	}
	module, resource := m.locate(rc)
	obj := core.TFField(module, resource, "")
	c := rc.Change
	var old, new map[string]leaf
	if act != ActionCreate {
		old = leaves(c.Before, nil)
	}
	if act != ActionDelete && !(drift && a.Delete()) {
		new = leaves(c.After, c.AfterUnknown)
	}
	ptrs := make([]string, 0, len(old)+len(new))
	for p := range old {
		ptrs = append(ptrs, p)
	}
	for p := range new {
		if _, ok := old[p]; !ok {
			ptrs = append(ptrs, p)
		}
	}
	sort.Strings(ptrs)
	var out []Change
	for _, p := range ptrs {
		o, n := old[p], new[p]
		if !n.unknown && o.value == n.value {
			continue // unchanged, sensitive or not: compared on the real values
		}
		ch := Change{Field: obj, Address: rc.Address, Action: act, Old: o.value, New: n.value, Unknown: n.unknown}
		ch.Field.Path = p
		ch.Sensitive = sensitiveAt(c.BeforeSensitive, p) || sensitiveAt(c.AfterSensitive, p)
		out = append(out, ch)
	}
	if act == ActionReplace && len(out) == 0 {
		reason := ""
		if rc.ActionReason != "" {
			reason = " (" + string(rc.ActionReason) + ")"
		}
		m.note("replace:"+rc.Address, "%s: replaced%s without an attribute change: nothing to judge", rc.Address, reason)
	}
	return out
}

func actionList(a tfjson.Actions) string {
	s := make([]string, len(a))
	for i, x := range a {
		s[i] = string(x)
	}
	return "[" + strings.Join(s, ",") + "]"
}

// leaf is one flattened value: a canonical Value, or unknown.
type leaf struct {
	value   core.Value
	unknown bool
}

// leaves flattens a resource's attributes into leaves by pointer. unknown is the after_unknown
// tree (nil for none): true at a leaf or above it makes the value known after apply.
func leaves(v, unknown any) map[string]leaf {
	out := map[string]leaf{}
	flatten(v, unknown, "", 0, out)
	return out
}

func flatten(v, unk any, ptr string, depth int, out map[string]leaf) {
	if b, ok := unk.(bool); ok && b {
		if ptr != "" {
			out[ptr] = leaf{value: core.ExprValue(KnownAfterApply), unknown: true}
		}
		return
	}
	if depth >= maxDepth {
		if ptr != "" && !unset(v) {
			out[ptr] = leaf{value: valueOf(v), unknown: anyTrue(unk, 0)}
			if out[ptr].unknown {
				out[ptr] = leaf{value: core.ExprValue(KnownAfterApply), unknown: true}
			}
		}
		return
	}
	switch x := v.(type) {
	case map[string]any:
		um, _ := unk.(map[string]any)
		for k, c := range x {
			flatten(c, um[k], ptr+"/"+core.EscapePointerToken(k), depth+1, out)
		}
		for k, u := range um {
			if _, ok := x[k]; !ok {
				flatten(nil, u, ptr+"/"+core.EscapePointerToken(k), depth+1, out)
			}
		}
	case []any:
		ua, _ := unk.([]any)
		scalars := true
		for _, c := range x {
			scalars = scalars && isScalar(c)
		}
		for _, u := range ua {
			if _, isBool := u.(bool); !isBool {
				scalars = false
			}
		}
		if scalars && ptr != "" {
			if anyTrue(unk, 0) {
				out[ptr] = leaf{value: core.ExprValue(KnownAfterApply), unknown: true}
			} else if len(x) > 0 {
				out[ptr] = leaf{value: valueOf(x)}
			}
			return
		}
		for i := 0; i < max(len(x), len(ua)); i++ {
			var c, u any
			if i < len(x) {
				c = x[i]
			}
			if i < len(ua) {
				u = ua[i]
			}
			flatten(c, u, ptr+"/"+strconv.Itoa(i), depth+1, out)
		}
	case nil:
		switch u := unk.(type) {
		case map[string]any:
			flatten(map[string]any{}, u, ptr, depth, out)
		case []any:
			flatten([]any{}, u, ptr, depth, out)
		}
	default:
		if ptr != "" {
			out[ptr] = leaf{value: valueOf(x)}
		}
	}
}

func isScalar(v any) bool {
	switch v.(type) {
	case map[string]any, []any:
		return false
	}
	return true
}

// unset reports whether v counts as not set: null, or an empty object or array.
func unset(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case map[string]any:
		return len(x) == 0
	case []any:
		return len(x) == 0
	}
	return false
}

// valueOf is the canonical Value of a decoded JSON value.
func valueOf(v any) core.Value {
	if s, ok := v.(string); ok {
		return core.StringValue(s)
	}
	cv, err := core.JSONValue(v)
	if err != nil {
		return core.StringValue(fmt.Sprint(v))
	}
	return cv
}

// anyTrue reports whether a mask (after_unknown, *_sensitive) holds true anywhere.
func anyTrue(mask any, depth int) bool {
	if depth > maxDepth*4 {
		return true // deeper than any plan writes: be safe
	}
	switch x := mask.(type) {
	case bool:
		return x
	case map[string]any:
		for _, c := range x {
			if anyTrue(c, depth+1) {
				return true
			}
		}
	case []any:
		for _, c := range x {
			if anyTrue(c, depth+1) {
				return true
			}
		}
	}
	return false
}

// sensitiveAt reports whether a sensitivity mask marks the value at ptr: true at the pointer, at
// an ancestor, or anywhere below it (the leaf holds the marked part).
func sensitiveAt(mask any, ptr string) bool {
	for _, tok := range core.SplitPointer(ptr) {
		switch x := mask.(type) {
		case bool:
			return x
		case map[string]any:
			mask = x[tok]
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(x) {
				return false
			}
			mask = x[i]
		default:
			return false
		}
	}
	return anyTrue(mask, 0)
}

// locate maps a resource instance address to the module directory and the resource address in
// it. Resources in modules called with a local source go to that module's directory; others keep
// their full address under the root module's directory, with a note.
func (m *mapper) locate(rc *tfjson.ResourceChange) (module, resource string) {
	steps, rest, ok := splitModules(rc.Address)
	if !ok {
		m.note("address:"+rc.Address, "%s: the module part of the address could not be read; the resource keeps its full address under %s", rc.Address, m.dir)
		return m.dir, rc.Address
	}
	if len(steps) == 0 {
		return m.dir, rc.Address
	}
	dir, cfg := m.dir, m.root
	for i, st := range steps {
		prefix := strings.Join(stepTexts(steps[:i+1]), ".")
		var call *tfjson.ModuleCall
		if cfg != nil {
			call = cfg.ModuleCalls[st.name]
		}
		switch {
		case call == nil:
			m.note("module:"+prefix, "%s: the plan has no configuration for this module call; its resources keep their full address under %s", prefix, m.dir)
			return m.dir, rc.Address
		case st.key != "":
			m.note("module:"+prefix, "%s: an instance of a module called with count or for_each; its resources keep their full address under %s", prefix, m.dir)
			return m.dir, rc.Address
		case !strings.HasPrefix(call.Source, "./") && !strings.HasPrefix(call.Source, "../"):
			m.note("module:"+prefix, "%s: module source %q is not a local path; its resources keep their full address under %s", prefix, clip(call.Source, 200), m.dir)
			return m.dir, rc.Address
		}
		next := path.Join(dir, call.Source)
		if next == ".." || strings.HasPrefix(next, "../") {
			m.note("module:"+prefix, "%s: module source %q is outside the repository; its resources keep their full address under %s", prefix, clip(call.Source, 200), m.dir)
			return m.dir, rc.Address
		}
		dir, cfg = next, call.Module
	}
	return dir, rest
}

type moduleStep struct{ name, key string }

func stepTexts(steps []moduleStep) []string {
	out := make([]string, len(steps))
	for i, s := range steps {
		out[i] = "module." + s.name + s.key
	}
	return out
}

// splitModules splits "module.a.module.b[\"k\"].aws_x.y" into its module steps and the
// resource address within the innermost module ("aws_x.y").
func splitModules(addr string) (steps []moduleStep, rest string, ok bool) {
	rest = addr
	for strings.HasPrefix(rest, "module.") {
		s := rest[len("module."):]
		end := strings.IndexAny(s, ".[")
		if end <= 0 {
			return nil, "", false
		}
		st := moduleStep{name: s[:end]}
		s = s[end:]
		if s[0] == '[' {
			k, n, ok := instanceKey(s)
			if !ok {
				return nil, "", false
			}
			st.key, s = k, s[n:]
		}
		if !strings.HasPrefix(s, ".") || len(s) == 1 {
			return nil, "", false
		}
		steps = append(steps, st)
		rest = s[1:]
	}
	return steps, rest, true
}

// instanceKey reads a leading [0] or ["key"] (with JSON-style escapes) and returns it and its
// length.
func instanceKey(s string) (string, int, bool) {
	if len(s) < 3 || s[0] != '[' {
		return "", 0, false
	}
	if s[1] == '"' {
		for i := 2; i < len(s); i++ {
			switch s[i] {
			case '\\':
				i++
			case '"':
				if i+1 < len(s) && s[i+1] == ']' {
					return s[:i+2], i + 2, true
				}
				return "", 0, false
			}
		}
		return "", 0, false
	}
	end := strings.IndexByte(s, ']')
	if end < 2 {
		return "", 0, false
	}
	if _, err := strconv.Atoi(s[1:end]); err != nil {
		return "", 0, false
	}
	return s[:end+1], end + 1, true
}
