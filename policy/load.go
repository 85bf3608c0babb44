package policy

import (
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/core/fielddiff"
)

// DefaultFile is where a repository keeps its policy, read from the default branch.
const DefaultFile = ".parley/policy.hcl"

// LoadFile reads and parses a policy file. A file that cannot be read gives a wrapped os error; a
// policy with problems gives Diagnostics.
func LoadFile(path string) (*Policy, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read policy %s: %w", path, err)
	}
	return Parse(src, path)
}

// Parse compiles policy source. filename is used in diagnostics. The error, if any, is Diagnostics.
func Parse(src []byte, filename string) (*Policy, error) {
	c := &compiler{src: src, p: &Policy{
		File:         filename,
		Intents:      map[core.Intent]*Intent{},
		Motivations:  map[string]*Motivation{},
		actorsByName: map[string]*Actor{},
		base:         &hcl.EvalContext{Functions: stdFunctions()},
	}}
	// The policy is HCL from the repository: refuse nesting hclsyntax would recurse on past Go's
	// stack (a fatal error, not a panic), and unclosed comments its lexer would rescan the rest of
	// the file for, before it parses.
	var deep *fielddiff.NestingError
	var big *fielddiff.SizeError
	var unclosed *fielddiff.UnclosedCommentError
	switch err := fielddiff.CheckHCLNesting(filename, src); {
	case errors.As(err, &deep):
		c.errorf(deep.Range, "%s", deep.Message())
		return nil, c.diags
	case errors.As(err, &unclosed):
		c.errorf(unclosed.Range, "%s", unclosed.Message())
		return nil, c.diags
	case errors.As(err, &big):
		c.errorf(hcl.Range{Filename: filename, Start: hcl.InitialPos, End: hcl.InitialPos}, "%s", big.Message())
		return nil, c.diags
	case err != nil:
		// A refusal of a kind this switch does not know yet still stops the parse: failing closed.
		c.errorf(hcl.Range{Filename: filename, Start: hcl.InitialPos, End: hcl.InitialPos}, "%v", err)
		return nil, c.diags
	}
	file, diags := hclsyntax.ParseConfig(src, filename, hcl.Pos{Line: 1, Column: 1})
	c.addDiags(diags)
	if diags.HasErrors() {
		return nil, c.diags
	}
	c.compile(file.Body)
	if len(c.diags) > 0 {
		return nil, c.diags
	}
	return c.p, nil
}

type compiler struct {
	src   []byte
	p     *Policy
	diags Diagnostics
	pend  pending
}

func (c *compiler) errorf(rng hcl.Range, format string, args ...any) {
	c.diags = append(c.diags, Diagnostic{File: c.p.File, Line: rng.Start.Line, Column: rng.Start.Column,
		Message: fmt.Sprintf(format, args...)})
}

func (c *compiler) addDiags(diags hcl.Diagnostics) {
	for _, d := range diags {
		if d.Severity != hcl.DiagError {
			continue
		}
		rng := hcl.Range{Filename: c.p.File, Start: hcl.InitialPos}
		if d.Subject != nil {
			rng = *d.Subject
		}
		msg := d.Summary
		if d.Detail != "" {
			msg += "; " + d.Detail
		}
		c.errorf(rng, "%s", msg)
	}
}

var rootSchema = &hcl.BodySchema{Attributes: attrs("trust_unsigned_git_authors", "policy_owners"), Blocks: []hcl.BlockHeaderSchema{
	{Type: "intent", LabelNames: []string{"name"}},
	{Type: "motivation", LabelNames: []string{"name"}},
	{Type: "actor", LabelNames: []string{"name"}},
	{Type: "field", LabelNames: []string{"name"}},
	{Type: "rule", LabelNames: []string{"name"}},
	{Type: "freeze", LabelNames: []string{"name"}},
	{Type: "oscillation"},
	{Type: "escalation"},
	{Type: "ledger"},
	{Type: "gitops"},
	{Type: "unknown_actors"},
}}

