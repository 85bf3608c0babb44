package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/parleyhq/parley/reconcile/gitops"
)

// newRenderWorkerCmd is the hidden child process that renders Helm charts and builds
// kustomizations for a gitops.RenderProcess (parley serve, discover, ingest, propose, mcp): it reads
// jobs on standard input, one at a time, and writes each result on standard output, under the
// memory budget its parent gives it; its parent kills it when a job's time budget is spent or the
// work is cancelled, and ends it by closing its input.
func newRenderWorkerCmd() *cobra.Command {
	return &cobra.Command{
		Use:       "render-worker serve",
		Short:     "Render Helm charts and build kustomizations for a parent parley process (internal)",
		Hidden:    true,
		Args:      cobra.ExactArgs(1),
		ValidArgs: []string{gitops.WorkerServe},
		RunE: func(cmd *cobra.Command, args []string) error {
			if args[0] != gitops.WorkerServe {
				return usageErr(fmt.Errorf("render-worker %q: the one mode is %s", args[0], gitops.WorkerServe))
			}
			return gitops.ServeWorker(args[0], cmd.InOrStdin(), cmd.OutOrStdout())
		},
	}
}

// renderWorker is the command that re-executes this binary as a render worker; the
// gitops.RenderProcess appends the worker's mode (serve). os.Executable reads
// /proc/self/exe on Linux; where /proc is not mounted (a chroot, a minimal sandbox) the path the
// binary was started by serves when it is absolute and names this very file.
func renderWorker() ([]string, error) {
	exe, err := os.Executable()
	if err != nil {
		if exe, err = startedAs(os.Args[0]); err != nil {
			return nil, fmt.Errorf("find the parley binary to render charts and build kustomizations in a child process: %w", err)
		}
	}
	return []string{exe, "render-worker"}, nil
}

// startedAs returns arg0 when it is an absolute path to an executable file.
func startedAs(arg0 string) (string, error) {
	if !filepath.IsAbs(arg0) {
		return "", fmt.Errorf("/proc/self/exe cannot be read and the binary was started as %q, not by an absolute path", arg0)
	}
	fi, err := os.Stat(arg0)
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("%s, the path the binary was started by, is not an executable file", arg0)
	}
	return arg0, nil
}

// renderHelp is the paragraph of --help of every command that renders a repository's charts and
// builds its kustomizations.
const renderHelp = `Each chart is rendered, and each kustomization a manager applies is built, in a child process
(this binary, re-executed, kept from one chart or build to the next) under a time budget for each
(--render-timeout, default 30s) and a memory budget (--render-memory, default 512 MiB), two at a
time: neither Helm's template engine nor kustomize can be interrupted, so a chart whose templates
loop or grow, or an overlay tree that fans out, is stopped there (its worker killed, the next job
given a fresh one) and reported as not rendered (not built), with why; an overlay not built is read
as its files are written. Ctrl-C stops the workers too. --render-in-process renders and builds in
this process instead, without budgets, for repositories you trust.`

// renderFlags are the rendering budgets of a command that discovers a repository's managers
// (parley discover, ingest, propose): one set of flags, registered by addRenderFlags, so that
// every command that renders a repository's charts and builds its kustomizations does it the same
// way.
type renderFlags struct {
	timeout   time.Duration
	memoryMiB int64
	parallel  int
	inProcess bool
}

// addRenderFlags registers --render-timeout, --render-memory, --render-parallel and
// --render-in-process on cmd.
func addRenderFlags(cmd *cobra.Command) *renderFlags {
	r := &renderFlags{}
	f := cmd.Flags()
	f.DurationVar(&r.timeout, "render-timeout", gitops.DefaultRenderTimeout, "the longest one chart's rendering or one kustomize build may take")
	f.Int64Var(&r.memoryMiB, "render-memory", gitops.DefaultRenderMemory>>20, "the most memory one chart's rendering or one kustomize build may use, in MiB, beyond its worker process's own (about 100 MiB)")
	f.IntVar(&r.parallel, "render-parallel", gitops.DefaultRenderParallel, "how many charts render and kustomizations build at once")
	f.BoolVar(&r.inProcess, "render-in-process", false, "render charts and build kustomizations in this process, without a time or memory budget (for trusted repositories)")
	return r
}

// renderer is the renderer the flags ask for: workers that take chart after chart and build after
// build under the budgets, or nil (render and build in this process) with --render-in-process.
// The caller defers closeWorkers, which ends the workers kept between jobs.
func (r *renderFlags) renderer() (helm gitops.HelmRenderer, closeWorkers func(), err error) {
	if r.inProcess {
		return nil, func() {}, nil
	}
	if r.timeout <= 0 || r.memoryMiB <= 0 || r.parallel <= 0 {
		return nil, nil, usageErr(fmt.Errorf("--render-timeout %s, --render-memory %d, --render-parallel %d: each must be above 0 (--render-in-process renders without budgets)",
			r.timeout, r.memoryMiB, r.parallel))
	}
	worker, err := renderWorker()
	if err != nil {
		return nil, nil, err
	}
	p := &gitops.RenderProcess{Command: worker, Timeout: r.timeout, Memory: r.memoryMiB << 20, Parallel: r.parallel}
	return p, func() { p.Close() }, nil
}
