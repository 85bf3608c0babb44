package reconcile

import (
	"fmt"

	"github.com/parleyhq/parley/policy"
	"github.com/parleyhq/parley/trailers/ledger"
)

// OpenLedger opens the ledger of the repository at dir, to index branch with the files the policy
// on that branch names in its ledger block (see UsePolicyPaths).
func OpenLedger(dir, branch, policyFile string, opts ledger.Options) (*ledger.Ledger, error) {
	l, err := ledger.Open(dir, opts)
	if err != nil {
		return nil, err
	}
	if err := UsePolicyPaths(l, branch, policyFile); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// UsePolicyPaths makes l read the files that the policy on branch (policyFile, policy.DefaultFile
// when empty; "" branch is HEAD's) names in its ledger block, or the defaults without a policy,
// and verify OpenPGP commit signatures against the keys its actors list.
// Every caller that indexes a branch sets its paths this way, so that all read the same files and
// none makes the index rebuild another's work.
func UsePolicyPaths(l *ledger.Ledger, branch, policyFile string) error {
	if policyFile == "" {
		policyFile = policy.DefaultFile
	}
	src, ok, err := l.FileAt(branch, policyFile)
	if err != nil {
		return fmt.Errorf("ledger paths: %w", err)
	}
	if ok {
		paths, keys := policy.LedgerSettings(src, policyFile)
		l.SetPaths(paths)
		l.SetOpenPGPKeys(keys)
	}
	return nil
}