func attrs(names ...string) []hcl.AttributeSchema {
	out := make([]hcl.AttributeSchema, len(names))
	for i, n := range names {
		req := strings.HasSuffix(n, "!")
		out[i] = hcl.AttributeSchema{Name: strings.TrimSuffix(n, "!"), Required: req}
	}
	return out
}

var (
	intentSchema     = &hcl.BodySchema{Attributes: attrs("rank!", "description")}
	motivationSchema = &hcl.BodySchema{Attributes: attrs("urgency", "description", "default_lifetime",
		"max_lifetime", "asserted_by")}
	actorSchema = &hcl.BodySchema{Attributes: attrs("description", "intent", "intents", "motivation", "confined",
		"git_authors", "signing_keys", "github_users", "github_teams", "k8s_users", "field_managers", "aws_principals")}
	fieldSchema = &hcl.BodySchema{Attributes: attrs("description", "match!", "owner", "owner_when",
		"owner_gives_way_when", "immutable", "writers", "min", "max", "veto_ask_when", "veto_ask", "admission")}
	ruleSchema   = &hcl.BodySchema{Attributes: attrs("description", "fields", "when!", "decision!", "veto_ask_when", "veto_ask")}
	freezeSchema = &hcl.BodySchema{Attributes: attrs("description", "start!", "end!", "repeat",
		"allow_intents", "allow_when", "fields")}
	oscillationSchema = &hcl.BodySchema{Attributes: attrs("flips", "window", "hold")}
	escalationSchema  = &hcl.BodySchema{Attributes: attrs("ask", "timeout", "fallback")}
	ledgerSchema      = &hcl.BodySchema{Attributes: attrs("include", "exclude")}
	gitopsSchema      = &hcl.BodySchema{Attributes: attrs("enable_helm_drift_detection")}
	unknownSchema     = &hcl.BodySchema{Attributes: attrs("description", "intent", "intents", "motivations", "expiry")}
)

// matcherSources maps actor attributes to the identity source they match.
var matcherSources = []struct {
	attr   string
	source core.IdentitySource
}{
	{"git_authors", core.SourceGitAuthor}, {"github_users", core.SourceGitHubUser},
	{"github_teams", core.SourceGitHubTeam}, {"k8s_users", core.SourceKubeUser},
	{"field_managers", core.SourceFieldManager}, {"aws_principals", core.SourceAWSPrincipal},
}

// pending holds references to check once every block is read.
type pending struct {
	actorRefs      []ref
	intentRefs     []ref
	motivationRefs []ref
}

type ref struct {
	name string
	rng  hcl.Range
	what string
}

