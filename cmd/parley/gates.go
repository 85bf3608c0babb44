package main

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/parleyhq/parley/reconcile/gitops"
)

func newGatesCmd() *cobra.Command {
	var dir string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "gates [--repo DIR]",
		Short: "List every per-field gate Parley wrote for Argo CD, Flux and Terraform, and why",
		Long: `Gates reads every YAML and Terraform file of the repository's work tree and lists the per-field
gates Parley wrote: into Argo CD Applications, ApplicationSets and Flux Kustomizations (recorded in
their parley.dev/gates annotation), and into Terraform resources' lifecycle ignore_changes (recorded
in a "# parley.dev/gates:" comment in the lifecycle block). For each: the field, the object holding
the gate, until when, and the rule that decided it. A file that does not parse is reported on stderr
and skipped.`,
		Example: `  parley gates --repo ./infra
  parley gates --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			type row struct {
				File string `json:"file"`
				gitops.Listed
			}
			var rows []row
			err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
				if err != nil {
					return err
				}
				if d.IsDir() {
					if d.Name() == ".git" || d.Name() == ".cache" || d.Name() == "node_modules" {
						return filepath.SkipDir
					}
					return nil
				}
				if ext := strings.ToLower(filepath.Ext(p)); ext != ".yaml" && ext != ".yml" && ext != ".tf" {
					return nil
				}
				data, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				if !strings.Contains(string(data), gitops.Annotation) {
					return nil
				}
				rel, _ := filepath.Rel(dir, p)
				gates, err := gitops.ListGates(filepath.ToSlash(rel), data)
				if err != nil {
					fmt.Fprintf(cmd.ErrOrStderr(), "parley: skipped %v\n", err)
					return nil
				}
				for _, g := range gates {
					rows = append(rows, row{File: filepath.ToSlash(rel), Listed: g})
				}
				return nil
			})
			if err != nil {
				return usageErr(fmt.Errorf("read %s: %w", dir, err))
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				if rows == nil {
					rows = []row{}
				}
				return enc.Encode(rows)
			}
			if len(rows) == 0 {
				fmt.Fprintln(out, "no gates: Argo CD and Flux sync every field from Git")
				return nil
			}
			tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "FIELD\tGATED BY\tFILE\tUNTIL\tRULE")
			for _, r := range rows {
				until := "resumed by hand"
				if !r.Until.IsZero() {
					until = r.Until.UTC().Format(time.RFC3339)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Field, r.Target, r.File, until, r.Rule)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&dir, "repo", ".", "repository work tree")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the gates as JSON")
	return cmd
}
