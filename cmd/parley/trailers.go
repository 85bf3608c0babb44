package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/parleyhq/parley/trailers"
)

func newTrailersCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "trailers",
		Short: "Parse, add and check commit message trailers exactly as git does",
		Long: `Read and write git trailers (the "Key: value" lines at the end of a commit message) with git's own
rules, and check Parley's trailers (Intent, Motivation, Claim, Yield, Expires). See docs/trailers.md.`,
		Example: `  git log -1 --format=%B | parley trailers parse
  printf 'Fix lag\n' | parley trailers add --trailer Intent=availability --trailer 'Motivation=incident INC-4211'
  parley trailers check .git/COMMIT_EDITMSG`,
	}
	cmd.AddCommand(newTrailersParseCmd(), newTrailersAddCmd(), newTrailersCheckCmd())
	return cmd
}

// parseFlags are git interpret-trailers' parsing options.
type parseFlags struct {
	noDivider   bool
	commentChar string
	separators  string
}

func (p *parseFlags) register(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&p.noDivider, "no-divider", false, `do not treat a "---" line as the end of the message (git's --no-divider)`)
	cmd.Flags().StringVar(&p.commentChar, "comment-char", "#", "the comment character (git's core.commentChar)")
	cmd.Flags().StringVar(&p.separators, "separators", ":", "characters that separate a key from its value (git's trailer.separators)")
}

func (p *parseFlags) options() (trailers.Options, error) {
	if len(p.commentChar) != 1 {
		return trailers.Options{}, fmt.Errorf("--comment-char must be one character, got %q", p.commentChar)
	}
	if p.separators == "" {
		return trailers.Options{}, fmt.Errorf("--separators must not be empty")
	}
	return trailers.Options{NoDivider: p.noDivider, CommentChar: p.commentChar[0], Separators: p.separators}, nil
}

func newTrailersParseCmd() *cobra.Command {
	var pf parseFlags
	cmd := &cobra.Command{
		Use:   "parse",
		Short: "Print a message's trailers, byte for byte as git interpret-trailers --parse does",
		Long: `Read a message on standard input and print its trailer block, one "Key: value" line per trailer, exactly
as 'git interpret-trailers --parse' prints it: same block detection (the 25% rule, divider, scissors,
comments), same unfolding of continuation lines.`,
		Example: `  git log -1 --format=%B | parley trailers parse
  parley trailers parse --no-divider < message.txt`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts, err := pf.options()
			if err != nil {
				return usageErr(err)
			}
			msg, err := io.ReadAll(cmd.InOrStdin())
			if err != nil {
				return fmt.Errorf("read standard input: %w", err)
			}
			_, err = io.WriteString(cmd.OutOrStdout(), trailers.FormatWith(trailers.Parse(string(msg), opts), opts))
			return err
		},
	}
	pf.register(cmd)
	return cmd
}

func newTrailersAddCmd() *cobra.Command {
	var pf parseFlags
	var add []string
	var ifExists string
	cmd := &cobra.Command{
		Use:   "add --trailer KEY=VALUE...",
		Short: "Add trailers to a message, as git interpret-trailers --trailer does",
		Long: `Read a message on standard input and print it with the trailers added at the end of its trailer block
(a new block after a blank line if it has none), above any divider, comments or scissors line, exactly
as 'git interpret-trailers --trailer' does. --if-exists says what to do when a trailer with the same
key already exists: addIfDifferentNeighbor (git's default), addIfDifferent, add, replace or doNothing.`,
		Example: `  printf 'Scale consumers\n' | parley trailers add --trailer Intent=availability --trailer 'Motivation=incident INC-4211 severity=high'
  git log -1 --format=%B | parley trailers add --if-exists replace --trailer Expires=4h`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts, err := pf.options()
			if err != nil {
				return usageErr(err)
			}
			ie, err := trailers.ParseIfExists(ifExists)
			if err != nil {
				return usageErr(fmt.Errorf("--if-exists: %w", err))
			}
			if len(add) == 0 {
				return usageErr(fmt.Errorf("no --trailer given"))
			}
			var ts []trailers.Trailer
			for _, a := range add {
				t, err := trailers.ParseTrailerArg(a, opts)
				if err != nil {
					return usageErr(fmt.Errorf("--trailer %q: %w", a, err))
				}
				ts = append(ts, t)
			}
			msg, err := io.ReadAll(cmd.InOrStdin())
			if err != nil {
				return fmt.Errorf("read standard input: %w", err)
			}
			out := trailers.Add(string(msg), ts, trailers.WriteOptions{Options: opts, IfExists: ie})
			_, err = io.WriteString(cmd.OutOrStdout(), out)
			return err
		},
	}
	pf.register(cmd)
	cmd.Flags().StringArrayVar(&add, "trailer", nil, "a trailer to add, KEY=VALUE or KEY:VALUE (repeatable)")
	cmd.Flags().StringVar(&ifExists, "if-exists", "addIfDifferentNeighbor", "what to do when the key already exists")
	return cmd
}

func newTrailersCheckCmd() *cobra.Command {
	var commentChar string
	cmd := &cobra.Command{
		Use:   "check [FILE]",
		Short: "Report malformed Parley trailers in a commit message (exit 1 if any)",
		Long: `Read a commit message from FILE (or standard input) and report every Parley trailer that is malformed
(an unknown intent word, a bad field address in Claim or Yield, an Expires that is neither an RFC 3339
time nor a duration, ...) with its line, key and reason, one per line. Exit status 1 when there is a
problem, 0 when there is none. The message is read the way the ledger reads commits (git log's
trailer rules: a "---" line does not end the message), so it works as a commit-msg hook:

  #!/bin/sh
  exec parley trailers check "$1"`,
		Example: `  parley trailers check .git/COMMIT_EDITMSG
  git log -1 --format=%B | parley trailers check`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(commentChar) != 1 {
				return usageErr(fmt.Errorf("--comment-char must be one character, got %q", commentChar))
			}
			var msg []byte
			var err error
			if len(args) == 1 {
				msg, err = os.ReadFile(args[0])
				if err != nil {
					return usageErr(err)
				}
			} else if msg, err = io.ReadAll(cmd.InOrStdin()); err != nil {
				return fmt.Errorf("read standard input: %w", err)
			}
			ts := trailers.Parse(string(msg), trailers.Options{NoDivider: true, CommentChar: commentChar[0]})
			_, probs := trailers.Interpret(ts, time.Now())
			out := cmd.OutOrStdout()
			for _, p := range probs {
				fmt.Fprintf(out, "line %d: %s: %s\n", p.Line, p.Key, p.Reason)
			}
			if len(probs) > 0 {
				return findingsErr(fmt.Errorf("%d malformed Parley trailer(s)", len(probs)))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&commentChar, "comment-char", "#", "the comment character (git's core.commentChar)")
	return cmd
}