func (c *compiler) compile(body hcl.Body) {
	content, diags := body.Content(rootSchema)
	c.addDiags(diags)
	c.p.TrustUnsignedGitAuthors = c.boolean(content.Attributes, "trust_unsigned_git_authors")
	if vals, rngs, present := c.list(content.Attributes, "policy_owners"); present {
		for i, v := range vals {
			if v == "" || strings.HasPrefix(v, "@") || strings.Count(v, "/") > 1 {
				c.errorf(rngs[i], "policy_owners: %q is neither a GitHub login nor an org/team slug (no @)", v)
				continue
			}
			c.p.PolicyOwners = append(c.p.PolicyOwners, v)
		}
	}
	pend := &c.pend
	seen := map[string]hcl.Range{}
	dup := func(b *hcl.Block) bool {
		key := b.Type + " " + strings.Join(b.Labels, " ")
		if prev, ok := seen[key]; ok {
			c.errorf(b.DefRange, "duplicate %s block %q (first declared at line %d)", b.Type, strings.Join(b.Labels, " "), prev.Start.Line)
			return true
		}
		seen[key] = b.DefRange
		return false
	}
	// Declarations first, so that rules may refer to anything regardless of order.
	var osc, esc, led, gitops, unknown *hcl.Block
	for _, b := range content.Blocks {
		if dup(b) {
			continue
		}
		switch b.Type {
		case "intent":
			c.intent(b)
		case "motivation":
			c.motivation(b, pend)
		case "actor":
			c.actor(b, pend)
		case "oscillation":
			osc = b
		case "escalation":
			esc = b
		case "ledger":
			led = b
		case "gitops":
			gitops = b
		case "unknown_actors":
			unknown = b
		}
	}
	if c.p.GitActor() == nil {
		g := &Actor{Name: GitActorName, Intent: core.IntentBaseline, Description: "Git itself: the value the repository holds"}
		c.p.Actors = append(c.p.Actors, g)
		c.p.actorsByName[g.Name] = g
	}
	if _, ok := c.p.Intents[core.IntentBaseline]; !ok {
		c.p.Intents[core.IntentBaseline] = &Intent{Name: core.IntentBaseline, Rank: 0, Description: "no declared intent: Git's standing configuration"}
	}
	if unknown != nil {
		c.unknownActors(unknown, pend)
	}
	for _, b := range content.Blocks {
		switch b.Type {
		case "field":
			c.field(b, pend)
		case "rule":
			c.rule(b)
		case "freeze":
			c.freeze(b, pend)
		}
	}
	c.p.Oscillation = Oscillation{Flips: 0, Window: time.Hour, Hold: 4 * time.Hour}
	if osc != nil {
		c.oscillation(osc)
	}
	c.p.Escalation = Escalation{Fallback: core.DecisionEnforceGit}
	if esc != nil {
		c.escalation(esc)
	}
	c.p.Ledger = core.PathFilter{}.WithDefaults()
	if led != nil {
		c.ledger(led)
	}
	if gitops != nil {
		as := c.content(gitops, gitopsSchema)
		c.p.GitOps.EnableHelmDriftDetection = c.boolean(as, "enable_helm_drift_detection")
	}
	for _, r := range pend.actorRefs {
		if c.p.Actor(r.name) == nil {
			c.errorf(r.rng, "%s refers to undefined actor %q%s", r.what, r.name, suggest(r.name, c.actorNames()))
		}
	}
	for _, r := range pend.intentRefs {
		if _, ok := c.p.Intents[core.Intent(r.name)]; !ok {
			c.errorf(r.rng, "%s refers to undefined intent %q%s", r.what, r.name, suggest(r.name, c.intentNames()))
		}
	}
	for _, r := range pend.motivationRefs {
		if _, ok := c.p.Motivations[r.name]; !ok && r.name != "" {
			c.errorf(r.rng, "%s refers to undefined motivation %q%s", r.what, r.name, suggest(r.name, c.motivationNames()))
		}
	}
	sort.SliceStable(c.diags, func(i, j int) bool {
		if c.diags[i].Line != c.diags[j].Line {
			return c.diags[i].Line < c.diags[j].Line
		}
		return c.diags[i].Column < c.diags[j].Column
	})
}

func (c *compiler) actorNames() []string {
	out := make([]string, 0, len(c.p.Actors))
	for _, a := range c.p.Actors {
		out = append(out, a.Name)
	}
	return out
}

func (c *compiler) motivationNames() []string {
	out := make([]string, 0, len(c.p.Motivations))
	for n := range c.p.Motivations {
		out = append(out, n)
	}
	return out
}

func (c *compiler) intentNames() []string {
	out := make([]string, 0, len(c.p.Intents))
	for n := range c.p.Intents {
		out = append(out, string(n))
	}
	return out
}

func (c *compiler) content(b *hcl.Block, s *hcl.BodySchema) hcl.Attributes {
	content, diags := b.Body.Content(s)
	c.addDiags(diags)
	if content == nil {
		return hcl.Attributes{}
	}
	return content.Attributes
}

// constant evaluates an attribute that must not refer to anything, converted to want.
func (c *compiler) constant(a *hcl.Attribute, want cty.Type) (cty.Value, bool) {
	v, diags := a.Expr.Value(nil)
	if diags.HasErrors() {
		c.errorf(a.Expr.Range(), "%s must be a constant: %s", a.Name, diagError(diags))
		return cty.NilVal, false
	}
	out, err := convert.Convert(v, want)
	if err != nil || out.IsNull() || !out.IsWhollyKnown() {
		c.errorf(a.Expr.Range(), "%s must be a %s", a.Name, want.FriendlyName())
		return cty.NilVal, false
	}
	return out, true
}

