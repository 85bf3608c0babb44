package app

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
)

// WorkLane is the share of serve's processors lent to work nobody waits on in a write path:
// judging a Terraform plan, a pull request's files, a large admission review, a batch from a
// cloud's audit pipeline. It lets at most all processors but one do such work at once, so that the
// admission webhook, which every covered write in the cluster waits for, always finds one free.
//
// Why: Go's scheduler has no priorities. With two processors, two plans being decoded (or a
// plan and a pull request's Terraform) held both, and an ordinary admission review that arrived
// waited for one of them to be preempted, up to the scheduler's 10 ms time slice, several times
// over while the review was read, judged and answered: under bench/attack's full mix that, more
// than the work itself, was the reviews' p99. A goroutine waiting for the lane uses no CPU.
//
// The lane bounds CPU, so only CPU-bound sections take it: never a network read or a call to
// GitHub, which would hold a processor's share while it waits on someone else.
type WorkLane struct {
	slots chan struct{}
	// held and peak count the sections inside, for tests and metrics.
	held, peak atomic.Int64
}

// NewWorkLane lends n processors; n < 1 lends runtime.GOMAXPROCS(0)-1, at least one.
func NewWorkLane(n int) *WorkLane {
	if n < 1 {
		n = max(1, runtime.GOMAXPROCS(0)-1)
	}
	return &WorkLane{slots: make(chan struct{}, n)}
}

// Do runs fn once the lane has room, and returns ctx's error without running it if ctx ends
// first. A nil lane runs fn at once: a handler built without one (a test, a CLI) lends nothing.
func (l *WorkLane) Do(ctx context.Context, fn func()) error {
	release, err := l.Acquire(ctx)
	if err != nil {
		return err
	}
	defer release()
	fn()
	return nil
}

// Acquire waits for room in the lane, or for ctx's end (its error), and returns the release,
// which the caller must call once its CPU-bound section ends. A nil lane has room at once.
func (l *WorkLane) Acquire(ctx context.Context) (release func(), _ error) {
	if l == nil {
		return func() {}, nil
	}
	select {
	case l.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	n := l.held.Add(1)
	for p := l.peak.Load(); n > p && !l.peak.CompareAndSwap(p, n); p = l.peak.Load() {
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			l.held.Add(-1)
			<-l.slots
		})
	}, nil
}

// Size is how many sections may run at once.
func (l *WorkLane) Size() int { return cap(l.slots) }

// Peak is the most sections that ran at once since the lane was made.
func (l *WorkLane) Peak() int { return int(l.peak.Load()) }
