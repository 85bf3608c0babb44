package arbiter

import (
	"math/rand/v2"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/policy"
)

// giveWayPolicy: the HPA owns Deployment replicas and gives way to a trusted incident claim (when it
// is not responding to an incident itself); it owns StatefulSet replicas outright.
const giveWayPolicy = `
intent "availability" { rank = 90 }
intent "consistency"  { rank = 20 }

motivation "incident" {
  urgency          = 100
  default_lifetime = "4h"
  asserted_by      = ["oncall", "dba"]
}
motivation "pin" {
  urgency     = 50
  asserted_by = ["oncall"]
}
motivation "launch" { urgency = 60 }

actor "hpa" {
  intent    = "availability"
  k8s_users = ["system:serviceaccount:kube-system:horizontal-pod-autoscaler"]
}
actor "oncall" {
  intent       = "availability"
  k8s_users    = ["alice@parley.example"]
  github_teams = ["parleyhq/sre"]
}
actor "dba" {
  intent    = "consistency"
  k8s_users = ["dora@parley.example"]
}
actor "developers" {
  intent    = "consistency"
  intents   = ["consistency"]
  k8s_users = ["*@parley.example"]
}

field "replicas" {
  match                = ["k8s:apps/Deployment/*/*#/spec/replicas"]
  owner                = "hpa"
  owner_gives_way_when = contains(["incident", "pin"], claim.motivation) && (other == null || other.motivation != "incident")
}
field "statefulset-replicas" {
  match = ["k8s:apps/StatefulSet/*/*#/spec/replicas"]
  owner = "hpa"
}
field "strict" {
  match                = ["k8s:apps/Deployment/*/*#/spec/minReadySeconds"]
  owner                = "hpa"
  owner_gives_way_when = claim.motivation == "incident" && other.urgency < claim.urgency
}

rule "incident-first" {
  when     = claim.motivation == "incident" && other.motivation != "incident"
  decision = "win"
}
`