func (c *compiler) str(as hcl.Attributes, name string) (string, bool) {
	a, ok := as[name]
	if !ok {
		return "", false
	}
	v, ok := c.constant(a, cty.String)
	if !ok {
		return "", false
	}
	return v.AsString(), true
}

func (c *compiler) num(as hcl.Attributes, name string) (float64, bool) {
	a, ok := as[name]
	if !ok {
		return 0, false
	}
	v, ok := c.constant(a, cty.Number)
	if !ok {
		return 0, false
	}
	f, _ := v.AsBigFloat().Float64()
	if math.IsInf(f, 0) || math.IsNaN(f) {
		c.errorf(a.Expr.Range(), "%s must be a finite number", name)
		return 0, false
	}
	return f, true
}

func (c *compiler) boolean(as hcl.Attributes, name string) bool {
	a, ok := as[name]
	if !ok {
		return false
	}
	v, ok := c.constant(a, cty.Bool)
	return ok && v.True()
}

// list reads a list of strings; present reports whether the attribute was written.
func (c *compiler) list(as hcl.Attributes, name string) (vals []string, rngs []hcl.Range, present bool) {
	a, ok := as[name]
	if !ok {
		return nil, nil, false
	}
	v, ok := c.constant(a, cty.List(cty.String))
	if !ok {
		return nil, nil, true
	}
	vals = []string{}
	for it := v.ElementIterator(); it.Next(); {
		_, ev := it.Element()
		if ev.IsNull() {
			c.errorf(a.Expr.Range(), "%s must not contain null", name)
			continue
		}
		vals = append(vals, ev.AsString())
		rngs = append(rngs, a.Expr.Range())
	}
	// Point at each element when the list is written literally.
	if tc, isTuple := a.Expr.(*hclsyntax.TupleConsExpr); isTuple && len(tc.Exprs) == len(vals) {
		for i, e := range tc.Exprs {
			rngs[i] = e.Range()
		}
	}
	return vals, rngs, true
}

func (c *compiler) duration(as hcl.Attributes, name string) (time.Duration, bool) {
	s, ok := c.str(as, name)
	if !ok {
		return 0, false
	}
	d, err := ParseDuration(s)
	if err != nil {
		c.errorf(as[name].Expr.Range(), "%s: %v", name, err)
		return 0, false
	}
	return d, true
}

func (c *compiler) patterns(as hcl.Attributes, name string) []core.FieldPattern {
	vals, rngs, present := c.list(as, name)
	if !present {
		return nil
	}
	out := make([]core.FieldPattern, 0, len(vals))
	for i, s := range vals {
		p, err := core.ParseFieldPattern(s)
		if err != nil {
			c.errorf(rngs[i], "%s: %v", name, err)
			continue
		}
		out = append(out, p)
	}
	return out
}

func validName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r == '-' || r == '_' || r == '.' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9')) {
			return false
		}
	}
	return true
}

// block is a labelled declaration being compiled: its name, its attributes, and how messages and
// references name it ("field web-replicas").
type block struct {
	name, what string
	as         hcl.Attributes
}

// open reads a labelled block's name and its attributes under schema. ok is false when the name
// is not valid; the attributes are still checked, so their errors are reported in the same pass.
func (c *compiler) open(b *hcl.Block, schema *hcl.BodySchema) (blk block, ok bool) {
	name := b.Labels[0]
	blk = block{name: name, what: b.Type + " " + name, as: c.content(b, schema)}
	if !validName(name) {
		c.errorf(b.LabelRanges[0], "%s name %q: use letters, digits, -, _ and .", b.Type, name)
		return blk, false
	}
	return blk, true
}

// description is the block's optional description.
func (c *compiler) description(blk block) string {
	d, _ := c.str(blk.as, "description")
	return d
}

// refStr reads the string attribute attr as the name of an actor, intent or motivation, recording
// it in to, so that it is checked once every block is read.
func (c *compiler) refStr(to *[]ref, blk block, attr string) (string, bool) {
	v, ok := c.str(blk.as, attr)
	if ok {
		*to = append(*to, ref{v, blk.as[attr].Expr.Range(), blk.what + " " + attr})
	}
	return v, ok
}

