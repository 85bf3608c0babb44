package tfplan

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"sort"
	"time"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/policy"
	"github.com/parleyhq/parley/policy/arbiter"
)

// Evidence sources and the identity source of drift.
const (
	// PlanSource is the evidence source of the plan author's claims.
	PlanSource = "terraform-plan"
	// DriftSource is the identity and evidence source of drift: an outside actor the plan only
	// knows by the resource it changed (the identity's ID is the resource address). No policy
	// actor matches it, so the arbiter judges it as an unknown actor.
	DriftSource core.IdentitySource = "terraform-drift"
)

// GitState is the default branch's ledger: what Git claims now and claimed before.
// trailers/ledger.Ledger satisfies it.
type GitState interface {
	Current(f core.Field) (core.Claim, bool, error)
	History(f core.Field) ([]core.Claim, error)
	Fields(p core.FieldPattern) ([]core.Field, error)
}

// ClaimOptions says who makes a plan's claims, why, and when.
type ClaimOptions struct {
	Author core.Identity // the plan's author
	// Intent and Motivation are the plan's declared intent and motivation; the zero values
	// mean none was declared (the policy's default intent for the author's actor applies).
	Intent     core.Intent
	Motivation core.Motivation
	At         time.Time // the time of every claim, the plan's and the drift's
}

// Claim is the claim c makes: by the author for a planned change, by the drift's outside actor
// for drift. The value is c.New (absent: the attribute is removed). Sensitive values are in it as
// they are: Judge hashes them before the arbiter sees them.
func (c Change) Claim(o ClaimOptions) core.Claim {
	cl := core.Claim{Field: c.Field, Value: c.New, At: o.At}
	if c.Action == ActionDrift {
		cl.Actor = core.Actor{Identity: core.Identity{Source: DriftSource, ID: c.Address}}
		cl.Evidence = core.Evidence{Source: string(DriftSource)}
		return cl
	}
	cl.Actor = core.Actor{Identity: o.Author}
	cl.Intent, cl.Motivation = o.Intent, o.Motivation
	cl.Evidence = core.Evidence{Source: PlanSource}
	return cl
}

// Judgement is the verdict on one field and the changes that made it judged.
type Judgement struct {
	Verdict core.Verdict // with sensitive values redacted
	Changes []Change     // the plan's change and any drift on the field, redacted
	// Sensitive is true when the plan marks the field's value sensitive: every value in Verdict
	// and Changes is then Sensitive (or KnownAfterApply, or absent).
	Sensitive bool
	// Blocks is the decision that stops the plan on this field, or "": a veto of the plan's own
	// value (a veto that refuses only drift, while the plan's value is the one that stands, does
	// not block), or a hold or an escalation of a field the plan changes. Verdicts on drift alone
	// never block: the plan does not change those fields.
	Blocks core.Decision
}

// Conclusion sums judgements up as review's check does: "failure" when one blocks with a veto,
// "action_required" when one blocks with a hold or an escalation, "neutral" when there is nothing to
// judge, "success" otherwise.
func Conclusion(js []Judgement) string {
	if len(js) == 0 {
		return "neutral"
	}
	c := "success"
	for _, j := range js {
		switch j.Blocks {
		case core.DecisionVeto:
			return "failure"
		case core.DecisionHold, core.DecisionEscalate:
			c = "action_required"
		}
	}
	return c
}

// blocks decides Judgement.Blocks from the unredacted verdict and the plan's hashed value.
func blocks(v core.Verdict, planned *core.Value) core.Decision {
	if planned == nil {
		return ""
	}
	switch v.Decision {
	case core.DecisionVeto:
		if v.Winner != nil && !v.Winner.Yield && v.Winner.Value.Equal(*planned) {
			return "" // the value that stands is the plan's: what was vetoed is someone else's
		}
		return core.DecisionVeto
	case core.DecisionHold, core.DecisionEscalate:
		return v.Decision
	}
	return ""
}

