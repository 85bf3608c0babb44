package main

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/pgtest"
)

// TestRunLosesNothing runs the load program briefly at a low rate, with and without a worker
// pool draining the queue, and checks its bookkeeping: every request acknowledged, every
// acknowledged delivery found in the store. It asserts no latency figure: those are for the
// benchmark run by hand.
func TestRunLosesNothing(t *testing.T) {
	for _, workers := range []int{0, 2} {
		var out bytes.Buffer
		if err := run(&out, "50,100", 300*time.Millisecond, 25<<10, "normal", workers, 1000, t.TempDir()); err != nil {
			t.Fatalf("workers=%d: %v\n%s", workers, err, out.String())
		}
		for _, want := range []string{"rate/s", "lost", "p99", "checkpoints", "rewinds", "(longest "} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("output lacks %q:\n%s", want, out.String())
			}
		}
	}
}

func TestRunRefusesBadFlags(t *testing.T) {
	cases := []struct {
		rates, sync string
		d           time.Duration
		want        string
	}{
		{"200,x", "full", time.Second, `"x" is not a positive integer`},
		{"0", "full", time.Second, "not a positive integer"},
		{"200", "off", time.Second, `-sync "off"`},
		{"200", "full", time.Hour, "-duration"},
	}
	for _, tc := range cases {
		err := run(&bytes.Buffer{}, tc.rates, tc.d, 100, tc.sync, 0, 10, t.TempDir())
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("run(%q, %q, %v) = %v, want %q", tc.rates, tc.sync, tc.d, err, tc.want)
		}
	}
}

func TestPayloadShapeAndSize(t *testing.T) {
	for _, size := range []int{25 << 10, 100 << 10} {
		b := payload(size)
		if len(b) < size || len(b) > size+size/10 {
			t.Errorf("payload(%d) is %d bytes", size, len(b))
		}
		var ev struct {
			Action      string `json:"action"`
			PullRequest struct {
				Number int `json:"number"`
			} `json:"pull_request"`
		}
		if err := json.Unmarshal(b, &ev); err != nil || ev.Action != "opened" || ev.PullRequest.Number != 1347 {
			t.Errorf("payload(%d) is not a pull_request event: %v %+v", size, err, ev)
		}
	}
}

func TestPercentile(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	cases := []struct {
		p    float64
		want time.Duration
	}{{50, 50 * time.Millisecond}, {99, 99 * time.Millisecond}, {100, 100 * time.Millisecond}, {0, time.Millisecond}}
	for _, tc := range cases {
		if got := pct(d, tc.p); got != tc.want {
			t.Errorf("pct(%v) = %v, want %v", tc.p, got, tc.want)
		}
	}
	if pct(nil, 99) != 0 {
		t.Error("pct of nothing is not 0")
	}
}

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestRunLosesNothingOnPostgreSQL: the same bookkeeping with the PostgreSQL store, and an unknown
// engine named.
func TestRunLosesNothingOnPostgreSQL(t *testing.T) {
	var out bytes.Buffer
	if err := runEngines(&out, "postgres", pgtest.DSN(t), "50", 300*time.Millisecond, 25<<10, "full", 2, 1000, t.TempDir()); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "receiver + PostgreSQL at postgres://") || !strings.Contains(out.String(), "lost") {
		t.Errorf("output:\n%s", out.String())
	}
	// The server's checkpoint count is read (a number, not "-"); PostgreSQL has no rewinds.
	if !regexp.MustCompile(`\s\d+\s+-\s*\n`).MatchString(out.String()) {
		t.Errorf("no checkpoint count in the PostgreSQL row:\n%s", out.String())
	}
	if err := runEngines(&out, "mysql", "", "50", time.Second, 100, "full", 0, 10, t.TempDir()); err == nil || !strings.Contains(err.Error(), `-engine "mysql"`) {
		t.Errorf("an unknown engine: %v", err)
	}
}

// TestRunDisk: the disk floor answers every request it sends, one sync covering several when
// they fall due together.
func TestRunDisk(t *testing.T) {
	var out bytes.Buffer
	if err := runEngines(&out, "disk", "", "200", 300*time.Millisecond, 25<<10, "full", 0, 1000, t.TempDir()); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	m := regexp.MustCompile(`\n\s+200\s+60\s+(\d+)\s`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no row for 200/s with 60 sent:\n%s", out.String())
	}
	if syncs, _ := strconv.Atoi(m[1]); syncs < 1 || syncs > 60 {
		t.Errorf("%d syncs for 60 requests:\n%s", syncs, out.String())
	}
}
