// Command parley is Parley's command-line interface: it reads and writes intent trailers, diffs
// infrastructure files field by field, replays a repository's claim ledger, arbitrates claims under a
// policy, and serves the GitHub App.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	// Mozilla's root certificates (kept by the Go team), used only where the system has none: the
	// container image is the static binary and a few files, without a CA bundle to keep current,
	// and TLS to GitHub and PostgreSQL must verify there as on any machine. The roots keep their
	// Mozilla distrust constraints, which a flat PEM bundle in the image would lose.
	_ "golang.org/x/crypto/x509roots/fallback"
)

// Exit codes: 0 success, 1 the command ran and found a problem (a policy error, a veto), 2 usage or
// input error, 3 an internal or environment failure.
const (
	exitOK       = 0
	exitFindings = 1
	exitUsage    = 2
	exitFailure  = 3
	// exitInterrupted is a shell's code for a command stopped by SIGINT (128 + 2).
	exitInterrupted = 130
)

// exitError carries a specific exit code out of a command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usageErr marks err as bad input from the user (exit 2).
func usageErr(err error) error { return &exitError{code: exitUsage, err: err} }

// findingsErr marks err as a finding, such as an invalid policy (exit 1).
func findingsErr(err error) error { return &exitError{code: exitFindings, err: err} }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// The first Ctrl-C or SIGTERM asks the command to stop where it stands cleanly (a ledger update
	// keeps its last checkpoint); the signal is then let go, so a second one kills at once.
	context.AfterFunc(ctx, stop)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes the CLI with the given arguments and streams and returns the process exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRootCmd()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		fmt.Fprintf(stderr, "parley: interrupted: %v\n", err)
		return exitInterrupted
	}
	fmt.Fprintf(stderr, "parley: %v\n", err)
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	if isCobraUsageError(err) {
		return exitUsage
	}
	return exitFailure
}
