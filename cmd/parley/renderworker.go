package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/parleyhq/parley/reconcile/gitops"
)

// newRenderWorkerCmd is the hidden child process that renders one Helm chart for a
// gitops.HelmProcess (parley serve, parley discover): it reads the job on standard input and
// writes the rendered templates on standard output, under the memory budget its parent gives it;
// its parent kills it when the time budget is spent or the work is cancelled.
func newRenderWorkerCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "render-worker helm",
		Short:  "Render one Helm chart for a parent parley process (internal)",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if args[0] != "helm" {
				return usageErr(fmt.Errorf("render-worker %q: the only worker is helm", args[0]))
			}
			return gitops.ServeHelm(cmd.InOrStdin(), cmd.OutOrStdout())
		},
	}
}

// helmWorker is the command that re-executes this binary as a Helm render worker. os.Executable
// reads /proc/self/exe on Linux; where /proc is not mounted (a chroot, a minimal sandbox) the path
// the binary was started by serves when it is absolute and names this very file.
func helmWorker() ([]string, error) {
	exe, err := os.Executable()
	if err != nil {
		if exe, err = startedAs(os.Args[0]); err != nil {
			return nil, fmt.Errorf("find the parley binary to render charts in a child process: %w", err)
		}
	}
	return []string{exe, "render-worker", "helm"}, nil
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
