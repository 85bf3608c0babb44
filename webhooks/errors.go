package webhooks

import (
	"errors"
	"fmt"
)

// ErrPermanent marks a handler error that no retry can fix (a payload the handler cannot
// decode, a repository Parley is not installed on). The pool dead-letters such a delivery at
// once instead of retrying it; after the cause is fixed, store Replay sends it through again.
// Return Permanent(err), or any error for which errors.Is(err, ErrPermanent) holds.
var ErrPermanent = errors.New("permanent failure")

// PermanentError wraps a handler error to mark it permanent. errors.Is(e, ErrPermanent) holds
// and errors.Unwrap(e) gives the cause.
type PermanentError struct {
	Err error
}

func (e *PermanentError) Error() string {
	if e.Err == nil {
		return ErrPermanent.Error()
	}
	return e.Err.Error()
}

func (e *PermanentError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrPermanent) hold for every PermanentError.
func (e *PermanentError) Is(target error) bool { return target == ErrPermanent }

// Permanent marks err permanent; Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &PermanentError{Err: err}
}

// panicError is what a recovered handler panic becomes: permanent, because a bug does not go
// away on retry.
type panicError struct {
	value any
}

func (e *panicError) Error() string { return fmt.Sprintf("handler panicked: %v", e.value) }

func (e *panicError) Is(target error) bool { return target == ErrPermanent }
