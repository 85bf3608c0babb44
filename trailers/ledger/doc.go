// Package ledger reads the claim history of infrastructure fields out of Git.
//
// Every commit on the first-parent history of a branch becomes claims:
//
//   - an implicit claim on every field the commit changed (the field-level diff of the commit's tree
//     against its first parent's tree, for the files package fielddiff understands), with the value
//     the commit set (absent for a removal);
//   - an explicit claim for every Claim trailer, merged with the implicit one when the commit also
//     changed that field;
//   - a yield for every Yield trailer (a field or a field pattern).
//
// All of a commit's claims carry the commit's author (git-author email and name), its committer time
// (when the change entered the branch), its Intent, Motivation and Expires trailers, and Evidence
// naming the commit and, where the message or trailers carry one, the pull request.
//
// A commit without an Intent trailer gets the intent baseline: core defines baseline as the intent of a
// change that declared none (Git's standing configuration), and policies rank it lowest. The ledger
// remembers that the intent was not declared (Entry.IntentDeclared), so that it stays visible as such.
//
// Merge commits are diffed against their first parent, which is what the merge brought to the branch,
// and their own message supplies the trailers; a merge or squash message naming a pull request
// ("Merge pull request #12 from ...", "title (#12)", "Parley-PR: 12") records it.
//
// In a shallow clone the history starts at the shallow boundary: a boundary commit has no parent
// in the repository, so it claims every field its tree holds, like a root commit.
//
// Problems never stop the replay and are never dropped: a malformed Parley trailer, a file that
// cannot be parsed (a Helm template, say), or a Claim trailer whose value disagrees with what the
// commit wrote are recorded against the commit and returned by Problems.
//
// # Index
//
// The ledger is persisted in SQLite at <git dir>/parley/ledger.db. It is a derived index: everything
// in it can be rebuilt from Git, so it uses WAL with synchronous=NORMAL, and a database with another
// schema version is rebuilt rather than migrated. Each indexed branch has a checkpoint, the tip it
// was last updated to; Update reads only the commits after it. When the checkpoint is no longer on the
// first-parent history of the branch's tip (a force-push), the branch's ledger is rebuilt from the
// root and UpdateStats.Rebuilt says so. An update is one transaction: a failed or cancelled update
// leaves the previous checkpoint and its claims as they were.
//
// Several branches may be indexed in one database; each has its own claims.
package ledger
