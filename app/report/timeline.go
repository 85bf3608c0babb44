package report

import (
	"fmt"
	"strings"
	"time"

	"github.com/parleyhq/parley/core"
)

// maxTimelines bounds the Mermaid timelines in one comment: the comment stays small, and the
// details page has every field's.
const maxTimelines = 3

// contested reports whether v weighed claims against each other, or refused one: the verdicts a
// timeline helps a reviewer read.
func contested(v core.Verdict) bool {
	if v.Winner != nil && len(v.Losers) > 0 {
		return true
	}
	switch v.Decision {
	case core.DecisionVeto, core.DecisionHold, core.DecisionEscalate:
		return v.Winner != nil || len(v.Losers) > 0
	}
	return false
}

// Timelines renders a Mermaid Gantt chart for each of the first maxTimelines contested verdicts,
// which GitHub draws in the comment: one row per claim, grouped by actor, from when it was made
// until it expires (or until at, the time the verdict was made for), and the verdict as a
// milestone at at. "" when no verdict is contested.
func Timelines(vs []core.Verdict, at time.Time) string {
	var b strings.Builder
	n := 0
	for _, v := range vs {
		if !contested(v) {
			continue
		}
		if n == maxTimelines {
			break
		}
		n++
		b.WriteString(Timeline(v, at))
	}
	return b.String()
}

// Timeline renders one verdict's claims as a fenced Mermaid Gantt chart. Times are Unix seconds
// (Mermaid's dateFormat X), so no date text has to survive Mermaid's parser; every text is
// stripped of what its syntax gives meaning to.
func Timeline(v core.Verdict, at time.Time) string {
	type row struct {
		claim core.Claim
		tag   string
	}
	var rows []row
	if v.Winner != nil {
		rows = append(rows, row{*v.Winner, "active"})
	}
	for _, l := range v.Losers {
		tag := "done"
		if v.Decision == core.DecisionVeto {
			tag = "crit"
		}
		rows = append(rows, row{l, tag})
	}
	start, end := at, at
	for _, r := range rows {
		if r.claim.At.Before(start) {
			start = r.claim.At
		}
		if r.claim.Expires.After(end) {
			end = r.claim.Expires
		}
	}
	var b strings.Builder
	b.WriteString("\n```mermaid\ngantt\n")
	fmt.Fprintf(&b, "  title %s\n", mermaidText(v.Field.String(), 80))
	b.WriteString("  dateFormat X\n  axisFormat %d %b %H:%M\n")
	// Group the rows by actor, in the order actors first appear (winner first).
	var actors []string
	byActor := map[string][]row{}
	for _, r := range rows {
		a := mermaidText(r.claim.Actor.String(), 40)
		if _, ok := byActor[a]; !ok {
			actors = append(actors, a)
		}
		byActor[a] = append(byActor[a], r)
	}
	for _, a := range actors {
		fmt.Fprintf(&b, "  section %s\n", a)
		for _, r := range byActor[a] {
			c := r.claim
			from, until := c.At, c.Expires
			if until.IsZero() || until.Before(from) {
				until = end
			}
			if until.Sub(from) < time.Minute {
				until = from.Add(time.Minute) // a claim made at the verdict's time still shows
			}
			label := c.Value.String()
			if c.Yield {
				label = "yield"
			}
			if c.Intent != "" {
				label += " (" + string(c.Intent) + ")"
			}
			fmt.Fprintf(&b, "  %s :%s, %d, %d\n", mermaidText(label, 40), r.tag, from.Unix(), until.Unix())
		}
	}
	b.WriteString("  section verdict\n")
	fmt.Fprintf(&b, "  %s :milestone, %d, 0s\n", mermaidText(string(v.Decision)+" by "+v.Rule, 40), at.Unix())
	b.WriteString("```\n")
	return b.String()
}

// mermaidText keeps s to what a Gantt chart's text may hold: no colon, hash or semicolon (task
// syntax and entities), no quote, no newline, no backquote (the fence), at most max runes.
func mermaidText(s string, max int) string {
	s = strings.Map(func(r rune) rune {
		switch r {
		case ':', '#', ';', '`', '"', '\n', '\r', '\t':
			return ' '
		}
		return r
	}, s)
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > max {
		s = string(r[:max-1]) + "…"
	}
	if s == "" {
		s = "-"
	}
	return s
}
