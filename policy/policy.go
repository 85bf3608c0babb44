package policy

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/parleyhq/parley/core"
)

// GitActorName is the name of the actor that stands for Git itself: the claim Git holds on a field
// is always made by this actor. A policy may declare it to change its default intent; when it does
// not, Git's actor exists anyway with intent baseline.
const GitActorName = "git"

// Policy is a compiled policy. It is immutable after Parse and safe for concurrent use.
type Policy struct {
	File string // file name used in diagnostics

	Intents     map[core.Intent]*Intent
	Motivations map[string]*Motivation
	Actors      []*Actor // declaration order; Git's actor is always present
	Fields      []*FieldRule
	Rules       []*Rule
	Freezes     []*Freeze
	Oscillation Oscillation
	Escalation  Escalation
	// Ledger is which files the ledger reads (the ledger block), with the defaults filled in.
	Ledger core.PathFilter
	// GitOps is what Parley may change in GitOps objects besides its gates (the gitops block).
	GitOps GitOps
	// TrustUnsignedGitAuthors believes a commit's author email without a signature, as Parley did
	// before commits had to prove who made them. Off by default: anyone who can push a branch can
	// write any email.
	TrustUnsignedGitAuthors bool
	// PolicyOwners are the GitHub logins and org/team slugs whose approval a pull request that
	// changes the policy needs (policy_owners); nil: anyone with maintain or admin on the repository.
	PolicyOwners []string
	// Unknown is what a claim may declare when its identity is no actor's (the unknown_actors
	// block): by default nothing, so that declaring never beats silence.
	Unknown UnknownActors

	actorsByName map[string]*Actor
	base         *hcl.EvalContext // stdlib functions; parent of every evaluation context
}

// Intent is a declared intent and its rank: higher ranks win when no rule decides.
type Intent struct {
	Name        core.Intent
	Rank        float64
	Description string
}

// Motivation is a declared motivation kind ("why now").
type Motivation struct {
	Name        string
	Urgency     float64 // breaks ties between equal intent ranks; higher wins
	Description string
	// DefaultLifetime is given to claims with this motivation that state no expiry; zero: none.
	DefaultLifetime time.Duration
	// MaxLifetime caps the expiry of claims with this motivation; zero: no cap.
	MaxLifetime time.Duration
	// AssertedBy lists the actors trusted to assert this motivation; nil: anyone.
	AssertedBy []string
}

// MayAssert reports whether the named actor is trusted to assert m.
func (m *Motivation) MayAssert(actor string) bool {
	return m.AssertedBy == nil || slices.Contains(m.AssertedBy, actor)
}

// UnknownActors is what a claim may declare when no actor vouches for its identity: no actor
// matches it, or a commit names an actor's email but its signature proves nothing (an unverified
// identity). Anyone can be such an identity (a new Kubernetes user, any author of a pull request,
// an email written on a commit), so what it declares counts only as far as the policy opts in: a
// declaration it may not make is judged as if it were absent. The zero value (no unknown_actors
// block) lets it declare nothing: its claims count as intent baseline, with no motivation, and
// conditions see no expiry.
type UnknownActors struct {
	// Intent is the intent its claims count as when they declare none, or one they may not;
	// baseline unless the block says otherwise.
	Intent core.Intent
	// Intents are the intents it may declare besides Intent; nil: none.
	Intents []core.Intent
	// Motivations are the motivations it may declare; nil: none. None of them lists asserted_by
	// (an unknown identity is none of the actors it names).
	Motivations []string
	// Expiry lets conditions see the expiry it states. Without it the claim still ends when it says
	// (an expiry only shortens a claim), but rules, owner_gives_way_when and the other conditions
	// judge it as stating none.
	Expiry bool
}

// MayAssertIntent reports whether an unknown identity may declare intent i.
func (u *UnknownActors) MayAssertIntent(i core.Intent) bool {
	return i == u.DefaultIntent() || slices.Contains(u.Intents, i)
}

// MayAssertMotivation reports whether an unknown identity may declare motivation m.
func (u *UnknownActors) MayAssertMotivation(m *Motivation) bool {
	return m.AssertedBy == nil && slices.Contains(u.Motivations, m.Name)
}

