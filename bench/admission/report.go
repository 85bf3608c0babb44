package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/parleyhq/parley/internal/busycluster"
)

// row is one line of the table: a run's figures, or the median of several runs'.
type row struct {
	label              string
	reviews            int
	parley, allowAll   [4]time.Duration // p50, p90, p99, max
	cpuMS, allowCPUMS  float64          // CPU milliseconds per review: serve's (over every replica), the allow-all process's
	p99Ratio, cpuRatio float64          // Parley / allow-all
	unjudged           float64
	errors, allowErr   float64
	rssMiB             []float64 // per serve replica
	load               string    // load average start → end
}

// rowOf is a run's row.
func rowOf(label string, r *result) row {
	out := row{label: label, reviews: r.reviews, unjudged: r.unjudged, errors: float64(r.parley.errors), allowErr: float64(r.allowAll.errors),
		load: r.loadBefore + " → " + r.loadEnd}
	for i, p := range []float64{50, 90, 99, 100} {
		out.parley[i], out.allowAll[i] = pct(r.parley.lat, p), pct(r.allowAll.lat, p)
	}
	out.cpuMS, out.allowCPUMS = 1000*r.cpu/float64(r.reviews), 1000*r.allowAllCPU/float64(r.reviews)
	out.p99Ratio, out.cpuRatio = ratio(float64(out.parley[2]), float64(out.allowAll[2])), ratio(out.cpuMS, out.allowCPUMS)
	for _, kib := range r.peakRSS {
		out.rssMiB = append(out.rssMiB, float64(kib)/1024)
	}
	return out
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return math.NaN()
	}
	return a / b
}

// median is the middle of xs (the mean of the middle two when there are evenly many); NaN when
// xs is empty or holds a NaN.
func median(xs []float64) float64 {
	if len(xs) == 0 || slices.ContainsFunc(xs, math.IsNaN) {
		return math.NaN()
	}
	s := slices.Sorted(slices.Values(xs))
	if n := len(s); n%2 == 1 {
		return s[n/2]
	} else {
		return (s[n/2-1] + s[n/2]) / 2
	}
}

// medianRow is the median of each column over rows (the ratios too: the median of the runs'
// ratios, not the ratio of the medians).
func medianRow(rows []row) row {
	col := func(f func(row) float64) float64 {
		xs := make([]float64, len(rows))
		for i, r := range rows {
			xs[i] = f(r)
		}
		return median(xs)
	}
	dur := func(f func(row) time.Duration) time.Duration {
		return time.Duration(math.Round(col(func(r row) float64 { return float64(f(r)) })))
	}
	out := row{label: fmt.Sprintf("median of %d", len(rows)), load: "—"}
	out.reviews = int(col(func(r row) float64 { return float64(r.reviews) }))
	for i := range 4 {
		out.parley[i] = dur(func(r row) time.Duration { return r.parley[i] })
		out.allowAll[i] = dur(func(r row) time.Duration { return r.allowAll[i] })
	}
	out.cpuMS, out.allowCPUMS = col(func(r row) float64 { return r.cpuMS }), col(func(r row) float64 { return r.allowCPUMS })
	out.p99Ratio, out.cpuRatio = col(func(r row) float64 { return r.p99Ratio }), col(func(r row) float64 { return r.cpuRatio })
	out.unjudged = col(func(r row) float64 { return r.unjudged })
	out.errors, out.allowErr = col(func(r row) float64 { return r.errors }), col(func(r row) float64 { return r.allowErr })
	if len(rows) > 0 {
		for i := range rows[0].rssMiB {
			out.rssMiB = append(out.rssMiB, col(func(r row) float64 {
				if i < len(r.rssMiB) {
					return r.rssMiB[i]
				}
				return math.NaN()
			}))
		}
	}
	return out
}

// header is the table's head: paste it once, then a row per run.
const header = "| run | reviews | Parley p50 | p90 | p99 | max | allow-all p50 | p90 | p99 | max | p99 Parley / allow-all | CPU per review: serve | allow-all | CPU Parley / allow-all | unjudged (fail open) | errors Parley / allow-all | serve peak RSS | load avg start → end |\n" +
	"|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n"

