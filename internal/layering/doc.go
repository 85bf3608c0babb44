// Package layering holds the test that keeps Parley's import arrows pointing one way:
// cmd -> app -> webhooks, reconcile -> policy, trailers -> core (docs/dev/layout.md). It has no
// code of its own; the rules live in its test so that a wrong import fails `go test ./...`.
package layering
