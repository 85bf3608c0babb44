package app

import (
	"fmt"
	"net/http"
	"runtime"
	"runtime/debug"
	"sync"
)

// warmStacks runs a request's CPU-heavy part on long-lived goroutines whose stacks have already
// grown, so that the request does not pay to grow one (issue 37).
//
// Why: Go's HTTP/2 server (the admission listener's: the API server speaks HTTP/2 to webhooks)
// starts a new goroutine for every request stream, with a small stack. Judging a review goes
// deep: encoding/json's decoder, the arbiter, and modernc's SQLite, whose transpiled C functions
// have frames of kilobytes. Each request's goroutine therefore grew its stack by copying, several
// doublings one after another: runtime.newstack and runtime.copystack were about 7% of serve's
// CPU under bench/admission at 500 reviews/s. GODEBUG's adaptivestackstart does not help: it
// sizes new stacks by the average over all goroutines scanned, mostly idle ones. A worker's stack
// keeps its size between jobs, except that the collector halves the stack of a goroutine using
// under a quarter of it, once per cycle: the worker then grows back by one copy, not several (its
// profiles show no growth under the workers at all). Measured (docs/benchmarks.md, "Admission
// reviews on warm stacks"): newstack 7.3% -> 2.9% of the server's CPU at the median in process,
// serve's CPU per review against the allow-all webhook's 2.78x -> 2.70x end to end.
//
// It never queues: a job goes to a worker only if one is idle at that instant, and otherwise runs
// on the caller's goroutine as it would have without workers, so a busy pool costs a request
// nothing but a failed non-blocking send. The caller waits for its job, so the job may use
// anything the caller owns (the request, its context, the ResponseWriter) exactly as inline.
//
// Lifecycle: newWarmStacks makes a pool with no goroutine; Start starts its workers and Close
// stops them and waits for them (a job in progress finishes first). Before Start and after Close
// every job runs inline. A nil *warmStacks runs every job inline too. Safe for concurrent use.
type warmStacks struct {
	n    int
	jobs chan warmJob
	quit chan struct{}
	wg   sync.WaitGroup

	mu    sync.Mutex
	state int // warmNew, warmStarted, warmClosed
}

const (
	warmNew = iota
	warmStarted
	warmClosed
)

// warmJob is a job and where its worker says how it ended: nil when it returned.
type warmJob struct {
	run  func()
	done chan *jobPanic
}

// jobPanic is a job's panic carried back to the goroutine that handed the job over, which panics
// again with it: so net/http recovers it for that request, as it would have inline, instead of the
// panic ending the process from a worker. goexit marks a job that called runtime.Goexit.
type jobPanic struct {
	value  any
	stack  []byte
	goexit bool
}

func (p *jobPanic) Error() string {
	return fmt.Sprintf("%v [recovered on a warm-stack worker]\n\nworker goroutine's stack:\n%s", p.value, p.stack)
}

// Unwrap is the job's panic value when it was an error.
func (p *jobPanic) Unwrap() error {
	err, _ := p.value.(error)
	return err
}

// newWarmStacks makes a pool of n workers (n < 1: GOMAXPROCS), not started.
func newWarmStacks(n int) *warmStacks {
	if n < 1 {
		n = runtime.GOMAXPROCS(0)
	}
	return &warmStacks{n: n, jobs: make(chan warmJob), quit: make(chan struct{})}
}

// Start starts the workers; once only, and never after Close.
func (p *warmStacks) Start() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state != warmNew {
		return
	}
	p.state = warmStarted
	p.wg.Add(p.n)
	for range p.n {
		go p.work() // owned by p; ends when Close closes quit
	}
}

// Close stops the workers and waits for them to return; jobs handed over later run inline.
func (p *warmStacks) Close() {
	p.mu.Lock()
	if p.state == warmStarted {
		close(p.quit)
	}
	p.state = warmClosed
	p.mu.Unlock()
	p.wg.Wait()
}

// Do runs job, on an idle worker if one is free right now and otherwise on the calling goroutine,
// and returns when it has. A panic in job is raised again on the calling goroutine; a job that
// calls runtime.Goexit ends the calling goroutine the same way.
func (p *warmStacks) Do(job func()) {
	if p == nil {
		job()
		return
	}
	j := warmJob{run: job, done: make(chan *jobPanic, 1)}
	select {
	case p.jobs <- j:
	default:
		job()
		return
	}
	jp := <-j.done
	switch {
	case jp == nil:
	case jp.goexit:
		runtime.Goexit()
	case jp.value == http.ErrAbortHandler:
		// net/http's sentinel for aborting a response without a log line: kept as it is.
		panic(http.ErrAbortHandler)
	default:
		panic(jp)
	}
}

func (p *warmStacks) work() {
	defer p.wg.Done()
	for {
		select {
		case j := <-p.jobs:
			p.run(j)
		case <-p.quit:
			return
		}
	}
}

// run runs one job and reports to its caller how it ended. A panic is recovered and carried back;
// the worker carries on. A job calling runtime.Goexit unwinds this worker, which nothing can stop:
// the caller is told, and a replacement keeps the pool at its size (it sees quit and ends at once
// if the pool is closing; the counter is above zero until this worker's deferred Done, so Add is
// safe even while Close waits).
func (p *warmStacks) run(j warmJob) {
	returned := false
	defer func() {
		if returned {
			return
		}
		if v := recover(); v != nil {
			j.done <- &jobPanic{value: v, stack: debug.Stack()}
			return
		}
		j.done <- &jobPanic{goexit: true}
		p.wg.Add(1)
		go p.work() // owned by p: replaces this worker, which Goexit is ending
	}()
	j.run()
	returned = true
	j.done <- nil
}
