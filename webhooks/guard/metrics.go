package guard

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics count what the guards refused. A nil *Metrics counts nothing.
type Metrics struct {
	refused   *prometheus.CounterVec
	open      prometheus.Gauge
	throttled *prometheus.CounterVec
	bodyHeld  prometheus.Gauge
	bodyBusy  *prometheus.CounterVec
	idleShut  prometheus.Counter
	holdFull  prometheus.Counter
}

// NewMetrics creates the guards' metrics and registers them in reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_http_connections_refused_total",
			Help: "Connections to the intake listener refused as they were accepted, by reason (total: max_connections reached; per_client: max_connections_per_client reached).",
		}, []string{"reason"}),
		open: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "parley_http_connections_open",
			Help: "Connections open on the intake listener.",
		}),
		throttled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_auth_throttled_total",
			Help: "Failed authentications answered 429 because their client address failed authentication too often, by endpoint.",
		}, []string{"endpoint"}),
		bodyHeld: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "parley_unauthenticated_body_bytes",
			Help: "Bytes held (in memory or spooled to a temporary file) by request bodies whose credentials are not verified yet.",
		}),
		bodyBusy: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_unauthenticated_body_refused_total",
			Help: "Requests answered 503 because their body would take the unauthenticated body budget (or its client's share) over its cap, by endpoint.",
		}, []string{"endpoint"}),
		idleShut: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "parley_http_idle_connections_closed_total",
			Help: "Idle connections closed to make room for a new connection at max_connections or max_connections_per_client.",
		}),
		holdFull: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "parley_auth_hold_full_total",
			Help: "Throttled failed authentications answered without their hold because the most requests held at once were held.",
		}),
	}
	for _, c := range []prometheus.Collector{m.refused, m.open, m.throttled, m.bodyHeld, m.bodyBusy, m.idleShut, m.holdFull} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register guard metrics: %w", err)
		}
	}
	return m, nil
}

func (m *Metrics) connectionRefused(reason string) {
	if m != nil {
		m.refused.WithLabelValues(reason).Inc()
	}
}

func (m *Metrics) connectionOpened() {
	if m != nil {
		m.open.Inc()
	}
}

func (m *Metrics) connectionClosed() {
	if m != nil {
		m.open.Dec()
	}
}

func (m *Metrics) authThrottled(endpoint string) {
	if m != nil {
		m.throttled.WithLabelValues(endpoint).Inc()
	}
}

func (m *Metrics) authHoldFull() {
	if m != nil {
		m.holdFull.Inc()
	}
}

func (m *Metrics) bodyBytes(held int64) {
	if m != nil {
		m.bodyHeld.Set(float64(held))
	}
}

func (m *Metrics) bodyRefused(endpoint string) {
	if m != nil {
		m.bodyBusy.WithLabelValues(endpoint).Inc()
	}
}

func (m *Metrics) idleClosed() {
	if m != nil {
		m.idleShut.Inc()
	}
}
