package webhooks

import (
	"context"
	"log/slog"
	"slices"
)

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
	return slog.New(lazyAttrs{h: l.Handler(), attrs: []slog.Attr{
		slog.String(LogKeySource, source),
		slog.String(LogKeyDeliveryID, id),
		slog.String(LogKeyEvent, event),
	}})
}

// lazyAttrs hands its attributes to the handler it wraps only when a record is logged. Every
// request makes a delivery logger before it is authenticated, and slog's JSON and text handlers
// format the attributes of WithAttrs at once: under a flood of wrong signatures that was 6% of
// parley serve's CPU, for lines that, at the default level, are never written.
type lazyAttrs struct {
	h     slog.Handler
	attrs []slog.Attr
}

func (l lazyAttrs) Enabled(ctx context.Context, level slog.Level) bool {
	return l.h.Enabled(ctx, level)
}

func (l lazyAttrs) Handle(ctx context.Context, r slog.Record) error {
	return l.h.WithAttrs(l.attrs).Handle(ctx, r)
}

func (l lazyAttrs) WithAttrs(attrs []slog.Attr) slog.Handler {
	return lazyAttrs{h: l.h, attrs: append(slices.Clip(l.attrs), attrs...)}
}

func (l lazyAttrs) WithGroup(name string) slog.Handler { return l.h.WithAttrs(l.attrs).WithGroup(name) }

func orDiscard(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}