// refList is refStr for a list of names.
func (c *compiler) refList(to *[]ref, blk block, attr string) (vals []string, present bool) {
	vals, rngs, present := c.list(blk.as, attr)
	for i, v := range vals {
		*to = append(*to, ref{v, rngs[i], blk.what + " " + attr})
	}
	return vals, present
}

func (c *compiler) intent(b *hcl.Block) {
	blk, ok := c.open(b, intentSchema)
	if !ok {
		return
	}
	in := &Intent{Name: core.Intent(blk.name), Description: c.description(blk)}
	in.Rank, _ = c.num(blk.as, "rank")
	c.p.Intents[in.Name] = in
}

func (c *compiler) motivation(b *hcl.Block, pend *pending) {
	blk, ok := c.open(b, motivationSchema)
	if !ok {
		return
	}
	name, as := blk.name, blk.as
	m := &Motivation{Name: name, Description: c.description(blk)}
	m.Urgency, _ = c.num(as, "urgency")
	m.DefaultLifetime, _ = c.duration(as, "default_lifetime")
	m.MaxLifetime, _ = c.duration(as, "max_lifetime")
	if m.MaxLifetime > 0 && m.DefaultLifetime > m.MaxLifetime {
		c.errorf(as["default_lifetime"].Expr.Range(), "default_lifetime %s is longer than max_lifetime %s", m.DefaultLifetime, m.MaxLifetime)
	}
	if vals, present := c.refList(&pend.actorRefs, blk, "asserted_by"); present {
		m.AssertedBy = vals
	}
	c.p.Motivations[name] = m
}

func (c *compiler) actor(b *hcl.Block, pend *pending) {
	blk, ok := c.open(b, actorSchema)
	if !ok {
		return
	}
	name, as := blk.name, blk.as
	a := &Actor{Name: name, Match: map[core.IdentitySource][]string{}, Description: c.description(blk)}
	if s, ok := c.refStr(&pend.intentRefs, blk, "intent"); ok {
		a.Intent = core.Intent(s)
	} else if name == GitActorName {
		a.Intent = core.IntentBaseline
	}
	if vals, present := c.refList(&pend.intentRefs, blk, "intents"); present {
		a.Intents = make([]core.Intent, len(vals))
		for i, v := range vals {
			a.Intents[i] = core.Intent(v)
		}
		if a.Intent != "" && !slices.Contains(a.Intents, a.Intent) {
			c.errorf(as["intents"].Expr.Range(), "actor %s: intents must include its default intent %q", name, a.Intent)
		}
	}
	a.Motivation, _ = c.refStr(&pend.motivationRefs, blk, "motivation")
	a.Confined = c.boolean(as, "confined")
	for _, ms := range matcherSources {
		if vals, rngs, present := c.list(as, ms.attr); present {
			for i, v := range vals {
				if v == "" {
					c.errorf(rngs[i], "%s: empty identity pattern", ms.attr)
				}
			}
			a.Match[ms.source] = vals
		}
	}
	// Keys are read after git_authors: a bare key is bound to the actor's one literal email.
	if vals, rngs, present := c.list(as, "signing_keys"); present {
		authors := a.Match[core.SourceGitAuthor]
		for i, v := range vals {
			k, err := parseSigningKey(v)
			if err != nil {
				c.errorf(rngs[i], "actor %s: signing_keys[%d]: %v", name, i, err)
				continue
			}
			if k.Principals == nil {
				// A key that names nobody would prove every email the actor matches, so that one
				// member's key signs as another; it is taken only where it can prove one email.
				if len(authors) != 1 || strings.Contains(authors[0], "*") {
					c.errorf(rngs[i], "actor %s: signing_keys[%d] names no principals, and the actor matches %s: write the emails this key signs as "+
						"before it, as in git's allowed-signers (\"alice@example.com ssh-ed25519 AAAA...\"); a key proves only the emails it names",
						name, i, describeAuthors(authors))
					continue
				}
				k.Principals = []string{authors[0]}
			}
			a.SigningKeys = append(a.SigningKeys, k)
		}
	}
	c.p.Actors = append(c.p.Actors, a)
	c.p.actorsByName[name] = a
}

