package report

import (
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/core"
)

// prClaim is a pull request's claim on web's replicas.
func prClaim(value string) *core.Claim {
	return &core.Claim{Field: core.K8sField("apps", "Deployment", "prod", "web", "/spec/replicas"),
		Actor: core.Actor{Identity: core.Identity{Source: core.SourceGitHubUser, ID: "alice"}}, Value: core.StringValue(value),
		Evidence: core.Evidence{Source: "github-pull-request", Commit: "c0ffee", PR: 7}}
}

func gitClaim(value string, expires time.Time) *core.Claim {
	return &core.Claim{Field: core.K8sField("apps", "Deployment", "prod", "web", "/spec/replicas"),
		Actor: core.Actor{Name: "oncall", Identity: core.Identity{Source: core.SourceGitAuthor, ID: "bob@example.com"}}, Value: core.StringValue(value),
		Intent: core.IntentAvailability, Motivation: core.Motivation{Kind: "incident"}, Expires: expires,
		Evidence: core.Evidence{Source: "git", Commit: "0123456789abcdef"}}
}

// The conclusion table (docs/verdicts-json.md): what each decision means for the pull request's
// own claim, and what the check run may conclude for it.
func TestOutcomeOfThePullRequestsOwnClaim(t *testing.T) {
	own := prClaim("4")
	until := now.Add(48 * time.Hour)
	field := own.Field
	cases := []struct {
		name       string
		v          core.Verdict
		own        *core.Claim
		kind       OutcomeKind
		conclusion string
		text       string
	}{
		{"adopted", core.Verdict{Field: field, Decision: core.DecisionAdopt, Winner: own, Rule: "rank"}, own, OutcomeWins, "success", "wins"},
		// The pull request wants Git's value: Git's claim wins, with the pull request's value.
		{"wants Git's value", core.Verdict{Field: field, Decision: core.DecisionEnforceGit, Winner: gitClaim("4", time.Time{}), Rule: "no-contest"}, own, OutcomeWins, "success", "wins"},
		{"judged as a contributor", core.Verdict{Field: field, Decision: core.DecisionYield, Winner: &core.Claim{Field: field, Value: core.StringValue("4"),
			Evidence: own.Evidence, Actor: core.Actor{Identity: core.Identity{Source: core.SourceGitHubUser, ID: "bob"}}}, Rule: "rank", Until: until}, own, OutcomeWins, "success", "wins"},
		{"overridden", core.Verdict{Field: field, Decision: core.DecisionEnforceGit, Winner: own, Rule: "override"}, own, OutcomeWins, "success", "wins (override)"},
		// Issue 33: enforce-git that keeps Git's value against the pull request's is no pass.
		{"deferred by a freeze", core.Verdict{Field: field, Decision: core.DecisionEnforceGit, Winner: gitClaim("3", time.Time{}), Losers: []core.Claim{*own},
			Rule: "freeze.peak-sales", Recheck: until}, own, OutcomeDeferred, "action_required", "deferred by freeze.peak-sales until 2026-11-24T09:00:00Z"},
		{"loses to a standing incident claim", core.Verdict{Field: field, Decision: core.DecisionEnforceGit, Winner: gitClaim("9", until), Losers: []core.Claim{*own},
			Rule: "urgency"}, own, OutcomeLoses, "failure",
			"loses to oncall (availability, incident) (commit 0123456789ab) by urgency until 2026-11-24T09:00:00Z"},
		{"loses to the standing owner", core.Verdict{Field: field, Decision: core.DecisionYield, Winner: gitClaim("9", time.Time{}), Rule: "owner.replicas", Until: until}, own,
			OutcomeLoses, "failure", "loses to oncall (availability, incident) (commit 0123456789ab) by owner.replicas until 2026-11-24T09:00:00Z"},
		{"vetoed", core.Verdict{Field: field, Decision: core.DecisionVeto, Winner: gitClaim("3", time.Time{}), Rule: "immutable"}, own, OutcomeVetoed, "failure", "vetoed"},
		{"held", core.Verdict{Field: field, Decision: core.DecisionHold, Rule: "oscillation", Until: until}, own, OutcomeAsks, "action_required", "asks people until 2026-11-24T09:00:00Z"},
		{"escalated", core.Verdict{Field: field, Decision: core.DecisionEscalate, Rule: "escalation"}, own, OutcomeAsks, "action_required", "asks people"},
		{"a command's claim only", core.Verdict{Field: field, Decision: core.DecisionAdopt, Winner: gitClaim("9", time.Time{}), Rule: "rank"}, nil, OutcomeUnclaimed, "success", "not claimed by the pull request"},
		{"a command's claim vetoed", core.Verdict{Field: field, Decision: core.DecisionVeto, Rule: "bounds"}, nil, OutcomeVetoed, "failure", "vetoed"},
	}
	for _, c := range cases {
		o := OutcomeOf(c.v, c.own)
		if o.Kind != c.kind || o.Conclusion() != c.conclusion || o.Text() != c.text {
			t.Errorf("%s: got %s, %s, %q; want %s, %s, %q", c.name, o.Kind, o.Conclusion(), o.Text(), c.kind, c.conclusion, c.text)
		}
	}
}

