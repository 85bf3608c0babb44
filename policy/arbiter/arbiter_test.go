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

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func demoPolicy(t testing.TB) *policy.Policy {
	t.Helper()
	p, err := policy.LoadFile("../../internal/demo/policy.hcl")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func num(t testing.TB, n any) core.Value {
	t.Helper()
	v, err := core.JSONValue(n)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func claimBy(f core.Field, src core.IdentitySource, id string, v core.Value, at time.Time) core.Claim {
	return core.Claim{Field: f, Actor: core.Actor{Identity: core.Identity{Source: src, ID: id}}, Value: v, At: at}
}

var (
	replicas = core.K8sField("apps", "Deployment", "prod", "web", "/spec/replicas")
	capacity = core.TFField("infra/kafka", "aws_autoscaling_group.consumer", "/desired_capacity")
	iam      = core.TFField("infra/kafka", "aws_iam_role_policy.consumer", "/policy")
	settings = core.K8sField("", "ConfigMap", "prod", "settings", "/data/LOG_LEVEL")
	hpaSA    = "system:serviceaccount:kube-system:horizontal-pod-autoscaler"
	costSA   = "system:serviceaccount:finops:cost-optimizer"
	agentARN = "arn:aws:sts::123456789012:assumed-role/kafka-scaling-agent/s1"
)

func steps(v core.Verdict) string { return Explain(v) }

// sre puts a GitHub user's claim in the parleyhq/sre team (the demo policy's oncall actor).
func sre(c core.Claim) core.Claim {
	c.Actor.Identity.Groups = []string{"parleyhq/sre"}
	return c
}

func TestDecide(t *testing.T) {
	p := demoPolicy(t)
	gitReplicas := claimBy(replicas, core.SourceGitAuthor, "carol@parley.example", num(t, 3), t0.Add(-48*time.Hour))
	gitReplicas.Evidence = core.Evidence{Source: "git", Commit: "abc123"}
	gitCap := claimBy(capacity, core.SourceGitAuthor, "carol@parley.example", num(t, 4), t0.Add(-48*time.Hour))
	gitSettings := claimBy(settings, core.SourceGitAuthor, "carol@parley.example", core.StringValue("info"), t0.Add(-48*time.Hour))
	hpaObj := core.K8sField("autoscaling", "HorizontalPodAutoscaler", "prod", "web", "/spec/scaleTargetRef/name")
	withHPA := GitValues{hpaObj: core.StringValue("web"), replicas: num(t, 3)}
	asg := GitValues{capacity.Object().Child("min_size"): num(t, 4), capacity.Object().Child("max_size"): num(t, 16)}

	incident := func(c core.Claim, ref string) core.Claim {
		c.Motivation = core.Motivation{Kind: "incident", Ref: ref}
		return c
	}
	tests := []struct {
		name     string
		in       Input
		decision core.Decision
		rule     string
		winner   string // actor name = value
		until    time.Time
		recheck  time.Time
		why      []string
	}{
		{
			name:     "nothing at all",
			in:       Input{Field: settings, Now: t0},
			decision: core.DecisionHold, rule: "no-claims",
			why: []string{"no claim remains"},
		},
		{
			name: "Git's latest commit yields the field to the owner",
			in: Input{Field: replicas, Now: t0, Lookup: withHPA, Git: &core.Claim{Field: replicas, Yield: true, At: t0.Add(-time.Hour),
				Actor: core.Actor{Identity: core.Identity{Source: core.SourceGitAuthor, ID: "dana@parley.example"}}, Evidence: core.Evidence{Commit: "feedbeef"}}},
			decision: core.DecisionYield, rule: "owner.replicas",
			why: []string{"Git's latest change yields the field (commit feedbeef by dana@parley.example)", "it has no live claim"},
		},
		{
			name:     "git alone",
			in:       Input{Field: settings, Git: &gitSettings, Now: t0},
			decision: core.DecisionEnforceGit, rule: "no-contest", winner: `git="info"`,
		},
		{
			name: "owner holds replicas when an HPA targets the Deployment",
			in: Input{Field: replicas, Git: &gitReplicas, Now: t0, Lookup: withHPA, Live: []core.Claim{
				claimBy(replicas, core.SourceKubeUser, hpaSA, num(t, 7), t0.Add(-time.Minute)),
				claimBy(replicas, core.SourceKubeUser, costSA, num(t, 2), t0.Add(-2*time.Minute)),
			}},
			decision: core.DecisionYield, rule: "owner.replicas", winner: "hpa=7",
			why: []string{"hpa is the standing owner", "its claim 7 wins",
				"cost-optimizer may only write fields that list it as a writer"},
		},
		{
			name: "no HPA: no owner, and ranks decide",
			in: Input{Field: replicas, Git: &gitReplicas, Now: t0, Lookup: GitValues{}, Live: []core.Claim{
				claimBy(replicas, core.SourceKubeUser, hpaSA, num(t, 7), t0.Add(-time.Minute)),
			}},
			decision: core.DecisionAdopt, rule: "rank", winner: "hpa=7",
			why: []string{"hpa does not own this field: owner_when", "hpa (availability, rank 90) outranks git (baseline, rank 10)"},
		},
		{
			name: "bounds below the minimum",
			in: Input{Field: replicas, Git: &gitReplicas, Now: t0, Lookup: GitValues{}, Live: []core.Claim{
				claimBy(replicas, core.SourceKubeUser, hpaSA, num(t, 0), t0.Add(-time.Minute)),
			}},
			decision: core.DecisionVeto, rule: "bounds", winner: "git=3",
			why: []string{"hpa wants 0, below the minimum 1"},
		},
		{
			name: "a Git commit asserting an incident its author may not declare is downgraded",
			in: Input{Field: settings, Now: t0, Git: func() *core.Claim {
				c := incident(gitSettings, "INC-1")
				return &c
			}()},
			decision: core.DecisionEnforceGit, rule: "no-contest",
			why:    []string{"the commit by carol@parley.example asserts motivation incident INC-1, which is not one an unknown actor may declare (only oncall may: asserted_by); its author carol@parley.example is no actor the policy vouches for, so the declaration is not counted"},
			winner: `git="info"`,
		},
		{
			name: "a trusted incident wins and expires after its default lifetime",
			in: Input{Field: settings, Git: &gitSettings, Now: t0, Live: []core.Claim{
				incident(claimBy(settings, core.SourceKubeUser, "alice@parley.example", core.StringValue("debug"), t0.Add(-time.Hour)), "INC-2"),
			}},
			decision: core.DecisionYield, rule: "rule.incident-first", winner: `oncall="debug"`,
			until: t0.Add(3 * time.Hour), recheck: t0.Add(3 * time.Hour),
			why: []string{"oncall beats git", "until 2026-11-22T13:00:00Z, then Git's value returns"},
		},
		{
			name: "intent the actor may not assert is downgraded",
			in: Input{Field: capacity, Git: &gitCap, Now: t0, Lookup: asg, Live: []core.Claim{func() core.Claim {
				c := claimBy(capacity, core.SourceKubeUser, costSA, num(t, 5), t0.Add(-time.Minute))
				c.Intent = core.IntentSecurity
				return c
			}()}},
			decision: core.DecisionAdopt, rule: "rank", winner: "cost-optimizer=5",
			why: []string{"cost-optimizer asserts intent security, which cost-optimizer may not assert (allowed: cost); it counts as cost"},
		},
		{
			name: "cost claims are vetoed by rule during an incident",
			in: Input{Field: capacity, Git: &gitCap, Now: t0, Lookup: asg, Live: []core.Claim{
				claimBy(capacity, core.SourceKubeUser, costSA, num(t, 5), t0.Add(-time.Minute)),
				incident(sre(claimBy(capacity, core.SourceGitHubUser, "bob", num(t, 12), t0.Add(-2*time.Minute))), "INC-3"),
			}},
			decision: core.DecisionYield, rule: "rule.incident-first", winner: "oncall=12", until: t0.Add(-2*time.Minute + 4*time.Hour),
			why: []string{"[rule.no-cost-cuts-during-incident: decided] cost-optimizer is vetoed against oncall"},
		},
		{
			name: "above Terraform's max_size",
			in: Input{Field: capacity, Git: &gitCap, Now: t0, Lookup: asg, Live: []core.Claim{
				claimBy(capacity, core.SourceAWSPrincipal, agentARN, num(t, 17), t0.Add(-time.Minute)),
			}},
			decision: core.DecisionVeto, rule: "bounds", winner: "git=4",
			why: []string{`maximum 16 (from git("${field.object}#/max_size"))`},
		},
		{
			name: "confined agent outside its musculature",
			in: Input{Field: settings, Git: &gitSettings, Now: t0, Live: []core.Claim{
				claimBy(settings, core.SourceAWSPrincipal, agentARN, core.StringValue("debug"), t0.Add(-time.Minute)),
			}},
			decision: core.DecisionVeto, rule: "confined", winner: `git="info"`,
		},
		{
			name: "immutable skeleton",
			in: Input{Field: iam, Now: t0, Git: func() *core.Claim {
				c := claimBy(iam, core.SourceGitAuthor, "carol@parley.example", core.StringValue("{}"), t0.Add(-time.Hour))
				return &c
			}(), Live: []core.Claim{claimBy(iam, core.SourceGitHubUser, "bob", core.StringValue(`{"a":1}`), t0)}},
			decision: core.DecisionVeto, rule: "immutable",
			why: []string{"immutable skeleton"},
		},
		{
			name: "two unknown actors tie: escalate, ask, recheck at the timeout",
			in: Input{Field: settings, Now: t0, Live: []core.Claim{
				claimBy(settings, core.SourceGitHubUser, "x", core.StringValue("a"), t0.Add(-10*time.Minute)),
				claimBy(settings, core.SourceGitHubUser, "y", core.StringValue("b"), t0.Add(-5*time.Minute)),
			}},
			decision: core.DecisionEscalate, rule: "escalation", recheck: t0.Add(25 * time.Minute),
			why: []string{"asking @parleyhq/sre", "if nobody decides by 2026-11-22T10:25:00Z, the fallback is enforce-git"},
		},
		{
			name: "after the escalation timeout the fallback applies",
			in: Input{Field: settings, Now: t0.Add(time.Hour), Live: []core.Claim{
				claimBy(settings, core.SourceGitHubUser, "x", core.StringValue("a"), t0.Add(-10*time.Minute)),
				claimBy(settings, core.SourceGitHubUser, "y", core.StringValue("b"), t0.Add(-5*time.Minute)),
			}},
			decision: core.DecisionEnforceGit, rule: "escalation.fallback",
			why: []string{"nobody decided by 2026-11-22T10:25:00Z, so the fallback enforce-git applies"},
		},
		{
			name: "a newer claim by the same actor supersedes the older; a yield gives up",
			in: Input{Field: settings, Git: &gitSettings, Now: t0, Live: []core.Claim{
				claimBy(settings, core.SourceGitHubUser, "x", core.StringValue("a"), t0.Add(-10*time.Minute)),
				claimBy(settings, core.SourceGitHubUser, "x", core.StringValue("b"), t0.Add(-5*time.Minute)),
				{Field: settings, Actor: core.Actor{Identity: core.Identity{Source: core.SourceGitHubUser, ID: "bob"}}, Yield: true, At: t0},
			}},
			// github-user:x is no actor: its claim counts as baseline, as Git's does, and ties with it.
			decision: core.DecisionEnforceGit, rule: "git-tie", winner: `git="info"`,
			why: []string{"github-user:x's claim of 2026-11-22T09:50:00Z is replaced by its newer claim", "github-user:bob gives the field up",
				"github-user:x ties with Git on rank and urgency, so Git's value stands"},
		},
		{
			name: "freeze defers a change and rechecks when the freeze ends",
			in: Input{Field: settings, Git: &gitSettings, Now: time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC), Live: []core.Claim{
				func() core.Claim {
					c := claimBy(settings, core.SourceGitHubUser, "security-scanner[bot]", core.StringValue("warn"), time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC))
					c.Motivation = core.Motivation{Kind: "cve", Ref: "CVE-1", Severity: core.SeverityMedium}
					return c
				}(),
			}},
			decision: core.DecisionEnforceGit, rule: "freeze.peak-sales", winner: `git="info"`,
			recheck: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC),
			why:     []string{"deferred until it ends: scanner"},
		},
		{
			name: "an upcoming freeze is a recheck time",
			in: Input{Field: settings, Git: &gitSettings, Now: t0, Live: []core.Claim{
				claimBy(settings, core.SourceGitHubUser, "security-scanner[bot]", core.StringValue("warn"), t0),
			}},
			decision: core.DecisionAdopt, rule: "rank", winner: `scanner="warn"`,
			recheck: time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC),
			why:     []string{"the next freeze runs from 2026-11-27T00:00:00Z"},
		},
		{
			name: "oscillation holds and cites the flips",
			in: Input{Field: capacity, Git: &gitCap, Now: t0, Lookup: asg,
				Live: []core.Claim{claimBy(capacity, core.SourceAWSPrincipal, agentARN, num(t, 8), t0.Add(-5*time.Minute))},
				History: []core.Claim{
					gitCap,
					claimBy(capacity, core.SourceAWSPrincipal, agentARN, num(t, 8), t0.Add(-30*time.Minute)),
					sre(claimBy(capacity, core.SourceGitHubUser, "bob", num(t, 4), t0.Add(-20*time.Minute))),
				}},
			decision: core.DecisionHold, rule: "oscillation", winner: "git=4", until: t0.Add(-5*time.Minute + 4*time.Hour),
			why: []string{"kafka-agent and oncall flipped the value 3 times in the last 1h", "09:55:00Z kafka-agent set 8"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := Decide(p, tt.in)
			text := steps(v)
			if v.Decision != tt.decision || v.Rule != tt.rule {
				t.Errorf("got %s by %s, want %s by %s\n%s", v.Decision, v.Rule, tt.decision, tt.rule, text)
			}
			if tt.winner != "" {
				got := ""
				if v.Winner != nil {
					got = v.Winner.Actor.Name + "=" + v.Winner.Value.String()
				}
				if got != tt.winner {
					t.Errorf("winner %q, want %q", got, tt.winner)
				}
			}
			if !v.Until.Equal(tt.until) {
				t.Errorf("until %s, want %s", v.Until, tt.until)
			}
			if !tt.recheck.IsZero() && !v.Recheck.Equal(tt.recheck) {
				t.Errorf("recheck %s, want %s", v.Recheck, tt.recheck)
			}
			for _, w := range tt.why {
				if !strings.Contains(text, w) {
					t.Errorf("explanation lacks %q:\n%s", w, text)
				}
			}
			if len(v.Explanation) == 0 {
				t.Errorf("empty explanation")
			}
		})
	}
}

