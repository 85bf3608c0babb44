package main

import (
	"math"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/parleyhq/parley/internal/busycluster"
)

func TestMedian(t *testing.T) {
	cases := []struct {
		xs   []float64
		want float64
	}{
		{[]float64{3}, 3},
		{[]float64{9, 1, 5}, 5},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{7, 7}, 7},
	}
	for _, tc := range cases {
		if got := median(tc.xs); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.xs, got, tc.want)
		}
	}
	if in := []float64{3, 1, 2}; median(in) != 2 || in[0] != 3 {
		t.Errorf("median sorted its argument: %v", in)
	}
	for _, xs := range [][]float64{nil, {1, math.NaN(), 3}} {
		if got := median(xs); !math.IsNaN(got) {
			t.Errorf("median(%v) = %v, want NaN", xs, got)
		}
	}
}

// TestMedianRowTakesEachColumnsMedian checks every column of the median row is the median of
// that column, the ratios included (the median of the runs' ratios, not the ratio of medians).
func TestMedianRowTakesEachColumnsMedian(t *testing.T) {
	mk := func(p99, ap99 time.Duration, cpu, acpu, cpuRatio, unjudged float64, rss ...float64) row {
		return row{reviews: 5000, parley: [4]time.Duration{time.Millisecond, 2 * time.Millisecond, p99, 2 * p99},
			allowAll: [4]time.Duration{time.Millisecond / 2, time.Millisecond, ap99, 2 * ap99},
			cpuMS:    cpu, allowCPUMS: acpu, p99Ratio: float64(p99) / float64(ap99), cpuRatio: cpuRatio, unjudged: unjudged, errors: unjudged, rssMiB: rss}
	}
	rows := []row{
		mk(30*time.Millisecond, 10*time.Millisecond, 1.2, 0.4, 3, 0, 100, 110), // p99 ratio 3
		mk(10*time.Millisecond, 2*time.Millisecond, 1.6, 0.4, 4, 4, 120, 90),   // p99 ratio 5
		mk(20*time.Millisecond, 5*time.Millisecond, 1.4, 0.7, 2, 1, 140, 130),  // p99 ratio 4
	}
	m := medianRow(rows)
	if m.parley[2] != 20*time.Millisecond || m.parley[3] != 40*time.Millisecond || m.allowAll[2] != 5*time.Millisecond || m.parley[0] != time.Millisecond {
		t.Errorf("latencies: Parley %v, allow-all %v", m.parley, m.allowAll)
	}
	if m.cpuMS != 1.4 || m.allowCPUMS != 0.4 || m.unjudged != 1 || m.errors != 1 || m.reviews != 5000 {
		t.Errorf("CPU %v / %v, unjudged %v, errors %v, reviews %d", m.cpuMS, m.allowCPUMS, m.unjudged, m.errors, m.reviews)
	}
	// The ratio of the medians would be 20/5 = 4 and 1.4/0.4 = 3.5: the medians of the ratios are 4 and 3.
	if m.p99Ratio != 4 || m.cpuRatio != 3 {
		t.Errorf("ratios %v and %v, want 4 and 3", m.p99Ratio, m.cpuRatio)
	}
	if len(m.rssMiB) != 2 || m.rssMiB[0] != 120 || m.rssMiB[1] != 110 {
		t.Errorf("peak RSS per replica %v, want [120 110]", m.rssMiB)
	}
	md := m.markdown()
	for _, s := range []string{"| median of 3 | 5000 | 1.00 ms |", "| 4.0x | 1.40 ms | 0.40 ms | 3.0x | 1 | 1 / 0 | 120 / 110 MiB |"} {
		if !strings.Contains(md, s) {
			t.Errorf("the median row lacks %q:\n%s", s, md)
		}
	}
	if even := medianRow(rows[:2]); even.unjudged != 2 || !strings.Contains(even.markdown(), "| 2 | 2 / 0 |") || even.cpuMS != 1.4 {
		t.Errorf("median of two: unjudged %v, CPU %v\n%s", even.unjudged, even.cpuMS, even.markdown())
	}
}

func TestRowOfComputesCPUPerReviewAndRatios(t *testing.T) {
	lat := func(ms ...int) []time.Duration {
		var out []time.Duration
		for _, m := range ms {
			out = append(out, time.Duration(m)*time.Millisecond)
		}
		return out
	}
	r := &result{reviews: 1000, cpu: 1.5, allowAllCPU: 0.5, peakRSS: []int64{100 << 10, 200 << 10}, loadBefore: "1.0", loadEnd: "2.0",
		parley: side{lat: lat(1, 2, 3, 40)}, allowAll: side{lat: lat(1, 1, 1, 10)}}
	got := rowOf("x", r)
	if got.cpuMS != 1.5 || got.allowCPUMS != 0.5 || got.cpuRatio != 3 || got.p99Ratio != 4 {
		t.Errorf("CPU per review %v / %v ms, ratios CPU %v, p99 %v", got.cpuMS, got.allowCPUMS, got.cpuRatio, got.p99Ratio)
	}
	if s := got.markdown(); !strings.Contains(s, "| 4.0x | 1.50 ms | 0.50 ms | 3.0x | 0 | 0 / 0 | 100 / 200 MiB | 1.0 → 2.0 |") {
		t.Errorf("row: %s", s)
	}
}

