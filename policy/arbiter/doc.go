// Package arbiter decides, for one field at one time, whose claim wins under a compiled policy, and
// explains why.
//
// Decide is a pure function of its Input: the field, the live claims, the claim Git holds, the
// field's claim history, the time, and a lookup of Git's current values (for bounds and owner
// conditions that refer to other fields). The result does not depend on the order of the live
// claims: they are sorted canonically first. The verdict lists every check and rule considered and
// its outcome, in words a person reads on a pull request; Explain renders it as text.
//
// An Arbiter caches what does not change between calls (actor resolution by identity, which policy
// blocks cover an object, and the outcome of rules that read only claim profiles), so reusing one
// Arbiter for many fields is much faster than calling Decide. An Arbiter is not safe for
// concurrent use; give each goroutine its own.
//
// The file formats the CLI reads (claims JSON, events JSONL) and the event replay behind
// 'parley simulate' live here too; docs/claims-format.md describes them.
package arbiter
