package ledger_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"

	"github.com/parleyhq/parley/internal/ledgertest"
	"github.com/parleyhq/parley/trailers/ledger"
)

// benchRepo generates a repository of 2,000 commits plus 10 on branch next. The 100,000-commit
// comparison with git log is go run ./bench/ledger.
func benchRepo(b *testing.B) (dir string, repo *git.Repository) {
	b.Helper()
	if testing.Short() {
		b.Skip("generates a repository with git fast-import")
	}
	dir = filepath.Join(b.TempDir(), "repo")
	if err := ledgertest.Generate(context.Background(), dir, ledgertest.Params{Commits: 2000, Extra: 10, Seed: 1}); err != nil {
		b.Fatal(err)
	}
	repo, err := git.PlainOpen(dir)
	if err != nil {
		b.Fatal(err)
	}
	return dir, repo
}

func setRef(b *testing.B, repo *git.Repository, name, target string) {
	b.Helper()
	r, err := repo.Reference(plumbing.ReferenceName(target), true)
	if err != nil {
		b.Fatal(err)
	}
	if err := repo.Storer.SetReference(plumbing.NewHashReference(plumbing.ReferenceName(name), r.Hash())); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkUpdateFull replays 2,000 commits into a fresh index.
func BenchmarkUpdateFull(b *testing.B) {
	dir, _ := benchRepo(b)
	tmp := b.TempDir()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		path := filepath.Join(tmp, "full.db")
		os.Remove(path)
		os.Remove(path + "-wal")
		os.Remove(path + "-shm")
		l, err := ledger.Open(dir, ledger.Options{Path: path})
		if err != nil {
			b.Fatal(err)
		}
		st, err := l.Update(context.Background(), "main")
		if err != nil || st.Commits != 2000 {
			b.Fatalf("update: %+v %v", st, err)
		}
		l.Close()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/2000, "ns/commit")
}

// BenchmarkUpdateIncremental reads the 10 commits after an indexed checkpoint of 2,000.
func BenchmarkUpdateIncremental(b *testing.B) {
	dir, repo := benchRepo(b)
	tmp := b.TempDir()
	base := filepath.Join(tmp, "base.db")
	setRef(b, repo, "refs/heads/bench", "refs/heads/main")
	l, err := ledger.Open(dir, ledger.Options{Path: base})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := l.Update(context.Background(), "bench"); err != nil {
		b.Fatal(err)
	}
	l.Close() // checkpoints the WAL into base.db
	setRef(b, repo, "refs/heads/bench", "refs/heads/next")
	path := filepath.Join(tmp, "inc.db")
	for b.Loop() {
		b.StopTimer()
		os.Remove(path + "-wal")
		os.Remove(path + "-shm")
		copyFile(b, base, path)
		l, err := ledger.Open(dir, ledger.Options{Path: path})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		st, err := l.Update(context.Background(), "bench")
		b.StopTimer()
		if err != nil || st.Commits != 10 || st.Rebuilt {
			b.Fatalf("update: %+v %v", st, err)
		}
		l.Close()
		b.StartTimer()
	}
}

func copyFile(b *testing.B, from, to string) {
	b.Helper()
	in, err := os.Open(from)
	if err != nil {
		b.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		b.Fatal(err)
	}
	if err := out.Close(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkUpdateIncrementalReal updates a copy of a real repository's index by the commits after
// its checkpoint: LEDGER_BENCH_REPO is the repository, LEDGER_BENCH_INDEX an index of its default
// branch built at an earlier tip (docs/benchmarks.md, issue 27, says how). Without them it does
// not run. With LEDGER_BENCH_GIT set the update reads through git as `parley ledger` does;
// without, through go-git as serve does.
func BenchmarkUpdateIncrementalReal(b *testing.B) {
	repo, base := os.Getenv("LEDGER_BENCH_REPO"), os.Getenv("LEDGER_BENCH_INDEX")
	if repo == "" || base == "" {
		b.Skip("LEDGER_BENCH_REPO and LEDGER_BENCH_INDEX name a repository and an older index of it")
	}
	path := filepath.Join(b.TempDir(), "inc.db")
	for b.Loop() {
		b.StopTimer()
		os.Remove(path + "-wal")
		os.Remove(path + "-shm")
		copyFile(b, base, path)
		opts := ledger.Options{Path: path}
		if os.Getenv("LEDGER_BENCH_GIT") != "" {
			opts = ledger.EveryUpdateUsesGit(opts)
		}
		l, err := ledger.Open(repo, opts)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		st, err := l.Update(context.Background(), "")
		b.StopTimer()
		if err != nil || st.Commits == 0 || st.Rebuilt {
			b.Fatalf("update: %+v %v", st, err)
		}
		l.Close()
		b.StartTimer()
	}
}