// Judge arbitrates every field res changes or reports drifted, at now, under pol, against git (nil:
// Git holds nothing), in field order. The author's claims and the drift's compete on a field as
// live claims against Git's; bounds and conditions read the plan's new values first, then Git's,
// as a pull request's review does.
func Judge(ctx context.Context, pol *policy.Policy, res Result, git GitState, o ClaimOptions, now time.Time) ([]Judgement, error) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("sensitive values: %w", err)
	}
	byField := map[core.Field][]Change{}
	sensitive := map[core.Field]bool{}
	for _, c := range append(append([]Change(nil), res.Changes...), res.Drift...) {
		byField[c.Field] = append(byField[c.Field], c)
		if c.Sensitive {
			sensitive[c.Field] = true
		}
	}
	h := hasher{key: key, sensitive: sensitive}
	head := map[core.Field]core.Value{}
	for _, c := range res.Changes {
		head[c.Field] = h.value(c.Field, c.New)
	}
	gs := redactedGit{git: git, h: h}
	lookup := policy.Overlay{Git: gs, Head: head}
	fields := make([]core.Field, 0, len(byField))
	for f := range byField {
		fields = append(fields, f)
	}
	sort.Slice(fields, func(i, j int) bool { return fields[i].String() < fields[j].String() })
	arb := arbiter.New(pol)
	out := make([]Judgement, 0, len(fields))
	for _, f := range fields {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		in := arbiter.Input{Field: f, Now: now, Lookup: lookup}
		var planned *core.Value
		for _, c := range byField[f] {
			cl := c.Claim(o)
			cl.Value = h.value(f, cl.Value)
			in.Live = append(in.Live, cl)
			if c.Action != ActionDrift {
				planned = &cl.Value
			}
		}
		if git != nil {
			cur, ok, err := gs.Current(f)
			if err != nil {
				return nil, fmt.Errorf("ledger: current claim on %s: %w", f, err)
			}
			if ok {
				in.Git = &cur
			}
			if in.History, err = gs.History(f); err != nil {
				return nil, fmt.Errorf("ledger: history of %s: %w", f, err)
			}
		}
		j := Judgement{Verdict: arb.Decide(in), Sensitive: sensitive[f]}
		j.Blocks = blocks(j.Verdict, planned)
		for _, c := range byField[f] {
			if j.Sensitive {
				c.Sensitive = true
			}
			j.Changes = append(j.Changes, c.Redacted())
		}
		if j.Sensitive {
			j.Verdict = redactVerdict(j.Verdict)
		}
		out = append(out, j)
	}
	return out, nil
}

// hasher stands in for the values of sensitive fields: a keyed hash of the value (the key is new
// for every Judge call), so equal values stay equal for the arbiter and nothing it writes can
// reveal them.
type hasher struct {
	key       []byte
	sensitive map[core.Field]bool
}

func (h hasher) value(f core.Field, v core.Value) core.Value {
	if !h.sensitive[f] || v.Absent() || (v.IsExpr() && v.Expr() == KnownAfterApply) {
		return v
	}
	m := hmac.New(sha256.New, h.key)
	m.Write([]byte(v.JSON()))
	m.Write([]byte{0})
	m.Write([]byte(v.Expr()))
	return core.StringValue("(sensitive " + hex.EncodeToString(m.Sum(nil)[:8]) + ")")
}

var hashed = regexp.MustCompile(`\(sensitive [0-9a-f]{16}\)`)

// redactVerdict replaces the hashes in a sensitive field's verdict with Sensitive.
func redactVerdict(v core.Verdict) core.Verdict {
	redact := func(c core.Claim) core.Claim {
		if !c.Yield && !c.Value.Absent() && !(c.Value.IsExpr() && c.Value.Expr() == KnownAfterApply) {
			c.Value = core.StringValue(Sensitive)
		}
		return c
	}
	if v.Winner != nil {
		w := redact(*v.Winner)
		v.Winner = &w
	}
	if v.Losers != nil {
		ls := make([]core.Claim, len(v.Losers))
		for i, l := range v.Losers {
			ls[i] = redact(l)
		}
		v.Losers = ls
	}
	if v.Explanation != nil {
		steps := make([]core.Step, len(v.Explanation))
		for i, s := range v.Explanation {
			s.Detail = hashed.ReplaceAllString(s.Detail, Sensitive)
			steps[i] = s
		}
		v.Explanation = steps
	}
	return v
}

// redactedGit is the ledger with the values of sensitive fields hashed.
type redactedGit struct {
	git GitState
	h   hasher
}

func (g redactedGit) Current(f core.Field) (core.Claim, bool, error) {
	if g.git == nil {
		return core.Claim{}, false, nil
	}
	c, ok, err := g.git.Current(f)
	c.Value = g.h.value(f, c.Value)
	return c, ok, err
}

func (g redactedGit) History(f core.Field) ([]core.Claim, error) {
	if g.git == nil {
		return nil, nil
	}
	hs, err := g.git.History(f)
	if err != nil || !g.h.sensitive[f] {
		return hs, err
	}
	out := make([]core.Claim, len(hs))
	for i, c := range hs {
		c.Value = g.h.value(f, c.Value)
		out[i] = c
	}
	return out, nil
}

func (g redactedGit) Fields(p core.FieldPattern) ([]core.Field, error) {
	if g.git == nil {
		return nil, nil
	}
	return g.git.Fields(p)
}
