package main

import (
	"fmt"
	"os"

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

// helmWorker is the command that re-executes this binary as a Helm render worker.
func helmWorker() ([]string, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find the parley binary to render charts in a child process: %w", err)
	}
	return []string{exe, "render-worker", "helm"}, nil
}
