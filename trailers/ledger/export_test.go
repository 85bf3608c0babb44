package ledger

import (
	"context"

	"github.com/parleyhq/parley/internal/gitcatfile"
	"github.com/parleyhq/parley/internal/gitlog"
)

// EveryUpdateUsesGit makes every update, even of one commit, walk the history and compare trees
// through git rev-list, cat-file and diff-tree (internal/gitlog) and read its blobs through git
// cat-file, as the CLI does, so that the tests of the ledger's histories run on those readers
// (openLedger), while others (openLedgerAt) keep go-git's.
func EveryUpdateUsesGit(o Options) Options {
	o.OpenBlobs = func(ctx context.Context, gitDir string) (BlobSource, error) {
		r, err := gitcatfile.Start(ctx, gitDir)
		if err != nil {
			return nil, err
		}
		return r, nil
	}
	o.OpenHistory = openGitHistory
	return o
}

func openGitHistory(_ context.Context, gitDir string) (HistorySource, error) {
	h, err := gitlog.Open(gitDir)
	if err != nil {
		return nil, err
	}
	return h, nil
}
