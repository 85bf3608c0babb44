// Package realk8s holds the end-to-end test that runs Parley's GitOps gate and audit-event code
// against a real kube-apiserver and a real Flux kustomize-controller (see README.md). It is its
// own module so that client-go and the control-plane binaries it drives stay out of the parley
// module's dependencies.
package realk8s
