// Package fielddiff turns two versions of an infrastructure file into the set of fields that changed,
// with their old and new values: Kubernetes manifests (multi-document YAML or JSON) and Terraform
// .tf files. A Snapshot is one parsed file; the ledger caches snapshots by blob hash so a blob is
// parsed once however many commits see it.
//
// No diff library is used: a file is flattened into a sorted list of (address, canonical value)
// leaves, and two sorted lists are compared in one merge walk. A JSON-patch library such as
// github.com/wI2L/jsondiff would first need both documents re-encoded as JSON and then report array
// moves and object-level operations that still have to be mapped back to fields; flattening gives
// field addresses directly and is several times faster, which matters when the ledger replays
// 100,000 commits.
package fielddiff
