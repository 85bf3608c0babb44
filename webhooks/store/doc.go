// Package store is Parley's durable intake queue: every event that reaches Parley from outside
// (GitHub webhooks today; Flux, Argo CD, Kubernetes audit and CloudTrail events later) is written
// here before it is acknowledged, and workers take it from here to process it.
//
// Deliveries is the contract. SQLite is the implementation for a single replica: one file, WAL
// journal, synchronous=FULL, and a group-commit writer that batches concurrent Put calls into one
// transaction so that many receivers share one fsync. A Postgres implementation for several
// replicas must satisfy the same contract; the doc comments on Deliveries say what that means in
// SQL terms (leases with an owner and an expiry, claimed with SELECT ... FOR UPDATE SKIP LOCKED).
//
// Durability choice. The receiver answers 2xx only after Put returns, and GitHub never redelivers
// on its own, so an acknowledged delivery that is lost is lost for good. In WAL mode
// synchronous=NORMAL survives a process crash (SIGKILL: the WAL pages are already in the OS page
// cache) but can lose the last commits on power loss or a kernel crash, because the WAL is only
// synced at checkpoints. SyncFull syncs the WAL after every Put batch, so "acknowledged" means
// "on disk": the store commits at NORMAL and then fdatasyncs the WAL itself before it answers
// (SQLite's own FULL would call fsync, which on a journaled filesystem commits the journal each
// time; see walFile). SyncFull is the default; the sync it costs is paid once per batch, not
// once per delivery, which is what the group-commit writer is for. Only Put needs it: leases and
// outcomes (Claim, Complete, Fail, ...) ride on the next Put's sync, so a power loss can at worst
// make a delivery be processed again. SyncNormal exists for tests and for deployments that
// accept losing the last acknowledged deliveries on power loss.
//
// Latency. Two things keep a Put short under load: the group commit (one transaction and one
// WAL sync for every Put waiting at that moment), and checkpoints kept off the commit path.
// SQLite's automatic checkpoint makes the committer that crosses ~1000 WAL pages copy the WAL
// into the database file and fsync it, a stall of many milliseconds on that commit; here a
// goroutine owned by the store runs PASSIVE checkpoints on its own connection instead, which
// never block the writer. Measured figures are in docs/benchmarks.md ("Webhook
// acknowledgement") and bench/webhooks/README.md.
//
// Idempotency of the effects of a delivery is not this package's job: the store guarantees
// at-least-once processing (a worker that crashes mid-handler loses its lease and the delivery
// is claimed again), and handlers make their effects idempotent.
package store
