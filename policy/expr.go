package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/parleyhq/parley/core"
)

// GitLookup answers questions about Git's current state for expressions (the git and git_values
// functions) and bounds that refer to another field, such as a Terraform max_size.
type GitLookup interface {
	// GitValue returns Git's current value of f; ok is false when Git does not hold f.
	GitValue(f core.Field) (v core.Value, ok bool, err error)
	// GitFields returns the fields Git holds that match p, in a stable order.
	GitFields(p core.FieldPattern) ([]core.Field, error)
}

// ClaimView is a claim as the policy sees it: resolved, trust-checked and with lifetimes applied.
// It is what the claim and other variables of an expression describe.
//
// Expressions convert a view to a cty object the first time they read it and keep the result: do
// not change a view after evaluating an expression over it.
type ClaimView struct {
	Claim      core.Claim // Actor.Name resolved; Intent, Motivation and Expires effective
	Git        bool       // the claim Git holds
	Rank       float64    // rank of the effective intent (0 when undeclared)
	Urgency    float64    // urgency of the effective motivation (0 when none or undeclared)
	Downgraded bool       // trust removed an asserted intent or motivation
	// SeenExpires replaces Claim.Expires in what conditions see when ExpiresOverridden: the claim
	// still ends at Claim.Expires (an expiry only shortens a claim), but its identity may not state
	// one, or the lifetime of a motivation it may not assert bounded it, and a condition must judge
	// the claim as it would be without that declaration (claim.expires != "" must not be bought).
	SeenExpires       time.Time
	ExpiresOverridden bool
	// Dependents are the fields that depend on the claim's field (the same for every claim on a
	// field), when the caller knows the repository's dependency graph.
	Dependents []core.Dependent

	val cty.Value // cached ClaimValue
}

func (v *ClaimView) cty() cty.Value {
	if v == nil {
		return cty.NullVal(claimType)
	}
	if v.val == cty.NilVal {
		v.val = ClaimValue(v)
	}
	return v.val
}

// EvalCache keeps what evaluations over one field build (the field object, the git functions
// bound to the lookup) for the next evaluation. Use one per field and lookup; the zero value is
// ready.
type EvalCache struct {
	field cty.Value
	funcs map[string]function.Function
}

// GitBinding is a reusable set of git functions whose lookup can be swapped, so that a caller
// deciding many fields builds the functions once. Not safe for concurrent use.
type GitBinding struct {
	lookup GitLookup
	funcs  map[string]function.Function
}

// ReadsOnlyFieldAndGit reports whether e reads nothing but the field and Git (not claim, other or
// now): its value for a field then stays the same while Git answers the same, so a caller that
// knows when that is (one commit) may keep it.
func (e *Expr) ReadsOnlyFieldAndGit() bool { return !e.usesClaim && !e.usesOther && !e.usesNow }

// NewGitBinding returns a binding with no lookup (git() then returns unknown).
func NewGitBinding() *GitBinding {
	b := &GitBinding{}
	b.funcs = gitFunctions(bindingLookup{b})
	return b
}

// Bind makes the functions read l until the next Bind.
func (b *GitBinding) Bind(l GitLookup) { b.lookup = l }

// Use makes evaluations with this cache call b's functions.
func (c *EvalCache) Use(b *GitBinding) { c.funcs = b.funcs }

// bindingLookup forwards to a binding's current lookup.
type bindingLookup struct{ b *GitBinding }

func (l bindingLookup) GitValue(f core.Field) (core.Value, bool, error) {
	if l.b.lookup == nil {
		return core.Value{}, false, nil
	}
	return l.b.lookup.GitValue(f)
}

func (l bindingLookup) GitFields(p core.FieldPattern) ([]core.Field, error) {
	if l.b.lookup == nil {
		return nil, nil
	}
	return l.b.lookup.GitFields(p)
}

// Env is what an expression is evaluated against. Claim and Other are nil where the expression
// cannot see them (bounds, owner conditions); Git may be nil, and git() then returns null.
type Env struct {
	Claim, Other *ClaimView
	Field        core.Field
	Now          time.Time
	Git          GitLookup
	Cache        *EvalCache // optional
}

