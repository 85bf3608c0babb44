// Package report renders verdicts for people and machines: the sticky pull request comment (Markdown
// with the verdicts as JSON in a hidden HTML comment, so other bots and agents can read them), and
// the check run's conclusion and summary. It depends on the domain vocabulary only; the GitHub layer
// decides where the text goes.
package report
