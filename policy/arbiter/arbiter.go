package arbiter

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/policy"
)

// Input is everything a verdict depends on.
type Input struct {
	Field core.Field
	// Live are the claims made outside Git (live changes, PR claims, commands) that still stand.
	// Their order does not matter.
	Live []core.Claim
	// Git is the claim Git holds on the field; nil when Git does not hold the field.
	Git *core.Claim
	// History is every claim seen on the field, oldest first (Git's commits and live changes); it
	// is read for oscillation only.
	History []core.Claim
	Now     time.Time
	// Lookup answers git() and git_values() in bounds and conditions; nil: they return null.
	Lookup policy.GitLookup
	// Dependents are the fields that depend on Field (the repository's dependency graph): the
	// claim.dependents of every claim, and listed in the explanation. nil: unknown.
	Dependents []core.Dependent
	// Owners answers who is asked when the verdict asks people (a hold, an escalation, a veto put
	// to people) and the policy names nobody: the code owners of the file that defines the field.
	// Called only then. nil: not known.
	Owners func() Owners
	// Conditions, when not nil, keeps the value of field conditions that read only the field and
	// Git (owner_when) between calls: the caller promises that Lookup answers the same for as long
	// as Conditions keeps them (reconcile keeps one per commit). nil: evaluated every time.
	Conditions ConditionMemo
}

// ConditionMemo keeps the values of conditions that read only the field and Git, per condition
// (an expression of one parsed policy) and field. Safe for concurrent use.
type ConditionMemo interface {
	Condition(e *policy.Expr, f core.Field) (v, ok bool)
	KeepCondition(e *policy.Expr, f core.Field, v bool)
}

// Owners are the people asked when the policy names nobody: the CODEOWNERS of the file that
// defines the field. From says where they were found ("the CODEOWNERS line 4 (/infra/kafka/) of
// .github/CODEOWNERS for infra/kafka/main.tf"), or, with no Ask, plainly why there are none.
type Owners struct {
	Ask  []string
	From string
}

// Arbiter decides verdicts under one policy, caching what repeats between fields. Not safe for
// concurrent use.
type Arbiter struct {
	p        *policy.Policy
	actors   map[idKey]*policy.Actor
	objects  map[core.Field]objectInfo
	profiles map[profileKey]int32
	pairs    map[pairKey]pairOutcome
	allMemo  bool // every rule's condition is memoisable
	git      *policy.GitBinding
	// nextFreeze caches the "next freeze" sentence per freeze, which only changes with the window.
	nextFreeze map[*policy.Freeze]freezeText
	texts      texts
	scratch    decision
	// boundsTexts caches the bounds sentence per field block and bound values.
	boundsTexts map[boundsKey]string
}

type boundsKey struct {
	fr         *policy.FieldRule
	lo, hi     float64
	loOK, hiOK bool
}

const maxBoundsTexts = 1 << 12

type freezeText struct {
	start time.Time
	text  string
}

// texts are explanation sentences that depend only on the policy, built once.
type texts struct {
	fieldApplies                        map[*policy.FieldRule]string
	ruleNoMatch, ruleNotReached, ruleNA []string
	ruleName                            []string
	oscNone                             string
	freezeName                          []string
}

func newTexts(p *policy.Policy) texts {
	t := texts{fieldApplies: map[*policy.FieldRule]string{}}
	t.oscNone = fmt.Sprintf("too few changes to oscillate (a hold needs %d flips by two or more actors within %s)", p.Oscillation.Flips, fmtDuration(p.Oscillation.Window))
	for _, fr := range p.Fields {
		t.fieldApplies[fr] = "the field block " + quote(fr.Name) + " covers this field (" + patternList(fr.Match) + ")"
	}
	for _, fz := range p.Freezes {
		t.freezeName = append(t.freezeName, "freeze."+fz.Name)
	}
	for _, r := range p.Rules {
		t.ruleName = append(t.ruleName, "rule."+r.Name)
		t.ruleNA = append(t.ruleNA, "the rule covers only "+patternList(r.Fields))
		src := ""
		if r.When != nil {
			src = r.When.Source
		}
		t.ruleNoMatch = append(t.ruleNoMatch, "did not hold for any pair of competing claims (when "+src+")")
		t.ruleNotReached = append(t.ruleNotReached, "did not hold for the pairs it was checked on; an earlier rule decided the others (when "+src+")")
	}
	return t
}

// Cache bounds, so memory stays bounded however many distinct fields and identities an Arbiter
// sees: past them a cache is dropped and rebuilt (the object cache instead stops growing).
const (
	maxActorCache   = 1 << 14
	maxObjectCache  = 1 << 15
	maxProfileCache = 1 << 14
	maxPairCache    = 1 << 16
)