// Expr is a compiled policy expression.
type Expr struct {
	expr   hcl.Expression
	Source string    // as written, for explanations
	Range  hcl.Range // where it is written
	// Memo is true when the result depends only on the claim's and other's profile attributes
	// (actor, intent, rank, motivation, ref, severity, urgency, source, git, yield, explicit,
	// downgraded): the arbiter may then cache the result per profile pair.
	Memo bool

	usesClaim, usesOther, usesField, usesNow, usesGit bool

	// konst is the value of an expression that reads nothing (min = 1), computed once.
	konst   cty.Value
	isConst bool

	// gitAddr is set for the common bound form git("<literal text and ${field.attr}>"): Number then
	// builds the address and reads Git directly instead of evaluating HCL.
	gitAddr []addrPart
}

// addrPart is a literal piece of an address template, or (attr != "") a field attribute.
type addrPart struct{ lit, attr string }

// compileGitAddr recognises git("...${field.x}...") and returns its template, or nil.
func compileGitAddr(x hcl.Expression) []addrPart {
	call, ok := x.(*hclsyntax.FunctionCallExpr)
	if !ok || call.Name != "git" || len(call.Args) != 1 || call.ExpandFinal {
		return nil
	}
	tmpl, ok := call.Args[0].(*hclsyntax.TemplateExpr)
	if !ok {
		return nil
	}
	var parts []addrPart
	for _, p := range tmpl.Parts {
		switch p := p.(type) {
		case *hclsyntax.LiteralValueExpr:
			if p.Val.Type() != cty.String || p.Val.IsNull() {
				return nil
			}
			parts = append(parts, addrPart{lit: p.Val.AsString()})
		case *hclsyntax.ScopeTraversalExpr:
			attr, ok := firstAttr(p.Traversal)
			if !ok || p.Traversal.RootName() != "field" || len(p.Traversal) != 2 {
				return nil
			}
			if _, known := fieldType.AttributeTypes()[attr]; !known {
				return nil
			}
			parts = append(parts, addrPart{attr: attr})
		default:
			return nil
		}
	}
	return parts
}

// fieldAttr is the string FieldValue gives attribute name of f.
func fieldAttr(f core.Field, name string) string {
	switch name {
	case "address":
		return f.String()
	case "object":
		return f.Object().String()
	case "scheme":
		return string(f.Scheme)
	case "group":
		if f.Scheme == core.SchemeKubernetes && f.Group == "" {
			return core.CoreGroup
		}
		return f.Group
	case "kind":
		return f.Kind
	case "namespace":
		return f.Namespace
	case "name":
		return f.Name
	case "module":
		return f.Module
	case "resource":
		return f.Resource
	case "path":
		return f.Path
	}
	return ""
}

// gitNumber is Number for the git("...") fast path.
func (e *Expr) gitNumber(env Env) (float64, bool, error) {
	var b strings.Builder
	for _, p := range e.gitAddr {
		if p.attr != "" {
			b.WriteString(fieldAttr(env.Field, p.attr))
		} else {
			b.WriteString(p.lit)
		}
	}
	f, err := core.ParseField(b.String())
	if err != nil {
		return 0, false, fmt.Errorf("%s: %w", e.Source, err)
	}
	if env.Git == nil {
		return 0, false, nil
	}
	v, ok, err := env.Git.GitValue(f)
	if err != nil {
		return 0, false, fmt.Errorf("git(%s): %w", f, err)
	}
	if !ok || v.Absent() || v.JSON() == "null" {
		return 0, false, nil
	}
	n, err := strconv.ParseFloat(v.JSON(), 64)
	if err != nil {
		// Not a plain JSON number: let cty convert it (a numeric string) or explain why not.
		return e.numberOf(ValueToCty(v))
	}
	return n, true, nil
}

// ProfileAttrs are the claim attributes a memoisable expression may read.
var profileAttrs = map[string]bool{
	"actor": true, "intent": true, "rank": true, "motivation": true, "ref": true, "severity": true,
	"urgency": true, "source": true, "git": true, "yield": true, "explicit": true, "downgraded": true,
}

// claimType is the object type of the claim and other variables.
var claimType = cty.Object(map[string]cty.Type{
	"actor": cty.String, "identity": cty.String, "source": cty.String,
	"intent": cty.String, "rank": cty.Number,
	"motivation": cty.String, "ref": cty.String, "severity": cty.String, "urgency": cty.Number,
	"value": cty.DynamicPseudoType, "git": cty.Bool, "yield": cty.Bool, "explicit": cty.Bool,
	"downgraded": cty.Bool, "at": cty.String, "expires": cty.String,
	"dependents": cty.List(dependentType), "asked": cty.Bool,
})

