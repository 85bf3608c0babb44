package app

import (
	"context"
	"sync"
	"time"
)

// largeReview is the body size from which an admission review takes the large-review lane. The
// API server's reviews of ordinary writes are a few kilobytes (a Deployment and its oldObject:
// 5 to 30 kB); one of 256 KiB or more is a big ConfigMap, a CRD instance, or someone making
// Parley work: a Deployment whose nodeSelector has 90,000 keys (2.8 MB) costs about 0.4 s of CPU
// to read and count, before it is found to be past the field budget.
const largeReview = 256 << 10

// lane lets one large review be read and judged at a time, and after each stays closed for
// laneRest times as long as it took, so that any number of them sent back to back (by anyone
// allowed to update an object: the API server forwards them all) take at most a sixteenth of one
// core from the ordinary reviews the cluster's writes wait on. Its zero value is ready.
type lane struct {
	once sync.Once
	slot chan struct{}
}

// laneRest is how many times a large review's own time the lane rests after it, at most
// laneMaxRest: 15 keeps the lane's work to a sixteenth of the time. Measured with bench/attack's
// bigmap (two connections of 2.8 MB reviews, each about 0.4 s of CPU): without the rest serve
// spent 1.4 cores and the ordinary reviews' p99 went 2.7x the quiet run's. The rest, not the
// review's cost, decides what such a stream costs: once counting a 90,000-key review fell from
// 0.4 s to 35 ms, a rest of 3 let ten times as many through and they still held a quarter of a
// core (3.4 s of serve's 11 s in 15 s of the full mix, issue 34); 7 halved that, and the stream
// was still 1.5 s of serve's 7.2 s under the full mix (its reading: four passes over 1.4 MB), the
// largest single share after the syscalls; 15 halves it again. A real large object (a ConfigMap
// of 300 kB) costs a few milliseconds, so its rest is under a tenth of a second: a cluster that
// updates big objects one after another waits that long between them, within the 2 s budget.
const (
	laneRest    = 15
	laneMaxRest = 2 * time.Second
)

// acquire waits for the lane until deadline or ctx's end and returns its release, or false when
// the lane did not come free in time. The release opens the lane after its rest; the timer that
// does it is the lane's, and owns nothing else.
func (l *lane) acquire(ctx context.Context, deadline time.Time) (release func(), ok bool) {
	l.once.Do(func() { l.slot = make(chan struct{}, 1) })
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	select {
	case l.slot <- struct{}{}:
		start := time.Now()
		return func() {
			time.AfterFunc(min(laneRest*time.Since(start), laneMaxRest), func() { <-l.slot })
		}, true
	case <-ctx.Done():
		return nil, false
	}
}
