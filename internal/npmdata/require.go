package npmdata

import (
	"errors"
	"testing"
)

// Require returns the directory of pkg as Dir does, fetching it if needed. It skips the test when
// npm is not installed to fetch it, and fails it on any other error.
func Require(t testing.TB, pkg string) string {
	t.Helper()
	dir, err := Dir(pkg)
	if err != nil {
		FatalOrSkip(t, err)
	}
	return dir
}

// FatalOrSkip ends the test over an error from this package (Dir, WebhookExamples,
// PatchedWebhookExample): skipped when it wraps ErrNoNPM, failed otherwise. A nil error does
// nothing.
func FatalOrSkip(t testing.TB, err error) {
	t.Helper()
	switch {
	case err == nil:
	case errors.Is(err, ErrNoNPM):
		t.Skip(err)
	default:
		t.Fatal(err)
	}
}