func TestWrongAnswer(t *testing.T) {
	allowed := &admissionv1.AdmissionResponse{Allowed: true}
	denied := &admissionv1.AdmissionResponse{Allowed: false}
	warned := &admissionv1.AdmissionResponse{Allowed: true, Warnings: []string{"parley: /spec/replicas ..."}}
	unjudged := &admissionv1.AdmissionResponse{Allowed: true, Warnings: []string{"Parley could not judge this change (timeout); allowed unjudged"}}
	cases := []struct {
		w     busycluster.Write
		mode  string
		got   *admissionv1.AdmissionResponse
		wrong string // "" = right
	}{
		{busycluster.HPAScale, "deny", allowed, ""},
		{busycluster.HPAScale, "deny", denied, "an HPA scale refused"},
		{busycluster.HPAScale, "deny", unjudged, "answered unjudged"},
		{busycluster.CostScaleDown, "deny", denied, ""},
		{busycluster.CostScaleDown, "deny", allowed, "scale-down allowed in deny mode"},
		{busycluster.CostScaleDown, "deny", unjudged, "answered unjudged"},
		{busycluster.CostScaleDown, "warn", warned, ""},
		{busycluster.CostScaleDown, "warn", allowed, "answered allowed=true with 0 warnings"},
		{busycluster.CostScaleDown, "warn", denied, "answered allowed=false"},
		{busycluster.ConfigMapEdit, "deny", allowed, ""},
		{busycluster.ConfigMapEdit, "warn", denied, "a ConfigMap edit refused"},
	}
	for _, tc := range cases {
		got := wrongAnswer(tc.w, tc.mode, tc.got)
		if (got == "") != (tc.wrong == "") || !strings.Contains(got, tc.wrong) {
			t.Errorf("write %d, %s mode, %+v: %q, want %q", tc.w, tc.mode, tc.got, got, tc.wrong)
		}
	}
}

// TestProblemsFindEveryWrongRun builds runs by hand: a right one has no problem, and each way of
// being wrong (fail-open, no answer, decisions other than the mix's, a wrong answer) is named.
func TestProblemsFindEveryWrongRun(t *testing.T) {
	right := func(mode string) *result {
		r := &result{o: options{mode: mode}, want: map[busycluster.Write]int{}, decisions: map[string]float64{}}
		for i := 1; i <= 20; i++ {
			w := busycluster.Mix(i)
			r.want[w]++
			a := &admissionv1.AdmissionResponse{Allowed: true}
			switch {
			case w == busycluster.HPAScale:
				r.decisions["allowed"]++
			case w == busycluster.ConfigMapEdit:
				r.decisions["uncovered"]++
			case mode == "deny":
				r.decisions["denied"]++
				a.Allowed = false
			default:
				r.decisions["warned"]++
				a.Warnings = []string{"parley: refused"}
			}
			r.answers = append(r.answers, a)
		}
		return r
	}
	for _, mode := range []string{"deny", "warn"} {
		if p := right(mode).problems(); len(p) != 0 {
			t.Errorf("%s mode, a right run: %q", mode, p)
		}
	}
	cases := []struct {
		name string
		edit func(*result)
		want []string
	}{
		{"fail-open", func(r *result) {
			r.unjudged, r.decisions["fail-open"], r.decisions["allowed"] = 1, 1, r.decisions["allowed"]-1
			r.answers[0].Warnings = []string{"Parley could not judge this change (timeout); allowed unjudged"}
		}, []string{"1 reviews answered unjudged", "want the mix's allowed 10", "1 answers wrong (the first, review 1: answered unjudged"}},
		{"no answer", func(r *result) { r.parley.errors, r.parley.first, r.answers[3] = 1, "timeout", nil },
			[]string{"1 reviews got no answer from serve (the first: timeout)"}},
		{"a decision missing", func(r *result) { r.decisions["denied"]-- }, []string{"serve's decisions allowed 10, denied 5, uncovered 4, want the mix's allowed 10, denied 6, uncovered 4"}},
		{"a wrong answer", func(r *result) { r.answers[5].Allowed = true }, []string{"1 answers wrong (the first, review 6: a cost optimizer scale-down allowed in deny mode)"}},
	}
	for _, tc := range cases {
		r := right("deny")
		tc.edit(r)
		got := strings.Join(r.problems(), "\n")
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: problems\n%s\nlack %q", tc.name, got, w)
			}
		}
	}
}
