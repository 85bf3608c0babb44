package app

import (
	"context"
	"sync"
	"time"

	"github.com/parleyhq/parley/core"
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
	obsLost      = "lost"       // confirmed, but the queue refused it
)

// defaultConfirmWithin is how long an admitted write waits for a review that confirms it.
const defaultConfirmWithin = 30 * time.Minute

// maxPending bounds the writes held at once; defaultMaxPendingBytes the reviews they keep (a
// review may be up to 4 MiB: the count alone would let a cluster of large objects hold gigabytes).
const (
	maxPending             = 10000
	defaultMaxPendingBytes = 64 << 20
)

// pendingWrite is an admitted write not yet seen stored.
type pendingWrite struct {
	uid    string
	body   []byte    // the review as received: the delivery's body once confirmed
	at     time.Time // when it was admitted
	baseRV string    // the resourceVersion the write replaced ("" for a create)
	values map[string]core.Value
}

// pendingWrites are the held writes, by cluster and object.
type pendingWrites struct {
	mu        sync.Mutex
	byObject  map[pendingKey][]pendingWrite
	n         int
	bytes     int64
	nextSweep time.Time
}

type pendingKey struct {
	cluster string
	object  core.Field
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

// hold keeps an admitted write until a later review confirms it.
func (h *Admission) hold(cluster string, adm events.Admission, body []byte, at time.Time) {
	p := &h.pending
	p.mu.Lock()
	limit := h.MaxPendingBytes
	if limit <= 0 {
		limit = defaultMaxPendingBytes
	}
	if p.n >= maxPending || p.bytes+int64(len(body)) > limit {
		p.mu.Unlock()
		h.countObservation(cluster, obsOverflow, 1)
		h.log().Warn("admitted write not held: too many pending", "cluster", cluster, "uid", adm.UID, "object", adm.Object.String())
		return
	}
	if p.byObject == nil {
		p.byObject = map[pendingKey][]pendingWrite{}
	}
	values := make(map[string]core.Value, len(adm.Changes))
	for _, o := range adm.Changes {
		values[o.Field.Path] = o.Value
	}
	k := pendingKey{cluster, adm.Object}
	p.byObject[k] = append(p.byObject[k], pendingWrite{uid: adm.UID, body: body, at: at, baseRV: adm.ResourceVersion, values: values})
	p.n++
	p.bytes += int64(len(body))
	p.mu.Unlock()
	h.countObservation(cluster, obsHeld, 1)
}

// settle decides the writes held for the object of a new review, by its oldObject (what is
// stored now), and drops those held past the window. Confirmed writes are queued.
func (h *Admission) settle(ctx context.Context, cluster string, adm events.Admission, now time.Time) {
	p := &h.pending
	var confirmed []pendingWrite
	notLanded := 0
	expired := map[string]int{}
	p.mu.Lock()
	if adm.Old != nil && adm.ResourceVersion != "" {
		k := pendingKey{cluster, adm.Object}
		var keep []pendingWrite
		for _, w := range p.byObject[k] {
			switch {
			case w.uid == adm.UID || w.baseRV == adm.ResourceVersion:
				// The object has not moved since the held write's base: it may still be on its
				// way to storage. Nothing is decided.
				keep = append(keep, w)
			case stored(w.values, adm.Old):
				confirmed = append(confirmed, w)
			default:
				notLanded++
			}
		}
		p.replace(k, keep)
	}
	if !now.Before(p.nextSweep) {
		window := h.confirmWithin()
		p.nextSweep = now.Add(window / 10)
		for k, ws := range p.byObject {
			var keep []pendingWrite
			for _, w := range ws {
				if now.Sub(w.at) > window {
					expired[k.cluster]++
					continue
				}
				keep = append(keep, w)
			}
			p.replace(k, keep)
		}
	}
	p.mu.Unlock()

	h.countObservation(cluster, obsNotLanded, notLanded)
	for c, n := range expired {
		h.countObservation(c, obsExpired, n)
	}
	queued := false
	for _, w := range confirmed {
		_, err := h.Queue.Put(ctx, store.Delivery{Source: events.SourceAdmission, ID: w.uid, Event: webhooks.EventName, Body: w.body,
			ReceivedAt: w.at, Scope: cluster})
		if err != nil {
			h.countObservation(cluster, obsLost, 1)
			h.log().Error("confirmed admitted write not queued", "cluster", cluster, "uid", w.uid, "object", adm.Object.String(), "error", err.Error())
			continue
		}
		h.countObservation(cluster, obsConfirmed, 1)
		queued = true
	}
	if queued && h.Notify != nil {
		h.Notify()
	}
}

// replace sets the writes held for k to keep (a subset), accounting for the dropped ones.
// Called with mu held.
func (p *pendingWrites) replace(k pendingKey, keep []pendingWrite) {
	for _, w := range p.byObject[k] {
		p.n--
		p.bytes -= int64(len(w.body))
	}
	for _, w := range keep {
		p.n++
		p.bytes += int64(len(w.body))
	}
	if len(keep) == 0 {
		delete(p.byObject, k)
	} else {
		p.byObject[k] = keep
	}
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