// TestOrderIndependent shuffles the live claims and checks the verdict does not change, for every
// scenario's final state and a mixed random set.
func TestOrderIndependent(t *testing.T) {
	p := demoPolicy(t)
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 200; i++ {
		in := randomInput(t, r, i)
		want := Decide(p, in)
		for k := 0; k < 5; k++ {
			r.Shuffle(len(in.Live), func(a, b int) { in.Live[a], in.Live[b] = in.Live[b], in.Live[a] })
			if got := Decide(p, in); !reflect.DeepEqual(got, want) {
				t.Fatalf("input %d: verdict depends on claim order:\n%s\nvs\n%s", i, Explain(want), Explain(got))
			}
		}
	}
}

// TestArbiterCacheTransparent checks a long-lived Arbiter (with warm caches) decides exactly as a
// fresh one.
func TestArbiterCacheTransparent(t *testing.T) {
	p := demoPolicy(t)
	arb := New(p)
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 300; i++ {
		in := randomInput(t, r, i)
		if got, want := arb.Decide(in), Decide(p, in); !reflect.DeepEqual(got, want) {
			t.Fatalf("input %d: cached arbiter differs:\n%s\nvs\n%s", i, Explain(got), Explain(want))
		}
	}
}

var randomActors = []core.Identity{
	{Source: core.SourceKubeUser, ID: hpaSA},
	{Source: core.SourceKubeUser, ID: costSA},
	{Source: core.SourceAWSPrincipal, ID: agentARN},
	{Source: core.SourceGitHubUser, ID: "bob", Groups: []string{"parleyhq/sre"}},
	{Source: core.SourceGitHubUser, ID: "security-scanner[bot]"},
	{Source: core.SourceGitHubUser, ID: "stranger"},
	{Source: core.SourceKubeUser, ID: "alice@parley.example"},
}

