// Package reconcile closes Parley's loop for changes made outside Git. A batch of decoded events
// (package events) becomes claims; each touched field is arbitrated against Git's claim (the
// ledger) and the other standing live claims under the repository's policy; the verdict is
// recorded with its evidence (package driftstate) and, where it asks for one, turned into exactly
// one Git change:
//
//   - yield: a per-field gate in the Argo CD Application/ApplicationSet or Flux Kustomization that
//     applies the object (package gitops finds them and writes the gate), so the GitOps tool stops
//     reverting that field and only that field;
//   - resume: the gate removed again, when the yield expires or the live claim loses;
//   - adopt: the live value written into the manifest or the Terraform attribute, keeping the
//     file's comments and layout;
//   - enforce Git, veto, hold, escalate: no write; the verdict is recorded and shown.
//
// Writes are idempotent: a gate that is already there, a value Git already has, a resume with no
// gate left all write nothing. That is what keeps machine-speed actors from causing commit storms:
// the HPA rescaling a field it owns changes no file after the first gate, and an oscillation hold
// writes nothing at all. Each write is one commit whose trailers carry the winning claim's intent
// and motivation and the verdict (rule, evidence); a Writer lands it (a pull request branch or the
// default branch, with optimistic concurrency, see package gitwrite).
//
// Yields that expire set a durable timer; Recheck judges the due fields again (the server's timer
// loop and `parley ingest` call it), which resumes Git's value once nothing holds the field.
//
// The server and `parley ingest` share this code path: they differ only in where the snapshot
// comes from (a fetched clone or a local repository) and which Writer lands the change.
package reconcile
