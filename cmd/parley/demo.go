package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/internal/demo"
	"github.com/parleyhq/parley/reconcile"
	"github.com/parleyhq/parley/trailers/ledger"
)

func newDemoCmd() *cobra.Command {
	var dir string
	var keep, all bool
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Build a small infrastructure repository with a contested history and print its ledger",
		Long: `Build, in a temporary directory (or --dir), an infrastructure repository with a realistic history:
a Kubernetes Deployment (prod/web) with its HorizontalPodAutoscaler, and Terraform for a Kafka consumer
autoscaling group, its lag alarm and an IAM role. Several writers change it: a platform engineer, an
on-call engineer hotfixing during incident INC-4211, a cost optimizer bot, a security scanner, and
commits without any Parley trailers; a pull request is merged. The Parley policy is committed as
.parley/policy.hcl.

Then print the repository's ledger: who claimed each field, why, and which claim Git holds now.
Everything is fixed (contents, authors, times), so the output is the same on every run. No GitHub
account, cluster or network is needed.

The temporary directory is removed afterwards unless --keep is given; a --dir is always kept.`,
		Example: `  parley demo
  parley demo --keep
  parley demo --dir /tmp/parley-demo && cd /tmp/parley-demo && git log --graph`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			target := dir
			if target == "" {
				tmp, err := os.MkdirTemp("", "parley-demo-")
				if err != nil {
					return fmt.Errorf("demo: %w", err)
				}
				target = tmp
				if !keep {
					defer os.RemoveAll(tmp)
				}
			}
			res, err := demo.Build(target)
			if err != nil {
				return usageErr(err)
			}
			l, err := reconcile.OpenLedger(res.Dir, res.Branch, "", ledger.Options{})
			if err != nil {
				return err
			}
			defer l.Close()
			stats, err := l.Update(cmd.Context(), res.Branch)
			if err != nil {
				return err
			}
			b, err := l.Branch(stats.Branch)
			if err != nil {
				return err
			}
			head, err := ledgerHeadOf(b, stats)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "Parley demo: an infrastructure repository with %d commits by five writers.\n\n", res.Commits)
			if err := writeLedgerText(cmd.Context(), out, b, head, core.FieldPattern{}, all, ledgerPolicy(l, stats.Branch)); err != nil {
				return err
			}
			if dir != "" || keep {
				fmt.Fprintf(cmd.ErrOrStderr(), "The demo repository is in %s (try: git -C %s log --graph --format=fuller).\n", res.Dir, res.Dir)
				fmt.Fprintf(cmd.ErrOrStderr(), "Replay live changes against it: parley ingest examples/drift/k8s-audit.json examples/drift/flux.json examples/drift/kafka-agent.jsonl --repo %s\n", res.Dir)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "build the repository in this directory (must not exist or be empty; kept)")
	cmd.Flags().BoolVar(&keep, "keep", false, "keep the temporary repository and print where it is")
	cmd.Flags().BoolVar(&all, "all", false, "show every field in full, including fields with a single claim")
	return cmd
}