func TestOwnerGivesWay(t *testing.T) {
	p, err := policy.Parse([]byte(giveWayPolicy), "give-way.hcl")
	if err != nil {
		t.Fatal(err)
	}
	sts := core.K8sField("apps", "StatefulSet", "prod", "db", "/spec/replicas")
	minReady := core.K8sField("apps", "Deployment", "prod", "web", "/spec/minReadySeconds")
	gitAt := t0.Add(-48 * time.Hour)
	git := func(f core.Field) *core.Claim {
		c := claimBy(f, core.SourceGitAuthor, "carol@parley.example", num(t, 3), gitAt)
		c.Evidence = core.Evidence{Source: "git", Commit: "abc123"}
		return &c
	}
	hpa := func(f core.Field, n int, at time.Time) core.Claim {
		return claimBy(f, core.SourceKubeUser, hpaSA, num(t, n), at)
	}
	// On-call's incident claim at 09:00 lasts 4 h (the motivation's default lifetime): until 13:00.
	incidentAt := t0.Add(-time.Hour)
	expiry := incidentAt.Add(4 * time.Hour)
	with := func(c core.Claim, kind, ref string) core.Claim {
		c.Motivation = core.Motivation{Kind: kind, Ref: ref}
		return c
	}
	oncall := func(f core.Field, n int, at time.Time) core.Claim {
		return with(claimBy(f, core.SourceKubeUser, "alice@parley.example", num(t, n), at), "incident", "INC-7")
	}
	const cond = `owner_gives_way_when contains(["incident", "pin"], claim.motivation) && (other == null || other.motivation != "incident") holds`
	tests := []struct {
		name     string
		in       Input
		decision core.Decision
		rule     string
		winner   string
		until    time.Time
		recheck  time.Time
		losers   []string
		why      []string
	}{
		{
			name:     "the HPA owns replicas: its claim wins over Git's",
			in:       Input{Field: replicas, Git: git(replicas), Now: t0, Live: []core.Claim{hpa(replicas, 7, t0.Add(-2*time.Hour))}},
			decision: core.DecisionYield, rule: "owner.replicas", winner: "hpa=7", losers: []string{"git"},
			why: []string{"hpa is the standing owner of this field; its claim 7 wins"},
		},
		{
			name: "on-call's trusted incident claim takes the field until it expires",
			in: Input{Field: replicas, Git: git(replicas), Now: t0, Live: []core.Claim{
				hpa(replicas, 7, t0.Add(-2*time.Hour)), oncall(replicas, 12, incidentAt),
			}},
			decision: core.DecisionYield, rule: "owner.replicas", winner: "oncall=12", until: expiry, recheck: expiry,
			losers: []string{"git", "hpa"},
			why: []string{
				"[owner.replicas: gives way] hpa is the standing owner of this field, but it gives way to oncall because " + cond + ` for its claim 12`,
				"the owner's claim 7 loses",
				"until 2026-11-22T13:00:00Z, when the claim expires and hpa holds the field again",
				"[rules: not reached] the standing owner's condition decides this field",
			},
		},
		{
			name: "one minute after the incident claim expires the HPA holds the field again",
			in: Input{Field: replicas, Git: git(replicas), Now: expiry.Add(time.Minute), Live: []core.Claim{
				hpa(replicas, 7, t0.Add(-2*time.Hour)), oncall(replicas, 12, incidentAt),
			}},
			decision: core.DecisionYield, rule: "owner.replicas", winner: "hpa=7", losers: []string{"git"},
			why: []string{"oncall's claim (12) expired at 2026-11-22T13:00:00Z", "hpa is the standing owner of this field; its claim 7 wins"},
		},
		{
			name:     "the owner without a live claim gives way too (other is null)",
			in:       Input{Field: replicas, Git: git(replicas), Now: t0, Live: []core.Claim{oncall(replicas, 12, incidentAt)}},
			decision: core.DecisionYield, rule: "owner.replicas", winner: "oncall=12", until: expiry, losers: []string{"git"},
			why: []string{"gives way to oncall because owner_gives_way_when"},
		},
		{
			name: "an actor that may not assert incident cannot take the field with it",
			in: Input{Field: replicas, Git: git(replicas), Now: t0, Live: []core.Claim{
				hpa(replicas, 7, t0.Add(-2*time.Hour)),
				with(claimBy(replicas, core.SourceKubeUser, "frank@parley.example", num(t, 20), incidentAt), "incident", "INC-7"),
			}},
			decision: core.DecisionYield, rule: "owner.replicas", winner: "hpa=7", losers: []string{"git", "developers"},
			why: []string{
				"developers asserts motivation incident INC-7, but developers may not assert it (trusted: oncall, dba)",
				"developers lose to the owner (owner_gives_way_when " + cond[len("owner_gives_way_when "):len(cond)-len(" holds")] + " holds for none of their claims)",
			},
		},
		{
			name: "a claim the condition does not hold for loses to the owner",
			in: Input{Field: replicas, Git: git(replicas), Now: t0, Live: []core.Claim{
				hpa(replicas, 7, t0.Add(-2*time.Hour)),
				with(claimBy(replicas, core.SourceKubeUser, "alice@parley.example", num(t, 20), incidentAt), "launch", "L-1"),
			}},
			decision: core.DecisionYield, rule: "owner.replicas", winner: "hpa=7", losers: []string{"git", "oncall"},
			why: []string{"oncall lose to the owner (owner_gives_way_when", "holds for none of their claims)"},
		},
		{
			name: "without owner_gives_way_when the owner's hold is absolute",
			in: Input{Field: sts, Git: git(sts), Now: t0, Live: []core.Claim{
				hpa(sts, 7, t0.Add(-2*time.Hour)), oncall(sts, 12, incidentAt),
			}},
			decision: core.DecisionYield, rule: "owner.statefulset-replicas", winner: "hpa=7", losers: []string{"git", "oncall"},
			why: []string{"hpa is the standing owner of this field; its claim 7 wins; oncall lose to the owner; GitOps is told to ignore the field"},
		},
		{
			name: "several claims qualify: the regular arbitration between them chooses",
			in: Input{Field: replicas, Git: git(replicas), Now: t0, Live: []core.Claim{
				hpa(replicas, 7, t0.Add(-2*time.Hour)), oncall(replicas, 12, incidentAt),
				with(claimBy(replicas, core.SourceKubeUser, "dora@parley.example", num(t, 9), incidentAt.Add(time.Minute)), "incident", "INC-7"),
			}},
			decision: core.DecisionYield, rule: "owner.replicas", winner: "oncall=12", until: expiry,
			losers: []string{"git", "hpa", "dba"},
			why: []string{"(it holds for oncall, dba; oncall beats the others (rank))", "dba lose to oncall",
				"until 2026-11-22T13:00:00Z, when the claim expires and owner_gives_way_when is weighed again for the claims that remain (dba)"},
		},
		{
			name: "several claims qualify and tie: the most recent takes the field",
			in: Input{Field: replicas, Git: git(replicas), Now: t0, Live: []core.Claim{
				hpa(replicas, 7, t0.Add(-2*time.Hour)), oncall(replicas, 12, incidentAt),
				func() core.Claim {
					c := with(claimBy(replicas, core.SourceKubeUser, "dora@parley.example", num(t, 9), incidentAt.Add(time.Minute)), "incident", "INC-7")
					c.Intent = "availability"
					return c
				}(),
			}},
			decision: core.DecisionYield, rule: "owner.replicas", winner: "dba=9", until: incidentAt.Add(time.Minute + 4*time.Hour),
			losers: []string{"git", "hpa", "oncall"},
			why:    []string{"none beats every other, so the most recent, dba's, takes the field"},
		},
		{
			name: "a qualifying claim without expiry still wins, with a warning",
			in: Input{Field: replicas, Git: git(replicas), Now: t0, Live: []core.Claim{
				hpa(replicas, 7, t0.Add(-2*time.Hour)),
				with(claimBy(replicas, core.SourceKubeUser, "alice@parley.example", num(t, 5), incidentAt), "pin", ""),
			}},
			decision: core.DecisionYield, rule: "owner.replicas", winner: "oncall=5", losers: []string{"git", "hpa"},
			why: []string{"[owner.replicas: gives way, no expiry]", "the claim has no expiry, so hpa holds the field again only when oncall withdraws or replaces it"},
		},
		{
			name: "a condition that fails to evaluate does not hold",
			in: Input{Field: minReady, Git: git(minReady), Now: t0, Live: []core.Claim{
				oncall(minReady, 12, incidentAt),
			}},
			decision: core.DecisionYield, rule: "owner.strict", losers: []string{"git", "oncall"},
			why: []string{"[owner.strict: error] owner_gives_way_when could not be evaluated for oncall:", "it has no live claim"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := Decide(p, tt.in)
			text := Explain(v)
			if v.Decision != tt.decision || v.Rule != tt.rule {
				t.Errorf("got %s by %s, want %s by %s\n%s", v.Decision, v.Rule, tt.decision, tt.rule, text)
			}
			got := ""
			if v.Winner != nil {
				got = v.Winner.Actor.Name + "=" + v.Winner.Value.String()
			}
			if got != tt.winner {
				t.Errorf("winner %q, want %q\n%s", got, tt.winner, text)
			}
			if !v.Until.Equal(tt.until) {
				t.Errorf("until %s, want %s", v.Until, tt.until)
			}
			if !tt.recheck.IsZero() && !v.Recheck.Equal(tt.recheck) {
				t.Errorf("recheck %s, want %s", v.Recheck, tt.recheck)
			}
			var losers []string
			for _, l := range v.Losers {
				losers = append(losers, l.Actor.Name)
			}
			if !reflect.DeepEqual(losers, tt.losers) {
				t.Errorf("losers %v, want %v", losers, tt.losers)
			}
			for _, w := range tt.why {
				if !strings.Contains(text, w) {
					t.Errorf("explanation lacks %q:\n%s", w, text)
				}
			}
			// The claims' order does not matter, and a warm arbiter decides as a fresh one.
			in := tt.in
			in.Live = append([]core.Claim(nil), in.Live...)
			for i, j := 0, len(in.Live)-1; i < j; i, j = i+1, j-1 {
				in.Live[i], in.Live[j] = in.Live[j], in.Live[i]
			}
			if again := Decide(p, in); !reflect.DeepEqual(again, v) {
				t.Errorf("reversing the claims changes the verdict:\n%s", Explain(again))
			}
		})
	}
}

