// Package webhooks is Parley's delivery intake: the HTTP receiver that turns GitHub webhook
// requests into durable store deliveries, and the worker pool that hands stored deliveries to
// event handlers.
//
// The receiver does as little as possible before answering, in this order: the method (405);
// the X-GitHub-Event and X-GitHub-Delivery headers (400 naming the header); the presence and
// form of X-Hub-Signature-256 (before the body is read); the size (413, from Content-Length or,
// for a chunked body, by http.MaxBytesReader at 25 MB); room in the unauthenticated body budget
// (guard.Bodies: a declared body waits up to guard.WaitForRoom for room, then 503 with
// Retry-After, before the body is read); the HMAC-SHA256 of the raw body against every live
// secret, computed as the body streams into a buffer of its declared size or, past
// SpoolThreshold, an unlinked temporary file, so secrets can be rotated without downtime. A
// missing, malformed or wrong signature is answered 401, or 429 with Retry-After once its client
// address has failed too often (guard.Failures, where a wrong signature's body counts one failure
// more per guard.FailureBytes read); the 429 only after a hold (guard.Failures.Hold: the
// Retry-After, at most a second), so that a flood of wrong signatures gets an answer a second
// per connection instead of thousands. A valid signature is never refused nor held for what its
// address did before: it is checked first. Only then is the body looked at:
// application/json and a JSON object (415, 400); then a
// durable Put. Only a Put that committed earns a 202; a redelivery of a stored
// delivery, or its body replayed under another delivery ID or event, earns a 200 saying
// "duplicate" and changes nothing; a store that cannot commit
// earns a 503, never a 2xx. Nothing is processed on the request's goroutine.
//
// The pool runs a fixed number of workers. Each claims a leased delivery from the store,
// dispatches it to the Handler registered for its (source, event) in the explicit map given to
// NewPool, and completes it, schedules a retry with exponential backoff and jitter, or
// dead-letters it on a permanent error. The receiver wakes idle workers through Pool.Notify,
// so a stored delivery is picked up without polling latency; a slow poll remains as a
// fallback for retries that come due and for deliveries stored by another process.
//
// Ping events are stored and processed like any other event (no handler is registered for
// them, so a worker completes them and counts them as unhandled). That makes GitHub's ping,
// sent when the App's webhook is configured, an end-to-end check of the intake: a ping
// answered 202 proves the secret matches and the store commits.
//
// Every log line about a delivery carries its source, ID and event under the LogKey*
// attribute names; secrets never reach a log (Secret redacts itself in every format).
package webhooks
