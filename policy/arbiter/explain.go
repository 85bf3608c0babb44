package arbiter

import (
	"strings"

	"github.com/parleyhq/parley/core"
)

// decisionWords says what a decision means for people.
var decisionWords = map[core.Decision]string{
	core.DecisionEnforceGit: "keep Git's value",
	core.DecisionAdopt:      "adopt the live value into Git",
	core.DecisionYield:      "yield the field",
	core.DecisionVeto:       "refuse the live claim; Git's value stands",
	core.DecisionHold:       "hold the field and stop automatic writes",
	core.DecisionEscalate:   "escalate to humans",
}

// Explain renders a verdict as text for a terminal or a pull-request comment: the decision, the
// winner and losers, and every step of the explanation.
//
// It writes each piece into one builder, sized for the steps up front: an admission review that is
// refused renders a verdict per field, and joining each line before writing it doubled the bytes.
func Explain(v core.Verdict) string {
	var b strings.Builder
	n := 256 + 160*(len(v.Losers)+2)
	for _, s := range v.Explanation {
		n += len(s.Rule) + len(s.Outcome) + len(s.Detail) + 12
	}
	b.Grow(n)
	w := func(ss ...string) {
		for _, s := range ss {
			b.WriteString(s)
		}
	}
	w(v.Field.String(), "\n  decision: ", string(v.Decision))
	if words := decisionWords[v.Decision]; words != "" {
		w(" (", words, ")")
	}
	w("\n  rule:     ", orNone(v.Rule), "\n")
	if v.Winner != nil {
		w("  winner:   ")
		writeClaim(&b, *v.Winner)
		w("\n")
	}
	for _, l := range v.Losers {
		w("  loser:    ")
		writeClaim(&b, l)
		w("\n")
	}
	if !v.Until.IsZero() {
		w("  until:    ", fmtTime(v.Until), "\n")
	}
	if !v.Recheck.IsZero() {
		w("  recheck:  ", fmtTime(v.Recheck), "\n")
	}
	if v.Proposed != nil {
		w("  proposed: ")
		writeClaim(&b, *v.Proposed)
		w("\n")
	}
	if len(v.Ask) > 0 {
		w("  ask:      ", strings.Join(v.Ask, ", "), "\n")
	}
	w("  why:\n")
	for _, s := range v.Explanation {
		w("    - [", s.Rule, ": ", s.Outcome, "] ", s.Detail, "\n")
	}
	return b.String()
}

// writeClaim writes a claim in one line: who, what, why, until when, and from where.
func writeClaim(b *strings.Builder, c core.Claim) {
	if c.Actor.Name == "" {
		b.WriteString(c.Actor.Identity.String())
	} else {
		b.WriteString(c.Actor.Name)
		if c.Actor.Identity.ID != "" {
			b.WriteString(" <")
			b.WriteString(c.Actor.Identity.String())
			b.WriteString(">")
		}
	}
	if c.Yield {
		b.WriteString(" yields")
	} else {
		b.WriteString(" wants ")
		b.WriteString(c.Value.String())
	}
	b.WriteString(" (intent ")
	b.WriteString(orNone(string(c.Intent)))
	if !c.Motivation.IsZero() {
		b.WriteString(", motivation ")
		b.WriteString(c.Motivation.String())
	}
	if !c.Expires.IsZero() {
		b.WriteString(", expires ")
		b.WriteString(fmtTime(c.Expires))
	}
	b.WriteString(", at ")
	b.WriteString(fmtTime(c.At))
	b.WriteString(", ")
	b.WriteString(evidenceText(c.Evidence))
	b.WriteString(")")
}
