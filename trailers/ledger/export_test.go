package ledger

// EveryUpdateUsesCatFile makes even an update of one commit read its blobs through git cat-file,
// so that the tests of the ledger's histories run on that reader (openLedger), while others
// (openLedgerAt, small repositories) keep go-git's.
func EveryUpdateUsesCatFile(o Options) Options {
	o.catFileMinCommits = 1
	return o
}
