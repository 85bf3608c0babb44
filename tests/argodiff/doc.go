// Package argodiff checks Parley's Argo CD gates with Argo CD's own code rather than with Parley's
// idea of it: the YAML gitops.AddGate writes is decoded strictly into Argo CD v3.2.6's
// Application and ApplicationSet types, and the ignoreDifferences it carries is fed to the
// controller's diff (util/argo/diff.StateDiffs) against a live Deployment whose replicas an HPA
// changed. A gated field must stop showing as drift; every other drift, and the same field on any
// other object, must still show; after gitops.RemoveGate the file is the user's again, byte for
// byte, and the drift shows again.
//
// It is a module of its own so that Argo CD's dependency graph stays out of Parley's. Run it with
//
//	cd tests/argodiff && go test ./...
//
// See README.md for what it covers, what it does not, and how long it takes.
package argodiff