func (r row) markdown() string {
	rss := make([]string, len(r.rssMiB))
	for i, m := range r.rssMiB {
		rss[i] = fmt.Sprintf("%.0f", m)
	}
	return fmt.Sprintf("| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %.1fx | %.2f ms | %.2f ms | %.1fx | %s | %s / %s | %s MiB | %s |\n",
		r.label, r.reviews, ms(r.parley[0]), ms(r.parley[1]), ms(r.parley[2]), ms(r.parley[3]),
		ms(r.allowAll[0]), ms(r.allowAll[1]), ms(r.allowAll[2]), ms(r.allowAll[3]),
		r.p99Ratio, r.cpuMS, r.allowCPUMS, r.cpuRatio, count(r.unjudged), count(r.errors), count(r.allowErr), strings.Join(rss, " / "), r.load)
}

// count prints a count, or a median of counts (a half when the middle two differ by one).
func count(x float64) string {
	return strings.TrimSuffix(fmt.Sprintf("%.1f", x), ".0")
}

// describe is what a run's first cell says: the rate, duration, mode, log level, store and
// replicas.
func describe(o options) string {
	s := fmt.Sprintf("%d/s × %s (%s, log %s, %s", o.rate, o.duration, o.mode, o.logLevel, o.store)
	if o.replicas > 1 {
		s += fmt.Sprintf(" ×%d", o.replicas)
	}
	return s + ")"
}

// details is what a run's row has no room for: serve's decisions against the mix, how late the
// load generator sent, and errors.
func (r *result) details(w io.Writer, label string) {
	fmt.Fprintf(w, "%s: serve's decisions %s (the mix sent: %d HPA scales, %d cost optimizer scale-downs, %d ConfigMap edits); "+
		"the load generator sent p99 %s, at most %s after the due time (both sides' latencies include it)\n",
		label, decisionList(r.decisions), r.want[busycluster.HPAScale], r.want[busycluster.CostScaleDown], r.want[busycluster.ConfigMapEdit],
		ms(pct(r.lag, 99)), ms(pct(r.lag, 100)))
	fmt.Fprintf(w, "%s: CPU per review during the load: the load generator %.2f ms (both sides' requests)", label, 1000*r.senderCPU/float64(r.reviews))
	if !math.IsNaN(r.postgresCPU) {
		fmt.Fprintf(w, ", PostgreSQL %.2f ms (not in serve's column)", 1000*r.postgresCPU/float64(r.reviews))
	}
	fmt.Fprintln(w)
	if late := pct(r.lag, 99); late > 10*time.Millisecond {
		fmt.Fprintf(w, "%s: the load generator fell behind (p99 %s late): the machine was saturated, and both sides' latencies include it\n", label, ms(late))
	}
	if r.allowAll.errors > 0 {
		fmt.Fprintf(w, "%s: allow-all: %d errors, the first: %s\n", label, r.allowAll.errors, r.allowAll.first)
	}
	for _, p := range r.problems() {
		fmt.Fprintf(w, "%s: WRONG: %s\n", label, p)
	}
}

// runAll makes o.runs runs back to back (each with a fresh serve and repository; the parley
// binary built once), prints each run's row to logw as it ends, then the table to out: the rows,
// their median, and each run's details. It returns the exit code: 1 when a run failed or was
// wrong.
func runAll(o options, out, logw io.Writer) int {
	if err := o.check(); err != nil {
		fmt.Fprintln(logw, "admission:", err)
		return 2
	}
	if o.parley == "" {
		dir, err := os.MkdirTemp("", "parley-admission-build-")
		if err != nil {
			fmt.Fprintln(logw, "admission:", err)
			return 1
		}
		defer os.RemoveAll(dir)
		if o.parley, err = buildParley(dir, logw); err != nil {
			fmt.Fprintln(logw, "admission:", err)
			return 1
		}
	}
	var rows []row
	var results []*result
	code := 0
	for i := range o.runs {
		label := describe(o)
		if o.runs > 1 {
			label = fmt.Sprintf("%d of %d: %s", i+1, o.runs, label)
		}
		res, err := run(o, logw)
		if err != nil {
			fmt.Fprintf(logw, "admission: run %d: %v\n", i+1, err)
			code = 1
			break
		}
		rows, results = append(rows, rowOf(label, res)), append(results, res)
		fmt.Fprint(logw, header, rows[i].markdown())
		if len(res.problems()) != 0 {
			code = 1
		}
	}
	if len(rows) == 0 {
		return code
	}
	fmt.Fprint(out, header)
	for _, r := range rows {
		fmt.Fprint(out, r.markdown())
	}
	if len(rows) > 1 {
		fmt.Fprint(out, medianRow(rows).markdown())
	}
	fmt.Fprintln(out)
	for i, res := range results {
		res.details(out, fmt.Sprintf("run %d", i+1))
	}
	return code
}