var randomFields = []core.Field{replicas, capacity, iam, settings}

func randomInput(t testing.TB, r *rand.Rand, i int) Input {
	f := randomFields[i%len(randomFields)]
	in := Input{Field: f, Now: t0, Lookup: GitValues{
		capacity.Object().Child("max_size"): num(t, 16),
		core.K8sField("autoscaling", "HorizontalPodAutoscaler", "prod", "web", "/spec/scaleTargetRef/name"): core.StringValue("web"),
	}}
	if r.IntN(4) > 0 {
		g := claimBy(f, core.SourceGitAuthor, "carol@parley.example", num(t, 4), t0.Add(-24*time.Hour))
		in.Git = &g
	}
	intents := []core.Intent{"", "availability", "cost", "security", "performance"}
	motivations := []string{"", "incident", "cve", "budget", "traffic", "launch"}
	for n := r.IntN(5); n > 0; n-- {
		c := claimBy(f, core.SourceGitAuthor, "", num(t, r.IntN(20)), t0.Add(-time.Duration(r.IntN(120))*time.Minute))
		c.Actor.Identity = randomActors[r.IntN(len(randomActors))]
		c.Intent = intents[r.IntN(len(intents))]
		if m := motivations[r.IntN(len(motivations))]; m != "" {
			c.Motivation = core.Motivation{Kind: m, Severity: []core.Severity{"", "critical"}[r.IntN(2)]}
		}
		if r.IntN(3) == 0 {
			c.Expires = c.At.Add(time.Duration(r.IntN(180)) * time.Minute)
		}
		in.Live = append(in.Live, c)
		in.History = append(in.History, c)
	}
	return in
}