func TestConclusion(t *testing.T) {
	win, defer_, lose, veto, ask := Outcome{Kind: OutcomeWins}, Outcome{Kind: OutcomeDeferred}, Outcome{Kind: OutcomeLoses}, Outcome{Kind: OutcomeVetoed}, Outcome{Kind: OutcomeAsks}
	cases := []struct {
		os       []Outcome
		unjudged bool
		want     string
	}{
		{nil, false, "neutral"},
		{nil, true, "action_required"},
		{[]Outcome{win, {Kind: OutcomeUnclaimed}}, false, "success"},
		{[]Outcome{win}, true, "action_required"},
		{[]Outcome{win, defer_}, false, "action_required"},
		{[]Outcome{win, ask}, false, "action_required"},
		{[]Outcome{win, lose}, false, "failure"},
		{[]Outcome{ask, veto}, false, "failure"},
		{[]Outcome{veto}, true, "failure"},
		{[]Outcome{{Kind: "from-a-later-version"}}, false, "failure"},
	}
	for _, c := range cases {
		if got := Conclusion(c.os, c.unjudged); got != c.want {
			t.Errorf("Conclusion(%v, unjudged %v) = %s, want %s", c.os, c.unjudged, got, c.want)
		}
	}
}

// The comment shows what each verdict means for the pull request, and why it does not pass.
func TestCommentShowsThePullRequestsOutcome(t *testing.T) {
	own := prClaim("4")
	v := core.Verdict{Field: own.Field, Decision: core.DecisionEnforceGit, Winner: gitClaim("3", time.Time{}), Losers: []core.Claim{*own},
		Rule: "freeze.peak-sales", Recheck: now.Add(time.Hour)}
	body := Comment(Input{Generated: now, Verdicts: []core.Verdict{v}, Outcomes: map[core.Field]Outcome{v.Field: OutcomeOf(v, own)}})
	if !strings.Contains(body, "| field | pull request | decision |") || !strings.Contains(body, `| ⏸️ deferred by freeze\.peak\-sales until 2026\-11\-22T10\:00\:00Z | enforce\-git |`) {
		t.Errorf("the table must say the pull request is deferred, and until when:\n%s", body)
	}
}

// Property: whatever the verdicts, a change with a part Parley could not judge never concludes
// success, neutral or skipped, and a veto anywhere always fails.
func FuzzUnjudgedNeverPasses(f *testing.F) {
	f.Add([]byte{0, 1, 2}, true)
	f.Add([]byte{}, true)
	f.Add([]byte{3, 3, 0}, false)
	decisions := []core.Decision{core.DecisionEnforceGit, core.DecisionAdopt, core.DecisionYield, core.DecisionVeto, core.DecisionHold, core.DecisionEscalate}
	f.Fuzz(func(t *testing.T, shape []byte, unjudged bool) {
		own := prClaim("4")
		var outcomes []Outcome
		vetoed := false
		for i, b := range shape {
			if i == 64 {
				break
			}
			d := decisions[int(b)%len(decisions)]
			v := core.Verdict{Field: own.Field, Decision: d, Rule: "rank"}
			switch b / 6 % 4 { // who wins: the pull request, Git with another value, Git with its value, nobody
			case 0:
				v.Winner = own
			case 1:
				v.Winner = gitClaim("3", now)
			case 2:
				v.Winner = gitClaim("4", time.Time{})
			}
			if b/24%2 == 1 {
				v.Rule = "freeze.x"
			}
			claim := own
			if b/48%2 == 1 {
				claim = nil
			}
			vetoed = vetoed || d == core.DecisionVeto
			outcomes = append(outcomes, OutcomeOf(v, claim))
		}
		c := Conclusion(outcomes, unjudged)
		if unjudged && Passes(c) {
			t.Fatalf("unjudged change concluded %s (outcomes %v)", c, outcomes)
		}
		if vetoed && c != "failure" {
			t.Fatalf("a veto concluded %s (outcomes %v)", c, outcomes)
		}
		if c == "success" || c == "neutral" {
			for _, o := range outcomes {
				if o.Kind != OutcomeWins && o.Kind != OutcomeUnclaimed {
					t.Fatalf("concluded %s with an outcome %s", c, o.Kind)
				}
			}
		}
	})
}