// dependentType is an element of claim.dependents: the dependent field's parts, as field has
// them, and why it depends.
var dependentType = cty.Object(map[string]cty.Type{
	"address": cty.String, "object": cty.String, "scheme": cty.String,
	"group": cty.String, "kind": cty.String, "namespace": cty.String, "name": cty.String,
	"module": cty.String, "resource": cty.String, "path": cty.String, "via": cty.String,
})

// fieldType is the object type of the field variable.
var fieldType = cty.Object(map[string]cty.Type{
	"address": cty.String, "object": cty.String, "scheme": cty.String,
	"group": cty.String, "kind": cty.String, "namespace": cty.String, "name": cty.String,
	"module": cty.String, "resource": cty.String, "path": cty.String,
})

// ClaimValue returns the cty object an expression sees as claim or other.
func ClaimValue(v *ClaimView) cty.Value {
	if v == nil {
		return cty.NullVal(claimType)
	}
	c := v.Claim
	seen := c.Expires
	if v.ExpiresOverridden {
		seen = v.SeenExpires
	}
	exp := ""
	if !seen.IsZero() {
		exp = seen.UTC().Format(time.RFC3339)
	}
	return cty.ObjectVal(map[string]cty.Value{
		"actor":      cty.StringVal(c.Actor.Name),
		"identity":   cty.StringVal(c.Actor.Identity.String()),
		"source":     cty.StringVal(c.Evidence.Source),
		"intent":     cty.StringVal(string(c.Intent)),
		"rank":       cty.NumberFloatVal(v.Rank),
		"motivation": cty.StringVal(c.Motivation.Kind),
		"ref":        cty.StringVal(c.Motivation.Ref),
		"severity":   cty.StringVal(string(c.Motivation.Severity)),
		"urgency":    cty.NumberFloatVal(v.Urgency),
		"value":      ValueToCty(c.Value),
		"git":        cty.BoolVal(v.Git),
		"yield":      cty.BoolVal(c.Yield),
		"explicit":   cty.BoolVal(c.Evidence.Explicit),
		"downgraded": cty.BoolVal(v.Downgraded),
		"at":         cty.StringVal(c.At.UTC().Format(time.RFC3339)),
		"expires":    cty.StringVal(exp),
		"dependents": dependentsValue(v.Dependents),
		"asked":      cty.BoolVal(c.Evidence.Asked()),
	})
}

func dependentsValue(ds []core.Dependent) cty.Value {
	if len(ds) == 0 {
		return cty.ListValEmpty(dependentType)
	}
	out := make([]cty.Value, len(ds))
	for i, d := range ds {
		attrs := FieldValue(d.Field).AsValueMap()
		attrs["via"] = cty.StringVal(d.Via)
		out[i] = cty.ObjectVal(attrs)
	}
	return cty.ListVal(out)
}

// FieldValue returns the cty object an expression sees as field.
func FieldValue(f core.Field) cty.Value {
	group := f.Group
	if f.Scheme == core.SchemeKubernetes && group == "" {
		group = core.CoreGroup
	}
	return cty.ObjectVal(map[string]cty.Value{
		"address": cty.StringVal(f.String()), "object": cty.StringVal(f.Object().String()),
		"scheme": cty.StringVal(string(f.Scheme)), "group": cty.StringVal(group), "kind": cty.StringVal(f.Kind),
		"namespace": cty.StringVal(f.Namespace), "name": cty.StringVal(f.Name), "module": cty.StringVal(f.Module),
		"resource": cty.StringVal(f.Resource), "path": cty.StringVal(f.Path),
	})
}

// ValueToCty converts a field value: JSON literals to their cty equivalent, expressions to their
// "${...}" text, an absent value to null.
func ValueToCty(v core.Value) cty.Value {
	switch {
	case v.IsExpr():
		return cty.StringVal(v.String())
	case v.Absent():
		return cty.NullVal(cty.DynamicPseudoType)
	}
	js := v.JSON()
	switch c := js[0]; {
	case c == '"':
		var str string
		if err := json.Unmarshal([]byte(js), &str); err == nil {
			return cty.StringVal(str)
		}
	case c == '-' || (c >= '0' && c <= '9'):
		if n, err := cty.ParseNumberVal(js); err == nil {
			return n
		}
	case js == "true":
		return cty.True
	case js == "false":
		return cty.False
	case js == "null":
		return cty.NullVal(cty.DynamicPseudoType)
	}
	b := []byte(js)
	t, err := ctyjson.ImpliedType(b)
	if err != nil {
		return cty.StringVal(v.JSON())
	}
	out, err := ctyjson.Unmarshal(b, t)
	if err != nil {
		return cty.StringVal(v.JSON())
	}
	return out
}

