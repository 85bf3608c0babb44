package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
)

// hookMarker is in every hook parley writes, so that install recognises its own hook (and
// replaces it) and never overwrites someone else's without --force.
const hookMarker = "# installed by parley hooks install"

func newHooksCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "hooks",
		Short: "Install Git hooks that check commits as Parley reads them",
	}
	cmd.AddCommand(newHooksInstallCmd())
	return cmd
}

func newHooksInstallCmd() *cobra.Command {
	var dir, binary string
	var force bool
	cmd := &cobra.Command{
		Use:   "install [--repo DIR]",
		Short: "Install a commit-msg hook that refuses a commit whose Parley trailers are malformed",
		Long: `Install writes a commit-msg hook into the repository's hooks directory (core.hooksPath when set,
else .git/hooks) that runs 'parley trailers check' on each commit message, with the repository's
core.commentChar: a commit whose Intent, Motivation, Claim, Yield or Expires trailer is malformed
is refused, with the line and the reason, before it exists (a trailer Parley cannot read is a claim
it cannot judge). A message without Parley trailers passes.

The hook runs --binary: by default the parley on PATH when there is one, else this binary's own
path. An existing commit-msg hook that parley did not write is left alone unless --force.`,
		Example: `  parley hooks install
  parley hooks install --repo ../infra --binary /usr/local/bin/parley`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireRepository(dir); err != nil {
				return usageErr(err)
			}
			out, err := explainGit(dir, "rev-parse", "--path-format=absolute", "--git-path", "hooks")
			if err != nil {
				return err
			}
			hooks := strings.TrimSpace(string(out))
			if binary == "" {
				if binary, err = exec.LookPath("parley"); err != nil {
					if binary, err = os.Executable(); err != nil {
						return fmt.Errorf("the parley binary for the hook: %w; give --binary", err)
					}
				}
			}
			if abs, err := filepath.Abs(binary); err == nil && strings.ContainsRune(binary, filepath.Separator) {
				binary = abs
			}
			if strings.ContainsAny(binary, "'\n") {
				return usageErr(fmt.Errorf("--binary %q: a path with a quote or a newline cannot be written into the hook", binary))
			}
			path := filepath.Join(hooks, "commit-msg")
			old, err := os.ReadFile(path)
			switch {
			case errors.Is(err, fs.ErrNotExist):
			case err != nil:
				return err
			case !strings.Contains(string(old), hookMarker) && !force:
				return usageErr(fmt.Errorf("%s exists and parley did not write it: add 'parley trailers check \"$1\"' to it yourself, or replace it with --force", path))
			}
			if err := os.MkdirAll(hooks, 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(path, []byte(commitMsgHook(binary)), 0o755); err != nil {
				return err
			}
			// WriteFile keeps the mode of a file that was there: make sure git can run it.
			if err := os.Chmod(path, 0o755); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "installed %s: commits with malformed Parley trailers are refused (%s trailers check)\n", path, binary)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&dir, "repo", ".", "the repository")
	f.StringVar(&binary, "binary", "", "the parley the hook runs (default: parley on PATH, else this binary)")
	f.BoolVar(&force, "force", false, "replace a commit-msg hook parley did not write")
	return cmd
}

// commitMsgHook is the hook's script: git gives it the message file as $1.
func commitMsgHook(binary string) string {
	return `#!/bin/sh
` + hookMarker + `: refuses a commit whose Parley trailers
# (Intent, Motivation, Claim, Yield, Expires) are malformed. docs/trailers.md lists them.
c=$(git config --get core.commentChar 2>/dev/null || true)
[ "${#c}" -eq 1 ] || c='#'
exec '` + binary + `' trailers check --comment-char "$c" "$1"
`
}
