package webhooks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/parleyhq/parley/webhooks/store"
)

// Handler processes one delivery. It must be idempotent: a delivery is processed at least
// once, and again if the worker lost its lease or the process died before Complete.
//
// Return nil when done, Permanent(err) (or an error matching ErrPermanent) when retrying
// cannot help, any other error to be retried with backoff. ctx is cancelled when the
// delivery's lease runs out or the pool's drain grace period ends; a handler must return
// promptly then.
//
// The Delivery's Body is the raw payload; the handler decodes it into the event's type and
// speaks domain types from there on.
type Handler interface {
	Handle(ctx context.Context, d store.Delivery) error
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, d store.Delivery) error

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, d store.Delivery) error { return f(ctx, d) }

// Route selects a handler: a delivery's source and event.
type Route struct {
	Source string
	Event  string
}

// Queue is what the Pool needs of the store; store.Deliveries satisfies it.
type Queue interface {
	Claim(ctx context.Context, worker string, lease time.Duration, now time.Time) (store.Delivery, bool, error)
	Complete(ctx context.Context, k store.Key, worker string) error
	Fail(ctx context.Context, k store.Key, worker string, cause error, next time.Time) (store.FailOutcome, error)
	DeadLetter(ctx context.Context, k store.Key, worker string, cause error) error
	Release(ctx context.Context, k store.Key, worker string) error
}

// Backoff computes retry delays: Base doubled per attempt, capped at Max, with Jitter (0..1)
// of the delay randomised away so that deliveries that failed together do not retry together.
type Backoff struct {
	Base   time.Duration
	Max    time.Duration
	Jitter float64
}

// defaultBackoff, used when PoolConfig.Backoff is zero: 10s, 20s, 40s, ... capped at 15 minutes, each up to half shorter.
var defaultBackoff = Backoff{Base: 10 * time.Second, Max: 15 * time.Minute, Jitter: 0.5}

// Delay returns the wait before the attempt after the given one (attempt counts from 1), for
// a random number r in [0, 1).
func (b Backoff) Delay(attempt int, r float64) time.Duration {
	d := b.Base
	for i := 1; i < attempt && d < b.Max; i++ {
		d *= 2
	}
	d = min(d, b.Max)
	j := min(max(b.Jitter, 0), 1)
	return d - time.Duration(float64(d)*j*r)
}

// PoolConfig configures a Pool. Queue is required; Handlers may be empty (every delivery is
// then completed as unhandled).
type PoolConfig struct {
	Queue    Queue
	Handlers map[Route]Handler
	// Workers is the number of concurrent handlers. Default 4.
	Workers int
	// Name prefixes worker names in leases; it must be unique per process across replicas.
	// Default "<hostname>-<pid>".
	Name string
	// Lease is how long a claim holds a delivery; the handler's context ends a tenth of it
	// earlier. Default 5 minutes.
	Lease time.Duration
	// Poll is how often an idle worker looks for due work without being notified (retries
	// coming due, deliveries stored by another process). Default 5s.
	Poll time.Duration
	// Grace is how long Run lets in-flight handlers finish after its context ends. Default 30s.
	Grace time.Duration
	// Backoff spaces retries; the zero value means 10s doubling to 15 minutes, jitter 0.5.
	Backoff Backoff
	// Logger defaults to discarding.
	Logger *slog.Logger
	// Metrics may be nil: the pool then counts into metrics nobody exports.
	Metrics *Metrics
	// Now is the clock for claims and retry times; default time.Now.
	Now func() time.Time
}

// Pool runs workers that claim deliveries from a Queue and dispatch them to handlers.
type Pool struct {
	queue    Queue
	handlers map[Route]Handler
	workers  int
	name     string
	lease    time.Duration
	poll     time.Duration
	grace    time.Duration
	backoff  Backoff
	log      *slog.Logger
	metrics  *Metrics
	now      func() time.Time
	wake     chan struct{}
	running  atomic.Bool
	// storeTimeout is defaultStoreTimeout; tests shorten it.
	storeTimeout time.Duration
}