// DefaultIntent is the intent an unknown identity's claims count as: Intent, or baseline.
func (u *UnknownActors) DefaultIntent() core.Intent {
	if u.Intent == "" {
		return core.IntentBaseline
	}
	return u.Intent
}

// Actor is a declared actor: a named writer of fields and the identities it is recognised by.
type Actor struct {
	Name        string
	Description string
	// Intent is the intent of the actor's claims that declare none; "" leaves them without intent.
	Intent core.Intent
	// Intents lists the intents the actor may assert; nil: any (the policy trusts the identities it
	// names; unknown identities are restricted by the unknown_actors block instead). A claim
	// asserting another intent is downgraded to Intent.
	Intents []core.Intent
	// Motivation is the motivation kind given to the actor's live claims (from events) that declare
	// none, e.g. "traffic" for an autoscaler; "" leaves them without one.
	Motivation string
	// Confined actors may only write fields whose field block lists them in writers (the "mutable
	// musculature"); anything else they touch is vetoed.
	Confined bool
	// Identity globs per source; * matches any run of characters.
	Match map[core.IdentitySource][]string
	// SigningKeys are the keys whose signatures prove a commit is the actor's (signing_keys): a
	// commit whose author email matches git_authors counts as the actor only when one of them
	// that names that email among its principals signed it, unless the policy sets
	// trust_unsigned_git_authors. A key of another member of the actor proves nothing of an author.
	SigningKeys []SigningKey
}

// SigningKey is a key an actor signs commits with.
type SigningKey struct {
	ID string // as core.Proof.Key: "SHA256:..." (SSH) or "openpgp:<FINGERPRINT>"
	// Armored is the OpenPGP public key block, for OpenPGP keys; "" for SSH keys, which a
	// signature carries itself.
	Armored string
	// Principals are the author emails (globs) the key signs as, as git's allowed-signers names
	// them: the key proves these and no other. A bare key is bound, when the policy is loaded, to
	// its actor's one literal git_authors email.
	Principals []string
}

// HasKey reports whether the actor lists the key with id, for whatever principals.
func (a *Actor) HasKey(id string) bool {
	return id != "" && slices.ContainsFunc(a.SigningKeys, func(k SigningKey) bool { return k.ID == id })
}

// KeySignsAs reports whether the actor lists the key with id for the author email: a key listed
// for another of the actor's people does not prove this one.
func (a *Actor) KeySignsAs(id, email string) bool {
	return id != "" && slices.ContainsFunc(a.SigningKeys, func(k SigningKey) bool { return k.ID == id && k.SignsAs(email) })
}

// PrincipalsOf returns the principals the actor lists the key with id for.
func (a *Actor) PrincipalsOf(id string) []string {
	var out []string
	for _, k := range a.SigningKeys {
		if k.ID == id {
			out = append(out, k.Principals...)
		}
	}
	return out
}

// MayAssertIntent reports whether the actor may assert intent i.
func (a *Actor) MayAssertIntent(i core.Intent) bool {
	return a.Intents == nil || slices.Contains(a.Intents, i)
}

// FieldRule is a field block: what the policy says about the fields its patterns match.
type FieldRule struct {
	Name        string
	Description string
	Match       []core.FieldPattern
	// Owner is the standing owner's actor name; "" when the field has none. When OwnerWhen is set the
	// ownership holds only where it evaluates to true.
	Owner     string
	OwnerWhen *Expr
	// OwnerGivesWayWhen, when set, is evaluated for each competing live claim (as claim, after trust,
	// with other the owner's live claim or null): where it holds, the owner gives the field up to that
	// claim until the claim expires. Set only with Owner.
	OwnerGivesWayWhen *Expr
	Immutable         bool
	// Writers is the allow-list of actors that may write the field (besides Git); nil: anyone.
	Writers  []string
	Min, Max *Expr // bounds on numeric values; nil: unbounded
	// VetoAsk, when set, puts the block's vetoes (confinement, immutability, writers, bounds) to
	// people where its condition holds for the vetoed claim.
	VetoAsk *VetoAsk
	// Admission is what Parley's admission webhook does with a live write to these fields that the
	// policy refuses: AdmissionDeny denies it, AdmissionWarn lets it through with a warning; ""
	// leaves it to the cluster's setting. Per block, so a team can enforce one field while the
	// rest of the cluster is still watched in warn mode.
	Admission string
}

