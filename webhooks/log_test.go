package webhooks

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/parleyhq/parley/webhooks/store"
)

// TestDeliveryLoggerFormatsOnlyWhatIsLogged: a delivery logger costs nothing to make when its
// lines are below the level (every request makes one before it is authenticated: under a flood
// of wrong signatures, slog's eager formatting of its attributes was 6% of serve's CPU), and a
// line that is logged still carries the delivery's attributes, and those added after.
func TestDeliveryLoggerFormatsOnlyWhatIsLogged(t *testing.T) {
	var out bytes.Buffer
	base := slog.New(slog.NewJSONHandler(&out, &slog.HandlerOptions{Level: slog.LevelError}))
	if n := testing.AllocsPerRun(200, func() {
		deliveryLogger(base, store.SourceGitHub, "", EventName).Info("webhook refused")
	}); n > 3 {
		t.Errorf("a delivery logger whose line is below the level allocates %v times, want at most 3", n)
	}
	if out.Len() != 0 {
		t.Fatalf("a line below the level was written: %s", out.String())
	}
	deliveryLogger(base, store.SourceGitHub, "d-1", "push").With("status", 401).WithGroup("g").Error("refused", "why", "x")
	line := out.String()
	for _, want := range []string{`"source":"github"`, `"delivery_id":"d-1"`, `"event":"push"`, `"status":401`, `"g":{"why":"x"}`} {
		if !strings.Contains(line, want) {
			t.Errorf("the logged line lacks %s: %s", want, line)
		}
	}
	if !deliveryLogger(base, store.SourceGitHub, "", "").Enabled(context.Background(), slog.LevelError) {
		t.Error("the delivery logger is not enabled where its handler is")
	}
}
