package report

import (
	"fmt"
	"strings"
	"time"

	"github.com/parleyhq/parley/core"
)

// A verdict decides a field; a pull request wants to know whether its own change may happen. The
// two differ: enforce-git is a win when the pull request wants Git's value (or an override gave it
// the field) and a loss when Git's value stands against the pull request's (a freeze defers it, a
// standing claim outranks it). The check run's conclusion follows what each verdict means for the
// pull request's own claim, so that it passes only when the change may happen.

// OutcomeKind is what a verdict means for the pull request's own claim on its field.
type OutcomeKind string

// Outcome kinds, and the check run conclusion each allows at best (docs/verdicts-json.md).
const (
	// OutcomeWins: the pull request's value is the one that stands (success).
	OutcomeWins OutcomeKind = "wins"
	// OutcomeDeferred: a freeze keeps Git's value for now; the change waits for it to end or for
	// people to override it (action_required).
	OutcomeDeferred OutcomeKind = "deferred"
	// OutcomeLoses: another claim holds the field, Git's standing claim or a live one, and the
	// pull request's value does not stand (failure).
	OutcomeLoses OutcomeKind = "loses"
	// OutcomeVetoed: the pull request's value is refused (failure).
	OutcomeVetoed OutcomeKind = "vetoed"
	// OutcomeAsks: people must decide, a hold or an escalation (action_required).
	OutcomeAsks OutcomeKind = "asks"
	// OutcomeUnclaimed: the pull request makes no claim of its own on the field (a /parley command
	// does, or the pull request yields it): only a veto (failure) or a question to people
	// (action_required) stops it.
	OutcomeUnclaimed OutcomeKind = "unclaimed"
)

// Outcome is what a verdict means for the pull request's own claim, and why.
type Outcome struct {
	Kind OutcomeKind `json:"kind"`
	// By names what decided against the pull request: the freeze that defers it, the claim that
	// holds the field; for a win decided by people, "override".
	By string `json:"by,omitempty"`
	// Until is when that ends: the freeze's end, the standing claim's expiry. Zero: not known, or
	// for good.
	Until time.Time `json:"until,omitzero"`
}

// Conclusion is the check run conclusion the outcome allows at best.
func (o Outcome) Conclusion() string {
	switch o.Kind {
	case OutcomeWins, OutcomeUnclaimed:
		return "success"
	case OutcomeDeferred, OutcomeAsks:
		return "action_required"
	}
	return "failure" // loses, vetoed, and any kind this version does not know
}

// Text says the outcome in a few words, for the comment's table and parley review.
func (o Outcome) Text() string {
	var s string
	switch o.Kind {
	case OutcomeWins:
		s = "wins"
		if o.By != "" {
			s += " (" + o.By + ")"
		}
		return s
	case OutcomeDeferred:
		s = "deferred by " + orUnknown(o.By)
	case OutcomeLoses:
		s = "loses to " + orUnknown(o.By)
	case OutcomeVetoed:
		s = "vetoed"
	case OutcomeAsks:
		s = "asks people"
	case OutcomeUnclaimed:
		return "not claimed by the pull request"
	default:
		s = string(o.Kind)
	}
	if !o.Until.IsZero() {
		s += " until " + o.Until.UTC().Format(time.RFC3339)
	}
	return s
}

func orUnknown(s string) string {
	if s == "" {
		return "(unknown)"
	}
	return s
}

// OutcomeOf is what v means for own, the pull request's own claim on v's field (nil: it has none,
// or own.Yield: it gives the field up). A verdict the pull request's value survives is a win: its
// claim is the winner (compared by its evidence, since it is judged as each contributor too), or
// the winner wants the same value; an enforce-git whose winner is Git's own claim is not. By and
// Until are filled from the verdict where it says them; a caller that knows more (the freeze's end
// from the policy) may set Until.
func OutcomeOf(v core.Verdict, own *core.Claim) Outcome {
	switch v.Decision {
	case core.DecisionVeto:
		return Outcome{Kind: OutcomeVetoed, By: v.Rule}
	case core.DecisionHold, core.DecisionEscalate:
		return Outcome{Kind: OutcomeAsks, By: v.Rule, Until: v.Until}
	}
	if own == nil || own.Yield {
		return Outcome{Kind: OutcomeUnclaimed}
	}
	if w := v.Winner; w != nil && !w.Yield && (sameClaim(w, own) || w.Value.Equal(own.Value)) {
		o := Outcome{Kind: OutcomeWins}
		if v.Rule == "override" {
			o.By = "override"
		}
		return o
	}
	if strings.HasPrefix(v.Rule, "freeze.") {
		return Outcome{Kind: OutcomeDeferred, By: v.Rule, Until: v.Recheck}
	}
	o := Outcome{Kind: OutcomeLoses, By: holder(v)}
	switch {
	case !v.Until.IsZero():
		o.Until = v.Until
	case v.Winner != nil:
		o.Until = v.Winner.Expires
	}
	return o
}

// sameClaim reports whether w is the pull request's claim own, as any contributor judged.
func sameClaim(w, own *core.Claim) bool {
	return w.Evidence.Source == own.Evidence.Source && w.Evidence.PR == own.Evidence.PR && w.Evidence.Commit == own.Evidence.Commit &&
		w.Field == own.Field
}

// holder names the claim that holds the field against the pull request, and why it does.
func holder(v core.Verdict) string {
	if v.Winner == nil {
		if strings.HasPrefix(v.Rule, "owner.") {
			return "the field's standing owner (" + v.Rule + ")" // an owner holds the field without a claim
		}
		return v.Rule
	}
	s := winner(v)
	if v.Winner.Evidence.Commit != "" && v.Winner.Evidence.Source != "github-pull-request" {
		s += fmt.Sprintf(" (commit %.12s)", v.Winner.Evidence.Commit)
	}
	return s + " by " + v.Rule
}

// Conclusion is the check run conclusion for a pull request: the worst its verdicts' outcomes
// allow (failure before action_required before success), neutral when no field is claimed, and
// never success or neutral when part of the change was not judged (unjudged): what Parley could
// not read cannot pass, so it is at best action_required, and a veto beside it still fails.
func Conclusion(outcomes []Outcome, unjudged bool) string {
	c := "success"
	if len(outcomes) == 0 {
		c = "neutral"
	}
	for _, o := range outcomes {
		switch o.Conclusion() {
		case "failure":
			return "failure"
		case "action_required":
			c = "action_required"
		}
	}
	if unjudged && (c == "success" || c == "neutral") {
		return "action_required"
	}
	return c
}

// Passes reports whether GitHub lets a required check with this conclusion pass.
func Passes(conclusion string) bool {
	switch conclusion {
	case "success", "neutral", "skipped":
		return true
	}
	return false
}