// VetoAsk says when a veto is put to people rather than only refused: Git's value stands, and a
// pull request proposes the vetoed value as a reviewed Git change.
type VetoAsk struct {
	// When is evaluated for the vetoed claim (claim, after trust; on a rule also other, the claim it
	// was vetoed against).
	When *Expr
	// Ask names the people or teams asked; nil: the escalation block's ask.
	Ask []string
}

// Admission modes of a field block (FieldRule.Admission) and of a cluster.
const (
	AdmissionWarn = "warn"
	AdmissionDeny = "deny"
)

// MatchesField reports whether one of the block's patterns matches f.
func (fr *FieldRule) MatchesField(f core.Field) bool {
	for _, p := range fr.Match {
		if p.Match(f) {
			return true
		}
	}
	return false
}

// Decisions a rule may take for a pair of claims.
const (
	RuleWin      = "win"      // claim beats other
	RuleVeto     = "veto"     // claim is vetoed
	RuleHold     = "hold"     // the field is held at Git's value and humans are asked
	RuleEscalate = "escalate" // humans decide between claim and other
)

// Rule is a pairwise rule: when its condition holds for (claim, other), Decision applies.
type Rule struct {
	Name        string
	Description string
	Fields      []core.FieldPattern // nil: every field
	When        *Expr
	Decision    string
	// VetoAsk, when set on a veto rule, puts its vetoes to people where its condition holds.
	VetoAsk *VetoAsk
}

// AppliesTo reports whether the rule covers field f.
func (r *Rule) AppliesTo(f core.Field) bool { return patternsMatch(r.Fields, f) }

// Oscillation configures flip detection; Flips == 0 disables it.
type Oscillation struct {
	Flips  int           // flips within Window that trigger a hold
	Window time.Duration // how far back flips count
	Hold   time.Duration // how long the hold lasts after the last flip
}

// Escalation says what happens when nothing decides.
type Escalation struct {
	Ask      []string      // people or teams asked
	Timeout  time.Duration // after this, Fallback applies; zero: wait for humans forever
	Fallback core.Decision // DecisionEnforceGit or DecisionHold
}

// Actor returns the named actor, or nil.
func (p *Policy) Actor(name string) *Actor { return p.actorsByName[name] }

// GitActor returns the actor standing for Git.
func (p *Policy) GitActor() *Actor { return p.actorsByName[GitActorName] }

// ResolveActor returns the first declared actor (in declaration order) matching the identity, or nil.
// A git-author identity matches an actor only when it is proven: signed by one of the actor's
// signing_keys for that email, or vouched for (core.Proof); or when the policy sets
// trust_unsigned_git_authors.
func (p *Policy) ResolveActor(id core.Identity) *Actor {
	for _, a := range p.Actors {
		if a.matches(id) && p.proves(a, id) {
			return a
		}
	}
	return nil
}

// NamedActor returns the actor the identity names, proven or not: for a git-author identity, the
// first actor whose git_authors match its email. Explanations use it to say whom an unproven
// commit claims to be.
func (p *Policy) NamedActor(id core.Identity) *Actor {
	for _, a := range p.Actors {
		if a.matches(id) {
			return a
		}
	}
	return nil
}

func (p *Policy) proves(a *Actor, id core.Identity) bool {
	if id.Source != core.SourceGitAuthor || p.TrustUnsignedGitAuthors || id.Proof.Vouched != "" {
		return true
	}
	return a.KeySignsAs(id.Proof.Key, id.ID)
}

// OpenPGPKeyring is the armored OpenPGP keys every actor lists, one after another: what the ledger
// verifies OpenPGP commit signatures against.
func (p *Policy) OpenPGPKeyring() string {
	var b strings.Builder
	for _, a := range p.Actors {
		for _, k := range a.SigningKeys {
			if k.Armored != "" {
				b.WriteString(strings.TrimSpace(k.Armored))
				b.WriteString("\n")
			}
		}
	}
	return b.String()
}