// unknownActors reads the unknown_actors block: what an identity no actor vouches for may declare.
// A motivation it may declare must not list asserted_by, which names the only actors trusted with
// it: the policy would say two things at once.
func (c *compiler) unknownActors(b *hcl.Block, pend *pending) {
	blk := block{name: "unknown_actors", what: "unknown_actors", as: c.content(b, unknownSchema)}
	u := &c.p.Unknown
	if s, ok := c.refStr(&pend.intentRefs, blk, "intent"); ok {
		u.Intent = core.Intent(s)
	}
	if vals, present := c.refList(&pend.intentRefs, blk, "intents"); present {
		u.Intents = make([]core.Intent, len(vals))
		for i, v := range vals {
			u.Intents[i] = core.Intent(v)
		}
	}
	vals, rngs, present := c.list(blk.as, "motivations")
	if present {
		u.Motivations = []string{}
	}
	for i, v := range vals {
		m, ok := c.p.Motivations[v]
		switch {
		case !ok:
			c.errorf(rngs[i], "unknown_actors motivations refers to undefined motivation %q%s", v, suggest(v, c.motivationNames()))
		case m.AssertedBy != nil:
			c.errorf(rngs[i], "unknown_actors motivations: motivation %q lists asserted_by (%s), so only those actors may assert it; "+
				"remove it here or remove its asserted_by", v, strings.Join(m.AssertedBy, ", "))
		default:
			u.Motivations = append(u.Motivations, v)
		}
	}
	u.Expiry = c.boolean(blk.as, "expiry")
}

func (c *compiler) field(b *hcl.Block, pend *pending) {
	blk, ok := c.open(b, fieldSchema)
	if !ok {
		return
	}
	name, as := blk.name, blk.as
	fr := &FieldRule{Name: name, Description: c.description(blk)}
	fr.Match = c.patterns(as, "match")
	fr.Owner, _ = c.refStr(&pend.actorRefs, blk, "owner")
	if a, ok := as["owner_when"]; ok {
		if fr.Owner == "" {
			c.errorf(a.NameRange, "field %s: owner_when needs an owner", name)
		}
		fr.OwnerWhen = c.compileExpr(a, exprScope{field: true, now: true, want: cty.Bool, what: "owner_when"})
	}
	if a, ok := as["owner_gives_way_when"]; ok {
		if fr.Owner == "" {
			c.errorf(a.NameRange, "field %s: owner_gives_way_when needs an owner", name)
		}
		// As a rule sees a pair: claim is a competing live claim, other the owner's live claim (null
		// when the owner has none).
		fr.OwnerGivesWayWhen = c.compileExpr(a, exprScope{claim: true, other: true, field: true, now: true,
			want: cty.Bool, what: "owner_gives_way_when"})
	}
	fr.Immutable = c.boolean(as, "immutable")
	fr.Writers, _ = c.refList(&pend.actorRefs, blk, "writers")
	for _, bound := range []string{"min", "max"} {
		if a, ok := as[bound]; ok {
			e := c.compileExpr(a, exprScope{field: true, want: cty.Number, what: bound})
			if bound == "min" {
				fr.Min = e
			} else {
				fr.Max = e
			}
		}
	}
	if fr.Immutable && (fr.Owner != "" || fr.Writers != nil) {
		c.errorf(b.DefRange, "field %s: an immutable field has no owner or writers", name)
	}
	// The vetoed claim is claim, seen after trust (as rules see it): a motivation its actor may
	// not assert is gone, so veto_ask_when = claim.motivation == "cve" asks only for trusted ones.
	fr.VetoAsk = c.vetoAsk(blk, "field "+name, exprScope{claim: true, field: true, now: true, want: cty.Bool, what: "veto_ask_when"})
	if m, ok := c.str(as, "admission"); ok {
		switch m {
		case AdmissionWarn, AdmissionDeny:
			fr.Admission = m
		default:
			c.errorf(as["admission"].Expr.Range(), "field %s: admission %q: want %q or %q", name, m, AdmissionWarn, AdmissionDeny)
		}
	}
	c.p.Fields = append(c.p.Fields, fr)
}

