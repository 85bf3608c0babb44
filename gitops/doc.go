// Package gitops writes verdicts into the files GitOps tools read, so Argo CD and Flux stop (or
// resume) reverting exactly one field, or so Git adopts a live value:
//
//   - a yield adds a per-field entry: Argo CD `spec.ignoreDifferences` (plus the
//     RespectIgnoreDifferences=true sync option, without which sync still applies Git's value) or
//     Flux `spec.ignore` (kustomize-controller v1.9 and later);
//   - a resume removes exactly that entry;
//   - an adoption writes a live value into a manifest or a Terraform attribute.
//
// Every gate Parley writes is listed in the object's `parley.dev/gates` annotation (field, until,
// rule), which is how a resume finds what to remove and `parley gates` lists them; an annotation
// survives other tools' edits better than a comment would. Edits go through kyaml (YAML, comments
// kept, as Flux's image automation does) and hclwrite (Terraform, structure kept); an edit that
// changes nothing reports so, and bad input leaves the file untouched with an error naming it.
package gitops