// Eval evaluates the expression.
func (e *Expr) Eval(p *Policy, env Env) (cty.Value, error) {
	if e.isConst {
		return e.konst, nil
	}
	ctx := p.base.NewChild()
	vars := make(map[string]cty.Value, 4)
	if e.usesClaim {
		vars["claim"] = env.Claim.cty()
	}
	if e.usesOther {
		vars["other"] = env.Other.cty()
	}
	if e.usesField {
		switch {
		case env.Cache == nil:
			vars["field"] = FieldValue(env.Field)
		case env.Cache.field == cty.NilVal:
			env.Cache.field = FieldValue(env.Field)
			fallthrough
		default:
			vars["field"] = env.Cache.field
		}
	}
	if e.usesNow {
		vars["now"] = cty.StringVal(env.Now.UTC().Format(time.RFC3339))
	}
	ctx.Variables = vars
	if e.usesGit {
		switch {
		case env.Cache == nil:
			ctx.Functions = gitFunctions(env.Git)
		case env.Cache.funcs == nil:
			env.Cache.funcs = gitFunctions(env.Git)
			fallthrough
		default:
			ctx.Functions = env.Cache.funcs
		}
	}
	v, diags := e.expr.Value(ctx)
	if diags.HasErrors() {
		return cty.NilVal, diagError(diags)
	}
	return v, nil
}

// Bool evaluates a condition. Null and unknown are false.
func (e *Expr) Bool(p *Policy, env Env) (bool, error) {
	v, err := e.Eval(p, env)
	if err != nil {
		return false, err
	}
	if v.IsNull() || !v.IsKnown() {
		return false, nil
	}
	b, err := convert.Convert(v, cty.Bool)
	if err != nil {
		return false, fmt.Errorf("%s: want a bool, got %s", e.Source, v.Type().FriendlyName())
	}
	return b.True(), nil
}

// Number evaluates a numeric expression; ok is false when it is null (for example git() of a field
// Git does not hold).
func (e *Expr) Number(p *Policy, env Env) (n float64, ok bool, err error) {
	if e.gitAddr != nil {
		return e.gitNumber(env)
	}
	v, err := e.Eval(p, env)
	if err != nil {
		return 0, false, err
	}
	return e.numberOf(v)
}

func (e *Expr) numberOf(v cty.Value) (n float64, ok bool, err error) {
	if v.IsNull() || !v.IsKnown() {
		return 0, false, nil
	}
	nv, err := convert.Convert(v, cty.Number)
	if err != nil {
		return 0, false, fmt.Errorf("%s: want a number, got %s", e.Source, v.Type().FriendlyName())
	}
	f, _ := nv.AsBigFloat().Float64()
	return f, true, nil
}

func diagError(diags hcl.Diagnostics) error {
	var msgs []string
	for _, d := range diags {
		if d.Severity != hcl.DiagError {
			continue
		}
		m := d.Summary
		if d.Detail != "" {
			m += ": " + d.Detail
		}
		msgs = append(msgs, m)
	}
	return errors.New(strings.Join(msgs, "; "))
}

