package ledger

import (
	"context"

	"github.com/parleyhq/parley/internal/gitcatfile"
)

// EveryUpdateUsesCatFile makes every update, even of one commit, read its blobs through git
// cat-file as the CLI does, so that the tests of the ledger's histories run on that reader
// (openLedger), while others (openLedgerAt) keep go-git's.
func EveryUpdateUsesCatFile(o Options) Options {
	o.OpenBlobs = func(ctx context.Context, gitDir string) (BlobSource, error) {
		r, err := gitcatfile.Start(ctx, gitDir)
		if err != nil {
			return nil, err
		}
		return r, nil
	}
	o.blobSourceMinCommits = 1
	return o
}
