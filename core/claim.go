package core

import (
	"fmt"
	"time"
)

// Intent is what a change is for. Policies rank intents; the zero Intent means "not declared".
type Intent string

// The intents Parley knows out of the box. A policy may declare more.
const (
	IntentAvailability Intent = "availability"
	IntentCost         Intent = "cost"
	IntentSecurity     Intent = "security"
	IntentCompliance   Intent = "compliance"
	IntentPerformance  Intent = "performance"
	IntentReliability  Intent = "reliability"
	IntentConsistency  Intent = "consistency"
	IntentExperiment   Intent = "experiment"
	// IntentBaseline is the intent of a change that declared none: Git's standing configuration.
	IntentBaseline Intent = "baseline"
)

// KnownIntents lists the built-in intents in a stable order (for help text and validation).
func KnownIntents() []Intent {
	return []Intent{IntentAvailability, IntentCost, IntentSecurity, IntentCompliance, IntentPerformance,
		IntentReliability, IntentConsistency, IntentExperiment, IntentBaseline}
}

// IsKnown reports whether i is one of the built-in intents.
func (i Intent) IsKnown() bool {
	for _, k := range KnownIntents() {
		if i == k {
			return true
		}
	}
	return false
}

// Severity grades a motivation. The zero Severity means "not stated".
type Severity string

// Severities in increasing order.
const (
	SeverityLow      Severity = "low"
	SeverityMedium   Severity = "medium"
	SeverityHigh     Severity = "high"
	SeverityCritical Severity = "critical"
)

// Rank orders severities: 0 for unstated, 1 (low) to 4 (critical), -1 for an unknown word.
func (s Severity) Rank() int {
	switch s {
	case "":
		return 0
	case SeverityLow:
		return 1
	case SeverityMedium:
		return 2
	case SeverityHigh:
		return 3
	case SeverityCritical:
		return 4
	}
	return -1
}

// Motivation kinds Parley knows out of the box ("why now"). A policy may declare more.
const (
	MotivationIncident        = "incident"
	MotivationCVE             = "cve"
	MotivationLaunch          = "launch"
	MotivationBudget          = "budget"
	MotivationRightsizing     = "rightsizing"
	MotivationBaseline        = "baseline"
	MotivationTraffic         = "traffic"
	MotivationMaintenance     = "maintenance"
	MotivationComplianceAudit = "compliance-audit"
	MotivationExperiment      = "experiment"
)

// KnownMotivations lists the built-in motivation kinds in a stable order.
func KnownMotivations() []string {
	return []string{MotivationIncident, MotivationCVE, MotivationLaunch, MotivationBudget, MotivationRightsizing,
		MotivationBaseline, MotivationTraffic, MotivationMaintenance, MotivationComplianceAudit, MotivationExperiment}
}

// Motivation says why a change happens now: an incident, a CVE, a launch, a budget...
type Motivation struct {
	Kind     string   // e.g. "incident"; empty when none was declared
	Ref      string   // optional reference such as "INC-4211" or "CVE-2026-1234"
	Severity Severity // optional
}

// IsZero reports whether no motivation was declared.
func (m Motivation) IsZero() bool { return m.Kind == "" && m.Ref == "" && m.Severity == "" }

// String renders the motivation the way the Motivation trailer is written.
func (m Motivation) String() string {
	s := m.Kind
	if m.Ref != "" {
		s += " " + m.Ref
	}
	if m.Severity != "" {
		s += " severity=" + string(m.Severity)
	}
	return s
}

// IdentitySource says which system vouches for an identity.
type IdentitySource string

// Identity sources. Policies match actors on (source, id).
const (
	SourceGitAuthor    IdentitySource = "git-author"    // commit author email
	SourceGitHubUser   IdentitySource = "github-user"   // GitHub login
	SourceGitHubTeam   IdentitySource = "github-team"   // org/team slug
	SourceKubeUser     IdentitySource = "k8s-user"      // Kubernetes username or service account
	SourceFieldManager IdentitySource = "field-manager" // SSA field manager
	SourceAWSPrincipal IdentitySource = "aws-principal" // AWS principal ARN
)

// Identity is who did something, as the source system names them.
type Identity struct {
	Source IdentitySource
	ID     string   // e.g. "alice@example.com", "system:serviceaccount:kube-system:horizontal-pod-autoscaler"
	Name   string   // display name where the source has one (commit author name, GitHub login)
	Groups []string // groups or teams the source reports, if any
	// Proof is how a git-author identity was proven. Git's author line is free text, so an email
	// proves nothing by itself; the other sources are authenticated by the system that reports them
	// (GitHub, the Kubernetes API server, CloudTrail) and need none.
	Proof Proof
}

