package reconcile

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/reconcile/driftstate"
)

// EvidenceProposal is the evidence source of a claim an actor proposed before making the change
// (the proposals API, parley propose): its event IDs hold the proposal's ID.
const EvidenceProposal = "proposal"

// Proposed is the verdict on one proposed change.
type Proposed struct {
	Claim   core.Claim
	Verdict core.Verdict
	// Accepted is true when the proposing actor's claim wins the field: the change may be made,
	// and the claim stands (until its expiry) so the event that follows is the claimed change.
	Accepted bool
	// Holder is the claim that holds the field instead, when the proposal is refused and
	// another claim (another actor, or Git) wins: who, why and until when.
	Holder *core.Claim
}

// Propose judges changes an actor asks to make before making them: each claim (one per field) is
// set against the field's standing live claims and Git's, as a drift event's claim would be, but
// nothing is written to Git. The accepted claims, their verdicts and timers are recorded durably
// (in one transaction, before Propose returns); a refused claim is not recorded as a claim, so it
// weighs on no later verdict. id names the proposal: it is the accepted claims' evidence.
func (r *Reconciler) Propose(ctx context.Context, snap Snapshot, id string, claims []core.Claim) ([]Proposed, error) {
	return r.propose(ctx, snap, id, claims, true)
}

// Judge is Propose that records nothing: the verdicts the claims would get, for a dry run (an
// admission request with dryRun set, which the API server will not persist either).
func (r *Reconciler) Judge(ctx context.Context, snap Snapshot, id string, claims []core.Claim) ([]Proposed, error) {
	return r.propose(ctx, snap, id, claims, false)
}

func (r *Reconciler) propose(ctx context.Context, snap Snapshot, id string, claims []core.Claim, record bool) ([]Proposed, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if snap.Policy == nil {
		return nil, errors.New("reconcile: no policy")
	}
	if id == "" {
		return nil, errors.New("propose: the proposal has no id")
	}
	seen := map[core.Field]bool{}
	for _, c := range claims {
		if seen[c.Field] {
			return nil, fmt.Errorf("propose: %s is proposed twice; one claim per field", c.Field)
		}
		seen[c.Field] = true
	}
	now := r.now()
	out := make([]Proposed, 0, len(claims))
	for _, c := range claims {
		if a := snap.Policy.ResolveActor(c.Actor.Identity); a != nil {
			c.Actor.Name = a.Name
		}
		one := []core.Claim{c}
		applyActorDefaults(snap.Policy, one)
		c = one[0]
		c.Evidence = core.Evidence{Source: EvidenceProposal, EventIDs: []string{id}}
		if c.At.IsZero() {
			c.At = now
		}
		v, err := r.judge(ctx, snap, c.Field, []core.Claim{c}, now)
		if err != nil {
			return nil, err
		}
		p := Proposed{Claim: c, Verdict: v}
		switch {
		case v.Winner != nil && v.Winner.Actor.Identity.Source == c.Actor.Identity.Source && v.Winner.Actor.Identity.ID == c.Actor.Identity.ID &&
			(v.Decision == core.DecisionYield || v.Decision == core.DecisionAdopt):
			p.Accepted = true
		case v.Winner != nil:
			w := *v.Winner
			p.Holder = &w
		}
		out = append(out, p)
	}
	if record {
		if err := r.record(ctx, id, out, now); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Record records the accepted claims of a proposal Judge judged, as Propose would have: for a
// caller that decides between judging and recording (an admission review is allowed or denied as
// a whole, so the accepted fields of a denied write are not claims).
func (r *Reconciler) Record(ctx context.Context, id string, judged []Proposed) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.record(ctx, id, judged, r.now())
}

func (r *Reconciler) record(ctx context.Context, id string, judged []Proposed, now time.Time) error {
	// The proposal is recorded as an event: a proposal sent again under the same id records its
	// claims once.
	batch := driftstate.Batch{At: now, Events: []string{eventKey(EvidenceProposal, id)}}
	for _, p := range judged {
		if !p.Accepted {
			continue
		}
		batch.Claims = append(batch.Claims, p.Claim)
		batch.Verdicts = append(batch.Verdicts, driftstate.Record{Verdict: p.Verdict, At: now, Evidence: []string{eventKey(EvidenceProposal, id)},
			Note: "proposed and accepted; nothing is written to Git until the change is made"})
		batch.Timers = append(batch.Timers, timerFor(p.Verdict, now))
	}
	if len(batch.Claims) == 0 {
		return nil
	}
	return r.State.Apply(ctx, batch)
}

// asProposed completes the claims a drift event makes with what their actor proposed for the same
// field and value, still standing: the intent, motivation and expiry it declared when it asked.
// It returns the proposal each completed claim carries out, by index.
func asProposed(standing []core.Claim, fresh []core.Claim, now time.Time) map[int]string {
	out := map[int]string{}
	for i := range fresh {
		c := &fresh[i]
		for _, s := range slices.Backward(standing) {
			if s.Evidence.Source != EvidenceProposal || s.Field != c.Field || s.Actor.Identity.Source != c.Actor.Identity.Source ||
				s.Actor.Identity.ID != c.Actor.Identity.ID || !s.Value.Equal(c.Value) || (!s.Expires.IsZero() && !s.Expires.After(now)) {
				continue
			}
			if c.Intent == "" {
				c.Intent = s.Intent
			}
			if c.Motivation.IsZero() {
				c.Motivation = s.Motivation
			}
			if c.Expires.IsZero() {
				c.Expires = s.Expires
			}
			if len(s.Evidence.EventIDs) > 0 {
				out[i] = s.Evidence.EventIDs[0]
				c.Evidence.Proposal = out[i]
			}
			break
		}
	}
	return out
}

// Explain judges a field as it stands, with no new claim: the standing live claims against Git's.
// Nothing is recorded.
func (r *Reconciler) Explain(ctx context.Context, snap Snapshot, f core.Field) (core.Verdict, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if snap.Policy == nil {
		return core.Verdict{}, errors.New("reconcile: no policy")
	}
	return r.judge(ctx, snap, f, nil, r.now())
}

// Holders are a field's claims as they stand: Git's, and the live claims not closed.
type Holders struct {
	Field core.Field
	Git   *core.Claim
	Live  []core.Claim
}

// Claims lists, for the fields Git holds that match p (at most limit, in Git's order), who holds
// what: Git's claim and the standing live claims. more is true when more fields match.
func (r *Reconciler) Claims(ctx context.Context, snap Snapshot, p core.FieldPattern, limit int) (out []Holders, more bool, err error) {
	fields, err := snap.Git.Fields(p)
	if err != nil {
		return nil, false, err
	}
	if limit > 0 && len(fields) > limit {
		fields, more = fields[:limit], true
	}
	for _, f := range fields {
		h := Holders{Field: f}
		if c, ok, err := snap.gitClaim(f); err != nil {
			return nil, false, err
		} else if ok {
			h.Git = &c
		}
		if h.Live, err = r.State.Standing(ctx, f); err != nil {
			return nil, false, err
		}
		out = append(out, h)
	}
	return out, more, nil
}
