package arbiter

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/policy"
)

// FuzzDeclaringNeverBeatsSilence checks the arbiter's promise as a property rather than by
// example: a claim that declares an intent, a motivation or an expiry its identity may not declare
// never does better than the same claim declaring none of them. The fuzzer's bytes make a policy
// (intents and ranks; motivations with urgency, lifetimes and asserted_by; actors with and without
// intents lists; an unknown_actors block or none; a field block with a standing owner,
// owner_gives_way_when, writers, bounds or immutability; rules; freezes with allow_intents and
// allow_when; escalation) and the claims on one field; the demo and starter policies are judged
// with the same claims. For every claim (Git's included) carrying such a declaration, the verdict
// is compared with the verdict for the same input where that claim declares only what it may: when
// the claim without the declaration is refused (vetoed, held, deferred, losing, escalated), it
// must be refused with it too.
//
// Conditions that reward claim.downgraded (the one attribute that tells a discounted declaration
// from silence, there so that a policy can punish it) are not generated: such a policy asks for
// the opposite of the property.
func FuzzDeclaringNeverBeatsSilence(f *testing.F) {
	// The demo repository's attack (issue 33): during peak-sales a stranger declares availability
	// on a change, the freeze admitted it and it outranked Git's value.
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
		1, 4, 6, 1, 0, 0, 0})
	f.Add([]byte("unknown actors declare an incident to make the owner give way"))
	f.Add([]byte{7, 200, 13, 99, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28,
		29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42})
	f.Add([]byte{255, 254, 253, 252, 251, 250, 249, 248, 247, 246, 245, 244, 243, 242, 241, 240, 239, 238, 237, 236, 235, 234})
	demo := demoPolicy(f)
	starter, err := policy.Parse([]byte(policy.Starter), "starter.hcl")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := &fuzzBytes{b: data}
		src := silencePolicy(r)
		gen, err := policy.Parse([]byte(src), "generated.hcl")
		if err != nil {
			t.Fatalf("the generator wrote a policy that does not parse: %v\n%s", err, src)
		}
		in := silenceInput(t, r)
		for _, p := range []*policy.Policy{gen, demo, starter} {
			checkSilence(t, p, in, src)
		}
	})
}

// checkSilence compares, for each claim of in with a declaration its identity may not make, the
// verdict with and without it.
func checkSilence(t *testing.T, p *policy.Policy, in Input, src string) {
	t.Helper()
	with := Decide(p, in)
	targets := len(in.Live)
	for i := -1; i < targets; i++ {
		c := in.Git
		if i >= 0 {
			c = &in.Live[i]
		}
		if c == nil || c.Yield {
			continue
		}
		silent, ok := silenced(p, *c, i < 0)
		if !ok {
			continue
		}
		alt := in
		if i < 0 {
			alt.Git = &silent
		} else {
			alt.Live = append([]core.Claim(nil), in.Live...)
			alt.Live[i] = silent
		}
		without := Decide(p, alt)
		if wins(with, *c, i < 0) && !wins(without, silent, i < 0) {
			t.Fatalf("%s: %s's declarations (intent %q, motivation %q, expires %s) turn a refusal into a win\n"+
				"with them:\n%s\nwithout them:\n%s\npolicy:\n%s", p.File, c.Actor.Identity, c.Intent, c.Motivation.Kind,
				fmtTime(c.Expires), Explain(with), Explain(without), src)
		}
	}
}

// silenced returns c without the declarations its identity may not make (for Git's claim, the
// commit author's), and whether there were any.
func silenced(p *policy.Policy, c core.Claim, git bool) (core.Claim, bool) {
	a := p.ResolveActor(c.Actor.Identity)
	changed := false
	if c.Intent != "" {
		may := a == nil && p.Unknown.MayAssertIntent(c.Intent) && !git || a == nil && git && containsIntent(p.Unknown.Intents, c.Intent) ||
			a != nil && a.MayAssertIntent(c.Intent)
		if !may {
			c.Intent, changed = "", true
		}
	}
	if m := p.Motivations[c.Motivation.Kind]; c.Motivation.Kind != "" {
		may := a == nil && m != nil && p.Unknown.MayAssertMotivation(m) || a != nil && (m == nil || m.MayAssert(a.Name))
		if !may {
			c.Motivation, changed = core.Motivation{}, true
		}
	}
	if !c.Expires.IsZero() && a == nil && !p.Unknown.Expiry {
		c.Expires, changed = time.Time{}, true
	}
	return c, changed
}

func containsIntent(is []core.Intent, i core.Intent) bool {
	for _, x := range is {
		if x == i {
			return true
		}
	}
	return false
}

