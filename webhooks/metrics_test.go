package webhooks

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/parleyhq/parley/webhooks/store"
)

func TestQueueCollector(t *testing.T) {
	s := openStore(t, store.Options{MaxAttempts: 1})
	ctx := context.Background()
	received := time.Now().Add(-90 * time.Second)
	for _, id := range []string{"a", "b", "c"} {
		if _, err := s.Put(ctx, store.Delivery{Source: "github", ID: id, Event: "push", Body: []byte(`{"id":"` + id + `"}`), ReceivedAt: received}); err != nil {
			t.Fatal(err)
		}
	}
	d, _, err := s.Claim(ctx, "w", time.Minute, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Fail(ctx, d.Key(), "w", context.DeadlineExceeded, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Claim(ctx, "w", time.Hour, time.Now()); err != nil {
		t.Fatal(err)
	}

	reg := prometheus.NewRegistry()
	if _, err := NewMetrics(reg, s); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP parley_delivery_dead_letters Deliveries in the dead-letter state.
# TYPE parley_delivery_dead_letters gauge
parley_delivery_dead_letters 1
# HELP parley_delivery_queue_depth Deliveries pending (not done, not dead), leased or not.
# TYPE parley_delivery_queue_depth gauge
parley_delivery_queue_depth 2
# HELP parley_delivery_queue_leased Pending deliveries a worker holds a live lease on.
# TYPE parley_delivery_queue_leased gauge
parley_delivery_queue_leased 1
# HELP parley_delivery_store_up 1 if the delivery store answered the last scrape's stats query, else 0.
# TYPE parley_delivery_store_up gauge
parley_delivery_store_up 1
`
	names := []string{"parley_delivery_dead_letters", "parley_delivery_queue_depth", "parley_delivery_queue_leased", "parley_delivery_store_up"}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	age := gauge(t, reg, "parley_delivery_queue_oldest_age_seconds")
	if age < 90 || age > 600 {
		t.Errorf("oldest age = %v s, want about 90", age)
	}

	// A closed store does not break the scrape; it says so.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if up := gauge(t, reg, "parley_delivery_store_up"); up != 0 {
		t.Errorf("store_up after close = %v, want 0", up)
	}

	if _, err := NewMetrics(reg, nil); err == nil {
		t.Error("registering twice in one registry succeeded")
	}
}

func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("metric %s not gathered", name)
	return 0
}
