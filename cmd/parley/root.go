package main

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/parleyhq/parley/internal/version"
)

// newRootCmd builds the command tree. Commands are listed here explicitly: no init() registration.
func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "parley",
		Short: "Decide whose change to an infrastructure field wins, and explain why",
		Long: `Parley reads why each change to infrastructure was made (intent and motivation trailers),
keeps every actor's claims on every field in a Git ledger, and arbitrates competing claims under an
HCL policy.

Start with 'parley demo': it builds a small infrastructure repository with history and prints its ledger.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version.Get().String(),
	}
	// --version prints the same line a bug report quotes, without cobra's "parley version" prefix.
	root.SetVersionTemplate("{{.Version}}\n")
	root.AddCommand(
		newTrailersCmd(),
		newFieldsCmd(),
		newLedgerCmd(),
		newDemoCmd(),
		newPolicyCmd(), newInitCmd(), newExplainCmd(), newSimulateCmd(),
		newReviewCmd(),
		newServeCmd(), newDeliveriesCmd(), newAppCmd(), newDoctorCmd(),
		newGatesCmd(), newIngestCmd(), newVerdictsCmd(), newDiscoverCmd(), newReportCmd(),
		newTokensCmd(),
		newProposeCmd(),
		newMCPCmd(),
		newHooksCmd(),
		newRenderWorkerCmd(),
		newVersionCmd(),
	)
	return root
}

// isCobraUsageError recognises cobra's own argument and flag errors, which are usage errors (exit 2).
func isCobraUsageError(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand flag", "flag needs an argument",
		"invalid argument", "accepts ", "requires at least", "requires at most", "required flag"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}