// wins reports whether the verdict goes c's way: for a live claim, its value wins as its own
// (adopted, yielded to, or standing as the winner); for Git's claim, Git's value stands.
func wins(v core.Verdict, c core.Claim, git bool) bool {
	if git {
		return v.Decision == core.DecisionEnforceGit || v.Decision == core.DecisionVeto
	}
	switch v.Decision {
	case core.DecisionVeto, core.DecisionHold, core.DecisionEscalate:
		return false
	}
	w := v.Winner
	return w != nil && w.Actor.Identity.Source == c.Actor.Identity.Source && w.Actor.Identity.ID == c.Actor.Identity.ID &&
		w.Value.Equal(c.Value) && !w.Yield
}

// fuzzBytes hands out the fuzzer's bytes one at a time, then zeros.
type fuzzBytes struct {
	b []byte
	i int
}

func (r *fuzzBytes) next() int {
	if r.i >= len(r.b) {
		return 0
	}
	r.i++
	return int(r.b[r.i-1])
}

func (r *fuzzBytes) pick(n int) int { return r.next() % n }
func (r *fuzzBytes) flag() bool     { return r.next()&1 == 1 }

// silenceField is the field every generated claim is about.
var silenceField = core.K8sField("apps", "Deployment", "prod", "web", "/spec/template/spec/containers/0/resources/requests/cpu")

var (
	silenceIntents     = []string{"availability", "cost", "security", "performance", "baseline"}
	silenceMotivations = []string{"incident", "cve", "budget", "launch"}
	silenceConditions  = []string{
		`claim.intent == "availability" && other.intent == "cost"`,
		`claim.motivation == "incident" && other.motivation != "incident"`,
		`claim.motivation == "cve" && claim.severity == "critical"`,
		`claim.rank > other.rank`,
		`claim.urgency >= 50`,
		`claim.expires != "" && other.expires == ""`,
		`claim.expires == ""`,
		`claim.intent == "cost" && other.motivation == "incident"`,
		`claim.actor == "bot"`,
		`claim.actor == ""`,
		`claim.intent != "security"`,
		`claim.motivation != ""`,
		`other.downgraded`,
	}
	silenceDecisions = []string{"win", "veto", "hold", "escalate"}
)

