// Package tfplan judges a Terraform plan: the JSON that `terraform show -json PLANFILE` prints
// (github.com/hashicorp/terraform-json's Plan, format_version 1.x).
//
// ReadPlan reads and checks the document (bounded to MaxPlanSize, with errors that say what is
// wrong: not JSON, not a plan, an unsupported format). Extract turns its resource_changes and
// resource_drift into per-attribute changes addressed as Parley fields
// (tf:<module dir>//<resource address>#<pointer>), compared leaf by leaf with the rules the rest of
// Parley uses for JSON trees: objects descend, arrays of scalars are one value, other arrays
// descend by index, null and empty collections are absent. Judge makes each change a claim (by the
// plan's author, or by an outside actor for drift) and arbitrates every touched field against the
// default branch's ledger under its policy, as `parley review` does for a pull request.
//
// Sensitive values (before_sensitive or after_sensitive true at the leaf or above it) never leave
// this package in a verdict or a printable change: they are "(sensitive)". The arbiter itself sees
// them only as keyed hashes, so an unchanged secret is still not a change, and a secret never
// reaches an explanation.
package tfplan
