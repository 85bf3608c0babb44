package app

import (
	"context"
	"fmt"
	"testing"

	"github.com/parleyhq/parley/webhooks/store"
)

// BenchmarkPullRequestEvent measures the GitHub API cost of judging a pull request: calls and
// response bytes for the first evaluation (token, check run and comment created) and for a
// re-evaluation whose verdict did not change (reads only; the ETag layer of parley serve would
// make them free 304s). The goal is at most 4 calls and no write for the re-evaluation.
func BenchmarkPullRequestEvent(b *testing.B) {
	for _, phase := range []string{"first", "unchanged"} {
		b.Run(phase, func(b *testing.B) {
			var calls, bytes, writes int
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				dir, git := remote(b)
				h, gh := handler(b)
				base, head := git("rev-parse", "main"), git("rev-parse", "refs/pull/7/head")
				ev := store.Delivery{ID: fmt.Sprint(i), Event: "pull_request", Body: prEvent(b, dir, base, head, "opened")}
				if phase == "unchanged" {
					if err := h.Handle(context.Background(), ev); err != nil {
						b.Fatal(err)
					}
				}
				c0, by0, w0 := gh.TotalCalls(), gh.TotalBytes(), len(gh.Writes())
				b.StartTimer()
				if err := h.Handle(context.Background(), ev); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				calls += gh.TotalCalls() - c0
				bytes += gh.TotalBytes() - by0
				writes += len(gh.Writes()) - w0
			}
			b.ReportMetric(float64(calls)/float64(b.N), "calls/event")
			b.ReportMetric(float64(bytes)/float64(b.N), "bytes/event")
			b.ReportMetric(float64(writes)/float64(b.N), "writes/event")
		})
	}
}
