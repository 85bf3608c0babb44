package core

import "time"

// Decision is what a verdict does about a field.
type Decision string

// Decisions. The arbiter picks exactly one per field.
const (
	// DecisionEnforceGit keeps Git's value: the GitOps tool may revert live drift.
	DecisionEnforceGit Decision = "enforce-git"
	// DecisionAdopt writes the live value into Git, keeping the file's structure.
	DecisionAdopt Decision = "adopt"
	// DecisionYield lets the live actor hold the field until Verdict.Until (zero: for good);
	// the GitOps tool is told to ignore the field.
	DecisionYield Decision = "yield"
	// DecisionVeto refuses the claim outright (bounds, immutability, trust).
	DecisionVeto Decision = "veto"
	// DecisionHold freezes the field at its current value and stops automatic writes.
	DecisionHold Decision = "hold"
	// DecisionEscalate asks humans to decide.
	DecisionEscalate Decision = "escalate"
)

// Step is one line of a verdict's explanation: a rule considered and what came of it.
type Step struct {
	Rule    string `json:"rule"`    // rule or check name, e.g. "freeze.peak-sales" or "rank"
	Outcome string `json:"outcome"` // e.g. "decided", "skipped", "not applicable", "downgraded"
	Detail  string `json:"detail"`  // words a person reads on a PR
}

// Verdict is the arbiter's decision for one field at one time.
type Verdict struct {
	Field    Field     `json:"field"`
	Decision Decision  `json:"decision"`
	Winner   *Claim    `json:"winner,omitempty"`
	Losers   []Claim   `json:"losers,omitempty"`
	Rule     string    `json:"rule"`             // the rule that decided
	Until    time.Time `json:"until,omitzero"`   // end of a yield or hold; zero when open-ended
	Recheck  time.Time `json:"recheck,omitzero"` // next time the verdict must be re-evaluated; zero: never
	// Ask names the people or teams asked to decide (a DecisionEscalate, or a hold that escalates).
	Ask []string `json:"ask,omitempty"`
	// Proposed is the vetoed claim a veto puts to people (the policy's veto_ask_when): Git's value
	// stands, and a pull request proposes this claim's value as a reviewed Git change. nil otherwise.
	Proposed    *Claim `json:"proposed,omitempty"`
	Explanation []Step `json:"explanation,omitempty"` // omitted only in a truncated summary
}

// Dependent is a field that depends on another: it reads its value, directly or through others
// (a Terraform reference, a Deployment's env reading a ConfigMap key). Via says how, in words.
type Dependent struct {
	Field Field
	Via   string
}