func (c *compiler) rule(b *hcl.Block) {
	blk, ok := c.open(b, ruleSchema)
	if !ok {
		return
	}
	name, as := blk.name, blk.as
	r := &Rule{Name: name, Description: c.description(blk)}
	r.Fields = c.patterns(as, "fields")
	if d, ok := c.str(as, "decision"); ok {
		switch d {
		case RuleWin, RuleVeto, RuleHold, RuleEscalate:
			r.Decision = d
		default:
			c.errorf(as["decision"].Expr.Range(), "rule %s: unknown decision %q (want win, veto, hold or escalate)%s",
				name, d, suggest(d, []string{RuleWin, RuleVeto, RuleHold, RuleEscalate}))
		}
	}
	if a, ok := as["when"]; ok {
		r.When = c.compileExpr(a, exprScope{claim: true, other: true, field: true, now: true, want: cty.Bool, what: "when"})
	}
	r.VetoAsk = c.vetoAsk(blk, "rule "+name, exprScope{claim: true, other: true, field: true, now: true, want: cty.Bool, what: "veto_ask_when"})
	if r.VetoAsk != nil && r.Decision != "" && r.Decision != RuleVeto {
		c.errorf(as["veto_ask_when"].NameRange, "rule %s: veto_ask_when needs decision = \"veto\" (this rule decides %q)", name, r.Decision)
	}
	c.p.Rules = append(c.p.Rules, r)
}

// vetoAsk reads a block's veto_ask_when and veto_ask: when a veto of the block should be put to
// people, and who is asked. nil when the block does not set veto_ask_when.
func (c *compiler) vetoAsk(blk block, what string, scope exprScope) *VetoAsk {
	as := blk.as
	a, ok := as["veto_ask_when"]
	if !ok {
		if ask, ok := as["veto_ask"]; ok {
			c.errorf(ask.NameRange, "%s: veto_ask needs veto_ask_when (when a veto is put to people)", what)
		}
		return nil
	}
	va := &VetoAsk{When: c.compileExpr(a, scope)}
	if vals, rngs, present := c.list(as, "veto_ask"); present {
		for i, v := range vals {
			if strings.TrimSpace(v) == "" {
				c.errorf(rngs[i], "%s: veto_ask: empty name", what)
			}
		}
		va.Ask = vals
	}
	return va
}

func (c *compiler) freeze(b *hcl.Block, pend *pending) {
	blk, ok := c.open(b, freezeSchema)
	if !ok {
		return
	}
	name, as := blk.name, blk.as
	fz := &Freeze{Name: name, Description: c.description(blk)}
	parseTime := func(attr string) time.Time {
		s, ok := c.str(as, attr)
		if !ok {
			return time.Time{}
		}
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			c.errorf(as[attr].Expr.Range(), "freeze %s: %s %q is not an RFC 3339 time such as 2026-11-27T00:00:00Z", name, attr, s)
		}
		return t.UTC()
	}
	fz.Start, fz.End = parseTime("start"), parseTime("end")
	if !fz.Start.IsZero() && !fz.End.IsZero() && !fz.End.After(fz.Start) {
		c.errorf(as["end"].Expr.Range(), "freeze %s: end must be after start", name)
	}
	if s, ok := c.str(as, "repeat"); ok {
		switch s {
		case "daily":
			fz.Every = 24 * time.Hour
		case "weekly":
			fz.Every = 7 * 24 * time.Hour
		default:
			c.errorf(as["repeat"].Expr.Range(), "freeze %s: repeat %q: want daily or weekly", name, s)
		}
		if fz.Every > 0 && fz.End.Sub(fz.Start) >= fz.Every {
			c.errorf(as["end"].Expr.Range(), "freeze %s: a %s window must be shorter than its period", name, s)
		}
	}
	allow, _ := c.refList(&pend.intentRefs, blk, "allow_intents")
	for _, v := range allow {
		fz.AllowIntents = append(fz.AllowIntents, core.Intent(v))
	}
	if a, ok := as["allow_when"]; ok {
		fz.AllowWhen = c.compileExpr(a, exprScope{claim: true, field: true, now: true, want: cty.Bool, what: "allow_when"})
	}
	fz.Fields = c.patterns(as, "fields")
	c.p.Freezes = append(c.p.Freezes, fz)
}

