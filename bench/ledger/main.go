//go:build unix

// Command ledger measures a full ledger replay of a large generated repository against
// `git log --first-parent --format='%H%x00%(trailers:only,unfold)'` on the same repository, in
// the same run, and an incremental update of the commits after it.
//
//	go run ./bench/ledger                      # 100,000 commits, 10 new for the incremental update
//	go run ./bench/ledger -commits 20000 -runs 5
//
// The repository is generated with git fast-import (every commit carries Intent, Motivation and
// Signed-off-by trailers, a third of the replica and capacity changes a Claim trailer, and changes
// one field of one Kubernetes or Terraform file) and cached under .cache/ledger-bench keyed by its
// parameters. Each run replays into a fresh index; the figures are the best and the median of the
// runs.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"syscall"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"

	"github.com/parleyhq/parley/internal/ledgertest"
	"github.com/parleyhq/parley/trailers/ledger"
)

func main() {
	commits := flag.Int("commits", 100000, "commits on the replayed branch")
	extra := flag.Int("extra", 10, "commits read by the incremental update")
	runs := flag.Int("runs", 3, "measured runs of each")
	cacheDir := flag.String("cache", ".cache/ledger-bench", "where generated repositories are kept")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *commits, *extra, *runs, *cacheDir); err != nil {
		fmt.Fprintln(os.Stderr, "bench/ledger:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, commits, extra, runs int, cacheDir string) error {
	p := ledgertest.Params{Commits: commits, Extra: extra, Seed: 1}
	started := time.Now()
	dir, err := ledgertest.Cached(ctx, cacheDir, p)
	if err != nil {
		return err
	}
	fmt.Printf("repository %s (%d + %d commits; ready in %s)\n", dir, commits, extra, time.Since(started).Round(time.Millisecond))
	fmt.Printf("machine: %d CPUs, %s, %s\n\n", runtime.NumCPU(), runtime.Version(), gitVersion())

	repo, err := git.PlainOpen(dir)
	if err != nil {
		return fmt.Errorf("open %s: %w", dir, err)
	}
	ref := func(name string) (plumbing.Hash, error) {
		r, err := repo.Reference(plumbing.ReferenceName(name), true)
		if err != nil {
			return plumbing.ZeroHash, fmt.Errorf("%s: %w", name, err)
		}
		return r.Hash(), nil
	}
	mainTip, err := ref("refs/heads/" + "main")
	if err != nil {
		return err
	}
	nextTip, err := ref("refs/heads/" + "next")
	if err != nil {
		return err
	}
	const benchRef = "refs/heads/parley-bench"
	setBench := func(h plumbing.Hash) error {
		return repo.Storer.SetReference(plumbing.NewHashReference(benchRef, h))
	}

	var gitTimes, gitPatchTimes, fullTimes, incTimes, gitCPU, fullCPU []time.Duration
	var full, inc ledger.UpdateStats
	tmp, err := os.MkdirTemp("", "parley-ledger-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	for i := range runs {
		// git log, output to /dev/null as a shell redirect would.
		devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		cmd := exec.CommandContext(ctx, "git", "log", "--first-parent", "--format=%H%x00%(trailers:only,unfold)", "main")
		cmd.Dir = dir
		cmd.Stdout = devnull
		cmd.Stderr = os.Stderr
		t := time.Now()
		err = cmd.Run()
		gitTimes = append(gitTimes, time.Since(t))
		devnull.Close()
		if cmd.ProcessState != nil {
			gitCPU = append(gitCPU, cmd.ProcessState.UserTime()+cmd.ProcessState.SystemTime())
		}
		if err != nil {
			return fmt.Errorf("git log: %w", err)
		}

		// For context: git log with textual diffs, which reads trees and blobs as the ledger does.
		if devnull, err = os.OpenFile(os.DevNull, os.O_WRONLY, 0); err != nil {
			return err
		}
		cmd = exec.CommandContext(ctx, "git", "log", "--first-parent", "-p", "--format=%H%x00%(trailers:only,unfold)", "main")
		cmd.Dir = dir
		cmd.Stdout = devnull
		cmd.Stderr = os.Stderr
		t = time.Now()
		err = cmd.Run()
		gitPatchTimes = append(gitPatchTimes, time.Since(t))
		devnull.Close()
		if err != nil {
			return fmt.Errorf("git log -p: %w", err)
		}

		// Full replay into a fresh index, then the incremental update of the next commits.
		if err := setBench(mainTip); err != nil {
			return err
		}
		dbPath := filepath.Join(tmp, fmt.Sprintf("run%d.db", i))
		cpu0 := cpuTime()
		t = time.Now()
		l, err := ledger.Open(dir, ledger.Options{Path: dbPath})
		if err != nil {
			return err
		}
		full, err = l.Update(ctx, benchRef)
		if err != nil {
			l.Close()
			return err
		}
		fullTimes = append(fullTimes, time.Since(t))
		fullCPU = append(fullCPU, cpuTime()-cpu0)
		if err := setBench(nextTip); err != nil {
			l.Close()
			return err
		}
		t = time.Now()
		inc, err = l.Update(ctx, benchRef)
		incTimes = append(incTimes, time.Since(t))
		l.Close()
		if err != nil {
			return err
		}
		if full.Commits != commits || inc.Commits != extra {
			return fmt.Errorf("replay read %d commits and the update %d, want %d and %d", full.Commits, inc.Commits, commits, extra)
		}
		fmt.Printf("run %d: git log %s (cpu %s), git log -p %s, full replay %s (cpu %s), incremental %s\n", i+1,
			gitTimes[i].Round(time.Millisecond), gitCPU[i].Round(time.Millisecond), gitPatchTimes[i].Round(time.Millisecond),
			fullTimes[i].Round(time.Millisecond), fullCPU[i].Round(time.Millisecond), incTimes[i].Round(10*time.Microsecond))
	}
	gb, gm := stats(gitTimes)
	fb, fm := stats(fullTimes)
	ib, im := stats(incTimes)
	fmt.Printf("\n%-44s %12s %12s\n", "", "best", "median")
	fmt.Printf("%-44s %12s %12s\n", "git log --first-parent (trailers)", gb.Round(time.Millisecond), gm.Round(time.Millisecond))
	fmt.Printf("%-44s %12s %12s\n", fmt.Sprintf("parley full replay (%d commits)", commits), fb.Round(time.Millisecond), fm.Round(time.Millisecond))
	fmt.Printf("%-44s %12.2f %12.2f\n", "ratio parley / git (wall clock)", float64(fb)/float64(gb), float64(fm)/float64(gm))
	pb, pm := stats(gitPatchTimes)
	fmt.Printf("%-44s %12s %12s\n", "context: git log --first-parent -p (diffs)", pb.Round(time.Millisecond), pm.Round(time.Millisecond))
	fmt.Printf("%-44s %12.2f %12.2f\n", "ratio parley / git log -p (wall clock)", float64(fb)/float64(pb), float64(fm)/float64(pm))
	gcb, gcm := stats(gitCPU)
	fcb, fcm := stats(fullCPU)
	fmt.Printf("%-44s %12s %12s\n", "git log CPU time (user+system)", gcb.Round(time.Millisecond), gcm.Round(time.Millisecond))
	fmt.Printf("%-44s %12s %12s\n", "parley full replay CPU time (all threads)", fcb.Round(time.Millisecond), fcm.Round(time.Millisecond))
	fmt.Printf("%-44s %12.2f %12.2f\n", "ratio parley / git (CPU time)", float64(fcb)/float64(gcb), float64(fcm)/float64(gcm))
	fmt.Printf("%-44s %12s %12s\n", fmt.Sprintf("parley incremental update (%d commits)", extra), ib.Round(10*time.Microsecond), im.Round(10*time.Microsecond))
	fmt.Printf("\nfull replay recorded %d claims and %d problems\n", full.Claims, full.Problems)
	return nil
}

// stats returns the best and the median of ds.
func stats(ds []time.Duration) (best, median time.Duration) {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[0], s[len(s)/2]
}

// cpuTime returns the CPU time this process has used, all threads, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func gitVersion() string {
	out, err := exec.Command("git", "version").Output()
	if err != nil {
		return "git unknown"
	}
	return string(out[:len(out)-1])
}