// stdFunctions are the pure functions every expression may call.
func stdFunctions() map[string]function.Function {
	return map[string]function.Function{
		"abs": stdlib.AbsoluteFunc, "ceil": stdlib.CeilFunc, "floor": stdlib.FloorFunc,
		"max": stdlib.MaxFunc, "min": stdlib.MinFunc, "parseint": stdlib.ParseIntFunc,
		"upper": stdlib.UpperFunc, "lower": stdlib.LowerFunc, "strlen": stdlib.StrlenFunc,
		"substr": stdlib.SubstrFunc, "trimspace": stdlib.TrimSpaceFunc, "trimprefix": stdlib.TrimPrefixFunc,
		"trimsuffix": stdlib.TrimSuffixFunc, "replace": stdlib.ReplaceFunc, "regex": stdlib.RegexFunc,
		"regexall": stdlib.RegexAllFunc, "format": boundedFormatFunc, "join": stdlib.JoinFunc,
		"split": stdlib.SplitFunc, "contains": stdlib.ContainsFunc, "length": stdlib.LengthFunc,
		"concat": stdlib.ConcatFunc, "coalesce": stdlib.CoalesceFunc, "distinct": stdlib.DistinctFunc,
		"element": stdlib.ElementFunc, "keys": stdlib.KeysFunc, "lookup": stdlib.LookupFunc,
		"timeadd": stdlib.TimeAddFunc, "formatdate": stdlib.FormatDateFunc,
		"startswith": startsWithFunc, "endswith": endsWithFunc,
		"hour": hourFunc, "weekday": weekdayFunc, "unix": unixFunc, "duration": durationFunc,
	}
}

// gitFunctionNames are the functions that read Git's state; expressions calling them are never cached.
var gitFunctionNames = map[string]bool{"git": true, "git_values": true}

func allFunctionNames() []string {
	names := make([]string, 0, 40)
	for n := range stdFunctions() {
		names = append(names, n)
	}
	for n := range gitFunctionNames {
		names = append(names, n)
	}
	return names
}

// boundedFormatFunc is format with widths and precisions capped, so that a policy cannot make the
// loader or the arbiter build a gigabyte string (format("%999999999s", "")).
var boundedFormatFunc = function.New(&function.Spec{
	Params:   stdlib.FormatFunc.Params(),
	VarParam: stdlib.FormatFunc.VarParam(),
	Type:     function.StaticReturnType(cty.String),
	RefineResult: func(b *cty.RefinementBuilder) *cty.RefinementBuilder {
		return b.NotNull()
	},
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		if f := args[0]; f.IsKnown() && !f.IsNull() {
			digits := 0
			for _, r := range f.AsString() {
				if r >= '0' && r <= '9' {
					digits++
					if digits > 3 {
						return cty.NilVal, function.NewArgErrorf(0, "format widths and precisions are limited to 3 digits")
					}
				} else {
					digits = 0
				}
			}
		}
		return stdlib.FormatFunc.Call(args)
	},
})

var startsWithFunc = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "s", Type: cty.String}, {Name: "prefix", Type: cty.String}},
	Type:   function.StaticReturnType(cty.Bool),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		return cty.BoolVal(strings.HasPrefix(args[0].AsString(), args[1].AsString())), nil
	},
})

var endsWithFunc = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "s", Type: cty.String}, {Name: "suffix", Type: cty.String}},
	Type:   function.StaticReturnType(cty.Bool),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		return cty.BoolVal(strings.HasSuffix(args[0].AsString(), args[1].AsString())), nil
	},
})

func timeArgFunc(ret cty.Type, f func(t time.Time) cty.Value) function.Function {
	return function.New(&function.Spec{
		Params: []function.Parameter{{Name: "timestamp", Type: cty.String}},
		Type:   function.StaticReturnType(ret),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			t, err := time.Parse(time.RFC3339, args[0].AsString())
			if err != nil {
				return cty.NilVal, function.NewArgErrorf(0, "not an RFC 3339 timestamp: %q", args[0].AsString())
			}
			return f(t.UTC()), nil
		},
	})
}

// hour(ts) is the UTC hour (0-23); weekday(ts) the lower-case UTC weekday; unix(ts) the Unix seconds.
var (
	hourFunc    = timeArgFunc(cty.Number, func(t time.Time) cty.Value { return cty.NumberIntVal(int64(t.Hour())) })
	weekdayFunc = timeArgFunc(cty.String, func(t time.Time) cty.Value {
		return cty.StringVal(strings.ToLower(t.Weekday().String()))
	})
	unixFunc = timeArgFunc(cty.Number, func(t time.Time) cty.Value { return cty.NumberIntVal(t.Unix()) })
)

// duration("90m") is the number of seconds in a duration (Go syntax, plus d for days).
var durationFunc = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "duration", Type: cty.String}},
	Type:   function.StaticReturnType(cty.Number),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		d, err := ParseDuration(args[0].AsString())
		if err != nil {
			return cty.NilVal, function.NewArgError(0, err)
		}
		return cty.NumberFloatVal(d.Seconds()), nil
	},
})

