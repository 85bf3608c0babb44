//go:build unix

// Command realrepo times what a user runs on a real repository, end to end: a cold
// `parley ledger --json` (index and output) against `git log --first-parent -p HEAD -- '*.yaml'
// '*.yml' '*.tf'` in the same run, with each process's wall time and peak resident memory, at
// several points of the history (25%, 50%, 100% of the first-parent commits by default) to show
// how both grow with it. Each process's CPU time (user and system, its waited-for children
// included, from wait4's rusage) is reported beside its wall time: on a shared machine the CPU
// ratio is the figure that load does not move. With -runs N the sides run interleaved (git,
// parley, git, parley, ...) and the medians are printed; -bin compares other builds of parley
// (the code before a change) in the same interleaved runs.
//
//	go run ./bench/realrepo -repo /work/.mirror/argoproj+argo-cd/repo
//	go run ./bench/realrepo -repo DIR -fractions 100 -runs 3
//	go run ./bench/realrepo -repo DIR -fractions 100 -runs 3 -bin /tmp/parley-before,/tmp/parley-after
//	go run ./bench/realrepo -repo DIR -review FILE -old TEXT -new TEXT -runs 3   # one pull request (review.go)
//
// The repository is cloned (bare, local, objects hard-linked) into a temporary directory, so the
// snapshot it reads is never written to; a branch is made there at each fraction. Snapshots of
// public repositories come from the search tool's fetch (see DEVELOPERS.md); they are never
// committed. -cpuprofile and -memprofile profile an in-process ledger update of the whole history
// instead.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/trailers/ledger"
)

func main() {
	repo := flag.String("repo", "", "the repository to measure (a work tree or bare repository; required)")
	branch := flag.String("branch", "", "the branch (default: the branch HEAD points at)")
	fractions := flag.String("fractions", "25,50,100", "points of the first-parent history to measure, in percent")
	runs := flag.Int("runs", 1, "measured runs at each point, interleaved; medians are printed when more than one")
	bins := flag.String("bin", "", "comma-separated parley binaries to measure (default: build ./cmd/parley)")
	cpuprofile := flag.String("cpuprofile", "", "profile an in-process update of the whole history into this file instead")
	memprofile := flag.String("memprofile", "", "write a heap profile after an in-process update of the whole history")
	var rf reviewFlags
	flag.StringVar(&rf.file, "review", "", "time one pull request on the indexed repository instead (issue 27): the file a Renovate-style bump changes")
	flag.StringVar(&rf.old, "old", "", "with -review: the text the bump replaces (once in the file)")
	flag.StringVar(&rf.new, "new", "", "with -review: the text it puts instead")
	flag.StringVar(&rf.parley, "parley", "", "with -review: another parley binary to time beside this tree's, interleaved (an older build)")
	flag.Parse()
	if *repo == "" {
		fmt.Fprintln(os.Stderr, "bench/realrepo: -repo is required: a snapshot of a public repository (see DEVELOPERS.md: fetch github:argoproj/argo-cd)")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	if rf.file != "" {
		rf.runs = *runs
		err = review(ctx, *repo, *branch, rf)
	} else if *cpuprofile != "" || *memprofile != "" {
		err = profile(ctx, *repo, *branch, *cpuprofile, *memprofile)
	} else {
		err = run(ctx, *repo, *branch, *fractions, *runs, *bins)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench/realrepo:", err)
		os.Exit(1)
	}
}

func git(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimSpace(string(out)), nil
}

// measured is one process's cost.
type measured struct {
	wall   time.Duration
	cpu    time.Duration
	maxRSS int64 // bytes
	out    int64 // bytes written to stdout
}

func (m measured) String() string {
	return fmt.Sprintf("%8.2fs wall %8.2fs cpu %7.0f MiB peak RSS %8.1f MiB out", m.wall.Seconds(), m.cpu.Seconds(),
		float64(m.maxRSS)/(1<<20), float64(m.out)/(1<<20))
}

// countingWriter counts what a process prints, as a redirect to a file would take it.
type countingWriter struct{ n int64 }

func (w *countingWriter) Write(p []byte) (int, error) { w.n += int64(len(p)); return len(p), nil }

func measure(ctx context.Context, dir string, name string, args ...string) (measured, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var out countingWriter
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	t := time.Now()
	err := cmd.Run()
	m := measured{wall: time.Since(t), out: out.n}
	if cmd.ProcessState != nil {
		m.cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			m.maxRSS = ru.Maxrss * 1024 // kilobytes on Linux
		}
	}
	if err != nil {
		return m, fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, stderr.String())
	}
	return m, nil
}

