package arbiter

import (
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/policy"
)

// A veto rule with veto_ask_when reads other (the claim it was vetoed against) and, without
// veto_ask, asks the escalation block's people; where veto_ask_when does not hold, the veto only
// refuses.
func TestAVetoRulePutsItsVetoToTheEscalationsPeople(t *testing.T) {
	p, err := policy.Parse([]byte(`
intent "availability" { rank = 90 }
intent "cost"         { rank = 40 }
motivation "incident" { urgency = 100 }
motivation "budget"   { urgency = 20 }
actor "oncall" {
  intent      = "availability"
  k8s_users   = ["alice@parley.example"]
  git_authors = ["alice@parley.example"]
}
actor "finops" {
  intent    = "cost"
  k8s_users = ["system:serviceaccount:finops:*"]
}
rule "no-cuts-during-incident" {
  when          = claim.intent == "cost" && other.motivation == "incident"
  decision      = "veto"
  veto_ask_when = claim.urgency >= 20 && other.actor == "git"
}
escalation { ask = ["@acme/sre"] }
`), "p.hcl")
	if err != nil {
		t.Fatal(err)
	}
	// Git holds on-call's incident change (the commit's author is vouched for: only an actor's
	// incident counts, an unknown author's is not counted).
	git := claimBy(replicas, core.SourceGitAuthor, "alice@parley.example", num(t, 6), t0.Add(-time.Hour))
	git.Actor.Identity.Proof.Vouched = "the test"
	git.Motivation = core.Motivation{Kind: "incident"}
	cut := claimBy(replicas, core.SourceKubeUser, "system:serviceaccount:finops:bot", num(t, 2), t0.Add(time.Minute))
	cut.Motivation = core.Motivation{Kind: "budget"}

	v := Decide(p, Input{Field: replicas, Git: &git, Live: []core.Claim{cut}, Now: t0.Add(2 * time.Minute)})
	if v.Decision != core.DecisionVeto || v.Winner == nil || !v.Winner.Value.Equal(git.Value) {
		t.Fatalf("decision %s:\n%s", v.Decision, Explain(v))
	}
	if v.Proposed == nil || v.Proposed.Value.JSON() != "2" || strings.Join(v.Ask, ",") != "@acme/sre" {
		t.Fatalf("proposed %+v asking %v:\n%s", v.Proposed, v.Ask, Explain(v))
	}
	if !strings.Contains(Explain(v), "veto_ask_when claim.urgency >= 20 && other.actor == \"git\" holds for it (rule.no-cuts-during-incident)") ||
		!strings.Contains(Explain(v), "asking @acme/sre (the escalation's ask)") {
		t.Errorf("the explanation does not say why and whom it asks:\n%s", Explain(v))
	}

	// Without urgency (no budget motivation) the condition does not hold: the veto only refuses.
	cut.Motivation = core.Motivation{}
	v = Decide(p, Input{Field: replicas, Git: &git, Live: []core.Claim{cut}, Now: t0.Add(2 * time.Minute)})
	if v.Proposed != nil || v.Ask != nil || strings.Contains(Explain(v), "veto-ask") {
		t.Fatalf("a veto whose veto_ask_when does not hold was put to people:\n%s", Explain(v))
	}
}
