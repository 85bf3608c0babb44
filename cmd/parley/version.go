package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/parleyhq/parley/internal/version"
)

func newVersionCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print Parley's version, the commit it was built from, that commit's time and the Go release",
		Long: `Version prints which build of Parley this is, read from the binary's own build information:
the version (a release's number, or the module pseudo-version of a build from a checkout), the
commit and its time, whether the checkout had uncommitted changes, and the Go release that compiled
it. Quote it in a bug report. 'parley --version' prints the same line; /metrics serves it as
parley_build_info.`,
		Example: `  parley version
  parley version --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info := version.Get()
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(info)
			}
			fmt.Fprintf(out, "version:  %s\n", info.Version)
			fmt.Fprintf(out, "commit:   %s\n", orUnknown(info.Revision))
			fmt.Fprintf(out, "built:    %s\n", orUnknown(info.Time))
			fmt.Fprintf(out, "modified: %t\n", info.Modified)
			fmt.Fprintf(out, "go:       %s\n", info.GoVersion)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the build information as JSON")
	return cmd
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
