package reconcile

import (
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/internal/lru"
	"github.com/parleyhq/parley/policy"
	"github.com/parleyhq/parley/trailers/ledger"
)

// OpenLedger opens the ledger of the repository at dir, to index branch with the files the policy
// on that branch names in its ledger block (see UsePolicyPaths).
func OpenLedger(dir, branch, policyFile string, opts ledger.Options) (*ledger.Ledger, error) {
	return (*LedgerSettingsMemo)(nil).OpenLedger(dir, branch, policyFile, opts)
}

// UsePolicyPaths makes l read the files that the policy on branch (policyFile, policy.DefaultFile
// when empty; "" branch is HEAD's) names in its ledger block, or the defaults without a policy,
// and verify OpenPGP commit signatures against the keys its actors list.
// Every caller that indexes a branch sets its paths this way, so that all read the same files and
// none makes the index rebuild another's work.
func UsePolicyPaths(l *ledger.Ledger, branch, policyFile string) error {
	return (*LedgerSettingsMemo)(nil).UsePolicyPaths(l, branch, policyFile)
}

// LedgerSettingsMemo remembers what policy.LedgerSettings made of a policy file, by the file's
// blob ID and path, so that a ledger opened again on a branch whose policy has not changed does
// not read and parse the policy again: a pull request delivered again opens the default branch's
// ledger each time, and that parse was a third of a repeated judgement's CPU (issue 34).
//
// A blob ID names its bytes, and LedgerSettings is a pure function of the bytes and the path, so
// an entry is never stale: a branch that moves to another policy names another blob, parsed
// afresh. Bounded in entries and in the bytes the settings hold, least recently used out; safe for
// concurrent use. The zero value is ready; a nil *LedgerSettingsMemo remembers nothing.
type LedgerSettingsMemo struct {
	cache lru.Cache[settingsKey, *settingsEntry]
	hits  atomic.Int64
}

// ledgerSettingsEntries and ledgerSettingsBytes bound a LedgerSettingsMemo: a server serving
// many repositories keeps each one's settings, which are a few globs and keys.
const (
	ledgerSettingsEntries = 256
	ledgerSettingsBytes   = 4 << 20
)

type settingsKey struct{ blob, path string }

type settingsEntry struct {
	paths core.PathFilter
	keys  string // armored OpenPGP keys
}

// OpenLedger is OpenLedger with the policy's settings taken from m when its blob was read before.
func (m *LedgerSettingsMemo) OpenLedger(dir, branch, policyFile string, opts ledger.Options) (*ledger.Ledger, error) {
	l, err := ledger.Open(dir, opts)
	if err != nil {
		return nil, err
	}
	if err := m.UsePolicyPaths(l, branch, policyFile); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// UsePolicyPaths is UsePolicyPaths with the policy's settings taken from m when its blob was read
// before.
func (m *LedgerSettingsMemo) UsePolicyPaths(l *ledger.Ledger, branch, policyFile string) error {
	if policyFile == "" {
		policyFile = policy.DefaultFile
	}
	var key settingsKey
	if m != nil {
		// The tree entry names the blob without reading it. Anything but a file found there is
		// left to FileAt, which decides as it always did.
		id, ok, err := l.FileIDAt(branch, policyFile)
		if err != nil {
			return fmt.Errorf("ledger paths: %w", err)
		}
		if ok {
			key = settingsKey{id, policyFile}
			if e, found := m.cache.Get(key); found {
				m.hits.Add(1)
				use(l, e)
				return nil
			}
		}
	}
	src, ok, err := l.FileAt(branch, policyFile)
	if err != nil {
		return fmt.Errorf("ledger paths: %w", err)
	}
	if !ok {
		return nil
	}
	paths, keys := policy.LedgerSettings(src, policyFile)
	e := &settingsEntry{paths: paths, keys: keys}
	use(l, e)
	if m != nil && key.blob != "" {
		cost := 128 + len(key.blob) + len(key.path) + len(keys)
		for _, p := range slices.Concat(paths.Include, paths.Exclude) {
			cost += 16 + len(p)
		}
		if cost <= ledgerSettingsBytes/4 {
			m.cache.Add(key, e, cost, ledgerSettingsEntries, ledgerSettingsBytes)
		}
	}
	return nil
}

// use sets e's settings on l; the globs are copied, so that nothing l does with them reaches the
// entry other ledgers share.
func use(l *ledger.Ledger, e *settingsEntry) {
	l.SetPaths(core.PathFilter{Include: slices.Clone(e.paths.Include), Exclude: slices.Clone(e.paths.Exclude)})
	l.SetOpenPGPKeys(e.keys)
}

// Hits is how many times m answered from what it kept.
func (m *LedgerSettingsMemo) Hits() int {
	if m == nil {
		return 0
	}
	return int(m.hits.Load())
}
