package ledger

import (
	"context"
	"fmt"

	"github.com/go-git/go-git/v5/plumbing"
)

// BlobSource reads file contents for one Update in place of go-git: the CLI gives one that asks
// `git cat-file --batch` (internal/gitcatfile), which reads a long history's blobs at a fraction
// of go-git's CPU. The update's reader goroutine is its only user, and the update closes it.
type BlobSource interface {
	// Blob returns blob h's content and size. found is false when the source lacks the object or
	// it is not a blob: go-git is asked instead, so a problem reads the same either way. A blob
	// larger than maxBytes comes back with its size and no content. An error means the source
	// failed: go-git reads the rest of the update.
	Blob(h plumbing.Hash, maxBytes int64) (data []byte, size int64, found bool, err error)
	Close() error
}

// tooLargeError is a blob the ledger does not parse, whichever reader found its size.
type tooLargeError struct {
	h         plumbing.Hash
	size, max int64
}

func (e tooLargeError) Error() string {
	return fmt.Sprintf("blob %s is %d bytes, more than the %d the ledger parses", e.h, e.size, e.max)
}

// openBlobs opens the Options' blob source for an update, or returns nil (go-git reads the blobs)
// when none is configured or it cannot start (no git binary). A short update uses it too: go-git's
// first object read loads the pack's index, far dearer on a large repository than starting git.
func (l *Ledger) openBlobs(ctx context.Context) BlobSource {
	if l.opts.OpenBlobs == nil {
		return nil
	}
	src, err := l.opts.OpenBlobs(ctx, l.gitDir)
	if err != nil {
		l.opts.Logger.Debug("ledger: blobs read with go-git", "reason", err)
		return nil
	}
	return src
}