// NewPool checks cfg and returns a Pool. The handler map is copied: later changes to it do
// not reach the pool.
func NewPool(cfg PoolConfig) (*Pool, error) {
	if cfg.Queue == nil {
		return nil, errors.New("webhooks pool: no queue")
	}
	p := &Pool{
		queue:    cfg.Queue,
		handlers: make(map[Route]Handler, len(cfg.Handlers)),
		workers:  cfg.Workers,
		name:     cfg.Name,
		lease:    cfg.Lease,
		poll:     cfg.Poll,
		grace:    cfg.Grace,
		backoff:  cfg.Backoff,
		log:      orDiscard(cfg.Logger),
		metrics:  cfg.Metrics,
		now:      cfg.Now,
	}
	for r, h := range cfg.Handlers {
		if h == nil {
			return nil, fmt.Errorf("webhooks pool: nil handler for %s/%s", r.Source, r.Event)
		}
		p.handlers[r] = h
	}
	if p.workers <= 0 {
		p.workers = 4
	}
	if p.name == "" {
		host, _ := os.Hostname()
		p.name = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	if p.lease <= 0 {
		p.lease = 5 * time.Minute
	}
	if p.poll <= 0 {
		p.poll = 5 * time.Second
	}
	if p.grace <= 0 {
		p.grace = 30 * time.Second
	}
	if p.backoff == (Backoff{}) {
		p.backoff = defaultBackoff
	}
	if p.backoff.Base <= 0 || p.backoff.Max < p.backoff.Base {
		return nil, fmt.Errorf("webhooks pool: backoff base %v / max %v: want 0 < base <= max", p.backoff.Base, p.backoff.Max)
	}
	if p.metrics == nil {
		p.metrics = newMetrics()
	}
	if p.now == nil {
		p.now = time.Now
	}
	p.wake = make(chan struct{}, p.workers)
	p.storeTimeout = defaultStoreTimeout
	return p, nil
}

// Notify wakes an idle worker to claim at once. It never blocks: when every worker is already
// awake or busy the wake-up is dropped, since a worker looks for more work after each delivery.
func (p *Pool) Notify() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// defaultStoreTimeout bounds Complete/Fail/Release, which run on a context detached from the
// pool's so that a drain still records outcomes.
const defaultStoreTimeout = 10 * time.Second

func (p *Pool) storeContext(hctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(hctx), p.storeTimeout)
}

// Run starts the workers and blocks until ctx ends. Then it drains: no new claims; in-flight
// handlers get Grace to finish (their outcome is recorded as usual); after that their context
// is cancelled and the deliveries they still hold are released, attempt given back, for the
// next process. Run returns when every worker has stopped; it returns an error only if the
// pool is already running.
func (p *Pool) Run(ctx context.Context) error {
	if !p.running.CompareAndSwap(false, true) {
		return errors.New("webhooks pool: already running")
	}
	defer p.running.Store(false)

	// Handlers run on a context that outlives ctx by the grace period.
	hctx, hcancel := context.WithCancel(context.WithoutCancel(ctx))
	defer hcancel()
	var wg sync.WaitGroup
	for i := range p.workers {
		name := fmt.Sprintf("%s/w%d", p.name, i)
		wg.Go(func() { p.work(ctx, hctx, name) })
	}
	p.log.Info("delivery pool started", slog.Int("workers", p.workers), slog.String(LogKeyWorker, p.name))
	<-ctx.Done()

	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	grace := time.NewTimer(p.grace)
	defer grace.Stop()
	select {
	case <-done:
	case <-grace.C:
		p.log.Warn("delivery pool grace period over, cancelling handlers", slog.Duration("grace", p.grace))
		hcancel()
		<-done
	}
	p.log.Info("delivery pool stopped", slog.String(LogKeyWorker, p.name))
	return nil
}

func (p *Pool) work(ctx, hctx context.Context, name string) {
	idle := time.NewTimer(p.poll)
	defer idle.Stop()
	for ctx.Err() == nil {
		d, ok, err := p.queue.Claim(ctx, name, p.lease, p.now())
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			p.log.Error("claim failed", slog.String(LogKeyWorker, name), slog.String(LogKeyError, err.Error()))
		}
		if err != nil || !ok {
			idle.Reset(p.poll)
			select {
			case <-ctx.Done():
				return
			case <-p.wake:
			case <-idle.C:
			}
			continue
		}
		p.process(hctx, name, d)
	}
}