// New returns an Arbiter for p.
func New(p *policy.Policy) *Arbiter {
	a := &Arbiter{p: p, allMemo: len(p.Rules) <= 64, texts: newTexts(p), git: policy.NewGitBinding(),
		nextFreeze: map[*policy.Freeze]freezeText{}, boundsTexts: map[boundsKey]string{}}
	for _, r := range p.Rules {
		if r.When == nil || !r.When.Memo {
			a.allMemo = false
		}
	}
	a.reset()
	return a
}

func (a *Arbiter) reset() {
	a.actors = map[idKey]*policy.Actor{}
	a.objects = map[core.Field]objectInfo{}
	a.profiles = map[profileKey]int32{}
	a.pairs = map[pairKey]pairOutcome{}
}

// Decide is New(p).Decide(in), for one-off verdicts.
func Decide(p *policy.Policy, in Input) core.Verdict { return New(p).Decide(in) }

// Policy returns the arbiter's policy.
func (a *Arbiter) Policy() *policy.Policy { return a.p }

type idKey struct {
	src    core.IdentitySource
	id     string
	groups string
	proof  core.Proof
}

func (a *Arbiter) resolve(id core.Identity) *policy.Actor {
	k := idKey{src: id.Source, id: id.ID, proof: id.Proof}
	if len(id.Groups) > 0 {
		k.groups = strings.Join(id.Groups, "\x00")
	}
	if act, ok := a.actors[k]; ok {
		return act
	}
	if len(a.actors) >= maxActorCache {
		a.actors = map[idKey]*policy.Actor{}
	}
	act := a.p.ResolveActor(id)
	a.actors[k] = act
	return act
}

// objectInfo says which policy blocks have a pattern matching an object, as bit sets over the
// blocks' indices; paths are matched per field. Blocks past index 63 are always checked in full.
type objectInfo struct {
	fields, rules, freezes uint64
}

// has reports whether block i may match (its bit is set, or it is past the bit set).
func has(mask uint64, i int) bool { return i >= 64 || mask&(1<<uint(i)) != 0 }

func (a *Arbiter) object(f core.Field) objectInfo {
	obj := f.Object()
	if oi, ok := a.objects[obj]; ok {
		return oi
	}
	var oi objectInfo
	mask := func(ps []core.FieldPattern) bool {
		if ps == nil {
			return true
		}
		for _, p := range ps {
			if p.MatchObject(obj) {
				return true
			}
		}
		return false
	}
	for i, fr := range a.p.Fields {
		if i < 64 && mask(fr.Match) {
			oi.fields |= 1 << uint(i)
		}
	}
	for i, r := range a.p.Rules {
		if i < 64 && mask(r.Fields) {
			oi.rules |= 1 << uint(i)
		}
	}
	for i, fz := range a.p.Freezes {
		if i < 64 && mask(fz.Fields) {
			oi.freezes |= 1 << uint(i)
		}
	}
	// A full cache keeps what it has: dropping it would make every new object rehash the map.
	if len(a.objects) < maxObjectCache {
		a.objects[obj] = oi
	}
	return oi
}

func pathMatch(ps []core.FieldPattern, f core.Field) bool {
	if ps == nil {
		return true
	}
	for _, p := range ps {
		if p.MatchObject(f) && p.MatchPath(f.Path) {
			return true
		}
	}
	return false
}

// status of a claim during arbitration.
type status uint8

const (
	active status = iota
	expired
	yielded
	superseded
	vetoed
	deferred
	lost
)

// view is a claim under arbitration.
type view struct {
	policy.ClaimView
	actor   *policy.Actor // resolved actor (Git's actor for the Git claim); nil when unknown
	label   string        // how explanations name the claim's actor
	profile int32
	status  status
	vetoBy  string // rule name that vetoed or deferred the claim
	// vetoRule is the rule that vetoed the claim (vetoOther the claim it was vetoed against); nil
	// when a field block's check did.
	vetoRule  *policy.Rule
	vetoOther *view
}

type profileKey struct {
	actor, intent, motivation, severity, ref, source string
	flags                                            uint8
}

func (a *Arbiter) profileOf(v *view) int32 {
	c := &v.Claim
	k := profileKey{actor: c.Actor.Name, intent: string(c.Intent), motivation: c.Motivation.Kind,
		severity: string(c.Motivation.Severity), ref: c.Motivation.Ref, source: c.Evidence.Source}
	if v.Git {
		k.flags |= 1
	}
	if c.Yield {
		k.flags |= 2
	}
	if c.Evidence.Explicit {
		k.flags |= 4
	}
	if v.Downgraded {
		k.flags |= 8
	}
	if c.Actor.Name == "" {
		// Unknown actors are told apart by identity (claim.actor is "" for all of them, but the
		// profile must not merge claims that differ in what an expression can read).
		k.actor = "\x00" + c.Actor.Identity.String()
	}
	if id, ok := a.profiles[k]; ok {
		return id
	}
	if len(a.profiles) >= maxProfileCache {
		a.profiles = map[profileKey]int32{}
		a.pairs = map[pairKey]pairOutcome{}
	}
	id := int32(len(a.profiles))
	a.profiles[k] = id
	return id
}

