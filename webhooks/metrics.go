package webhooks

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/parleyhq/parley/webhooks/store"
)

// StatsReader is what the queue collector needs of the store.
type StatsReader interface {
	Stats(ctx context.Context, now time.Time) (store.Stats, error)
}

// Metrics are the intake's Prometheus metrics. One Metrics is shared by the Receiver and the
// Pool. Label values are bounded: source is one of the store's sources, event is counted only
// after the signature proved the request came from the source, and reasons are fixed strings.
type Metrics struct {
	received          *prometheus.CounterVec
	duplicates        *prometheus.CounterVec
	signatureFailures *prometheus.CounterVec
	rejected          *prometheus.CounterVec
	completed         *prometheus.CounterVec
	failedAttempts    *prometheus.CounterVec
	deadLettered      *prometheus.CounterVec
	unhandled         *prometheus.CounterVec
	handlerDuration   *prometheus.HistogramVec
	pruned            prometheus.Counter
}

// Reasons used as label values.
const (
	reasonMissing   = "missing"
	reasonMalformed = "malformed"
	reasonMismatch  = "mismatch"

	reasonMethod       = "method"
	reasonHeader       = "header"
	reasonTooLarge     = "too_large"
	reasonContentType  = "content_type"
	reasonInvalidJSON  = "invalid_json"
	reasonStoreFailure = "store_unavailable"
	reasonReadBody     = "read_body"
	reasonThrottled    = "throttled"
	reasonBusy         = "body_budget"

	reasonPermanent = "permanent"
	reasonExhausted = "exhausted"
	reasonPanic     = "panic"
)

func newMetrics() *Metrics {
	return &Metrics{
		received: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_webhook_deliveries_received_total",
			Help: "Deliveries verified and stored for the first time, by source and event.",
		}, []string{"source", "event"}),
		duplicates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_webhook_duplicates_total",
			Help: "Verified deliveries whose ID was already stored (redeliveries), by source and event.",
		}, []string{"source", "event"}),
		signatureFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_webhook_signature_failures_total",
			Help: "Requests refused with 401, by source and reason (missing, malformed, mismatch).",
		}, []string{"source", "reason"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_webhook_rejected_total",
			Help: "Requests refused for anything but the signature, by source and reason.",
		}, []string{"source", "reason"}),
		completed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_delivery_completed_total",
			Help: "Deliveries a handler finished, by source and event.",
		}, []string{"source", "event"}),
		failedAttempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_delivery_failed_attempts_total",
			Help: "Handler attempts that returned an error, by source and event.",
		}, []string{"source", "event"}),
		deadLettered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_delivery_dead_lettered_total",
			Help: "Deliveries moved to the dead-letter state, by source, event and reason (permanent, exhausted, panic).",
		}, []string{"source", "event", "reason"}),
		unhandled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_delivery_unhandled_total",
			Help: "Deliveries completed without processing because no handler is registered for their event.",
		}, []string{"source", "event"}),
		handlerDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "parley_delivery_handler_duration_seconds",
			Help:    "Time spent in handlers, by source and event, whatever the outcome.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"source", "event"}),
		pruned: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "parley_deliveries_pruned_total",
			Help: "Done and dead-lettered deliveries deleted once past their retention.",
		}),
	}
}

// NewMetrics creates the intake metrics and registers them, with a collector that reads the
// queue's depth, oldest pending age and dead-letter count from stats at every scrape, in reg.
// stats may be nil when the queue is exported elsewhere.
func NewMetrics(reg prometheus.Registerer, stats StatsReader) (*Metrics, error) {
	m := newMetrics()
	cs := []prometheus.Collector{m.received, m.duplicates, m.signatureFailures, m.rejected,
		m.completed, m.failedAttempts, m.deadLettered, m.unhandled, m.handlerDuration, m.pruned}
	if stats != nil {
		cs = append(cs, newQueueCollector(stats, time.Now))
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register webhook metrics: %w", err)
		}
	}
	return m, nil
}

// queueCollector reads store.Stats at scrape time, so the gauges are never stale and nothing
// has to poll the store between scrapes.
type queueCollector struct {
	stats   StatsReader
	now     func() time.Time
	up      *prometheus.Desc
	depth   *prometheus.Desc
	leased  *prometheus.Desc
	oldest  *prometheus.Desc
	dead    *prometheus.Desc
	timeout time.Duration
}

func newQueueCollector(stats StatsReader, now func() time.Time) *queueCollector {
	return &queueCollector{
		stats:   stats,
		now:     now,
		timeout: 2 * time.Second,
		up:      prometheus.NewDesc("parley_delivery_store_up", "1 if the delivery store answered the last scrape's stats query, else 0.", nil, nil),
		depth:   prometheus.NewDesc("parley_delivery_queue_depth", "Deliveries pending (not done, not dead), leased or not.", nil, nil),
		leased:  prometheus.NewDesc("parley_delivery_queue_leased", "Pending deliveries a worker holds a live lease on.", nil, nil),
		oldest:  prometheus.NewDesc("parley_delivery_queue_oldest_age_seconds", "Age of the oldest pending delivery; 0 when none is pending.", nil, nil),
		dead:    prometheus.NewDesc("parley_delivery_dead_letters", "Deliveries in the dead-letter state.", nil, nil),
	}
}

func (c *queueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.up
	ch <- c.depth
	ch <- c.leased
	ch <- c.oldest
	ch <- c.dead
}

func (c *queueCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	now := c.now()
	st, err := c.stats.Stats(ctx, now)
	if err != nil {
		// A down store must not fail the whole scrape: say so in a gauge that can be alerted on.
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 0)
		return
	}
	age := 0.0
	if !st.OldestPending.IsZero() {
		age = max(now.Sub(st.OldestPending).Seconds(), 0)
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 1)
	ch <- prometheus.MustNewConstMetric(c.depth, prometheus.GaugeValue, float64(st.Pending))
	ch <- prometheus.MustNewConstMetric(c.leased, prometheus.GaugeValue, float64(st.Leased))
	ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, age)
	ch <- prometheus.MustNewConstMetric(c.dead, prometheus.GaugeValue, float64(st.Dead))
}
