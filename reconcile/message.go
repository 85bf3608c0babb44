package reconcile

import (
	"fmt"
	"strings"
	"time"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/internal/ghmarkdown"
	"github.com/parleyhq/parley/policy/arbiter"
	"github.com/parleyhq/parley/trailers"
)

// Trailer keys of a verdict commit, besides Intent and Motivation (the winner's). They are not
// claims: the ledger keeps them as foreign trailers, so a gate commit never claims a field.
const (
	TrailerField    = "Parley-Field"
	TrailerDecision = "Parley-Decision"
	TrailerRule     = "Parley-Rule"
	TrailerWinner   = "Parley-Winner"
	TrailerUntil    = "Parley-Until"
	TrailerEvidence = "Parley-Evidence"
)

// message builds a verdict commit: a subject saying what changed, the arbiter's own sentence
// saying why, the files, and the trailers. It is a pure function of its inputs, so the same
// verdict always gives the same message.
//
// The body is the pull request's body, GitHub Markdown: every piece of data in it (the arbiter's
// sentence quotes values and actors, a file name is a repository's) is escaped with ghmarkdown
// where it is placed, so that nothing a repository or a drift event holds becomes a mention, a
// link, an image or HTML in it. note is Markdown its caller built the same way (its @team asks
// are meant to be live). The trailers keep the data as it is: they are read back, not shown.
func message(v core.Verdict, a Action, files []string, note string) (title, body, msg string) {
	f := v.Field
	what := pointerLabel(f) + " of " + objectName(f)
	winner := "Git"
	if v.Winner != nil && v.Winner.Actor.Name != "" && v.Winner.Actor.Name != "git" {
		winner = v.Winner.Actor.Name
	} else if v.Winner != nil && v.Winner.Actor.Name == "" {
		winner = v.Winner.Actor.Identity.String()
	}
	switch a {
	case ActionGate:
		title = "parley: yield " + what + " to " + winner
	case ActionResume:
		title = "parley: resume Git's " + what
	case ActionAdopt:
		val := ""
		if v.Winner != nil {
			val = " = " + v.Winner.Value.String()
		}
		title = "parley: adopt " + what + val + " from " + winner
	case ActionPropose:
		val, who := "", "someone"
		if c := v.Proposed; c != nil {
			val = " = " + c.Value.String()
			if who = c.Actor.Name; who == "" {
				who = c.Actor.Identity.String()
			}
		}
		title = "parley: propose " + what + val + " from " + who + " (vetoed; people decide)"
	case ActionAsk:
		if v.Decision == core.DecisionHold {
			title = "parley: hold " + what + ": people decide"
		} else {
			title = "parley: escalate " + what + " to people"
		}
	}
	var b strings.Builder
	if why := resultSentence(v); why != "" {
		b.WriteString(ghmarkdown.Text(why))
		b.WriteString("\n\n")
	}
	if note != "" {
		b.WriteString(note)
		b.WriteString("\n\n")
	}
	b.WriteString("Field: " + ghmarkdown.Code(f.String()) + "\n")
	if len(files) > 0 {
		quoted := make([]string, len(files))
		for i, name := range files {
			quoted[i] = ghmarkdown.Code(name)
		}
		b.WriteString("Files: " + strings.Join(quoted, ", ") + "\n")
	}
	if a == ActionAsk || a == ActionPropose {
		// People are asked to decide: they read the whole explanation, every flip and claim.
		// The fence is longer than any run of backticks in the explanation, which quotes values.
		b.WriteString("\n" + ghmarkdown.Fence(arbiter.Explain(v), ""))
	}
	body = b.String()

	var tr []string
	add := func(k, val string) {
		if val = oneLine(val); val != "" {
			tr = append(tr, k+": "+val)
		}
	}
	claim := v.Winner
	if a == ActionPropose {
		// The proposal carries the vetoed claim's why: merged, the commit is its claim in Git.
		claim = v.Proposed
	}
	if claim != nil {
		add(trailers.KeyIntent, string(claim.Intent))
		add(trailers.KeyMotivation, claim.Motivation.String())
		add(TrailerWinner, claim.Actor.String()+" <"+claim.Actor.Identity.String()+">")
	}
	add(TrailerField, f.String())
	add(TrailerDecision, string(v.Decision))
	add(TrailerRule, v.Rule)
	if !v.Until.IsZero() {
		add(TrailerUntil, v.Until.UTC().Format(time.RFC3339))
	}
	if a == ActionPropose && v.Proposed != nil {
		add(TrailerEvidence, claimEvidence(*v.Proposed))
	} else {
		add(TrailerEvidence, evidence(v))
	}
	msg = title + "\n\n" + body + "\n" + strings.Join(tr, "\n") + "\n"
	return title, body, msg
}

// resultSentence is the explanation's last step: the arbiter's one-sentence verdict.
func resultSentence(v core.Verdict) string {
	for i := len(v.Explanation) - 1; i >= 0; i-- {
		if v.Explanation[i].Rule == "result" {
			return sentence(v.Explanation[i].Detail)
		}
	}
	for _, s := range v.Explanation {
		if s.Outcome == "decided" {
			return sentence(s.Detail)
		}
	}
	if n := len(v.Explanation); n > 0 {
		return sentence(v.Explanation[n-1].Detail)
	}
	return ""
}

func sentence(s string) string {
	s = oneLine(s)
	if s == "" {
		return ""
	}
	return s + "."
}

// evidence names where the winning claim came from: source and event IDs, or the commit.
func evidence(v core.Verdict) string {
	if v.Winner == nil {
		return ""
	}
	return claimEvidence(*v.Winner)
}

// claimEvidence names where a claim came from: source and event IDs, or the commit.
func claimEvidence(c core.Claim) string {
	e := c.Evidence
	switch {
	case len(e.EventIDs) > 0:
		ids := e.EventIDs
		if len(ids) > 8 {
			ids = append(ids[:8:8], fmt.Sprintf("and %d more", len(e.EventIDs)-8))
		}
		return e.Source + " " + strings.Join(ids, ", ")
	case e.Commit != "":
		return "commit " + e.Commit
	}
	return e.Source
}

func pointerLabel(f core.Field) string {
	if f.Scheme == core.SchemeTerraform {
		return strings.TrimPrefix(f.Path, "/")
	}
	return f.Path
}

// oneLine keeps a trailer value on one line: git would otherwise read a continuation.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// prose places data into a sentence that goes both into a plain-text reason (a change's "why",
// read in logs and summaries) and into a pull request's Markdown body: plain leaves the data as it
// is, markdown escapes it with ghmarkdown, so one sentence is written once for both places.
type prose struct{ markdown bool }

var (
	plain    = prose{}
	markdown = prose{markdown: true}
)

// text places s in running text.
func (p prose) text(s string) string {
	if p.markdown {
		return ghmarkdown.Text(s)
	}
	return s
}

// code places s as inline code.
func (p prose) code(s string) string {
	if p.markdown {
		return ghmarkdown.Code(s)
	}
	return "`" + s + "`"
}