// Decide returns the verdict for in.Field.
func (a *Arbiter) Decide(in Input) core.Verdict {
	// The decision and its scratch slices are reused from call to call: only the verdict (its
	// winner, losers and explanation) is allocated fresh, so callers may keep it.
	d := &a.scratch
	*d = decision{a: a, p: a.p, in: in, steps: make([]core.Step, 0, 12+len(a.p.Rules)),
		slab: d.slab[:0], live: d.live[:0], buf: d.buf[:0], pairs: d.pairs[:0], vetoes: d.vetoes[:0],
		cands: d.cands[:0], rules: d.rules[:0], notApplicable: d.notApplicable[:0]}
	a.git.Bind(in.Lookup)
	d.cache.Use(a.git)
	v := d.run()
	// Drop references to this call's claims and lookup.
	clear(d.slab[:cap(d.slab)])
	d.in, d.git, d.cache = Input{}, nil, policy.EvalCache{}
	return v
}

// decision is the state of one Decide call.
type decision struct {
	a     *Arbiter
	p     *policy.Policy
	in    Input
	steps []core.Step
	git   *view
	live  []*view
	fr    *policy.FieldRule
	oi    objectInfo

	recheck time.Time
	cache   policy.EvalCache
	buf     []*view // activeLive's result, reused: valid until the next call

	// Scratch space reused across calls.
	slab                 []view
	pairs, vetoes        []decidedPair
	cands                []*view
	rules, notApplicable []int
}

func (d *decision) step(rule, outcome, detail string) {
	d.steps = append(d.steps, core.Step{Rule: rule, Outcome: outcome, Detail: detail})
}

func (d *decision) noteRecheck(t time.Time) {
	if t.IsZero() || !t.After(d.in.Now) {
		return
	}
	if d.recheck.IsZero() || t.Before(d.recheck) {
		d.recheck = t
	}
}

func (d *decision) run() core.Verdict {
	in := d.in
	d.oi = d.a.object(in.Field)
	for i, fr := range d.p.Fields {
		if has(d.oi.fields, i) && pathMatch(fr.Match, in.Field) {
			d.fr = fr
			break
		}
	}
	d.normalise()
	if d.fr != nil {
		d.step("field."+d.fr.Name, "applies", d.a.texts.fieldApplies[d.fr])
	} else {
		d.step("field", "none", "no field block covers this field: no owner, bounds or writer list apply")
	}
	if len(d.in.Dependents) > 0 {
		d.step("dependents", "listed", dependentsText(d.in.Dependents))
	}
	d.vetoChecks()

	if v, ok := d.oscillation(); ok {
		return v
	}
	d.freezes()
	if v, ok := d.owner(); ok {
		return v
	}
	return d.contest()
}

// normalise resolves actors, applies trust and lifetimes, sorts and filters the claims.
func (d *decision) normalise() {
	in := d.in
	if in.Git != nil && in.Git.Yield {
		// Git's latest word on the field gives it up: the field is left to live actors.
		d.step("yield", "yielded", "Git's latest change yields the field ("+evidenceText(in.Git.Evidence)+" by "+
			in.Git.Actor.Identity.ID+"): live claims decide it")
	}
	n := len(in.Live)
	if cap(d.slab) < n+1 {
		d.slab = make([]view, n+1)
	}
	views := d.slab[:n+1]
	if in.Git != nil && !in.Git.Yield {
		v := &views[n]
		*v = view{ClaimView: policy.ClaimView{Claim: *in.Git, Git: true, Dependents: in.Dependents}}
		v.actor = d.p.GitActor()
		author := d.a.resolve(in.Git.Actor.Identity)
		d.identity(&v.Claim, author)
		v.Claim.Actor.Name = policy.GitActorName
		v.label = "git"
		d.trust(v, author)
		d.git = v
		if in.Git.ExpiredAt(in.Now) {
			d.step("expiry", "still in Git", "the commit behind Git's value ("+evidenceText(in.Git.Evidence)+") said its claim expires at "+
				fmtTime(in.Git.Expires)+"; Git still holds the value, so it stands until Git changes")
		}
	}
	for i := range in.Live {
		views[i] = view{ClaimView: policy.ClaimView{Claim: in.Live[i], Dependents: in.Dependents}}
		d.live = append(d.live, &views[i])
	}
	slices.SortFunc(d.live, func(a, b *view) int { return compareClaims(&a.Claim, &b.Claim) })
	for _, v := range d.live {
		v.actor = d.a.resolve(v.Claim.Actor.Identity)
		d.identity(&v.Claim, v.actor)
		if v.actor != nil {
			v.Claim.Actor.Name = v.actor.Name
			v.label = v.actor.Name
		} else {
			v.Claim.Actor.Name = ""
			v.label = v.Claim.Actor.Identity.String()
		}
		d.trust(v, v.actor)
	}
	// Which of one actor's claims at the same instant stands is decided on the claims as judged,
	// not as declared: otherwise a declaration trust discounted could still pick the one that
	// stands (declaring never beats silence). The raw order above keeps the explanation's steps
	// and the remaining ties deterministic.
	if len(d.live) > 1 {
		slices.SortStableFunc(d.live, compareJudged)
	}
	// One standing wish per actor: a newer claim supersedes an older one.
	for i, v := range d.live {
		for _, w := range d.live[i+1:] {
			if w.status == active && actorKey(w) == actorKey(v) && !w.Claim.At.Before(v.Claim.At) {
				v.status = superseded
				d.step("supersede", "superseded", v.label+"'s claim of "+v.Claim.At.UTC().Format(time.RFC3339)+
					" is replaced by its newer claim of "+w.Claim.At.UTC().Format(time.RFC3339))
				break
			}
		}
	}
	for _, v := range d.live {
		if v.status != active {
			continue
		}
		if v.Claim.ExpiredAt(in.Now) {
			v.status = expired
			d.step("expiry", "expired", v.label+"'s claim ("+valueOf(v)+") expired at "+fmtTime(v.Claim.Expires)+" and no longer counts")
			continue
		}
		if v.Claim.Yield {
			v.status = yielded
			d.step("yield", "yielded", v.label+" gives the field up")
			continue
		}
		d.noteRecheck(v.Claim.Expires)
		v.profile = d.a.profileOf(v)
	}
	if d.git != nil {
		d.git.profile = d.a.profileOf(d.git)
	}
}

