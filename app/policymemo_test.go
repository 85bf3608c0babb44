package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The default branch's policy is parsed once per blob and name: found again while it is the same,
// parsed afresh when a commit changes it (even to an invalid policy), and kept apart per branch,
// whose name its diagnostics quote.
func TestPolicyIsParsedOncePerBlob(t *testing.T) {
	dir, git := remote(t)
	git("branch", "other")
	var memo policyMemo
	read := func(branch string) (bool, string) {
		t.Helper()
		pol, note, err := readPolicyAt(dir, branch, "", &memo)
		if err != nil {
			t.Fatal(err)
		}
		return pol != nil, note
	}
	if ok, note := read("main"); !ok || note != "" {
		t.Fatalf("main's policy: parsed %v, note %q", ok, note)
	}
	first, _ := read("main")
	if entries, hits := memo.stats(); !first || entries != 1 || hits != 1 {
		t.Errorf("read twice: %d entries, %d hits; want one policy found again", entries, hits)
	}
	if ok, _ := read("other"); !ok {
		t.Fatal("other's policy")
	}
	if entries, hits := memo.stats(); entries != 2 || hits != 1 {
		t.Errorf("the same blob on another branch: %d entries, %d hits; want it parsed under its own name", entries, hits)
	}

	if err := os.WriteFile(filepath.Join(dir, ".parley/policy.hcl"), []byte("field \"x\" {\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git("commit", "-q", "-am", "Break the policy")
	for range 2 {
		if ok, note := read("main"); ok || !strings.Contains(note, "main:.parley/policy.hcl") {
			t.Errorf("main's broken policy: parsed %v, note %q; want it invalid, named", ok, note)
		}
	}
	if entries, hits := memo.stats(); entries != 3 || hits != 2 {
		t.Errorf("after the change: %d entries, %d hits; want the new blob parsed once, then found", entries, hits)
	}
}
