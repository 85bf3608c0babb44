package driftstate

import (
	"path/filepath"
	"testing"
)

// TestQueryRewrittenOnce pins q to no allocation once a query has been rewritten (issue 37): a
// recorded admission review runs about ten statements, and rewriting each one's text for the
// engine on every run was an allocation each.
func TestQueryRewrittenOnce(t *testing.T) {
	d := open(t, filepath.Join(t.TempDir(), "state.db"))
	const query = `UPDATE {versions} SET version = version + 1 WHERE field = ? AND version = ?`
	want := d.q(query)
	if want != `UPDATE field_versions SET version = version + 1 WHERE field = ? AND version = ?` {
		t.Fatalf("q(%q) = %q", query, want)
	}
	if got := testing.AllocsPerRun(100, func() { _ = d.q(query) }); got > 0 {
		t.Errorf("q of a query it has rewritten before: %.1f allocations, want 0", got)
	}
}
