// Package chatops reads Parley's slash commands from pull request comments.
//
// A command is a line of a paragraph that starts with "/parley", one command per line. The comment
// is read as GitHub renders it (goldmark, CommonMark with GitHub's extensions): lines inside code
// (fenced, indented or a code span), block quotes (lazy continuation lines included), HTML (an HTML
// comment opened in the middle of a line included), list items, headings and tables are never
// commands, so quoting someone's command, showing an example or hiding text never runs it. Parsing
// is pure: who may run a command is decided by the caller from the commenter's repository
// permission and the policy (see RequiredPermission).
package chatops
