package review

import (
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/internal/demo"
	"github.com/parleyhq/parley/policy"
	"github.com/parleyhq/parley/policy/arbiter"
)

// TestContributorSignedWithAnothersKeyIsJudgedOnItsOwn: Alice opens a pull request from a commit
// she signed; another commit of it is authored as Alice but signed with Bob's key (both on call,
// the capacity's only writers). That commit proves nobody, so the pull request's claim is judged
// as an unverified Alice too, and vetoed: it is not folded into the signed Alice as the same
// identity.
func TestContributorSignedWithAnothersKeyIsJudgedOnItsOwn(t *testing.T) {
	key := func(email string) (line, id string) {
		pub, err := demo.PublicKey(email)
		if err != nil {
			t.Fatal(err)
		}
		k, _, _, _, err := ssh.ParseAuthorizedKey([]byte(pub))
		if err != nil {
			t.Fatal(err)
		}
		return email + " " + strings.Join(strings.Fields(pub)[:2], " "), ssh.FingerprintSHA256(k)
	}
	aliceLine, aliceKey := key("alice@parley.example")
	bobLine, bobKey := key("bob@parley.example")
	pol, err := policy.Parse([]byte(`
actor "oncall" {
  git_authors  = ["alice@parley.example", "bob@parley.example"]
  signing_keys = ["`+aliceLine+`", "`+bobLine+`"]
}
field "capacity" {
  match   = ["tf:infra/kafka//aws_autoscaling_group.consumer#/desired_capacity"]
  writers = ["oncall"]
}
`), "p.hcl")
	if err != nil {
		t.Fatal(err)
	}
	f, err := core.ParseField("tf:infra/kafka//aws_autoscaling_group.consumer#/desired_capacity")
	if err != nil {
		t.Fatal(err)
	}
	val := func(n int) core.Value {
		v, err := core.JSONValue(n)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	t0 := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
	alice := func(key string) core.Identity {
		return core.Identity{Source: core.SourceGitAuthor, ID: "alice@parley.example", Proof: core.Proof{Key: key}}
	}
	git := core.Claim{Field: f, Value: val(6), At: t0.Add(-time.Hour), Actor: core.Actor{Identity: core.Identity{Source: core.SourceGitAuthor, ID: "dana@parley.example"}},
		Evidence: core.Evidence{Source: "git", Commit: "base"}}
	own := core.Claim{Field: f, Value: val(8), At: t0, Intent: core.IntentPerformance, Actor: core.Actor{Identity: alice(aliceKey)},
		Evidence: core.Evidence{Source: "pull-request", PR: 7}}
	arb := arbiter.New(pol)
	in := arbiter.Input{Field: f, Now: t0, Git: &git, Live: []core.Claim{own}}
	opener := arb.Decide(in)
	if opener.Decision == core.DecisionVeto {
		t.Fatalf("the signed opener alone is vetoed, so the case tests nothing:\n%s", arbiter.Explain(opener))
	}
	pr := PullRequest{Author: alice(aliceKey), Contributors: []Contributor{{Identity: alice(bobKey), What: "authored commit c0ffee", Files: nil}}}
	v := judge{arb: arb, pol: pol, now: t0}.asContributors(in, pr, nil, opener)
	if v.Decision != core.DecisionVeto || !strings.Contains(arbiter.Explain(v), "lists in signing_keys for bob@parley.example, not for alice@parley.example") {
		t.Errorf("the pull request with a commit signed as Alice by Bob's key:\n%s", arbiter.Explain(v))
	}
}
