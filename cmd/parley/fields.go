package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/core/fielddiff"
)

func newFieldsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "fields",
		Short: "Compare infrastructure files field by field",
		Long:  `Work with field addresses in Kubernetes YAML and Terraform files (see docs/addresses.md).`,
		Example: `  parley fields diff old/web.yaml k8s/prod/web.yaml
  parley fields diff --as infra/kafka/main.tf /tmp/main.tf.orig infra/kafka/main.tf --json`,
	}
	cmd.AddCommand(newFieldsDiffCmd())
	return cmd
}

// fieldChangeJSON is one changed field. Values are plain JSON; a Terraform expression that is not a
// literal goes under old_expr or new_expr instead; an added field has no old value, a removed one no
// new value (docs/schemas/field-changes.schema.json).
type fieldChangeJSON struct {
	Field   string          `json:"field"`
	Old     json.RawMessage `json:"old,omitempty"`
	OldExpr string          `json:"old_expr,omitempty"`
	New     json.RawMessage `json:"new,omitempty"`
	NewExpr string          `json:"new_expr,omitempty"`
}

func fieldChangeOf(f core.Field, old, new core.Value) fieldChangeJSON {
	return fieldChangeJSON{Field: f.String(), Old: old.RawJSON(), OldExpr: old.Expr(), New: new.RawJSON(), NewExpr: new.Expr()}
}

func newFieldsDiffCmd() *cobra.Command {
	var as string
	var asJSON, exitCode bool
	cmd := &cobra.Command{
		Use:   "diff OLD NEW",
		Short: "Print the fields that differ between two versions of a file, with old and new values",
		Long: `Compare two versions of a Kubernetes YAML file (multi-document; objects matched by group, kind,
namespace and name) or a Terraform .tf file, and print each changed field address with its old and new
value; an added field's old value and a removed field's new value are (absent).

The file's kind and, for Terraform, its module directory come from NEW's path as given; when the files
are not where they live in the repository, name that path with --as (for example
--as infra/kafka/main.tf, so that addresses read tf:infra/kafka//...).`,
		Example: `  parley fields diff web-old.yaml k8s/prod/web.yaml
  git show HEAD~1:infra/kafka/main.tf > /tmp/old.tf && parley fields diff --as infra/kafka/main.tf /tmp/old.tf infra/kafka/main.tf
  parley fields diff a.yaml b.yaml --json`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := args[1]
			if as != "" {
				path = as
			}
			if !fielddiff.Supported(path) {
				return usageErr(fmt.Errorf("%s: not a file type Parley diffs (Kubernetes .yaml/.yml, Terraform .tf); name the type with --as", path))
			}
			old, err := os.ReadFile(args[0])
			if err != nil {
				return usageErr(err)
			}
			new, err := os.ReadFile(args[1])
			if err != nil {
				return usageErr(err)
			}
			changes, err := fielddiff.Diff(path, old, new)
			if err != nil {
				return usageErr(err)
			}
			out := cmd.OutOrStdout()
			if asJSON {
				list := make([]fieldChangeJSON, 0, len(changes))
				for _, c := range changes {
					list = append(list, fieldChangeOf(c.Field, c.Old, c.New))
				}
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				if err := enc.Encode(list); err != nil {
					return err
				}
			} else {
				for _, c := range changes {
					fmt.Fprintf(out, "%s: %s -> %s\n", c.Field, c.Old, c.New)
				}
			}
			if exitCode && len(changes) > 0 {
				return findingsErr(fmt.Errorf("%d field(s) differ", len(changes)))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&as, "as", "", "read both files as if they were at this repository path")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON: a list of {field, old, new} (old_expr, new_expr for Terraform expressions)")
	cmd.Flags().BoolVar(&exitCode, "exit-code", false, "exit with status 1 when fields differ (like git diff --exit-code)")
	return cmd
}