// identity says in the explanation when a git-author identity counts for other than its email: a
// commit that names an actor's email but proves nothing (unsigned, a signature that does not
// verify, a key the actor does not list) is judged as an unverified identity, and one believed
// without a signature because the policy sets trust_unsigned_git_authors says so.
func (d *decision) identity(c *core.Claim, resolved *policy.Actor) {
	id := c.Actor.Identity
	if id.Source != core.SourceGitAuthor {
		return
	}
	commit := "the commit"
	if c.Evidence.Commit != "" {
		commit = "commit " + shortHash(c.Evidence.Commit)
	}
	switch {
	case resolved == nil:
		named := d.p.NamedActor(id)
		if named == nil {
			return
		}
		why := id.Proof.Problem
		switch {
		case id.Proof.Key != "" && named.HasKey(id.Proof.Key):
			// Another member's key: it proves its own principals, not this author.
			why = "it is signed by key " + id.Proof.Key + ", which " + named.Name + " lists in signing_keys for " +
				strings.Join(named.PrincipalsOf(id.Proof.Key), ", ") + ", not for " + id.ID
		case id.Proof.Key != "":
			why = "it is signed by key " + id.Proof.Key + ", which " + named.Name + " does not list in signing_keys"
		case why == "":
			why = "nothing proves it (no signature was checked)"
		}
		d.step("identity", "unverified", fmt.Sprintf("%s names author %s (%s), but %s: it is judged as an unverified identity, without %s's trust",
			commit, id.ID, named.Name, why, named.Name))
	case d.p.TrustUnsignedGitAuthors && id.Proof.Vouched == "" && !resolved.KeySignsAs(id.Proof.Key, id.ID):
		d.step("identity", "believed unsigned", fmt.Sprintf("%s counts as %s on its author email %s alone, without a signature, because the policy sets trust_unsigned_git_authors = true",
			commit, resolved.Name, id.ID))
	}
}

// compareJudged orders claims as trust left them: by what no declaration changes first (time,
// identity, value, evidence), then by the expiry conditions see and the effective intent and
// motivation, then by the expiry the claim ends at. An expiry sorts after a nearer one and none
// sorts last, so of one actor's simultaneous claims the one that stands is never the one whose
// discounted declarations alone set it apart.
func compareJudged(a, b *view) int {
	ca, cb := &a.Claim, &b.Claim
	return cmp.Or(
		ca.At.Compare(cb.At),
		cmp.Compare(ca.Actor.Identity.Source, cb.Actor.Identity.Source),
		cmp.Compare(ca.Actor.Identity.ID, cb.Actor.Identity.ID),
		cmp.Compare(ca.Actor.Name, cb.Actor.Name),
		cmp.Compare(ca.Actor.Identity.Name, cb.Actor.Identity.Name),
		slices.Compare(ca.Actor.Identity.Groups, cb.Actor.Identity.Groups),
		cmp.Compare(ca.Value.JSON(), cb.Value.JSON()),
		cmp.Compare(ca.Value.Expr(), cb.Value.Expr()),
		cmp.Compare(b2u(ca.Yield), b2u(cb.Yield)),
		cmp.Compare(ca.Evidence.Source, cb.Evidence.Source),
		cmp.Compare(ca.Evidence.Commit, cb.Evidence.Commit),
		cmp.Compare(ca.Evidence.PR, cb.Evidence.PR),
		slices.Compare(ca.Evidence.EventIDs, cb.Evidence.EventIDs),
		cmp.Compare(b2u(ca.Evidence.Explicit), b2u(cb.Evidence.Explicit)),
		compareExpiry(a.seenExpires(), b.seenExpires()),
		cmp.Compare(ca.Intent, cb.Intent),
		cmp.Compare(ca.Motivation.Kind, cb.Motivation.Kind),
		cmp.Compare(ca.Motivation.Ref, cb.Motivation.Ref),
		cmp.Compare(ca.Motivation.Severity, cb.Motivation.Severity),
		compareExpiry(ca.Expires, cb.Expires),
	)
}

