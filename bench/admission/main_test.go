package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/busycluster"
	"github.com/parleyhq/parley/internal/npmdata"
)

// TestMain serves the allow-all webhook when run re-executes the test binary as it.
func TestMain(m *testing.M) {
	if dir := os.Getenv(allowAllEnv); dir != "" {
		if err := serveAllowAll(dir); err != nil {
			os.Stderr.WriteString("allow-all: " + err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestRunJudgesEveryReview runs the program briefly at a low rate against a parley binary it
// builds, and checks its bookkeeping: every review answered by both sides, every one counted in
// parley serve's decisions, and those decisions the mix's (the cost optimizer's scale-downs denied,
// the ConfigMaps uncovered). It asserts no latency figure: those are for the benchmark run by hand.
func TestRunJudgesEveryReview(t *testing.T) {
	o := options{rate: 40, duration: time.Second, mode: "deny", timeout: 30 * time.Second, logLevel: "warn", runs: 1, replicas: 1, store: "sqlite"}
	res, err := run(o, &bytes.Buffer{})
	if err != nil {
		npmdata.FatalOrSkip(t, err) // skipped without npm to fetch the fake GitHub's API description
	}
	if res.reviews != 40 || len(res.parley.lat) != 40 || len(res.allowAll.lat) != 40 {
		t.Fatalf("reviews %d, latencies %d and %d", res.reviews, len(res.parley.lat), len(res.allowAll.lat))
	}
	if res.parley.errors != 0 || res.allowAll.errors != 0 {
		t.Fatalf("errors: parley %d (%s), allow-all %d (%s)", res.parley.errors, res.parley.first, res.allowAll.errors, res.allowAll.first)
	}
	if res.parley.proto != "HTTP/2.0" || res.allowAll.proto != "HTTP/2.0" {
		t.Errorf("protocols %q and %q, want HTTP/2.0 as the API server speaks", res.parley.proto, res.allowAll.proto)
	}
	var counted float64
	for _, n := range res.decisions {
		counted += n
	}
	if int(counted) != res.reviews || res.unjudged != res.decisions["fail-open"] {
		t.Fatalf("decisions %v, unjudged %v: not every review of %d counted once", res.decisions, res.unjudged, res.reviews)
	}
	want := map[string]int{"allowed": res.want[busycluster.HPAScale], "denied": res.want[busycluster.CostScaleDown], "uncovered": res.want[busycluster.ConfigMapEdit]}
	if want["allowed"] != 20 || want["denied"] != 12 || want["uncovered"] != 8 {
		t.Fatalf("the mix sent: %v", res.want)
	}
	for dec, n := range want {
		// A review that took longer than serve's 2 s budget on a loaded machine is answered
		// unjudged instead: the decisions are the mix's less those.
		if got := int(res.decisions[dec]); got > n || got < n-int(res.unjudged) {
			t.Errorf("%s: %d, want %d (%v unjudged)", dec, got, n, res.unjudged)
		}
	}
	if len(res.peakRSS) != 1 || res.peakRSS[0] <= 0 || res.cpu <= 0 {
		t.Errorf("serve's peak RSS %v KiB, CPU %v s", res.peakRSS, res.cpu)
	}
	// Every answer came, so the check finds nothing wrong unless serve failed open under load.
	if probs := res.problems(); (len(probs) != 0) != (res.unjudged != 0) {
		t.Errorf("problems %q with %v unjudged", probs, res.unjudged)
	}
	var out bytes.Buffer
	out.WriteString(header + rowOf(describe(o), res).markdown())
	res.details(&out, "run 1")
	for _, s := range []string{"| run | reviews |", "| 40/s × 1s (deny, log warn, sqlite) | 40 |", "denied 12", "uncovered 8"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("report lacks %q:\n%s", s, out.String())
		}
	}
}

func TestRunRefusesBadOptions(t *testing.T) {
	ok := options{rate: 500, duration: 10 * time.Second, mode: "deny", timeout: 5 * time.Second, runs: 1, replicas: 1, store: "sqlite"}
	cases := []struct {
		edit func(*options)
		want string
	}{
		{func(o *options) { o.rate = 0 }, "-rate 0"},
		{func(o *options) { o.rate = 100000 }, "-rate 100000"},
		{func(o *options) { o.duration = time.Hour }, "-duration 1h0m0s"},
		{func(o *options) { o.rate, o.duration = 1, 10*time.Millisecond }, "sends no review"},
		{func(o *options) { o.mode = "audit" }, `-mode "audit"`},
		{func(o *options) { o.timeout = time.Minute }, "-timeout 1m0s"},
		{func(o *options) { o.runs = 0 }, "-runs 0"},
		{func(o *options) { o.store = "mysql" }, `-store "mysql"`},
		{func(o *options) { o.replicas = 0 }, "-replicas 0"},
		{func(o *options) { o.replicas, o.store = 9, "postgres" }, "-replicas 9"},
		{func(o *options) { o.replicas = 2 }, "-replicas 2 needs -store postgres"},
	}
	if err := ok.check(); err != nil {
		t.Fatalf("the good options refused: %v", err)
	}
	// The program itself refuses before starting anything, naming the flag, with the usage code.
	var out, logw bytes.Buffer
	bad := ok
	bad.replicas = 2
	if code := runAll(bad, &out, &logw); code != 2 || out.Len() != 0 || !strings.Contains(logw.String(), "-replicas 2 needs -store postgres") {
		t.Errorf("-replicas 2 on SQLite: exit %d, output %q, log %q", code, out.String(), logw.String())
	}
	two := ok
	two.replicas, two.store = 2, "postgres"
	if err := two.check(); err != nil {
		t.Errorf("-replicas 2 -store postgres refused: %v", err)
	}
	for _, tc := range cases {
		o := ok
		tc.edit(&o)
		if _, err := run(o, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", o, err, tc.want)
		}
	}
}

func TestPercentileIsNearestRank(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 200; i++ {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	for p, want := range map[float64]time.Duration{50: 100 * time.Millisecond, 90: 180 * time.Millisecond, 99: 198 * time.Millisecond, 100: 200 * time.Millisecond, 0: time.Millisecond} {
		if got := pct(d, p); got != want {
			t.Errorf("pct(%v) = %v, want %v", p, got, want)
		}
	}
	if pct(nil, 99) != 0 {
		t.Error("pct of nothing is not 0")
	}
}