func (a *Actor) matches(id core.Identity) bool {
	for _, g := range a.Match[id.Source] {
		if globMatch(g, id.ID) {
			return true
		}
	}
	// A GitHub user's teams match github_teams.
	if id.Source == core.SourceGitHubUser {
		for _, g := range a.Match[core.SourceGitHubTeam] {
			for _, team := range id.Groups {
				if globMatch(g, team) {
					return true
				}
			}
		}
	}
	return false
}

// FieldRuleFor returns the first field block matching f, or nil.
func (p *Policy) FieldRuleFor(f core.Field) *FieldRule {
	for _, fr := range p.Fields {
		if fr.MatchesField(f) {
			return fr
		}
	}
	return nil
}

// IntentRank returns the rank of an intent and whether the policy declares it.
func (p *Policy) IntentRank(i core.Intent) (float64, bool) {
	if in, ok := p.Intents[i]; ok {
		return in.Rank, true
	}
	return 0, false
}

func patternsMatch(ps []core.FieldPattern, f core.Field) bool {
	if ps == nil {
		return true
	}
	for _, p := range ps {
		if p.Match(f) {
			return true
		}
	}
	return false
}

// globMatch matches s against a glob in which * matches any run of characters (including / and :).
func globMatch(pat, s string) bool {
	if !strings.Contains(pat, "*") {
		return pat == s
	}
	pi, si, star, mark := 0, 0, -1, 0
	for si < len(s) {
		switch {
		case pi < len(pat) && pat[pi] == '*':
			star, mark = pi, si
			pi++
		case pi < len(pat) && pat[pi] == s[si]:
			pi++
			si++
		case star >= 0:
			pi = star + 1
			mark++
			si = mark
		default:
			return false
		}
	}
	for pi < len(pat) && pat[pi] == '*' {
		pi++
	}
	return pi == len(pat)
}

// Diagnostic is one problem found in a policy, at a position in its file.
type Diagnostic struct {
	File         string
	Line, Column int
	Message      string
}

// String renders file:line:col: message.
func (d Diagnostic) String() string {
	return fmt.Sprintf("%s:%d:%d: %s", d.File, d.Line, d.Column, d.Message)
}

// Diagnostics are the parse and validation errors of a policy. It is the error type Parse returns.
type Diagnostics []Diagnostic

// Error renders one diagnostic per line.
func (ds Diagnostics) Error() string {
	lines := make([]string, len(ds))
	for i, d := range ds {
		lines[i] = d.String()
	}
	return strings.Join(lines, "\n")
}

// GitOps holds the gitops block's settings.
type GitOps struct {
	// EnableHelmDriftDetection lets a gate on a HelmRelease turn its drift detection on
	// (spec.driftDetection.mode: enabled) when it is off or warns only: without it helm-controller
	// reverts nothing, so every other field of the release goes unenforced. The last resume puts the
	// mode back as it was.
	EnableHelmDriftDetection bool
}

// TrustNotes says what the policy believes of commit authors, for people checking it: that it
// believes emails without signatures (trust_unsigned_git_authors), or which actors match commit
// emails but list no key, so that none of their commits will count as theirs.
func (p *Policy) TrustNotes() []string {
	var out []string
	if p.TrustUnsignedGitAuthors {
		out = append(out, "trust_unsigned_git_authors = true: commit author emails are believed without a signature; "+
			"anyone who can push a branch can write any of them")
	} else {
		for _, a := range p.Actors {
			if len(a.Match[core.SourceGitAuthor]) > 0 && len(a.SigningKeys) == 0 {
				out = append(out, "actor "+a.Name+" matches git_authors but lists no signing_keys: its commits count as an unverified identity")
			}
		}
	}
	// What the policy lets anyone declare: every identity no actor vouches for can.
	u := &p.Unknown
	var may []string
	if len(u.Intents) > 0 {
		s := make([]string, len(u.Intents))
		for i, in := range u.Intents {
			s[i] = string(in)
		}
		may = append(may, "intents "+strings.Join(s, ", "))
	}
	if len(u.Motivations) > 0 {
		may = append(may, "motivations "+strings.Join(u.Motivations, ", "))
	}
	if u.Expiry {
		may = append(may, "an expiry that conditions see")
	}
	if may != nil {
		out = append(out, "unknown_actors lets any identity no actor vouches for (any cluster user, pull request author or unverified commit) declare "+
			strings.Join(may, "; "))
	}
	return out
}
