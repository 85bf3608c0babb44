// Package app is Parley's GitHub App: the handlers that turn GitHub deliveries into verdicts and
// publish them (one check run and one sticky comment per pull request), wired to the delivery
// intake in webhooks and the clones in repocache. It is the only package that speaks go-github;
// everything it decides comes from review, policy and the ledger.
package app
