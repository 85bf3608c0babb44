// Package gitops writes verdicts into the files GitOps tools read, so Argo CD and Flux stop (or
// resume) reverting exactly one field, or so Git adopts a live value:
//
//   - a yield adds a per-field entry: Argo CD `spec.ignoreDifferences` (plus the
//     RespectIgnoreDifferences=true sync option, without which sync still applies Git's value),
//     Flux `spec.ignore` (kustomize-controller v1.9 and later), Flux HelmRelease
//     `spec.driftDetection.ignore` (helmgate.go), or a Terraform resource's lifecycle
//     `ignore_changes` (tfgate.go);
//   - a resume removes exactly that entry;
//   - an adoption writes a live value into a manifest or a Terraform attribute.
//
// Every gate Parley writes is listed in the object's `parley.dev/gates` annotation (field, until,
// rule, and for Flux the form written), which is how a resume finds what to remove and `parley
// gates` lists them; an annotation survives other tools' edits better than a comment would. Edits
// go through kyaml (YAML, comments kept, as Flux's image automation does) and hclwrite
// (Terraform, structure kept); an edit that changes nothing reports so, and bad input leaves the
// file untouched with an error naming it.
//
// # Older Flux: the remove patch
//
// kustomize-controller has spec.ignore only since v1.9 (apiVersion v1). A v1beta2 Kustomization,
// or a v1 one annotated `parley.dev/flux-gate: patch`, is gated with a spec.patches entry instead:
// a target naming the object (group, kind, name, namespace; no version) and a JSON6902 patch of
// one `remove` operation per gated pointer. A v1beta1 Kustomization gets the same as a
// spec.patchesJson6902 entry. `parley.dev/flux-gate: ignore` asks for spec.ignore, which only v1
// has. Parley changes only entries it wrote (exact target, nothing but its remove operations in
// its own layout), so a resume gives back the file's bytes. The patch takes the field out of
// what Flux applies: with Server-Side Apply that deletes or resets the field unless another
// manager owns it too, so it is safe only once, say, the HPA co-owns the field; spec.ignore has
// no such caveat.
//
// Every edit of a Kustomization is checked by decoding the result, strictly, with
// kustomize-controller's own API types (github.com/fluxcd/kustomize-controller/api v1.9.4: v1,
// v1beta2, v1beta1): a Kustomization that does not decode, or an edit whose decoded result does
// not hold the gate, is refused with an error naming the file and the object.
//
// # Discovery
//
// Discover reads a repository and finds its managers (Argo CD Applications and ApplicationSets,
// Flux Kustomizations and HelmReleases), the directories each applies, and for every object the
// file that defines it and the managers that apply it, under the identity it gets in the cluster.
// Kustomizations are built with the Kustomize API and charts in the repository rendered with the
// Helm SDK; nothing is fetched. Its doc comment lists the rules: kustomization files and their
// resources, kustomize-controller's generator for plain directories, Flux targetNamespace and
// kustomize namespace overrides, Argo CD's directory recursion and destination namespace,
// ApplicationSet git directory generators, duplicates and unparseable files (reported, not fatal).
package gitops
