package app

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/reconcile/driftstate"
	"github.com/parleyhq/parley/reconcile/events"
	"github.com/parleyhq/parley/webhooks"
	"github.com/parleyhq/parley/webhooks/store"
)

// Admission as an observation source (observe = true, docs/admission.md). On a cluster without an
// audit webhook the admitted writes are the observations, but admitting a write is not seeing it
// land: another webhook, an admission policy or a conflict in storage may still refuse it. So an
// admitted write is held as pending until a later review of the same object shows it stored: the
// API server sends, as that review's oldObject, what is stored now. If the object moved on (its
// resourceVersion is not the one the held write replaced) and holds the written values, the write
// landed, and its review goes to the delivery queue to be judged by the drift loop exactly as an
// audit event (claims built by the same code, the same verdicts, gates and timers). If the object
// moved on without them, the write did not land as admitted (refused later, or overwritten unseen):
// it is dropped. One still pending after AdmissionQueue's window expires and is dropped.
// Each outcome is counted in parley_admission_observations_total.
//
// The held writes live in the drift state of the cluster's repository (driftstate.Hold), not in
// this process: whichever replica answers the confirming review decides them, and a restart loses
// none. Deciding takes them out of the state in the transaction that queues the confirmed ones
// (driftstate.TakeHeld), so a write two replicas see confirmed at once is queued once, and one the
// queue refuses stays held for the next review.

// AdmissionQueue is where confirmed admitted writes go: the delivery store the event receivers
// put their events in, judged by the drift loop's workers.
type AdmissionQueue interface {
	Put(ctx context.Context, d store.Delivery) (inserted bool, err error)
}

// Outcomes of a held write, the outcome label of parley_admission_observations_total.
const (
	obsHeld      = "held"       // admitted and held until confirmed
	obsConfirmed = "confirmed"  // a later review showed it stored: queued for the drift loop
	obsNotLanded = "not-landed" // a later review showed the object moved on without it
	obsExpired   = "expired"    // nothing confirmed it within the window
	obsOverflow  = "overflow"   // not held: too many writes pending
	obsLost      = "lost"       // not held, or confirmed and not queued, because the drift state or the queue failed (a confirmed one stays held for the next review)
)

// defaultConfirmWithin is how long an admitted write waits for a review that confirms it.
const defaultConfirmWithin = 30 * time.Minute

// maxPending bounds the writes a cluster holds at once; defaultMaxPendingBytes the reviews they
// keep (a review may be up to 4 MiB: the count alone would let a cluster of large objects hold
// gigabytes). Both are checked against the drift state, so they bound every replica together.
const (
	maxPending             = 10000
	defaultMaxPendingBytes = 64 << 20
)

// holdTimeout bounds the write that holds an admitted write. It runs after the review is judged,
// under a context of its own: the write goes ahead whether or not the API server still waits for
// the answer (failurePolicy: Ignore), so it is held even then.
const holdTimeout = 5 * time.Second

// pendingWrites is this process's part of the held writes, which live in the drift state: when it
// last swept each state for expired ones.
type pendingWrites struct {
	mu        sync.Mutex
	nextSweep map[*driftstate.DB]time.Time
}

func (h *Admission) confirmWithin() time.Duration {
	if h.ConfirmWithin > 0 {
		return h.ConfirmWithin
	}
	return defaultConfirmWithin
}

func (h *Admission) countObservation(cluster, outcome string, n int) {
	if h.Metrics != nil && n > 0 {
		h.Metrics.observations.WithLabelValues(cluster, outcome).Add(float64(n))
	}
}

// heldState is the drift state a cluster's held writes live in: its repository's.
func (h *Admission) heldState(ctx context.Context, cluster string) (*driftstate.DB, error) {
	repo := h.Routes[cluster].Repository
	if repo == "" {
		repo = h.Drift.Repository
	}
	if repo == "" {
		return nil, errors.New("the cluster routes to no repository (no default gitops_repository is configured)")
	}
	rd, err := h.Drift.repo(ctx, repo, h.Drift.branchOf(repo))
	if err != nil {
		return nil, err
	}
	return rd.state, nil
}

