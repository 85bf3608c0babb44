// Package trailers reads and writes git commit trailers exactly as git does, and reads Parley's
// trailer vocabulary (Intent, Motivation, Claim, Yield, Expires, Parley-PR) from them.
//
// Parse agrees byte for byte with `git interpret-trailers --parse`, and Add with
// `git interpret-trailers --trailer ...` (where=end), under the same options. The rules are git's,
// ported from trailer.c, commit.c (ignore_non_trailer) and wt-status.c (the scissors line) of git
// 2.39, with one deliberate difference: where git 2.39 loops forever (a "---" divider before a
// scissors line), the earlier cut wins, as in current git. Git stops reading a message at its first
// NUL byte; so does this package. No well-kept Go library implements git's rules faithfully (go-git
// has none; git2go and LUCI's footer parser differ on folding, tabs and empty values), so they are
// written here by hand and checked against the git binary by differential tests and fuzzing.
package trailers
