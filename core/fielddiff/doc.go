// Package fielddiff turns two versions of an infrastructure file into the set of fields that changed,
// with their old and new values: Kubernetes manifests (multi-document YAML or JSON) and Terraform
// .tf files. A Snapshot is one parsed file; the ledger caches snapshots by blob hash so a blob is
// parsed once however many commits see it. The address grammar and the granularity rules are in
// docs/addresses.md.
//
// No diff library is used: a file is flattened into a sorted list of (address, canonical value)
// leaves, and two sorted lists are compared in one merge walk. github.com/wI2L/jsondiff (in go.mod)
// was measured on a 40-line Deployment: it needs both versions as JSON first (sigs.k8s.io/yaml costs
// as much as our whole parse), CompareJSON alone took about 30 µs where DiffSnapshots on cached
// snapshots takes under 1 µs, and its output is JSON Patch (a removed object is one operation, a
// changed list of scalars is per-index operations) that would still have to be mapped back to fields
// and granularity rules. Flattening yields the addresses directly.
//
// Kubernetes YAML is read with sigs.k8s.io/yaml's semantics (see yaml.go) on a go.yaml.in/yaml/v3
// node tree; Terraform with github.com/hashicorp/hcl/v2's hclsyntax (see tf.go).
package fielddiff
