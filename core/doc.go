// Package core is Parley's domain vocabulary: the words every other package shares.
//
// A Field names one value inside infrastructure code: a field of a Kubernetes object or an attribute
// of a Terraform resource. A Claim is one actor's wish for a Field, carrying why the actor wants it
// (Intent) and why now (Motivation). A Verdict is the arbiter's decision between competing claims.
//
// The package imports nothing of git, GitHub or HTTP: trailers, policy, the ledger and the GitHub App
// all speak these types, and the dependency arrows point here.
package core
