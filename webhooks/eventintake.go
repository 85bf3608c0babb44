package webhooks

import (
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/parleyhq/parley/webhooks/guard"
)

// IntakeConfig is what the receivers of events (the event doors, Firehose, Pub/Sub) share: where
// their deliveries are stored and how they are counted. Store is required.
type IntakeConfig struct {
	Store   Intake
	Notify  func() // called after a new delivery was stored (Pool.Notify)
	Logger  *slog.Logger
	Metrics *Metrics
	// EventMetrics counts the events left out (parley_events_ignored_total).
	EventMetrics *EventMetrics
	// MaxBodyBytes bounds the request body as sent (default MaxBodyBytes).
	MaxBodyBytes int64
	PutTimeout   time.Duration // the wait for the store; default 5s
	Now          func() time.Time
	Failures     *guard.Failures
}

// eventIntake is an IntakeConfig with its defaults filled in, embedded in each event receiver.
type eventIntake struct {
	store      Intake
	notify     func()
	log        *slog.Logger
	metrics    *Metrics
	events     *EventMetrics
	maxBody    int64
	putTimeout time.Duration
	now        func() time.Time
	failures   *guard.Failures
}

func newEventIntake(c IntakeConfig) eventIntake {
	in := eventIntake{store: c.Store, notify: c.Notify, log: orDiscard(c.Logger), metrics: c.Metrics, events: c.EventMetrics,
		maxBody: c.MaxBodyBytes, putTimeout: c.PutTimeout, now: c.Now, failures: c.Failures}
	if in.events == nil {
		in.events = newEventMetrics()
	}
	intakeDefaults(&in.metrics, &in.notify, &in.maxBody, &in.putTimeout, &in.now)
	return in
}

// eventRefusals are the two refusals of a door that answers with an eventReply: refuse, counted
// by reason and logged at info, and unauthorized, which only a failed credential reaches: it
// counts against the client address's failed-authentication budget (answering 429 once the
// address is over it) and is logged as a warning. A valid credential never meets either for its
// address's failures: a proxy's address is every sender's. what names the request in the log
// ("event", "pubsub push").
func eventRefusals(w http.ResponseWriter, req *http.Request, m *Metrics, failures *guard.Failures, log *slog.Logger, source, what string) (
	refuse func(code int, reason string, err error), unauthorized func(reason string, err error)) {
	refuse = func(code int, reason string, err error) {
		m.rejected.WithLabelValues(source, reason).Inc()
		log.Info(what+" refused", slog.Int(LogKeyStatus, code), slog.String(LogKeyError, err.Error()))
		writeEventReply(w, code, eventReply{Status: "refused", Error: err.Error()})
	}
	unauthorized = func(reason string, err error) {
		if throttled(w, req, failures, m, source) {
			return
		}
		m.signatureFailures.WithLabelValues(source, reason).Inc()
		log.Warn(fmt.Sprintf("%s credentials refused", what), slog.Int(LogKeyStatus, http.StatusUnauthorized), slog.String(LogKeyError, err.Error()))
		writeEventReply(w, http.StatusUnauthorized, eventReply{Status: "unauthorized", Error: err.Error()})
	}
	return refuse, unauthorized
}
