//go:build unix

// Command realrepo times what a user runs on a real repository, end to end: a cold
// `parley ledger --json` (index and output) against `git log --first-parent -p HEAD -- '*.yaml'
// '*.yml' '*.tf'` in the same run, with each process's wall time and peak resident memory, at
// several points of the history (25%, 50%, 100% of the first-parent commits by default) to show
// how both grow with it.
//
//	go run ./bench/realrepo -repo /work/.mirror/argoproj+argo-cd/repo
//	go run ./bench/realrepo -repo DIR -fractions 100 -runs 3
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
	runs := flag.Int("runs", 1, "measured runs at each point")
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
		err = run(ctx, *repo, *branch, *fractions, *runs)
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

func run(ctx context.Context, repo, branch, fractions string, runs int) error {
	tmp, err := os.MkdirTemp("", "parley-realrepo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "parley")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/parley")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("build parley: %w", err)
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
		for i := range runs {
			g, err := measure(ctx, clone, "git", "log", "--first-parent", "-p", ref, "--", "*.yaml", "*.yml", "*.tf")
			if err != nil {
				return err
			}
			if err := os.RemoveAll(filepath.Join(clone, "parley")); err != nil {
				return err
			}
			p, err := measure(ctx, clone, bin, "ledger", "--json", "--branch", ref)
			if err != nil {
				return err
			}
			fmt.Printf("%3d%% (%6d commits) run %d\n  git log -p      %s\n  parley ledger   %s\n  ratio %.2fx time, %.2fx memory\n",
				pct, n, i+1, g, p, p.wall.Seconds()/g.wall.Seconds(), float64(p.maxRSS)/float64(g.maxRSS))
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
