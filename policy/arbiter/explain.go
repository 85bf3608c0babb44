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
func Explain(v core.Verdict) string {
	var b strings.Builder
	b.WriteString(v.Field.String())
	b.WriteString("\n  decision: ")
	b.WriteString(string(v.Decision))
	if w := decisionWords[v.Decision]; w != "" {
		b.WriteString(" (" + w + ")")
	}
	b.WriteString("\n  rule:     ")
	b.WriteString(orNone(v.Rule))
	b.WriteString("\n")
	if v.Winner != nil {
		b.WriteString("  winner:   " + claimLine(*v.Winner) + "\n")
	}
	for _, l := range v.Losers {
		b.WriteString("  loser:    " + claimLine(l) + "\n")
	}
	if !v.Until.IsZero() {
		b.WriteString("  until:    " + fmtTime(v.Until) + "\n")
	}
	if !v.Recheck.IsZero() {
		b.WriteString("  recheck:  " + fmtTime(v.Recheck) + "\n")
	}
	if v.Proposed != nil {
		b.WriteString("  proposed: " + claimLine(*v.Proposed) + "\n")
	}
	if len(v.Ask) > 0 {
		b.WriteString("  ask:      " + strings.Join(v.Ask, ", ") + "\n")
	}
	b.WriteString("  why:\n")
	for _, s := range v.Explanation {
		b.WriteString("    - [" + s.Rule + ": " + s.Outcome + "] " + s.Detail + "\n")
	}
	return b.String()
}

// claimLine is a claim in one line: who, what, why, until when, and from where.
func claimLine(c core.Claim) string {
	who := c.Actor.Name
	if who == "" {
		who = c.Actor.Identity.String()
	} else if c.Actor.Identity.ID != "" {
		who += " <" + c.Actor.Identity.String() + ">"
	}
	s := who + " wants " + c.Value.String()
	if c.Yield {
		s = who + " yields"
	}
	s += " (intent " + orNone(string(c.Intent))
	if !c.Motivation.IsZero() {
		s += ", motivation " + c.Motivation.String()
	}
	if !c.Expires.IsZero() {
		s += ", expires " + fmtTime(c.Expires)
	}
	s += ", at " + fmtTime(c.At) + ", " + evidenceText(c.Evidence) + ")"
	return s
}
