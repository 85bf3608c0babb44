package core

import (
	"fmt"
	"slices"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
)

// PathFilter says which files of a repository the ledger reads: those an Include pattern matches
// and no Exclude pattern does. Patterns are globs on slash-separated repository paths, as
// .gitignore-style tools write them: * within a directory, ** across directories, {a,b}
// alternatives (github.com/bmatcuk/doublestar, the matcher Flux and kustomize use). A nil list
// means its default; an empty one means none.
type PathFilter struct {
	Include []string
	Exclude []string
}

// DefaultLedgerInclude and DefaultLedgerExclude are what a ledger reads when the policy does not
// say: every supported file, except test data and vendored trees, which hold manifests but not the
// repository's own infrastructure.
var (
	DefaultLedgerInclude = []string{"**"}
	DefaultLedgerExclude = []string{"**/testdata/**", "**/node_modules/**", "**/vendor/**"}
)

// WithDefaults returns f with its nil lists set to the defaults.
func (f PathFilter) WithDefaults() PathFilter {
	if f.Include == nil {
		f.Include = slices.Clone(DefaultLedgerInclude)
	}
	if f.Exclude == nil {
		f.Exclude = slices.Clone(DefaultLedgerExclude)
	}
	return f
}

// ValidatePathPattern reports a pattern the matcher cannot read.
func ValidatePathPattern(p string) error {
	if p == "" {
		return fmt.Errorf("empty path pattern")
	}
	if strings.HasPrefix(p, "/") {
		return fmt.Errorf("path pattern %q: repository paths have no leading slash", p)
	}
	if !doublestar.ValidatePattern(p) {
		return fmt.Errorf("path pattern %q is not a valid glob (unclosed [ or {?)", p)
	}
	return nil
}

// Match reports whether the ledger reads the file at path (nil lists as their defaults).
func (f PathFilter) Match(path string) bool {
	f = f.WithDefaults()
	in := false
	for _, p := range f.Include {
		if ok, _ := doublestar.Match(p, path); ok {
			in = true
			break
		}
	}
	if !in {
		return false
	}
	for _, p := range f.Exclude {
		if ok, _ := doublestar.Match(p, path); ok {
			return false
		}
	}
	return true
}

// String is the filter in one line, as an index records which filter it was built with.
func (f PathFilter) String() string {
	f = f.WithDefaults()
	return "include=" + strings.Join(f.Include, ",") + " exclude=" + strings.Join(f.Exclude, ",")
}
