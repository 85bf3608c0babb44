// Package demo builds Parley's demonstration repository: a small infrastructure repository with a
// realistic history of competing writers, used by `parley demo` and by tests.
//
// The repository holds a Kubernetes Deployment (prod/web) with its HorizontalPodAutoscaler, and a
// Terraform module for a Kafka consumer group: an autoscaling group, a consumer lag alarm and an IAM
// role and policy. Its history has a platform engineer, an on-call engineer hotfixing during incident
// INC-4211, a cost optimizer bot right-sizing, a security scanner bumping an image for a CVE, commits
// with and without Parley trailers, a merged pull request and a squash-style commit. The demo policy
// (policy.hcl, embedded) is committed as .parley/policy.hcl.
//
// Every commit is signed as git signs with gpg.format=ssh, by an ed25519 key derived from its
// author's email (PublicKey, PrivateKey; the policy lists them in signing_keys), except one: the
// tuning of the lag alarm carries Alice's name and email without her signature, so the ledger shows
// it as unverified and it counts as no actor.
//
// Everything is fixed (contents, authors, times), so commit hashes and the printed ledger are the
// same on every run.
package demo