func (c *compiler) oscillation(b *hcl.Block) {
	as := c.content(b, oscillationSchema)
	o := Oscillation{Flips: 3, Window: time.Hour, Hold: 4 * time.Hour}
	if n, ok := c.num(as, "flips"); ok {
		if n < 2 || n != math.Trunc(n) || n > 1000 {
			c.errorf(as["flips"].Expr.Range(), "oscillation flips must be a whole number from 2 to 1000")
		} else {
			o.Flips = int(n)
		}
	}
	if d, ok := c.duration(as, "window"); ok {
		o.Window = d
	}
	if d, ok := c.duration(as, "hold"); ok {
		o.Hold = d
	}
	if o.Window <= 0 {
		c.errorf(b.DefRange, "oscillation window must be positive")
	}
	c.p.Oscillation = o
}

func (c *compiler) escalation(b *hcl.Block) {
	as := c.content(b, escalationSchema)
	e := Escalation{Fallback: core.DecisionEnforceGit}
	e.Ask, _, _ = c.list(as, "ask")
	e.Timeout, _ = c.duration(as, "timeout")
	if s, ok := c.str(as, "fallback"); ok {
		switch core.Decision(s) {
		case core.DecisionEnforceGit, core.DecisionHold:
			e.Fallback = core.Decision(s)
		default:
			c.errorf(as["fallback"].Expr.Range(), "escalation fallback %q: want enforce-git or hold%s", s,
				suggest(s, []string{string(core.DecisionEnforceGit), string(core.DecisionHold)}))
		}
	}
	c.p.Escalation = e
}

// ledger reads which files the ledger reads; a list left out keeps its default.
func (c *compiler) ledger(b *hcl.Block) {
	as := c.content(b, ledgerSchema)
	var f core.PathFilter
	for _, name := range []string{"include", "exclude"} {
		vals, rngs, present := c.list(as, name)
		if !present {
			continue
		}
		for i, v := range vals {
			if err := core.ValidatePathPattern(v); err != nil {
				c.errorf(rngs[i], "ledger %s: %v", name, err)
			}
		}
		if vals == nil {
			vals = []string{} // an attribute that did not evaluate: already an error
		}
		if name == "include" {
			f.Include = vals
		} else {
			f.Exclude = vals
		}
	}
	c.p.Ledger = f.WithDefaults()
}

// suggest returns ` (did you mean "x"?)` for the closest candidate, or "".
func suggest(got string, candidates []string) string {
	best, bestD := "", 1<<30
	sort.Strings(candidates)
	for _, cand := range candidates {
		if d := editDistance(got, cand); d < bestD {
			best, bestD = cand, d
		}
	}
	if best == "" || bestD > max(2, len(got)/3) {
		if len(candidates) > 0 && len(candidates) <= 12 {
			return fmt.Sprintf(" (known: %s)", strings.Join(candidates, ", "))
		}
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		if a == b {
			return 0
		}
		return 1 << 20
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// LedgerSettings returns what a ledger reads under the policy source src, from one parse of it:
// the files (its ledger block) and the OpenPGP keys commits are verified against (see
// Policy.OpenPGPKeyring). When src is not a valid policy they are the default files and no keys
// (the policy's errors are reported where the policy is used; a broken policy must not stop the
// history being read). One parse, not one per setting: every pull request's judgement and every
// drift event opens its ledger this way, and parsing the policy was most of opening it.
func LedgerSettings(src []byte, filename string) (core.PathFilter, string) {
	p, err := Parse(src, filename)
	if err != nil {
		return core.PathFilter{}.WithDefaults(), ""
	}
	return p.Ledger, p.OpenPGPKeyring()
}

// describeAuthors says which git_authors an actor matches, for the error on a bare key.
func describeAuthors(authors []string) string {
	switch {
	case len(authors) == 0:
		return "no git_authors"
	case len(authors) == 1:
		return fmt.Sprintf("the glob %q", authors[0])
	}
	return fmt.Sprintf("%d git_authors", len(authors))
}
