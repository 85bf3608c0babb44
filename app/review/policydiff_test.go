package review

import (
	"testing"

	"github.com/parleyhq/parley/core"
)

// TestPolicyChangeConclusion is the conclusion table of docs/policy.md (policy_owners) for a pull
// request that changes the policy.
func TestPolicyChangeConclusion(t *testing.T) {
	for _, tt := range []struct {
		fields            string
		invalid, approved bool
		want              string
	}{
		{"success", true, true, "failure"},
		{"neutral", true, false, "failure"},
		{"neutral", false, false, "action_required"},
		{"success", false, false, "action_required"},
		{"action_required", false, false, "action_required"},
		{"failure", false, false, "failure"},
		{"neutral", false, true, "success"},
		{"success", false, true, "success"},
		{"action_required", false, true, "action_required"},
		{"failure", false, true, "failure"},
	} {
		if got := PolicyChangeConclusion(tt.fields, tt.invalid, tt.approved); got != tt.want {
			t.Errorf("PolicyChangeConclusion(%q, invalid %v, approved %v) = %q, want %q", tt.fields, tt.invalid, tt.approved, got, tt.want)
		}
	}
}

// TestPolicyChangeDiffers: a verdict differs by its decision or by the claim that wins, not by
// the rule's name alone.
func TestPolicyChangeDiffers(t *testing.T) {
	alice := &core.Claim{Actor: core.Actor{Identity: core.Identity{Source: core.SourceGitAuthor, ID: "alice@example.com"}}, Value: core.ParseLooseValue("8")}
	bob := &core.Claim{Actor: core.Actor{Identity: core.Identity{Source: core.SourceGitAuthor, ID: "bob@example.com"}}, Value: core.ParseLooseValue("8")}
	other := *alice
	other.Value = core.ParseLooseValue("9")
	for _, tt := range []struct {
		name     string
		old, new core.Verdict
		want     bool
	}{
		{"same", core.Verdict{Decision: core.DecisionAdopt, Winner: alice, Rule: "a"}, core.Verdict{Decision: core.DecisionAdopt, Winner: alice, Rule: "b"}, false},
		{"decision", core.Verdict{Decision: core.DecisionYield, Rule: "owner"}, core.Verdict{Decision: core.DecisionEnforceGit, Rule: "owner"}, true},
		{"winner", core.Verdict{Decision: core.DecisionAdopt, Winner: alice}, core.Verdict{Decision: core.DecisionAdopt, Winner: bob}, true},
		{"value", core.Verdict{Decision: core.DecisionAdopt, Winner: alice}, core.Verdict{Decision: core.DecisionAdopt, Winner: &other}, true},
		{"winner gone", core.Verdict{Decision: core.DecisionYield, Winner: alice}, core.Verdict{Decision: core.DecisionYield}, true},
		{"no winners", core.Verdict{Decision: core.DecisionHold}, core.Verdict{Decision: core.DecisionHold}, false},
	} {
		if got := (PolicyChange{Old: tt.old, New: tt.new}).Differs(); got != tt.want {
			t.Errorf("%s: Differs() = %v, want %v", tt.name, got, tt.want)
		}
	}
}