// silencePolicy writes a policy from the fuzzer's bytes. Every choice is valid HCL and a valid
// policy, so a parse error is the generator's bug.
func silencePolicy(r *fuzzBytes) string {
	var b strings.Builder
	subset := func(from []string) []string {
		var out []string
		for _, s := range from {
			if r.flag() {
				out = append(out, s)
			}
		}
		return out
	}
	list := func(xs []string) string {
		q := make([]string, len(xs))
		for i, x := range xs {
			q[i] = fmt.Sprintf("%q", x)
		}
		return "[" + strings.Join(q, ", ") + "]"
	}
	for _, in := range silenceIntents {
		fmt.Fprintf(&b, "intent %q { rank = %d }\n", in, r.pick(101))
	}
	asserted := map[string]bool{}
	for _, m := range silenceMotivations {
		fmt.Fprintf(&b, "motivation %q {\n  urgency = %d\n", m, r.pick(101))
		if r.flag() {
			fmt.Fprintf(&b, "  default_lifetime = \"%dm\"\n", 1+r.pick(240))
		}
		if r.flag() {
			fmt.Fprintf(&b, "  max_lifetime = \"%dh\"\n", 5+r.pick(48))
		}
		if r.flag() {
			asserted[m] = true
			b.WriteString("  asserted_by = [\"oncall\"]\n")
		}
		b.WriteString("}\n")
	}
	fmt.Fprintf(&b, "actor \"git\" { intent = %q }\n", silenceIntents[r.pick(len(silenceIntents))])
	// oncall: commits (proven by a voucher), cluster user alice; maybe an intents list.
	def := silenceIntents[r.pick(len(silenceIntents))]
	b.WriteString("actor \"oncall\" {\n  intent = \"" + def + "\"\n  k8s_users = [\"alice\"]\n  git_authors = [\"alice@example.com\"]\n")
	if r.flag() {
		b.WriteString("  intents = " + list(append([]string{def}, subset(silenceIntents)...)) + "\n")
	}
	b.WriteString("}\n")
	b.WriteString("actor \"bot\" {\n  intent = \"cost\"\n  github_users = [\"bot[bot]\"]\n")
	if r.flag() {
		b.WriteString("  intents = [\"cost\"]\n")
	}
	if r.flag() {
		b.WriteString("  confined = true\n")
	}
	b.WriteString("}\n")
	b.WriteString("actor \"hpa\" {\n  intent = \"availability\"\n  k8s_users = [\"system:hpa\"]\n}\n")
	if r.flag() {
		b.WriteString("unknown_actors {\n")
		if r.flag() {
			fmt.Fprintf(&b, "  intent = %q\n", silenceIntents[r.pick(len(silenceIntents))])
		}
		if r.flag() {
			b.WriteString("  intents = " + list(subset(silenceIntents)) + "\n")
		}
		var ms []string
		for _, m := range subset(silenceMotivations) {
			if !asserted[m] {
				ms = append(ms, m)
			}
		}
		if ms != nil {
			b.WriteString("  motivations = " + list(ms) + "\n")
		}
		if r.flag() {
			b.WriteString("  expiry = true\n")
		}
		b.WriteString("}\n")
	}
	if r.flag() {
		b.WriteString("field \"cpu\" {\n  match = [\"k8s:apps/Deployment/*/*#/spec/template/**\"]\n")
		if r.pick(8) == 0 {
			// Immutable: no owner or writers besides.
			b.WriteString("  immutable = true\n}\n")
			goto rules
		}
		switch r.pick(4) {
		case 1:
			b.WriteString("  owner = \"oncall\"\n")
		case 2:
			b.WriteString("  owner = \"hpa\"\n")
			if r.flag() {
				fmt.Fprintf(&b, "  owner_gives_way_when = %s\n", silenceConditions[r.pick(len(silenceConditions))])
			}
		}
		if r.flag() {
			b.WriteString("  writers = " + list(subset([]string{"oncall", "bot", "hpa"})) + "\n")
		}
		if r.flag() {
			fmt.Fprintf(&b, "  min = %d\n", r.pick(4))
		}
		if r.flag() {
			fmt.Fprintf(&b, "  max = %d\n", 8+r.pick(8))
		}
		b.WriteString("}\n")
	}
rules:
	for i, n := 0, r.pick(4); i < n; i++ {
		cond := silenceConditions[r.pick(len(silenceConditions))]
		dec := silenceDecisions[r.pick(len(silenceDecisions))]
		if cond == "other.downgraded" {
			dec = "win" // claim beats a downgraded other: punishing the declaration, never rewarding it
		}
		fmt.Fprintf(&b, "rule \"r%d\" {\n  when = %s\n  decision = %q\n}\n", i, cond, dec)
	}
	// A veto rule on downgraded claims: the other way a policy may punish a discounted declaration.
	if r.pick(4) == 0 {
		b.WriteString("rule \"no-lies\" {\n  when = claim.downgraded\n  decision = \"veto\"\n}\n")
	}
	for i, n := 0, r.pick(3); i < n; i++ {
		start := "2026-11-22T00:00:00Z" // active at every generated time
		if r.flag() {
			start = "2026-12-20T00:00:00Z"
		}
		end := strings.Replace(start, "T00", "T23", 1)
		if start == "2026-11-22T00:00:00Z" {
			end = "2026-12-02T00:00:00Z"
		}
		fmt.Fprintf(&b, "freeze \"f%d\" {\n  start = %q\n  end = %q\n  allow_intents = %s\n", i, start, end, list(subset(silenceIntents)))
		if r.flag() {
			fmt.Fprintf(&b, "  allow_when = %s\n", []string{
				`claim.motivation == "cve" && claim.severity == "critical"`, `claim.expires != ""`, `claim.urgency >= 50`,
				`claim.rank >= 50`, `claim.actor != ""`,
			}[r.pick(5)])
		}
		b.WriteString("}\n")
	}
	if r.flag() {
		fmt.Fprintf(&b, "escalation {\n  timeout = \"%dm\"\n  fallback = %q\n}\n", 1+r.pick(90), []string{"enforce-git", "hold"}[r.pick(2)])
	}
	return b.String()
}

// silenceIdentities are the claimants: actors of the generated policy (some of the demo's and
// starter's too) and identities no actor vouches for, among them a commit naming on-call's email
// that proves nothing.
var silenceIdentities = []core.Identity{
	{Source: core.SourceKubeUser, ID: "mallory"},
	{Source: core.SourceGitHubUser, ID: "mallory"},
	{Source: core.SourceGitAuthor, ID: "alice@example.com", Proof: core.Proof{Problem: "it is unsigned"}},
	{Source: core.SourceKubeUser, ID: "alice"},
	{Source: core.SourceGitHubUser, ID: "bot[bot]"},
	{Source: core.SourceKubeUser, ID: "system:hpa"},
	{Source: core.SourceGitAuthor, ID: "alice@example.com", Proof: core.Proof{Vouched: "the fuzz test"}},
	{Source: core.SourceKubeUser, ID: "system:serviceaccount:kube-system:horizontal-pod-autoscaler"},
	{Source: core.SourceGitHubUser, ID: "bob", Groups: []string{"parleyhq/sre"}},
	{Source: core.SourceGitAuthor, ID: "mallory@example.com", Proof: core.Proof{Problem: "it is unsigned"}},
}

