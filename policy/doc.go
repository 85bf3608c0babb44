// Package policy reads Parley's HCL policy language and compiles it into a Policy that the arbiter
// evaluates.
//
// A policy (by convention .parley/policy.hcl on a repository's default branch) declares intents with
// ranks, motivations with urgency, lifetimes and the actors trusted to assert them, actors matched
// from identities of every source, fields with standing owners, bounds, immutability and writer
// allow-lists, pairwise rules written as HCL expressions, freeze windows, oscillation detection and
// escalation. docs/policy.md is the language reference.
//
// Parse turns source into a Policy once: every expression is parsed, its references are checked
// (undefined actors, intents, motivations, variables and attributes are errors, with a suggestion),
// and it is classified so the arbiter can cache its results. A Policy is immutable after Parse and
// safe for concurrent use. Load errors (the file cannot be read) are plain wrapped errors; parse and
// validation errors are Diagnostics, each rendered as file:line:col: message.
package policy