// compareExpiry orders expiries, none last.
func compareExpiry(a, b time.Time) int {
	switch {
	case a.IsZero() && b.IsZero():
		return 0
	case a.IsZero():
		return 1
	case b.IsZero():
		return -1
	}
	return a.Compare(b)
}

// seenExpires is the expiry conditions see.
func (v *view) seenExpires() time.Time {
	if v.ExpiresOverridden {
		return v.SeenExpires
	}
	return v.Claim.Expires
}

func shortHash(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

func actorKey(v *view) string {
	if v.Claim.Actor.Name != "" {
		return v.Claim.Actor.Name
	}
	return v.Claim.Actor.Identity.String()
}

// trust fills the effective intent, motivation, rank, urgency and expiry of v. subject is the actor
// whose trust counts: the claim's own actor, or for Git's claim the commit author's actor. A
// subject of nil is an identity no actor vouches for (none matches, or a commit's signature proves
// nothing): what it may declare is the policy's unknown_actors block, by default nothing. Whatever
// a subject may not declare is judged as if it were absent, so that declaring never beats silence:
// the claim keeps the intent, motivation and (as conditions see it) the expiry it would have had
// without the declaration.
func (d *decision) trust(v *view, subject *policy.Actor) {
	c := &v.Claim
	subjName := ""
	if subject != nil {
		subjName = subject.Name
	}
	who := v.label
	if v.Git {
		who = "the commit by " + c.Actor.Identity.ID
		if subjName != "" {
			who += " (" + subjName + ")"
		}
	}
	u := &d.p.Unknown
	def := core.Intent("")
	if v.actor != nil {
		def = v.actor.Intent
	} else if subject == nil {
		def = u.DefaultIntent()
	}
	// seen is the expiry conditions see: the stated one, unless the subject may not state one.
	seen := c.Expires
	switch {
	case c.Intent == "":
		c.Intent = def
	case subject != nil && !subject.MayAssertIntent(c.Intent):
		d.step("trust", "downgraded", fmt.Sprintf("%s asserts intent %s, which %s may not assert (allowed: %s); it counts as %s",
			who, c.Intent, subjName, intentList(subject.Intents), orNone(string(def))))
		c.Intent = def
		v.Downgraded = true
	case subject == nil && c.Intent != def && !slices.Contains(u.Intents, c.Intent):
		// Pull requests and Git's ledger write baseline for a change that declares no intent: that
		// is silence, judged as such without a word.
		if c.Intent != core.IntentBaseline {
			d.step("trust", "not counted", fmt.Sprintf("%s declares intent %s, which is not one an unknown actor may declare (unknown_actors: %s); %s is no actor the policy vouches for, so the declaration is not counted: the claim counts as %s, as if it declared none",
				who, c.Intent, intentsMay(u), d.unknownName(v), orNone(string(def))))
			v.Downgraded = true
		}
		c.Intent = def
	}
	if subject == nil && !u.Expiry && !c.Expires.IsZero() {
		seen = time.Time{}
		ends := " (it still ends then)"
		if v.Git {
			ends = ""
		}
		d.step("trust", "not counted", fmt.Sprintf("%s states that its claim expires at %s, which an unknown actor may not declare (unknown_actors does not set expiry = true); %s is no actor the policy vouches for, so conditions judge the claim as stating no expiry%s",
			who, fmtTime(c.Expires), d.unknownName(v), ends))
		v.Downgraded = true
	}
	if c.Intent != "" {
		if r, ok := d.p.IntentRank(c.Intent); ok {
			v.Rank = r
		} else {
			d.step("intent", "undeclared", who+" declares intent "+string(c.Intent)+", which the policy does not declare: it ranks 0")
		}
	}
	if c.Motivation.Kind != "" {
		seen = d.trustMotivation(v, subject, who, seen)
	}
	if !seen.Equal(c.Expires) {
		v.SeenExpires, v.ExpiresOverridden = seen, true
	}
}

// trustMotivation is trust for v's motivation: it removes one subject may not assert, gives the
// claim the motivation's urgency and lifetimes otherwise, and returns the expiry conditions see
// (seen, bounded by the lifetimes of a motivation that counts).
func (d *decision) trustMotivation(v *view, subject *policy.Actor, who string, seen time.Time) time.Time {
	c := &v.Claim
	u := &d.p.Unknown
	subjName := ""
	if subject != nil {
		subjName = subject.Name
	}
	m := d.p.Motivations[c.Motivation.Kind]
	if m == nil && subject == nil {
		// Conditions read the kind even when the policy does not declare it (claim.motivation != ""):
		// an identity no actor vouches for gets nothing from it either.
		d.step("trust", "not counted", fmt.Sprintf("%s declares motivation %s, which the policy does not declare; %s is no actor the policy vouches for, so the declaration is not counted: the claim is treated as having no motivation",
			who, c.Motivation.String(), d.unknownName(v)))
		c.Motivation = core.Motivation{}
		v.Downgraded = true
		return seen
	}
	if m == nil {
		d.step("motivation", "undeclared", who+" declares motivation "+c.Motivation.Kind+", which the policy does not declare: it carries no urgency")
		return seen
	}
	may := m.MayAssert(subjName)
	if subject == nil {
		may = u.MayAssertMotivation(m)
	}
	if !may {
		var detail string
		if subject != nil {
			detail = fmt.Sprintf("%s asserts motivation %s, but %s may not assert it (trusted: %s); the claim is treated as having no motivation",
				who, c.Motivation.String(), subjName, strings.Join(m.AssertedBy, ", "))
		} else {
			trusted := "unknown_actors: " + motivationsMay(u)
			if m.AssertedBy != nil {
				trusted = "only " + strings.Join(m.AssertedBy, ", ") + " may: asserted_by"
			}
			detail = fmt.Sprintf("%s asserts motivation %s, which is not one an unknown actor may declare (%s); %s is no actor the policy vouches for, so the declaration is not counted: the claim is treated as having no motivation",
				who, c.Motivation.String(), trusted, d.unknownName(v))
		}
		// The claim keeps the asserted motivation's lifetime: asserting what one may not must never
		// buy a longer stay than asserting it honestly would (without this, a downgraded claim has
		// no expiry and a winning one is adopted into Git for good). Conditions still see the
		// expiry it would have had without the motivation (seen), so the lifetime buys nothing
		// there either. Git's claim does not expire.
		if !v.Git {
			if bounded, _ := boundLifetime(c, m); bounded {
				detail += fmt.Sprintf(", but it is still bounded by the lifetime of motivation %s (%s): it expires at %s",
					m.Name, lifetimeText(m), fmtTime(c.Expires))
			}
		}
		outcome := "downgraded"
		if subject == nil {
			outcome = "not counted"
		}
		d.step("trust", outcome, detail)
		c.Motivation = core.Motivation{}
		v.Downgraded = true
		return seen
	}
	v.Urgency = m.Urgency
	if v.Git {
		return seen // Git's claim does not expire: lifetimes bound live claims
	}
	if _, capped := boundLifetime(c, m); capped {
		d.step("lifetime", "capped", fmt.Sprintf("%s's claim is capped at the %s maximum lifetime of motivation %s: it expires at %s",
			who, fmtDuration(m.MaxLifetime), m.Name, fmtTime(c.Expires)))
	}
	// The motivation counts, so its lifetimes shape the expiry conditions see too.
	sc := core.Claim{At: c.At, Expires: seen}
	boundLifetime(&sc, m)
	return sc.Expires
}

// unknownName names, for an explanation, the identity no actor vouches for behind v (the
// sentence has named the claim already).
func (d *decision) unknownName(v *view) string {
	if v.Git {
		return "its author " + v.Claim.Actor.Identity.ID
	}
	return "the identity"
}

// intentsMay says which intents unknown actors may declare.
func intentsMay(u *policy.UnknownActors) string {
	if len(u.Intents) == 0 {
		return "none but " + string(u.DefaultIntent())
	}
	return "only " + intentList(u.Intents) + " (and " + string(u.DefaultIntent()) + ")"
}

// motivationsMay says which motivations unknown actors may declare.
func motivationsMay(u *policy.UnknownActors) string {
	if len(u.Motivations) == 0 {
		return "none"
	}
	return "only " + strings.Join(u.Motivations, ", ")
}

// boundLifetime bounds c's expiry by m's lifetimes: a claim stating no expiry gets the default
// lifetime, and none may outlast the maximum. bounded reports whether c now expires, capped whether
// the maximum cut it short.
func boundLifetime(c *core.Claim, m *policy.Motivation) (bounded, capped bool) {
	if c.Expires.IsZero() && m.DefaultLifetime > 0 {
		c.Expires = c.At.Add(m.DefaultLifetime)
	}
	if m.MaxLifetime > 0 && (c.Expires.IsZero() || c.Expires.After(c.At.Add(m.MaxLifetime))) {
		c.Expires = c.At.Add(m.MaxLifetime)
		capped = true
	}
	return !c.Expires.IsZero() && (m.DefaultLifetime > 0 || m.MaxLifetime > 0), capped
}

// lifetimeText names a motivation's lifetimes, e.g. "default 4h, at most 12h".
func lifetimeText(m *policy.Motivation) string {
	var parts []string
	if m.DefaultLifetime > 0 {
		parts = append(parts, "default "+fmtDuration(m.DefaultLifetime))
	}
	if m.MaxLifetime > 0 {
		parts = append(parts, "at most "+fmtDuration(m.MaxLifetime))
	}
	return strings.Join(parts, ", ")
}

// activeLive returns the live claims still in the contest.
func (d *decision) activeLive() []*view {
	out := d.buf[:0]
	for _, v := range d.live {
		if v.status == active {
			out = append(out, v)
		}
	}
	d.buf = out
	return out
}

// changes reports whether v would change Git's value.
func (d *decision) changes(v *view) bool {
	return d.git == nil || !v.Claim.Value.Equal(d.git.Claim.Value)
}

// fieldCondition is e (owner_when) for the field, from Input.Conditions when it keeps it. Errors
// are not kept: they are explained each time.
func (d *decision) fieldCondition(e *policy.Expr) (bool, error) {
	m := d.in.Conditions
	if m == nil || !e.ReadsOnlyFieldAndGit() {
		return e.Bool(d.p, d.env(nil, nil))
	}
	if v, ok := m.Condition(e, d.in.Field); ok {
		return v, nil
	}
	v, err := e.Bool(d.p, d.env(nil, nil))
	if err == nil {
		m.KeepCondition(e, d.in.Field, v)
	}
	return v, err
}

func (d *decision) env(c, o *view) policy.Env {
	e := policy.Env{Field: d.in.Field, Now: d.in.Now, Git: d.in.Lookup, Cache: &d.cache}
	if c != nil {
		e.Claim = &c.ClaimView
	}
	if o != nil {
		e.Other = &o.ClaimView
	}
	return e
}

// vetoChecks applies immutability, writer lists, confinement and bounds to every live claim.
func (d *decision) vetoChecks() {
	fr := d.fr
	live := d.activeLive()
	var confinedHit []string
	for _, v := range live {
		if v.actor == nil || !v.actor.Confined || !d.changes(v) {
			continue
		}
		if fr == nil || !slices.Contains(fr.Writers, v.actor.Name) {
			v.status, v.vetoBy = vetoed, "confined"
			confinedHit = append(confinedHit, v.label)
		}
	}
	if confinedHit != nil {
		d.step("confined", "vetoed", strings.Join(confinedHit, ", ")+" may only write fields that list it as a writer (its musculature); this field does not, so the claim is vetoed")
		live = d.activeLive()
	}
	if fr != nil && fr.Immutable {
		var hit []string
		for _, v := range live {
			if d.changes(v) {
				v.status, v.vetoBy = vetoed, "immutable"
				hit = append(hit, v.label+" ("+valueOf(v)+")")
			}
		}
		if hit != nil {
			d.step("immutable", "vetoed", "the field is part of the immutable skeleton ("+fr.Name+"): only a reviewed change to Git may alter it; vetoed "+strings.Join(hit, ", "))
		} else {
			others := "no live claim"
			if confinedHit != nil {
				others = "no other live claim"
			}
			d.step("immutable", "passed", "the field is part of the immutable skeleton ("+fr.Name+"); "+others+" tries to change it")
		}
		live = d.activeLive()
	}
	if fr != nil && fr.Writers != nil {
		var hit []string
		for _, v := range live {
			if d.changes(v) && !slices.Contains(fr.Writers, v.Claim.Actor.Name) {
				v.status, v.vetoBy = vetoed, "writers"
				hit = append(hit, v.label)
			}
		}
		allowed := "only " + strings.Join(fr.Writers, ", ") + " (and Git) may write it"
		if hit != nil {
			d.step("writers", "vetoed", allowed+"; vetoed "+strings.Join(hit, ", "))
		} else {
			d.step("writers", "passed", allowed+"; every claim comes from an allowed writer")
		}
		live = d.activeLive()
	}
	if fr == nil || (fr.Min == nil && fr.Max == nil) {
		return
	}
	lo, hi, loOK, hiOK, err := d.bounds()
	if err != nil {
		d.step("bounds", "error", "the bounds could not be evaluated ("+err.Error()+"); claims are not checked against them")
		return
	}
	bk := boundsKey{fr, lo, hi, loOK, hiOK}
	desc, ok := d.a.boundsTexts[bk]
	if !ok {
		desc = boundsText(fr, lo, hi, loOK, hiOK)
		if len(d.a.boundsTexts) < maxBoundsTexts {
			d.a.boundsTexts[bk] = desc
		}
	}
	var hit []string
	for _, v := range live {
		if !d.changes(v) {
			continue
		}
		n, err := strconv.ParseFloat(v.Claim.Value.JSON(), 64)
		if err != nil {
			if loOK || hiOK {
				v.status, v.vetoBy = vetoed, "bounds"
				hit = append(hit, v.label+" wants "+valueOf(v)+", which is not a number")
			}
			continue
		}
		switch {
		case loOK && n < lo:
			v.status, v.vetoBy = vetoed, "bounds"
			hit = append(hit, v.label+" wants "+valueOf(v)+", below the minimum "+fmtNum(lo))
		case hiOK && n > hi:
			v.status, v.vetoBy = vetoed, "bounds"
			hit = append(hit, v.label+" wants "+valueOf(v)+", above the maximum "+fmtNum(hi))
		}
	}
	switch {
	case hit != nil:
		d.step("bounds", "vetoed", desc+"; vetoed: "+strings.Join(hit, "; "))
	case len(live) == 0:
		d.step("bounds", "passed", desc+"; no live claim to check")
	default:
		d.step("bounds", "passed", desc+"; every claim is within them")
	}
}

func (d *decision) bounds() (lo, hi float64, loOK, hiOK bool, err error) {
	env := d.env(nil, nil)
	if d.fr.Min != nil {
		if lo, loOK, err = d.fr.Min.Number(d.p, env); err != nil {
			return
		}
	}
	if d.fr.Max != nil {
		hi, hiOK, err = d.fr.Max.Number(d.p, env)
	}
	return
}

func boundsText(fr *policy.FieldRule, lo, hi float64, loOK, hiOK bool) string {
	part := func(name string, e *policy.Expr, n float64, ok bool) string {
		if e == nil {
			return ""
		}
		if !ok {
			return name + " " + e.Source + " is unknown (Git does not hold it), so it is not enforced"
		}
		s := name + " " + fmtNum(n)
		if src := e.Source; src != fmtNum(n) {
			s += " (from " + src + ")"
		}
		return s
	}
	var parts []string
	if s := part("minimum", fr.Min, lo, loOK); s != "" {
		parts = append(parts, s)
	}
	if s := part("maximum", fr.Max, hi, hiOK); s != "" {
		parts = append(parts, s)
	}
	return "bounds: " + strings.Join(parts, ", ")
}

// freezes defers changes that active freeze windows do not allow.
func (d *decision) freezes() {
	for i, fz := range d.p.Freezes {
		if !has(d.oi.freezes, i) || !pathMatch(fz.Fields, d.in.Field) {
			continue
		}
		start, end, isActive := fz.Window(d.in.Now)
		rule := d.a.texts.freezeName[i]
		if !isActive {
			if start.IsZero() {
				d.step(rule, "not active", "the freeze is over")
			} else {
				d.noteRecheck(start)
				ft := d.a.nextFreeze[fz]
				if !ft.start.Equal(start) || ft.text == "" {
					ft = freezeText{start, "the next freeze runs from " + fmtTime(start) + " to " + fmtTime(end)}
					d.a.nextFreeze[fz] = ft
				}
				d.step(rule, "not active", ft.text)
			}
			continue
		}
		d.noteRecheck(end)
		var admitted, held []string
		for _, v := range d.activeLive() {
			if !d.changes(v) {
				continue
			}
			if fz.IntentAllowed(v.Claim.Intent) {
				admitted = append(admitted, v.label+" (intent "+string(v.Claim.Intent)+" is allowed)")
				continue
			}
			if fz.AllowWhen != nil {
				ok, err := fz.AllowWhen.Bool(d.p, d.env(v, nil))
				if err != nil {
					d.step(rule, "error", "allow_when failed for "+v.label+": "+err.Error()+"; the change is deferred")
				} else if ok {
					admitted = append(admitted, v.label+" (allow_when "+fz.AllowWhen.Source+" holds)")
					continue
				}
			}
			v.status, v.vetoBy = deferred, rule
			held = append(held, v.label+" ("+valueOf(v)+")")
		}
		detail := "the freeze is active until " + fmtTime(end)
		outcome := "active"
		if held != nil {
			outcome = "deferred"
			detail += "; deferred until it ends: " + strings.Join(held, ", ")
		}
		if admitted != nil {
			detail += "; admitted: " + strings.Join(admitted, ", ")
		}
		if held == nil && admitted == nil {
			detail += "; no claim changes the field"
		}
		d.step(rule, outcome, detail)
	}
}

// dependentsText lists what depends on the field, the first ten with how.
func dependentsText(ds []core.Dependent) string {
	const shown = 10
	var b strings.Builder
	fmt.Fprintf(&b, "%d field(s) depend on this one: ", len(ds))
	for i, dep := range ds {
		if i == shown {
			fmt.Fprintf(&b, "; and %d more", len(ds)-shown)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(dep.Field.String())
		if dep.Via != "" {
			b.WriteString(" (" + dep.Via + ")")
		}
	}
	return b.String()
}
