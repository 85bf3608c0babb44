package webhooks

import "log/slog"

// Attribute keys used on every log line about a delivery, so that one grep for a delivery ID
// finds its whole story from the receiver to the last retry.
const (
	LogKeySource     = "source"
	LogKeyDeliveryID = "delivery_id"
	LogKeyEvent      = "event"
	LogKeyWorker     = "worker"
	LogKeyAttempt    = "attempt"
	LogKeyError      = "error"
	LogKeyStatus     = "status"
	// LogKeyCluster names the cluster of a drift event posted to a per-cluster path
	// (ClusterPattern); it is absent from the lines about unscoped events.
	LogKeyCluster = "cluster"
)

func deliveryLogger(l *slog.Logger, source, id, event string) *slog.Logger {
	return l.With(
		slog.String(LogKeySource, source),
		slog.String(LogKeyDeliveryID, id),
		slog.String(LogKeyEvent, event),
	)
}

func orDiscard(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}
