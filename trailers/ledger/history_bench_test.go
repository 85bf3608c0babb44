package ledger

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/ledgertest"
)

// BenchmarkHistoryRead walks a first-parent history and compares every commit's tree with its
// first parent's (no blob read, no parse: the update's serial first stage), through go-git and
// through git rev-list, cat-file and diff-tree. The repository is $PARLEY_BENCH_REPO (a real one,
// e.g. a bare clone of onedr0p/home-ops), else a generated one of 2,000 commits. Besides wall time
// it reports this process's CPU and its git children's (waited for when the source closes):
//
//	PARLEY_BENCH_REPO=/tmp/lf/homeops.git go test ./trailers/ledger/ -run '^$' -bench HistoryRead -benchtime 3x
func BenchmarkHistoryRead(b *testing.B) {
	dir := os.Getenv("PARLEY_BENCH_REPO")
	if dir == "" {
		if testing.Short() {
			b.Skip("generates a repository with git fast-import")
		}
		dir = filepath.Join(b.TempDir(), "repo")
		if err := ledgertest.Generate(context.Background(), dir, ledgertest.Params{Commits: 2000, Seed: 1}); err != nil {
			b.Fatal(err)
		}
	}
	for _, viaGit := range []bool{false, true} {
		name := "go-git"
		if viaGit {
			name = "git"
		}
		b.Run(name, func(b *testing.B) {
			opts := Options{Path: filepath.Join(b.TempDir(), "ledger.db")}
			if viaGit {
				opts = EveryUpdateUsesGit(opts)
			}
			l, err := Open(dir, opts)
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			ref, err := l.resolveBranch("")
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			self0, children0 := cpuTimes(b)
			commits, files := 0, 0
			for b.Loop() {
				h, _, err := l.walk(ctx, "bench", ref.Hash(), "")
				if err != nil {
					b.Fatal(err)
				}
				if _, git := h.(*gitHistory); git != viaGit {
					b.Fatalf("history read through %T", h)
				}
				if err := h.start(ctx); err != nil {
					b.Fatal(err)
				}
				rd := &reader{repo: l.repo, paths: l.opts.Paths.WithDefaults()}
				for range h.len() {
					rc, _, err := h.next(rd)
					if err != nil {
						b.Fatal(err)
					}
					files += len(rc.files)
				}
				commits += h.len()
				h.close()
			}
			self1, children1 := cpuTimes(b)
			b.ReportMetric(float64((self1-self0).Milliseconds())/float64(b.N), "cpu-ms/op")
			b.ReportMetric(float64((children1-children0).Milliseconds())/float64(b.N), "git-cpu-ms/op")
			b.ReportMetric(float64(commits)/float64(b.N), "commits/op")
			b.ReportMetric(float64(files)/float64(b.N), "files/op")
		})
	}
}

// cpuTimes is the user and system CPU time of this process and of its waited-for children.
func cpuTimes(b *testing.B) (self, children time.Duration) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
		b.Fatal(err)
	}
	return self, time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
