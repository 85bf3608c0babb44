package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parleyhq/parley/internal/demo"
)

// TestReviewBelievesOnlySignedAuthors: on the demo repository, a branch raises the Kafka alarm
// threshold with Motivation: incident. Under on-call Alice's email without her key, the branch
// is judged as an unverified identity: only writers may change the alarm, so it is vetoed
// (exit 1) and the explanation names the commit and why. Signed by git with Alice's key
// (gpg.format=ssh) the same change is on-call's incident and wins (exit 0).
func TestReviewBelievesOnlySignedAuthors(t *testing.T) {
	dir, git := demoRepo(t)
	key, err := demo.PrivateKey("alice@parley.example")
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "alice")
	if err := os.WriteFile(keyFile, key, 0o600); err != nil {
		t.Fatal(err)
	}
	alice := git.As("Alice Martin", "alice@parley.example")
	raise := func(branch string, sign bool) string {
		alice.Run("checkout", "--quiet", "-b", branch, "main")
		tf := filepath.Join(dir, "infra/kafka/main.tf")
		b, err := os.ReadFile(tf)
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, tf, strings.Replace(string(b), "threshold           = 5000", "threshold           = 50000", 1))
		args := []string{"-c", "gpg.format=ssh", "-c", "user.signingkey=" + keyFile, "commit", "--quiet", "-a", "-m",
			"Raise the lag alarm\n\nIntent: availability\nMotivation: incident INC-4400 severity=high\n"}
		if sign {
			args = append(args, "-S")
		}
		alice.Run(args...)
		sha := alice.Run("rev-parse", "HEAD")
		alice.Run("checkout", "--quiet", "main")
		return sha
	}
	forged := raise("forged-alarm", false)
	raise("signed-alarm", true)

	code, out, stderr := runIn(t, "", "review", "--repo", dir, "--head", "forged-alarm", "--at", "2026-11-08T10:00:00Z")
	if code != exitFindings {
		t.Fatalf("forged: exit %d, want %d (a veto): %s\n%s", code, exitFindings, stderr, out)
	}
	for _, want := range []string{
		"commit " + forged[:12] + " names author alice@parley.example (oncall), but it is unsigned: it is judged as an unverified identity",
		"may not assert it (trusted: oncall)", "writers: vetoed", "conclusion: failure",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("forged: output lacks %q:\n%s", want, out)
		}
	}
	code, out, stderr = runIn(t, "", "review", "--repo", dir, "--head", "signed-alarm", "--at", "2026-11-08T10:00:00Z")
	if code != 0 || !strings.Contains(out, "conclusion: success") || strings.Contains(out, "unverified") {
		t.Errorf("signed: exit %d: %s\n%s", code, stderr, out)
	}
}