// hold keeps an admitted write until a later review confirms it.
func (h *Admission) hold(cluster string, adm events.Admission, body []byte, at time.Time) {
	ctx, cancel := context.WithTimeout(context.Background(), holdTimeout)
	defer cancel()
	limit := h.MaxPendingBytes
	if limit <= 0 {
		limit = defaultMaxPendingBytes
	}
	held, err := func() (bool, error) {
		db, err := h.heldState(ctx, cluster)
		if err != nil {
			return false, err
		}
		return db.Hold(ctx, driftstate.Held{Cluster: cluster, Object: adm.Object.String(), UID: adm.UID, BaseRV: adm.ResourceVersion, At: at, Body: body},
			driftstate.HeldLimits{Count: maxPending, Bytes: limit})
	}()
	switch {
	case errors.Is(err, driftstate.ErrHeldAlready):
		// Another replica answered the same review and holds it: one write, counted there.
	case err != nil:
		h.countObservation(cluster, obsLost, 1)
		h.log().Error("admitted write not held", "cluster", cluster, "uid", adm.UID, "object", adm.Object.String(), "error", err.Error())
	case !held:
		h.countObservation(cluster, obsOverflow, 1)
		h.log().Warn("admitted write not held: too many pending", "cluster", cluster, "uid", adm.UID, "object", adm.Object.String())
	default:
		h.countObservation(cluster, obsHeld, 1)
	}
}

// settle decides the writes held for the object of a new review, by its oldObject (what is
// stored now), and drops those held past the window. Confirmed writes are queued.
func (h *Admission) settle(ctx context.Context, cluster string, adm events.Admission, now time.Time) {
	db, err := h.heldState(ctx, cluster)
	if err != nil {
		h.log().Error("held admitted writes not decided", "cluster", cluster, "uid", adm.UID, "error", err.Error())
		return
	}
	h.sweep(ctx, db, now)
	if adm.Old == nil || adm.ResourceVersion == "" {
		return // a create: nothing stored to confirm anything by
	}
	object := adm.Object.String()
	// A held write on the object's current base (or this review's own) may still be on its way
	// to storage: HasHeld and TakeHeld leave it. Most reviews find nothing and stop at the read.
	if has, err := db.HasHeld(ctx, cluster, object, adm.UID, adm.ResourceVersion); err != nil || !has {
		if err != nil {
			h.log().Error("held admitted writes not decided", "cluster", cluster, "uid", adm.UID, "object", object, "error", err.Error())
		}
		return
	}
	var confirmed, notLanded int
	err = db.TakeHeld(ctx, cluster, object, adm.UID, adm.ResourceVersion, func(ws []driftstate.Held) error {
		confirmed, notLanded = 0, 0
		for _, w := range ws {
			// The held review is decoded again for the values it wrote: it decoded when it was
			// held, and only decided writes pay for it.
			was, err := events.DecodeAdmissionReview(w.Body, w.At)
			if err != nil || !stored(writtenValues(was), adm.Old) {
				notLanded++
				continue
			}
			if _, err := h.Queue.Put(ctx, store.Delivery{Source: events.SourceAdmission, ID: w.UID, Event: webhooks.EventName, Body: w.Body,
				ReceivedAt: w.At, Scope: cluster}); err != nil {
				// Nothing is taken: the writes stay held, and the next review of the object tries
				// again (a delivery queued before this one failed is queued once: Put keeps one
				// per ID, and the drift state takes an event in once).
				return fmt.Errorf("queue %s: %w", w.UID, err)
			}
			confirmed++
		}
		return nil
	})
	if err != nil {
		h.countObservation(cluster, obsLost, 1)
		h.log().Error("confirmed admitted writes not queued: kept held", "cluster", cluster, "object", object, "error", err.Error())
		return
	}
	h.countObservation(cluster, obsNotLanded, notLanded)
	h.countObservation(cluster, obsConfirmed, confirmed)
	if confirmed > 0 && h.Notify != nil {
		h.Notify()
	}
}

// sweep drops, once every tenth of the window, the writes held in db past the window. Every
// replica sweeps; each counts what it removed.
func (h *Admission) sweep(ctx context.Context, db *driftstate.DB, now time.Time) {
	p := &h.pending
	window := h.confirmWithin()
	p.mu.Lock()
	if now.Before(p.nextSweep[db]) {
		p.mu.Unlock()
		return
	}
	if p.nextSweep == nil {
		p.nextSweep = map[*driftstate.DB]time.Time{}
	}
	p.nextSweep[db] = now.Add(window / 10)
	p.mu.Unlock()
	expired, err := db.ExpireHeld(ctx, now.Add(-window))
	if err != nil {
		h.log().Error("expired admitted writes not dropped", "error", err.Error())
		return
	}
	for c, n := range expired {
		h.countObservation(c, obsExpired, n)
	}
}

// writtenValues are the values an admitted write sets, by path (a removed field: absent).
func writtenValues(adm events.Admission) map[string]core.Value {
	values := make(map[string]core.Value, len(adm.Changes))
	for _, o := range adm.Changes {
		values[o.Field.Path] = o.Value
	}
	return values
}

// stored reports whether the object now holds every value the write set (a removed field: absent).
func stored(values map[string]core.Value, now map[string]core.Value) bool {
	for path, v := range values {
		got, ok := now[path]
		if v.Absent() {
			if ok {
				return false
			}
			continue
		}
		if !ok || !got.Equal(v) {
			return false
		}
	}
	return true
}
