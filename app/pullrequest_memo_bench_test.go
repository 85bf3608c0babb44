package app

import (
	"context"
	"fmt"
	"testing"

	"github.com/parleyhq/parley/internal/fakegithub"
	"github.com/parleyhq/parley/reconcile"
	"github.com/parleyhq/parley/webhooks/store"
)

// BenchmarkJudgeDeepTF is bench/attack's deeptf attack in process: pull request #7 adds a
// Terraform file of 170,000 nested blocks (1.0 MB), and the same signed delivery is judged again
// and again. "first" judges it with a server that has judged nothing (a fresh PullRequests on
// the same clone cache and fake GitHub: the fetch, the ledger and the publish as in "repeated"),
// "repeated" with the server that judged it before. Issue 34's profile: 38 ms a delivery, 0.61
// of it lexing the refused file, 0.32 reading its blob, 0.13 parsing the policy.
// "repeated-ledger-settings-forgotten" is "repeated" with the ledger settings memo emptied before
// each delivery (docs/benchmarks.md, "A pull request delivered again").
//
//	go test ./app -run '^$' -bench BenchmarkJudgeDeepTF -benchtime 20x
func BenchmarkJudgeDeepTF(b *testing.B) {
	dir, base, head := deepRemote(b, 170_000)
	h, gh := handler(b)
	gh.SetCommit("acme/infra", head, fakegithub.Commit{AuthorLogin: "cost-optimizer[bot]", CommitterLogin: "cost-optimizer[bot]", Verified: true})
	body := prEvent(b, dir, base, head, "synchronize")
	deliver := func(h *PullRequests, i int) {
		if err := h.Handle(context.Background(), store.Delivery{ID: fmt.Sprint("deeptf-", i), Event: "pull_request", Body: body}); err != nil {
			b.Fatal(err)
		}
	}
	deliver(h, -1) // clone, check run and comment created: both phases then only fetch and read
	b.Run("first", func(b *testing.B) {
		defer cpuPerOp(b)()
		for i := 0; i < b.N; i++ {
			deliver(&PullRequests{Installations: h.Installations, Repos: h.Repos, Now: h.Now}, i)
		}
	})
	b.Run("repeated", func(b *testing.B) {
		defer cpuPerOp(b)()
		for i := 0; i < b.N; i++ {
			deliver(h, i)
		}
	})
	// The same server forgetting the default branch's ledger settings before each delivery, as
	// before issue 34's ledger settings memo: its policy is read and parsed each time the ledger
	// is opened.
	b.Run("repeated-ledger-settings-forgotten", func(b *testing.B) {
		defer cpuPerOp(b)()
		for i := 0; i < b.N; i++ {
			h.ledgers = reconcile.LedgerSettingsMemo{}
			deliver(h, i)
		}
	})
}

// cpuPerOp reports the process's CPU time (user and system, every goroutine: the fake GitHub's
// too) per op as cpu-µs/op when the returned func is called: on a shared machine the wall clock
// counts the other processes' turns, the CPU time far less.
func cpuPerOp(b *testing.B) func() {
	start := processCPU(b)
	return func() { b.ReportMetric(float64(processCPU(b)-start)/float64(b.N)/1e3, "cpu-µs/op") }
}