// silenceInput makes the field's claims from the fuzzer's bytes: maybe Git's, and up to four live
// ones, each with an identity, a value, and maybe an intent, a motivation and an expiry.
func silenceInput(t *testing.T, r *fuzzBytes) Input {
	nows := []time.Time{t0, time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC), time.Date(2026, 12, 25, 12, 0, 0, 0, time.UTC)}
	now := nows[r.pick(len(nows))]
	in := Input{Field: silenceField, Now: now}
	intents := append([]string{"", "nonsense"}, silenceIntents...)
	motivations := append([]string{"", "traffic"}, silenceMotivations...)
	claim := func() core.Claim {
		c := claimBy(silenceField, "", "", num(t, r.pick(16)), now.Add(-time.Duration(1+r.pick(600))*time.Minute))
		c.Actor.Identity = silenceIdentities[r.pick(len(silenceIdentities))]
		c.Intent = core.Intent(intents[r.pick(len(intents))])
		if m := motivations[r.pick(len(motivations))]; m != "" {
			c.Motivation = core.Motivation{Kind: m, Severity: []core.Severity{"", core.SeverityCritical, core.SeverityMedium}[r.pick(3)]}
		}
		if r.flag() {
			c.Expires = c.At.Add(time.Duration(1+r.pick(900)) * time.Minute)
		}
		return c
	}
	if r.pick(4) != 0 {
		g := claim()
		if g.Actor.Identity.Source != core.SourceGitAuthor {
			g.Actor.Identity = core.Identity{Source: core.SourceGitAuthor, ID: "carol@example.com", Proof: core.Proof{Problem: "it is unsigned"}}
		}
		g.Evidence = core.Evidence{Source: "git", Commit: "0123456789abcdef"}
		in.Git = &g
	}
	for n := r.pick(5); n > 0; n-- {
		in.Live = append(in.Live, claim())
	}
	return in
}

// TestDeclaringDoesNotChooseWhichSimultaneousClaimStands: two claims by the same identity at the
// same instant with the same value, one of them already expired. Which of the two stands (the
// newer supersedes the older; at the same instant the canonical order decides) must not depend on
// a declaration the identity may not make: before, the declared intent sorted the claims, so
// declaring availability made the live claim the one that stood, and win where the same claim
// declaring nothing was superseded by the expired one.
func TestDeclaringDoesNotChooseWhichSimultaneousClaimStands(t *testing.T) {
	p := demoPolicy(t)
	at := t0.Add(-10 * time.Minute)
	mallory := core.Identity{Source: core.SourceKubeUser, ID: "mallory"}
	declared := core.Claim{Field: settings, Actor: core.Actor{Identity: mallory}, Value: core.StringValue("debug"), At: at,
		Intent: core.IntentAvailability, Expires: t0.Add(time.Hour)}
	expired := core.Claim{Field: settings, Actor: core.Actor{Identity: mallory}, Value: core.StringValue("debug"), At: at,
		Expires: t0.Add(-time.Minute)}
	in := Input{Field: settings, Now: t0, Live: []core.Claim{declared, expired}}
	checkSilence(t, p, in, "the demo policy")
}

// TestABorrowedLifetimeDoesNotMeetAnExpiryCondition: an actor asserts incident, which only on-call
// may; the claim loses the motivation but keeps its lifetime (so it never outstays an honest
// incident claim). The standing owner gives way to claims that say when they end: the lifetime
// the claim borrowed must not make the owner give way, as the same claim without the motivation
// would not.
func TestABorrowedLifetimeDoesNotMeetAnExpiryCondition(t *testing.T) {
	p, err := policy.Parse([]byte(`
motivation "incident" {
  default_lifetime = "4h"
  asserted_by      = ["oncall"]
}
actor "oncall"     { k8s_users = ["alice"] }
actor "hpa"        { k8s_users = ["system:hpa"] }
actor "developers" { k8s_users = ["dev"] }
field "replicas" {
  match                = ["k8s:apps/Deployment/*/*#/spec/replicas"]
  owner                = "hpa"
  owner_gives_way_when = claim.expires != ""
}
`), "p.hcl")
	if err != nil {
		t.Fatal(err)
	}
	c := claimBy(replicas, core.SourceKubeUser, "dev", num(t, 12), t0.Add(-time.Minute))
	c.Motivation = core.Motivation{Kind: "incident", Ref: "INC-1"}
	in := Input{Field: replicas, Now: t0, Live: []core.Claim{c}}
	checkSilence(t, p, in, "p.hcl")
	v := Decide(p, in)
	if v.Winner != nil && v.Winner.Actor.Name == "developers" {
		t.Fatalf("the owner gave way to a borrowed lifetime:\n%s", Explain(v))
	}
}