// process runs one claimed delivery to an outcome: completed, retry scheduled, dead-lettered,
// or released on shutdown.
func (p *Pool) process(hctx context.Context, worker string, d store.Delivery) {
	log := deliveryLogger(p.log, d.Source, d.ID, d.Event).With(
		slog.String(LogKeyWorker, worker), slog.Int(LogKeyAttempt, d.Attempts))
	k := d.Key()

	h, ok := p.handlers[Route{Source: d.Source, Event: d.Event}]
	if !ok {
		p.metrics.unhandled.WithLabelValues(d.Source, d.Event).Inc()
		sctx, scancel := p.storeContext(hctx)
		defer scancel()
		if err := p.queue.Complete(sctx, k, worker); err != nil {
			log.Error("complete unhandled delivery failed", slog.String(LogKeyError, err.Error()))
			return
		}
		log.Info("no handler for event, completed")
		return
	}

	// The handler's deadline falls a tenth of the lease before the lease ends, so its outcome
	// is recorded while this worker still holds the delivery.
	ctx, cancel := context.WithTimeout(hctx, p.lease-p.lease/10)
	start := time.Now()
	err := safeHandle(ctx, h, d)
	cancel()
	p.metrics.handlerDuration.WithLabelValues(d.Source, d.Event).Observe(time.Since(start).Seconds())
	// The outcome is recorded even when the pool is draining or the handler ran out its
	// deadline: a fresh context, bounded on its own.
	sctx, scancel := p.storeContext(hctx)
	defer scancel()

	switch {
	case err == nil:
		if err := p.queue.Complete(sctx, k, worker); err != nil {
			log.Error("complete failed", slog.String(LogKeyError, err.Error()))
			return
		}
		p.metrics.completed.WithLabelValues(d.Source, d.Event).Inc()
		log.Info("delivery completed", slog.Duration("took", time.Since(start)))

	case hctx.Err() != nil:
		// The grace period ended under the handler: not its fault, not an attempt.
		if err := p.queue.Release(sctx, k, worker); err != nil {
			log.Error("release on shutdown failed", slog.String(LogKeyError, err.Error()))
			return
		}
		log.Warn("delivery released unfinished on shutdown", slog.String(LogKeyError, err.Error()))

	case errors.Is(err, ErrPermanent):
		reason := reasonPermanent
		if _, ok := errors.AsType[*panicError](err); ok {
			reason = reasonPanic
		}
		if derr := p.queue.DeadLetter(sctx, k, worker, err); derr != nil {
			log.Error("dead-letter failed", slog.String(LogKeyError, derr.Error()))
			return
		}
		p.metrics.failedAttempts.WithLabelValues(d.Source, d.Event).Inc()
		p.metrics.deadLettered.WithLabelValues(d.Source, d.Event, reason).Inc()
		log.Error("delivery dead-lettered", slog.String("reason", reason), slog.String(LogKeyError, err.Error()))

	default:
		p.metrics.failedAttempts.WithLabelValues(d.Source, d.Event).Inc()
		next := p.now().Add(p.backoff.Delay(d.Attempts, rand.Float64()))
		out, ferr := p.queue.Fail(sctx, k, worker, err, next)
		if ferr != nil {
			log.Error("recording failure failed", slog.String(LogKeyError, ferr.Error()), slog.String("cause", err.Error()))
			return
		}
		if out == store.DeadLettered {
			p.metrics.deadLettered.WithLabelValues(d.Source, d.Event, reasonExhausted).Inc()
			log.Error("delivery dead-lettered after its last attempt", slog.String(LogKeyError, err.Error()))
			return
		}
		log.Warn("delivery failed, retry scheduled", slog.Time("next_attempt", next), slog.String(LogKeyError, err.Error()))
	}
}

// safeHandle turns a handler panic into a permanent error carrying the stack, so one bad
// payload cannot take the process (and every other in-flight delivery) down.
func safeHandle(ctx context.Context, h Handler, d store.Delivery) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &panicError{value: fmt.Sprintf("%v\n%s", v, debug.Stack())}
		}
	}()
	return h.Handle(ctx, d)
}