// Proof is what establishes a git-author identity: a verified signature, or someone who vouches for
// it. The zero Proof proves nothing.
type Proof struct {
	// Key is the id of the key whose signature over the commit verified: "SHA256:..." for an SSH key
	// (ssh-keygen's fingerprint), "openpgp:<FINGERPRINT>" for an OpenPGP key. Whether that key
	// belongs to the actor the author email names is the policy's call (an actor's signing_keys).
	Key string
	// Vouched names who vouches for the identity without a signature: the person running parley
	// who named the author with --author, say. Empty for identities read from commits.
	Vouched string
	// Problem says why a commit proves nothing when Key is empty: "it is unsigned", "its SSH
	// signature does not verify: ...".
	Problem string
}

// Proven reports whether the identity carries a verified key or someone's word for it.
func (p Proof) Proven() bool { return p.Key != "" || p.Vouched != "" }

// String renders source:id.
func (id Identity) String() string { return string(id.Source) + ":" + id.ID }

// Actor is a writer of fields: an identity and, once a policy resolved it, the policy's name for it.
type Actor struct {
	Name     string // policy actor name such as "hpa" or "oncall"; empty until resolved
	Identity Identity
}

// String names the actor for people: the policy name if resolved, else the identity.
func (a Actor) String() string {
	if a.Name != "" {
		return a.Name
	}
	return a.Identity.String()
}

// Evidence records where a claim came from, so every verdict can cite it.
type Evidence struct {
	Source   string   // "git", "github-comment", "flux", "argocd", "k8s-audit", "cloudtrail", ...
	Commit   string   // commit hash for claims read from Git
	PR       int      // pull request number, 0 if none
	EventIDs []string // source event IDs for claims read from events
	// Explicit is true when the claim was stated (a Claim trailer or command) rather than implied
	// by a change to the field.
	Explicit bool
	// Proposal is the proposal the change carries out, when its actor asked first (a drift event
	// matching a standing accepted proposal of the same actor, field and value).
	Proposal string
}

// Asked reports whether the claim was asked for before the change: a proposal, or a change that
// carries one out.
func (e Evidence) Asked() bool { return e.Source == "proposal" || e.Proposal != "" }

// Claim is one actor's wish for one field.
type Claim struct {
	Field      Field
	Actor      Actor
	Value      Value // wanted value; absent for a Yield or a removal
	Yield      bool  // the actor gives the field up
	Intent     Intent
	Motivation Motivation
	At         time.Time // when the claim was made
	Expires    time.Time // zero: does not expire
	Evidence   Evidence
}

// ExpiredAt reports whether the claim has expired at t.
func (c Claim) ExpiredAt(t time.Time) bool { return !c.Expires.IsZero() && !t.Before(c.Expires) }

// String is a one-line summary for logs and explanations.
func (c Claim) String() string {
	verb := "claims " + c.Field.String() + " = " + c.Value.String()
	if c.Yield {
		verb = "yields " + c.Field.String()
	}
	s := fmt.Sprintf("%s %s (intent %s", c.Actor, verb, c.intentOrUnknown())
	if !c.Motivation.IsZero() {
		s += ", motivation " + c.Motivation.String()
	}
	if !c.Expires.IsZero() {
		s += ", expires " + c.Expires.UTC().Format(time.RFC3339)
	}
	return s + ")"
}

func (c Claim) intentOrUnknown() Intent {
	if c.Intent == "" {
		return "unknown"
	}
	return c.Intent
}

// ClaimStatement is a Claim trailer (or command): a field and, optionally, the value wanted.
type ClaimStatement struct {
	Field    Field
	Value    Value
	HasValue bool
}

// ForeignTrailer is a trailer that is not Parley's (Signed-off-by, Co-authored-by, ...), kept as read.
type ForeignTrailer struct {
	Key, Value string
	Line       int
}

// Declaration is what a change says about itself: its intent, motivation, explicit claims and yields.
type Declaration struct {
	Intent     Intent
	Motivation Motivation
	Claims     []ClaimStatement
	Yields     []FieldPattern
	Expires    time.Time // absolute; relative Expires are resolved against the change's time
	PR         int
	Foreign    []ForeignTrailer
}