// gitFunctions binds git(address) and git_values(pattern) to a lookup. With a nil lookup (as when
// checking a policy) they return unknown values.
func gitFunctions(g GitLookup) map[string]function.Function {
	return map[string]function.Function{
		"git": function.New(&function.Spec{
			Params: []function.Parameter{{Name: "address", Type: cty.String}},
			Type:   function.StaticReturnType(cty.DynamicPseudoType),
			Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
				f, err := core.ParseField(args[0].AsString())
				if err != nil {
					return cty.NilVal, function.NewArgError(0, err)
				}
				if g == nil {
					return cty.DynamicVal, nil
				}
				v, ok, err := g.GitValue(f)
				if err != nil {
					return cty.NilVal, fmt.Errorf("git(%s): %w", f, err)
				}
				if !ok {
					return cty.NullVal(cty.DynamicPseudoType), nil
				}
				return ValueToCty(v), nil
			},
		}),
		"git_values": function.New(&function.Spec{
			Params: []function.Parameter{{Name: "pattern", Type: cty.String}},
			Type:   function.StaticReturnType(cty.DynamicPseudoType),
			Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
				p, err := core.ParseFieldPattern(args[0].AsString())
				if err != nil {
					return cty.NilVal, function.NewArgError(0, err)
				}
				if g == nil {
					return cty.DynamicVal, nil
				}
				fs, err := g.GitFields(p)
				if err != nil {
					return cty.NilVal, fmt.Errorf("git_values(%s): %w", p, err)
				}
				vals := make([]cty.Value, 0, len(fs))
				for _, f := range fs {
					v, ok, err := g.GitValue(f)
					if err != nil {
						return cty.NilVal, fmt.Errorf("git_values(%s): %s: %w", p, f, err)
					}
					if ok {
						vals = append(vals, ValueToCty(v))
					}
				}
				if len(vals) == 0 {
					return cty.EmptyTupleVal, nil
				}
				return cty.TupleVal(vals), nil
			},
		}),
	}
}

