// Package review judges a pull request: it gathers the claims the pull request makes (the fields its
// manifests and .tf files change, explicit Claim and Yield trailers, the intent and motivation its
// commits, body and labels declare), sets them against Git's claims (the base branch's ledger) and the
// live claims on the same fields, and returns the arbiter's verdict for every field.
//
// It speaks domain types only. The GitHub layer implements Source on top of the REST API; tests
// implement it on a real git repository.
package review