func TestReadClaimsErrors(t *testing.T) {
	tests := []struct{ name, src, want string }{
		{"unknown key", `{"liv": []}`, `unknown field "liv"`},
		{"bad source", `{"live": [{"field": "k8s:apps/Deployment/a/b#/x", "actor": {"source": "ldap", "id": "x"}, "value": 1}]}`, `live[0]: actor source "ldap"`},
		{"no value", `{"live": [{"field": "k8s:apps/Deployment/a/b#/x", "actor": {"source": "k8s-user", "id": "x"}}]}`, `live[0]: claim has no value`},
		{"bad field", `{"git": [{"field": "k8s:x", "actor": {"source": "k8s-user", "id": "x"}, "value": 1}]}`, `git[0]: field address "k8s:x"`},
		{"bad expiry", `{"live": [{"field": "k8s:apps/Deployment/a/b#/x", "actor": {"source": "k8s-user", "id": "x"}, "value": 1, "expires": "soon"}]}`, `expires "soon"`},
		{"bad severity", `{"live": [{"field": "k8s:apps/Deployment/a/b#/x", "actor": {"source": "k8s-user", "id": "x"}, "value": 1, "motivation": {"kind": "cve", "severity": "dire"}}]}`, `severity "dire"`},
		{"duplicate git", `{"git": [{"field": "k8s:apps/Deployment/a/b#/x", "actor": {"source": "k8s-user", "id": "x"}, "value": 1}, {"field": "k8s:apps/Deployment/a/b#/x", "actor": {"source": "k8s-user", "id": "x"}, "value": 2}]}`, `git[1]: Git already holds`},
		{"trailing", `{} {}`, `trailing data`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadClaims(strings.NewReader(tt.src))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestReadEventsErrors(t *testing.T) {
	tests := []struct{ name, src, want string }{
		{"kind", `{"kind": "merge", "at": "2026-11-22T10:00:00Z"}`, `line 1: kind "merge"`},
		{"time", "\n# comment\n" + `{"kind": "tick", "at": "10am"}`, `line 3: at "10am"`},
		{"order", `{"kind": "tick", "at": "2026-11-22T10:00:00Z"}` + "\n" + `{"kind": "tick", "at": "2026-11-22T09:00:00Z"}`, `line 2: at 2026-11-22T09:00:00Z is before`},
		{"git-value", `{"kind": "git-value", "at": "2026-11-22T10:00:00Z", "field": "tf:a//b.c#/d"}`, `line 1: git-value has no value`},
		{"json", `{"kind": `, `line 1:`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadEvents(strings.NewReader(tt.src))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestExplainText(t *testing.T) {
	p := demoPolicy(t)
	g := claimBy(settings, core.SourceGitAuthor, "carol@parley.example", core.StringValue("info"), t0.Add(-time.Hour))
	g.Evidence = core.Evidence{Source: "git", Commit: "0123456789abcdef0123"}
	v := Decide(p, Input{Field: settings, Git: &g, Now: t0})
	want := `k8s:core/ConfigMap/prod/settings#/data/LOG_LEVEL
  decision: enforce-git (keep Git's value)
  rule:     no-contest
  winner:   git <git-author:carol@parley.example> wants "info" (intent baseline, at 2026-11-22T09:00:00Z, commit 0123456789ab)
  recheck:  2026-11-27T00:00:00Z
  why:
    - [field: none] no field block covers this field: no owner, bounds or writer list apply
    - [oscillation: none] too few changes to oscillate (a hold needs 3 flips by two or more actors within 1h)
    - [freeze.peak-sales: not active] the next freeze runs from 2026-11-27T00:00:00Z to 2026-12-01T00:00:00Z
    - [rules: not needed] no two claims compete, so no rule is needed
    - [result: enforce Git] no live claim competes: Git's value "info" stands
`
	if got := Explain(v); got != want {
		t.Errorf("Explain:\n%s\nwant:\n%s", got, want)
	}
	if _, err := os.Stat("../../internal/demo/policy.hcl"); err != nil {
		t.Fatal(err)
	}
}

// TestRuleDecisions covers the hold and escalate decisions, a veto aimed at Git's claim, field
// scoping of rules, and a weekly freeze.
func TestRuleDecisions(t *testing.T) {
	p, err := policy.Parse([]byte(`
intent "availability" { rank = 90 }
intent "cost"         { rank = 40 }
actor "a" { github_users = ["a"] }
actor "b" { github_users = ["b"] }
actor "c" { github_users = ["c"] }
rule "a-and-b-hold" {
  when     = claim.actor == "a" && other.actor == "b"
  decision = "hold"
}
rule "c-asks" {
  fields   = ["k8s:core/ConfigMap/*/*#/data/ASK"]
  when     = claim.actor == "c" && other.git
  decision = "escalate"
}
rule "c-vetoes-git" {
  when     = claim.git && other.actor == "c"
  decision = "veto"
}
freeze "weekends" {
  start  = "2026-11-21T00:00:00Z"
  end    = "2026-11-23T00:00:00Z"
  repeat = "weekly"
  fields = ["k8s:core/ConfigMap/*/*#/data/FROZEN"]
}
escalation {
  ask = ["@team"]
}
`), "rules.hcl")
	if err != nil {
		t.Fatal(err)
	}
	cm := func(key string) core.Field { return core.K8sField("", "ConfigMap", "prod", "s", "/data/"+key) }
	by := func(f core.Field, who, v string, at time.Time) core.Claim {
		return claimBy(f, core.SourceGitHubUser, who, core.StringValue(v), at)
	}
	git := func(f core.Field) *core.Claim {
		c := claimBy(f, core.SourceGitAuthor, "x@example.com", core.StringValue("git"), t0.Add(-time.Hour))
		return &c
	}
	saturday := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name     string
		in       Input
		decision core.Decision
		rule     string
		ask      bool
		recheck  time.Time
	}{
		{"hold rule", Input{Field: cm("X"), Now: t0, Git: git(cm("X")), Live: []core.Claim{by(cm("X"), "a", "1", t0), by(cm("X"), "b", "2", t0)}},
			core.DecisionHold, "rule.a-and-b-hold", true, time.Time{}},
		{"escalate rule, scoped to the field", Input{Field: cm("ASK"), Now: t0, Git: git(cm("ASK")), Live: []core.Claim{by(cm("ASK"), "c", "1", t0)}},
			core.DecisionEscalate, "escalation", true, time.Time{}},
		{"the same rule does not apply elsewhere; vetoing Git's claim makes the other win", Input{Field: cm("OTHER"), Now: t0, Git: git(cm("OTHER")), Live: []core.Claim{by(cm("OTHER"), "c", "1", t0)}},
			core.DecisionAdopt, "rule.c-vetoes-git", false, time.Time{}},
		{"weekly freeze on a later Saturday", Input{Field: cm("FROZEN"), Now: saturday, Git: git(cm("FROZEN")), Live: []core.Claim{by(cm("FROZEN"), "c", "1", saturday.Add(-time.Hour))}},
			core.DecisionEnforceGit, "freeze.weekends", false, time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)},
		{"weekly freeze on a weekday: the next window is the recheck", Input{Field: cm("FROZEN"), Now: t0.Add(24 * time.Hour), Git: git(cm("FROZEN")), Live: []core.Claim{by(cm("FROZEN"), "c", "1", t0)}},
			core.DecisionAdopt, "rule.c-vetoes-git", false, time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := Decide(p, tt.in)
			if v.Decision != tt.decision || v.Rule != tt.rule || (len(v.Ask) > 0) != tt.ask {
				t.Errorf("got %s by %s (ask %v), want %s by %s:\n%s", v.Decision, v.Rule, v.Ask, tt.decision, tt.rule, Explain(v))
			}
			if !tt.recheck.IsZero() && !v.Recheck.Equal(tt.recheck) {
				t.Errorf("recheck %s, want %s", v.Recheck, tt.recheck)
			}
		})
	}
}
