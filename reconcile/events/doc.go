// Package events decodes out-of-band change events into Parley's domain values: Kubernetes audit
// events (the audit webhook backend's EventList), Flux notification-controller events, Argo CD
// notifications (the template Parley ships in charts/parley/argocd-notifications.yaml) and AWS
// CloudTrail records (raw, in an S3 "Records" file, or in an EventBridge envelope).
//
// Each decoder takes the request body and returns a Batch: Observations (a field's live value and who
// wrote it, before a policy names the actor), Reverts (a GitOps tool just re-applied Git over live
// objects), OutOfSync objects, and counts of the events it ignored, keyed by reason. Irrelevant events
// (reads, status writes, lease and event noise, failed or dry-run requests, unknown API calls) are
// counted, never an error; only a body that is not the expected JSON is an error, and it names the
// byte offset or the key that was wrong. A Batch is all or nothing: a decoding error returns no
// partial batch.
//
// There is no HTTP, store or GitHub here: the server authenticates and persists, and uses Deduper as
// a fast in-memory pre-check on the sources' own event IDs before its durable store. Claims turns
// observations into core.Claims for the arbiter. docs/events.md documents the formats, the inferences
// (patch type, actor, resource kind) and the annotation and tag convention (parley.dev/intent,
// parley.dev/motivation, parley.dev/expires) by which actors declare why they changed a field.
package events
