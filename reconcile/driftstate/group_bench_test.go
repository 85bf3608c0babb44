package driftstate

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/parleyhq/parley/core"
)

// BenchmarkGroupCommit is what one accepted admission review's record costs when k of them share
// a transaction: an HPA scale's batch (its proposal event, claim, verdict and timer, the field's
// version compared and swapped) on a SQLite file with synchronous=FULL, as serve writes it. The
// difference between k=1 and k=8 per batch is what a transaction itself costs (its WAL frames,
// checksums and fsync).
func BenchmarkGroupCommit(b *testing.B) {
	for _, k := range []int{1, 2, 4, 8} {
		b.Run(fmt.Sprintf("per-tx=%d", k), func(b *testing.B) {
			ctx := context.Background()
			db := open(b, filepath.Join(b.TempDir(), "state.db"))
			g := &Group{DB: db, max: k}
			versions := map[core.Field]int64{}
			n := 0
			cpu0 := cpuTime()
			b.ResetTimer()
			for b.Loop() {
				group := make([]groupReq, 0, k)
				for range k {
					f := svcField(n % 1000)
					c := claim("hpa", n%7+1, t0.Add(time.Duration(n)), fmt.Sprintf("p%d", n))
					c.Field = f
					c.Evidence = core.Evidence{Source: "proposal", EventIDs: []string{fmt.Sprint(n)}}
					v := core.Verdict{Field: f, Decision: core.DecisionYield, Winner: &c}
					group = append(group, groupReq{ctx: ctx, reply: make(chan error, 1), batch: Batch{
						At: c.At, Events: []string{fmt.Sprintf("proposal/%d", n)}, Claims: []core.Claim{c},
						Verdicts: []Record{{Verdict: v, At: c.At, Evidence: []string{fmt.Sprintf("proposal/%d", n)}, Note: "proposed and accepted"}},
						Timers:   []Timer{{Field: f}},
						Expect:   map[core.Field]int64{f: versions[f]},
					}})
					versions[f] += 1
					n++
				}
				g.commit(group)
				for _, r := range group {
					if err := <-r.reply; err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/batch")
			b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(n), "cpu-ns/batch")
		})
	}
}

// cpuTime is the process's CPU time so far (user and system).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
