package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var thresholdLine = regexp.MustCompile(`(threshold +\= )\d+`)

// TestLedgerMarksAuthorsTheirKeysDoNotProve: a commit under Alice's email signed with Bob's key
// carries a valid SSH signature (it holds its own key), but the policy lists that key for Bob
// only, so arbitration counts the commit as no actor. `parley ledger` says so: the row reads
// "alice@parley.example (unverified)", as for an unsigned commit; the same change signed with
// Alice's own key reads as hers.
func TestLedgerMarksAuthorsTheirKeysDoNotProve(t *testing.T) {
	dir, git := demoRepo(t)
	alice := git.As("Alice Martin", "alice@parley.example")
	commit := func(keyFile, threshold string) string {
		tf := filepath.Join(dir, "infra/kafka/main.tf")
		b, err := os.ReadFile(tf)
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, tf, thresholdLine.ReplaceAllString(string(b), "${1}"+threshold))
		alice.Run("-c", "gpg.format=ssh", "-c", "user.signingkey="+keyFile, "commit", "--quiet", "-a", "-S", "-m",
			"Raise the lag alarm\n\nIntent: availability\nMotivation: incident INC-4400 severity=high\n")
		return alice.Run("rev-parse", "HEAD")
	}
	withBobs := commit(demoKeyFile(t, "bob@parley.example"), "60000")
	withHers := commit(demoKeyFile(t, "alice@parley.example"), "70000")

	code, out, stderr := runIn(t, "", "ledger", "--repo", dir, "--field", "tf:infra/kafka//aws_cloudwatch_metric_alarm.consumer_lag#/threshold")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	row := func(sha string) string {
		for line := range strings.SplitSeq(out, "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), sha[:8]) {
				return line
			}
		}
		t.Fatalf("no row for %s:\n%s", sha[:8], out)
		return ""
	}
	if r := row(withBobs); !strings.Contains(r, "alice@parley.example (unverified)") {
		t.Errorf("signed with Bob's key: %q, want alice@parley.example (unverified)", r)
	}
	if r := row(withHers); strings.Contains(r, "unverified") || !strings.Contains(r, "alice@parley.example") {
		t.Errorf("signed with her own key: %q, want alice@parley.example, verified", r)
	}
}