// giveWayDemo is the demo policy with the HPA giving replicas way to incident and critical claims:
// the random inputs and the fuzzer then reach the new path with every kind of claim.
func giveWayDemo(t testing.TB) *policy.Policy {
	t.Helper()
	src, err := os.ReadFile("../../internal/demo/policy.hcl")
	if err != nil {
		t.Fatal(err)
	}
	const anchor = "  owner_when = contains("
	if !strings.Contains(string(src), anchor) {
		t.Fatalf("the demo policy has no %q line", anchor)
	}
	edited := strings.Replace(string(src), anchor,
		"  owner_gives_way_when = claim.motivation == \"incident\" || claim.severity == \"critical\"\n"+anchor, 1)
	p, err := policy.Parse([]byte(edited), "demo-give-way.hcl")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestOwnerGivesWayOrderIndependent: with the owner giving way, verdicts still do not depend on the
// claims' order, and a warm arbiter decides as a fresh one.
func TestOwnerGivesWayOrderIndependent(t *testing.T) {
	p := giveWayDemo(t)
	arb := New(p)
	r := rand.New(rand.NewPCG(5, 6))
	gaveWay := 0
	for i := 0; i < 400; i++ {
		in := randomInput(t, r, i)
		want := Decide(p, in)
		if strings.Contains(Explain(want), "gives way to") {
			gaveWay++
		}
		if got := arb.Decide(in); !reflect.DeepEqual(got, want) {
			t.Fatalf("input %d: cached arbiter differs:\n%s\nvs\n%s", i, Explain(got), Explain(want))
		}
		for k := 0; k < 3; k++ {
			r.Shuffle(len(in.Live), func(a, b int) { in.Live[a], in.Live[b] = in.Live[b], in.Live[a] })
			if got := Decide(p, in); !reflect.DeepEqual(got, want) {
				t.Fatalf("input %d: verdict depends on claim order:\n%s\nvs\n%s", i, Explain(want), Explain(got))
			}
		}
	}
	if gaveWay == 0 {
		t.Error("no random input made the owner give way: the test does not reach the path")
	}
}
