// Package chatops reads Parley's slash commands from pull request comments.
//
// A command is a line that starts with "/parley" (after at most three spaces of indentation), one
// command per line. Lines inside fenced code blocks (``` or ~~~), indented code (four spaces or a
// tab), block quotes (">") and HTML comments are never commands, so quoting someone's command or
// showing an example never runs it. Parsing is pure: who may run a command is decided by the caller
// from the commenter's repository permission and the policy (see RequiredPermission).
package chatops