// ParseDuration parses a Go duration ("90m", "4h30m") or a whole number of days ("7d").
func ParseDuration(s string) (time.Duration, error) {
	if n, ok := strings.CutSuffix(s, "d"); ok && n != "" && strings.Trim(n, "0123456789") == "" {
		var days int64
		for _, c := range n {
			days = days*10 + int64(c-'0')
			if days > 100000 {
				return 0, fmt.Errorf("duration %q is too long", s)
			}
		}
		return time.Duration(days) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("duration %q: want Go syntax such as 90m or 4h, or days such as 7d", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("duration %q is negative", s)
	}
	return d, nil
}

// exprScope says which variables an expression may use.
type exprScope struct {
	claim, other, field, now bool
	want                     cty.Type // cty.Bool or cty.Number
	what                     string   // "condition" etc. for messages
}

// compileExpr checks an expression's references and types and classifies it for caching.
func (c *compiler) compileExpr(attr *hcl.Attribute, sc exprScope) *Expr {
	e := &Expr{expr: attr.Expr, Range: attr.Expr.Range(), Source: strings.TrimSpace(string(attr.Expr.Range().SliceBytes(c.src)))}
	memo := true
	ok := true
	for _, tr := range attr.Expr.Variables() {
		root := tr.RootName()
		rng := tr.SourceRange()
		allowed := map[string]bool{"claim": sc.claim, "other": sc.other, "field": sc.field, "now": sc.now}
		if !allowed[root] {
			var names []string
			for n, a := range allowed {
				if a {
					names = append(names, n)
				}
			}
			c.errorf(rng, "unknown variable %q in %s%s", root, sc.what, suggest(root, names))
			ok = false
			continue
		}
		switch root {
		case "claim", "other":
			e.usesClaim = e.usesClaim || root == "claim"
			e.usesOther = e.usesOther || root == "other"
			attrName, isAttr := firstAttr(tr)
			if !isAttr {
				memo = false
				continue
			}
			if _, exists := claimType.AttributeTypes()[attrName]; !exists {
				c.errorf(rng, "%s has no attribute %q%s", root, attrName, suggest(attrName, typeAttrNames(claimType)))
				ok = false
				continue
			}
			if !profileAttrs[attrName] {
				memo = false
			}
		case "field":
			e.usesField = true
			memo = false
			if attrName, isAttr := firstAttr(tr); isAttr {
				if _, exists := fieldType.AttributeTypes()[attrName]; !exists {
					c.errorf(rng, "field has no attribute %q%s", attrName, suggest(attrName, typeAttrNames(fieldType)))
					ok = false
				}
			}
		case "now":
			e.usesNow = true
			memo = false
		}
	}
	if sx, isSyntax := attr.Expr.(hclsyntax.Expression); isSyntax {
		fns := stdFunctions()
		hclsyntax.VisitAll(sx, func(n hclsyntax.Node) hcl.Diagnostics {
			if bin, isBin := n.(*hclsyntax.BinaryOpExpr); isBin && (bin.Op == hclsyntax.OpEqual || bin.Op == hclsyntax.OpNotEqual) {
				c.checkComparison(bin.LHS, bin.RHS)
				c.checkComparison(bin.RHS, bin.LHS)
			}
			call, isCall := n.(*hclsyntax.FunctionCallExpr)
			if !isCall {
				return nil
			}
			if gitFunctionNames[call.Name] {
				e.usesGit = true
				memo = false
				return nil
			}
			if _, known := fns[call.Name]; !known {
				c.errorf(call.NameRange, "unknown function %q%s", call.Name, suggest(call.Name, allFunctionNames()))
				ok = false
			}
			return nil
		})
	}
	e.Memo = memo
	if !ok {
		return e
	}
	// Type-check by evaluating with unknown values of the right types.
	ctx := c.p.base.NewChild()
	ctx.Variables = map[string]cty.Value{
		"claim": cty.UnknownVal(claimType), "other": cty.UnknownVal(claimType),
		"field": cty.UnknownVal(fieldType), "now": cty.UnknownVal(cty.String),
	}
	ctx.Functions = gitFunctions(nil)
	v, diags := attr.Expr.Value(ctx)
	if diags.HasErrors() {
		for _, d := range diags {
			rng := e.Range
			if d.Subject != nil {
				rng = *d.Subject
			}
			msg := d.Summary
			if d.Detail != "" {
				msg += ": " + d.Detail
			}
			c.errorf(rng, "%s", msg)
		}
		return e
	}
	if v.Type() != cty.DynamicPseudoType {
		if _, err := convert.Convert(cty.UnknownVal(v.Type()), sc.want); err != nil {
			c.errorf(e.Range, "%s must be a %s, not %s", sc.what, sc.want.FriendlyName(), v.Type().FriendlyName())
		}
	}
	if len(attr.Expr.Variables()) == 0 && !e.usesGit && v.IsWhollyKnown() {
		e.konst, e.isConst = v, true
	}
	if sc.want == cty.Number {
		e.gitAddr = compileGitAddr(attr.Expr)
	}
	return e
}

func firstAttr(tr hcl.Traversal) (string, bool) {
	if len(tr) < 2 {
		return "", false
	}
	a, ok := tr[1].(hcl.TraverseAttr)
	if !ok {
		return "", false
	}
	return a.Name, true
}

func typeAttrNames(t cty.Type) []string {
	var out []string
	for n := range t.AttributeTypes() {
		out = append(out, n)
	}
	return out
}

// checkComparison records a reference to a declared name when a claim's actor, intent or motivation
// is compared with a string literal, so that claim.intent == "availabilty" is caught at load time.
func (c *compiler) checkComparison(side, lit hclsyntax.Expression) {
	st, ok := side.(*hclsyntax.ScopeTraversalExpr)
	if !ok {
		return
	}
	root := st.Traversal.RootName()
	attr, ok := firstAttr(st.Traversal)
	if !ok || (root != "claim" && root != "other") || len(st.Traversal) != 2 {
		return
	}
	v, diags := lit.Value(nil)
	if diags.HasErrors() || v.IsNull() || !v.IsKnown() || v.Type() != cty.String || v.AsString() == "" {
		return
	}
	r := ref{name: v.AsString(), rng: lit.Range(), what: root + "." + attr + " comparison"}
	switch attr {
	case "actor":
		c.pend.actorRefs = append(c.pend.actorRefs, r)
	case "intent":
		c.pend.intentRefs = append(c.pend.intentRefs, r)
	case "motivation":
		c.pend.motivationRefs = append(c.pend.motivationRefs, r)
	}
}