// median returns the median of each figure of ms, taken separately.
func median(ms []measured) measured {
	pick := func(f func(measured) int64) int64 {
		v := make([]int64, len(ms))
		for i, m := range ms {
			v[i] = f(m)
		}
		slices.Sort(v)
		if len(v)%2 == 1 {
			return v[len(v)/2]
		}
		return (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return measured{
		wall:   time.Duration(pick(func(m measured) int64 { return int64(m.wall) })),
		cpu:    time.Duration(pick(func(m measured) int64 { return int64(m.cpu) })),
		maxRSS: pick(func(m measured) int64 { return m.maxRSS }),
		out:    pick(func(m measured) int64 { return m.out }),
	}
}

func ratios(p, g measured) string {
	return fmt.Sprintf("ratio %.2fx wall, %.2fx cpu, %.2fx memory", p.wall.Seconds()/g.wall.Seconds(), p.cpu.Seconds()/g.cpu.Seconds(),
		float64(p.maxRSS)/float64(g.maxRSS))
}

func run(ctx context.Context, repo, branch, fractions string, runs int, binList string) error {
	tmp, err := os.MkdirTemp("", "parley-realrepo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	var bins []string
	if binList != "" {
		for _, b := range strings.Split(binList, ",") {
			abs, err := filepath.Abs(b)
			if err != nil {
				return err
			}
			bins = append(bins, abs)
		}
	} else {
		bin := filepath.Join(tmp, "parley")
		build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/parley")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("build parley: %w", err)
		}
		bins = []string{bin}
	}
	clone := filepath.Join(tmp, "repo.git")
	if _, err := git(ctx, tmp, "clone", "--quiet", "--bare", "--local", repo, clone); err != nil {
		return err
	}
	if branch == "" {
		if branch, err = git(ctx, clone, "symbolic-ref", "--short", "HEAD"); err != nil {
			return err
		}
	}
	list, err := git(ctx, clone, "rev-list", "--first-parent", "--reverse", branch)
	if err != nil {
		return err
	}
	commits := strings.Fields(list)
	gitVersion, _ := git(ctx, tmp, "version")
	fmt.Printf("repository %s, branch %s: %d first-parent commits\n", repo, branch, len(commits))
	fmt.Printf("machine: %d CPUs, %s, %s\n\n", runtime.NumCPU(), runtime.Version(), gitVersion)
	for _, fs := range strings.Split(fractions, ",") {
		pct, err := strconv.Atoi(strings.TrimSpace(fs))
		if err != nil || pct <= 0 || pct > 100 {
			return fmt.Errorf("-fractions: %q is not a percentage from 1 to 100", fs)
		}
		n := len(commits) * pct / 100
		ref := fmt.Sprintf("bench-%d", pct)
		if _, err := git(ctx, clone, "branch", "--force", ref, commits[n-1]); err != nil {
			return err
		}
		var gs []measured
		ps := make([][]measured, len(bins))
		for i := range runs {
			g, err := measure(ctx, clone, "git", "log", "--first-parent", "-p", ref, "--", "*.yaml", "*.yml", "*.tf")
			if err != nil {
				return err
			}
			gs = append(gs, g)
			fmt.Printf("%3d%% (%6d commits) run %d\n  git log -p      %s\n", pct, n, i+1, g)
			for b, bin := range bins {
				if err := os.RemoveAll(filepath.Join(clone, "parley")); err != nil {
					return err
				}
				p, err := measure(ctx, clone, bin, "ledger", "--json", "--branch", ref)
				if err != nil {
					return err
				}
				ps[b] = append(ps[b], p)
				fmt.Printf("  parley ledger   %s  %s\n  %s\n", p, filepath.Base(bin), ratios(p, g))
			}
		}
		if runs > 1 {
			g := median(gs)
			fmt.Printf("%3d%% (%6d commits) medians of %d interleaved runs\n  git log -p      %s\n", pct, n, runs, g)
			for b, bin := range bins {
				p := median(ps[b])
				fmt.Printf("  parley ledger   %s  %s\n  %s\n", p, filepath.Base(bin), ratios(p, g))
			}
		}
	}
	return nil
}

// profile runs a cold ledger update in this process under the CPU profiler and/or writes a heap
// profile at its end, printing the update's figures.
func profile(ctx context.Context, repo, branch, cpuprofile, memprofile string) error {
	tmp, err := os.MkdirTemp("", "parley-realrepo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	l, err := ledger.Open(repo, ledger.Options{Path: filepath.Join(tmp, "ledger.db")})
	if err != nil {
		return err
	}
	defer l.Close()
	if cpuprofile != "" {
		f, err := os.Create(cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	t := time.Now()
	stats, err := l.Update(ctx, branch)
	if err != nil {
		return err
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fmt.Printf("update: %d commits, %d claims, %d problems in %s; heap in use %d MiB, total allocated %d MiB, %d GCs\n",
		stats.Commits, stats.Claims, stats.Problems, time.Since(t).Round(time.Millisecond), ms.HeapInuse>>20, ms.TotalAlloc>>20, ms.NumGC)
	if memprofile != "" {
		f, err := os.Create(memprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
			return err
		}
	}
	b, err := l.Branch(stats.Branch)
	if err != nil {
		return err
	}
	t = time.Now()
	fields := 0
	if err := b.EachField(ctx, core.FieldPattern{}, func(ledger.FieldHistory) error { fields++; return nil }); err != nil {
		return err
	}
	fmt.Printf("read back %d fields in %s\n", fields, time.Since(t).Round(time.Millisecond))
	return nil
}
