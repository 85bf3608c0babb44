package arbiter

import (
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/policy"
)

// TestUnprovenCommitAuthorsAreUnverifiedIdentities: Git holds a value from a commit whose author
// email names on-call (Alice) and which says Motivation: incident. Unsigned, or signed by a key
// on-call does not list for Alice (Bob's, though Bob is on call too), the commit carries none of
// on-call's trust and the explanation names the commit and why; signed by Alice's key it carries
// it; with trust_unsigned_git_authors the email alone counts, and the explanation says the policy
// chose so.
func TestUnprovenCommitAuthorsAreUnverifiedIdentities(t *testing.T) {
	const src = `
motivation "incident" { asserted_by = ["oncall"] }
actor "oncall" {
  git_authors  = ["alice@parley.example", "bob@parley.example"]
  signing_keys = [
    "alice@parley.example ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOdVVxmP91uVq8c4dWtrR81GBkh+FNNlaf3WWqwBMHan",
    "bob@parley.example ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIF7j/YAI+xf+l+TtGhEOVFUMTZg4NkBhZ8oGOMLIX36C",
  ]
}
`
	strict, err := policy.Parse([]byte(src), "p.hcl")
	if err != nil {
		t.Fatal(err)
	}
	trusting, err := policy.Parse([]byte("trust_unsigned_git_authors = true\n"+src), "p.hcl")
	if err != nil {
		t.Fatal(err)
	}
	key, bobs := strict.Actor("oncall").SigningKeys[0].ID, strict.Actor("oncall").SigningKeys[1].ID
	if !strings.HasPrefix(key, "SHA256:") {
		t.Fatalf("key id %q", key)
	}
	t0 := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
	decide := func(p *policy.Policy, proof core.Proof) string {
		git := core.Claim{Field: capacity, Value: num(t, 12), At: t0.Add(-time.Hour), Intent: core.IntentBaseline,
			Motivation: core.Motivation{Kind: "incident", Ref: "INC-1"},
			Actor:      core.Actor{Identity: core.Identity{Source: core.SourceGitAuthor, ID: "alice@parley.example", Proof: proof}},
			Evidence:   core.Evidence{Source: "git", Commit: "0123456789abcdef0123"}}
		return Explain(Decide(p, Input{Field: capacity, Now: t0, Git: &git}))
	}
	for _, tc := range []struct {
		name          string
		p             *policy.Policy
		proof         core.Proof
		want, notWant string
	}{
		{"unsigned", strict, core.Proof{Problem: "it is unsigned"},
			"commit 0123456789ab names author alice@parley.example (oncall), but it is unsigned: it is judged as an unverified identity", ""},
		{"another key", strict, core.Proof{Key: "SHA256:somebody-else"},
			"but it is signed by key SHA256:somebody-else, which oncall does not list in signing_keys", ""},
		// Bob is on call too, but his key proves Bob: Alice's commit signed with it is unverified.
		{"another member's key", strict, core.Proof{Key: bobs},
			"but it is signed by key " + bobs + ", which oncall lists in signing_keys for bob@parley.example, not for alice@parley.example: it is judged as an unverified identity", ""},
		{"signed", strict, core.Proof{Key: key}, "", "unverified"},
		{"trusting", trusting, core.Proof{Problem: "it is unsigned"},
			"commit 0123456789ab counts as oncall on its author email alice@parley.example alone, without a signature, because the policy sets trust_unsigned_git_authors = true", "unverified"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text := decide(tc.p, tc.proof)
			downgraded := strings.Contains(text, "which is not one an unknown actor may declare (only oncall may: asserted_by); its author alice@parley.example is no actor the policy vouches for, so the declaration is not counted")
			if wantDowngrade := tc.want != "" && tc.p == strict; downgraded != wantDowngrade {
				t.Errorf("incident motivation downgraded = %v, want %v:\n%s", downgraded, wantDowngrade, text)
			}
			if tc.want != "" && !strings.Contains(text, tc.want) {
				t.Errorf("explanation lacks %q:\n%s", tc.want, text)
			}
			if tc.notWant != "" && strings.Contains(text, tc.notWant) {
				t.Errorf("explanation has %q:\n%s", tc.notWant, text)
			}
		})
	}
}
