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
	out, _, err := r.ProposeIf(ctx, snap, id, claims, func([]Proposed) bool { return true })
	return out, err
}

// Judge is Propose that records nothing: the verdicts the claims would get, for a dry run (an
// admission request with dryRun set, which the API server will not persist either).
func (r *Reconciler) Judge(ctx context.Context, snap Snapshot, id string, claims []core.Claim) ([]Proposed, error) {
	out, _, err := r.ProposeIf(ctx, snap, id, claims, nil)
	return out, err
}

// maxJudgements bounds how often a proposal, or a drift event, is judged again because another
// recorded on one of its fields between its judgement and its record: each round trip lost means
// another caller won, so a field argued over this hard is refused with ErrConflict, not spun on.
const maxJudgements = 8

// ProposeIf is Propose for a caller that decides, from the verdicts, whether the accepted claims
// are recorded at all (an admission review is allowed or denied as a whole, so the accepted fields
// of a denied write are not claims); decide nil records nothing (Judge). recorded says whether
// the accepted claims now stand. decide is asked again each time the claims are judged again
// (below), so it must answer from the verdicts it is given alone.
//
// Proposals are judged outside the Reconciler's lock, which a drift event holds while it writes to
// Git: a proposal must not wait behind a push. What keeps two judgements from both winning a field
// that only one may win is a compare-and-swap: the fields' state versions (driftstate.Version) are
// read before their standing claims, and the record goes in only if every field is still at that
// version (driftstate.Batch.Expect). Otherwise another proposal, admission review or drift event
// recorded on one of them meanwhile, and the claims are judged again on what stands now. A drift
// event records its verdicts under the same check (Ingest), so it either saw an accepted proposal
// or is judged again with it standing.
func (r *Reconciler) ProposeIf(ctx context.Context, snap Snapshot, id string, claims []core.Claim, decide func([]Proposed) bool) (_ []Proposed, recorded bool, _ error) {
	if snap.Policy == nil {
		return nil, false, errors.New("reconcile: no policy")
	}
	if id == "" {
		return nil, false, errors.New("propose: the proposal has no id")
	}
	seen := map[core.Field]bool{}
	fields := make([]core.Field, 0, len(claims))
	for _, c := range claims {
		if seen[c.Field] {
			return nil, false, fmt.Errorf("propose: %s is proposed twice; one claim per field", c.Field)
		}
		seen[c.Field] = true
		fields = append(fields, c.Field)
	}
	memo, lister := r.memo()
	fresh := false // read the drift state, not the memo: it was found out of date this review
	for attempt := 1; ; attempt++ {
		now := r.now()
		since := now.Add(-snap.Policy.Oscillation.Window)
		var expect map[core.Field]int64
		var entries map[core.Field]*memoEntry
		remembered := false // some field was judged from the memo, at a version not read now
		var err error
		if memo != nil {
			expect, entries = make(map[core.Field]int64, len(fields)), make(map[core.Field]*memoEntry, len(fields))
			for _, f := range fields {
				e := (*memoEntry)(nil)
				if !fresh {
					e = memo.get(f, since)
				}
				if e != nil {
					memo.hits.Add(1)
					remembered = true
				} else if e, err = memo.load(ctx, r.State, lister, f, since); err != nil {
					return nil, false, err
				}
				entries[f], expect[f] = e, e.version
			}
		} else if expect, err = r.versions(ctx, fields); err != nil {
			return nil, false, err
		}
		out, err := r.judgeProposed(ctx, snap, id, claims, now, entries)
		if err != nil {
			return nil, false, err
		}
		applied := false
		var taken []string
		goAhead := decide != nil && decide(out)
		if goAhead {
			applied, err = r.record(ctx, id, out, now, expect, &taken)
			if errors.Is(err, driftstate.ErrConflict) && attempt < maxJudgements {
				r.log().Debug("proposal judged again: a field it claims was written meanwhile", "proposal", id, "attempt", attempt, "error", err.Error())
				if memo != nil {
					memo.drop(fields...)
					fresh = true
				}
				continue
			}
			if err != nil {
				return nil, false, fmt.Errorf("proposal %s: %w", id, err)
			}
		}
		if !applied && remembered {
			// Nothing recorded, so no compare-and-swap checked what the memo held: the versions do.
			moved, err := r.moved(ctx, expect)
			if err != nil {
				return nil, false, err
			}
			if moved {
				memo.drop(fields...)
				fresh = true
				continue
			}
		}
		if applied && memo != nil {
			memo.wroteThrough(entries, expect, out, slices.Contains(taken, eventKey(EvidenceProposal, id)), since)
		}
		return out, goAhead && slices.ContainsFunc(out, func(p Proposed) bool { return p.Accepted }), nil
	}
}

// memo returns the Reconciler's FieldMemo, and what it reads claims through; nil when there is
// none or the State cannot list claims.
func (r *Reconciler) memo() (*FieldMemo, claimLister) {
	if r.Memo == nil {
		return nil, nil
	}
	cl, ok := r.State.(claimLister)
	if !ok {
		return nil, nil
	}
	return r.Memo, cl
}

// moved reports whether any field is no longer at the version expect holds.
func (r *Reconciler) moved(ctx context.Context, expect map[core.Field]int64) (bool, error) {
	for f, want := range expect {
		v, err := r.State.Version(ctx, f)
		if err != nil {
			return false, err
		}
		if v != want {
			return true, nil
		}
	}
	return false, nil
}

// versions reads the fields' state versions, for a judgement's compare-and-swap.
func (r *Reconciler) versions(ctx context.Context, fields []core.Field) (map[core.Field]int64, error) {
	out := make(map[core.Field]int64, len(fields))
	for _, f := range fields {
		v, err := r.State.Version(ctx, f)
		if err != nil {
			return nil, err
		}
		out[f] = v
	}
	return out, nil
}

func (r *Reconciler) judgeProposed(ctx context.Context, snap Snapshot, id string, claims []core.Claim, now time.Time, memo map[core.Field]*memoEntry) ([]Proposed, error) {
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
		v, err := r.judgeOn(ctx, snap, c.Field, []core.Claim{c}, now, memo[c.Field])
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
	return out, nil
}

// record records a proposal's accepted claims, their verdicts and timers, provided the fields are
// still at the versions expect holds (ErrConflict otherwise). applied is false when there was
// nothing to record (no claim accepted): then nothing checked the versions. taken receives the
// events the record took in (driftstate.Batch.Taken).
func (r *Reconciler) record(ctx context.Context, id string, judged []Proposed, now time.Time, expect map[core.Field]int64, taken *[]string) (applied bool, _ error) {
	// The proposal is recorded as an event: a proposal sent again under the same id records its
	// claims once.
	batch := driftstate.Batch{At: now, Events: []string{eventKey(EvidenceProposal, id)}, Expect: expect, Taken: taken}
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
		return false, nil
	}
	return true, r.State.Apply(ctx, batch)
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
