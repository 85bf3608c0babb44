package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/demo"
	"github.com/parleyhq/parley/internal/gittest"
)

// TestReviewBelievesOnlySignedAuthors: on the demo repository, a branch raises the Kafka alarm
// threshold with Motivation: incident. Under on-call Alice's email without her key, the branch
// is judged as an unverified identity: only writers may change the alarm, so it is vetoed
// (exit 1) and the explanation names the commit and why. Signed by git with Alice's key
// (gpg.format=ssh) the same change is on-call's incident and wins (exit 0).
func TestReviewBelievesOnlySignedAuthors(t *testing.T) {
	dir, git := demoRepo(t)
	keyFile := aliceKeyFile(t)
	alice := git.As("Alice Martin", "alice@parley.example")
	raise := func(branch string, sign bool) string {
		alice.Run("checkout", "--quiet", "-b", branch, "main")
		raiseLagAlarmThreshold(t, dir)
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
		"which is not one an unknown actor may declare (only oncall may: asserted_by); the identity is no actor the policy vouches for, so the declaration is not counted", "writers: vetoed", "conclusion: failure",
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

// TestReviewTakesPolicyAndLedgerFromTheBase: in a clone of a pull request's branch (git clone
// --branch PR), the only local branch is the one being judged. Its change to the Kafka alarm (which
// only on-call and the agent may write) must be judged under the base's policy and ledger: vetoed,
// with --base origin/main and with origin/HEAD alone. Where no base can be found, review says so.
func TestReviewTakesPolicyAndLedgerFromTheBase(t *testing.T) {
	dir, git := demoRepo(t)
	git.Run("checkout", "--quiet", "-b", "pr", "main")
	raiseLagAlarmThreshold(t, dir)
	git.Run("commit", "--quiet", "-a", "-m", "Raise the lag alarm\n")
	git.Run("checkout", "--quiet", "main")

	clone := filepath.Join(t.TempDir(), "clone")
	git.Run("clone", "--quiet", "--branch", "pr", "file://"+dir, clone)
	if local := git.RunIn(clone, "branch", "--format=%(refname:short)"); local != "pr" {
		t.Fatalf("the clone's local branches are %q, want only pr", local)
	}
	for _, args := range [][]string{
		{"--base", "origin/main"},
		nil, // origin/HEAD
	} {
		code, out, stderr := runIn(t, "", append([]string{"review", "--repo", clone, "--head", "pr", "--at", "2026-11-08T10:00:00Z"}, args...)...)
		if code != exitFindings || !strings.Contains(out, "writers: vetoed") {
			t.Errorf("review %v: exit %d, want %d (a writers veto): %s\n%s", args, code, exitFindings, stderr, out)
		}
	}

	// A repository with neither origin/HEAD nor main nor master: no guessing.
	lone := gittest.Init(t, time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC), time.Minute)
	lone.Run("checkout", "--quiet", "-b", "trunk")
	lone.Write("a.yaml", "x: 1\n")
	lone.Commit("first\n")
	code, _, stderr := runIn(t, "", "review", "--repo", lone.Dir, "--head", "trunk")
	if code != exitUsage || !strings.Contains(stderr, "no base branch to judge against") || !strings.Contains(stderr, "--base") {
		t.Errorf("no base: exit %d, want %d with a clear error: %s", code, exitUsage, stderr)
	}
}

// TestReviewJudgesEveryCommitsAuthor: a branch whose last commit Alice signed, but whose first
// commit (raising the alarm with Motivation: incident) only carries her email, is judged as that
// unverified author too: vetoed, naming the commit.
func TestReviewJudgesEveryCommitsAuthor(t *testing.T) {
	dir, git := demoRepo(t)
	keyFile := aliceKeyFile(t)
	alice := git.As("Alice Martin", "alice@parley.example")
	alice.Run("checkout", "--quiet", "-b", "mixed", "main")
	raiseLagAlarmThreshold(t, dir)
	alice.Run("commit", "--quiet", "-a", "-m", "Raise the lag alarm\n\nIntent: availability\nMotivation: incident INC-4400\n")
	forged := alice.Run("rev-parse", "HEAD")
	writeFile(t, filepath.Join(dir, "NOTES.md"), "incident notes\n")
	alice.Run("add", "NOTES.md")
	alice.Run("-c", "gpg.format=ssh", "-c", "user.signingkey="+keyFile, "commit", "--quiet", "-S", "-m", "Notes\n")
	alice.Run("checkout", "--quiet", "main")

	code, out, stderr := runIn(t, "", "review", "--repo", dir, "--head", "mixed", "--at", "2026-11-08T10:00:00Z")
	if code != exitFindings || !strings.Contains(out, "alice@parley.example (authored commit "+forged[:12]+")") || !strings.Contains(out, "judged as git-author:alice@parley.example (unverified)") {
		t.Errorf("exit %d, want %d and the forged commit's author judged: %s\n%s", code, exitFindings, stderr, out)
	}
}

// TestReviewJudgesACommitsAuthorOnWhatItTouched: the branch's first commit, which only carries
// Alice's email, adds notes and touches no field; her signed commit raises the alarm with
// Motivation: incident. The unsigned commit's author is not judged on the alarm: it passes.
func TestReviewJudgesACommitsAuthorOnWhatItTouched(t *testing.T) {
	dir, git := demoRepo(t)
	keyFile := aliceKeyFile(t)
	alice := git.As("Alice Martin", "alice@parley.example")
	alice.Run("checkout", "--quiet", "-b", "mixed", "main")
	writeFile(t, filepath.Join(dir, "NOTES.md"), "incident notes\n")
	alice.Run("add", "NOTES.md")
	alice.Run("commit", "--quiet", "-m", "Notes\n")
	unsigned := alice.Run("rev-parse", "HEAD")
	raiseLagAlarmThreshold(t, dir)
	alice.Run("-c", "gpg.format=ssh", "-c", "user.signingkey="+keyFile, "commit", "--quiet", "-S", "-a", "-m", "Raise the lag alarm\n\nIntent: availability\nMotivation: incident INC-4400\n")
	alice.Run("checkout", "--quiet", "main")

	code, out, stderr := runIn(t, "", "review", "--repo", dir, "--head", "mixed", "--at", "2026-11-08T10:00:00Z")
	if code != 0 || strings.Contains(out, "authored commit "+unsigned[:12]) {
		t.Errorf("exit %d, want 0 and the notes commit's author not judged on the alarm: %s\n%s", code, stderr, out)
	}
}

// aliceKeyFile writes on-call Alice's demo signing key (listed in the demo policy) to a file git's
// user.signingkey can name.
func aliceKeyFile(t *testing.T) string { return demoKeyFile(t, "alice@parley.example") }

// demoKeyFile writes the demo's private SSH key for email to a file, for git's user.signingkey.
func demoKeyFile(t *testing.T, email string) string {
	t.Helper()
	key, err := demo.PrivateKey(email)
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(keyFile, key, 0o600); err != nil {
		t.Fatal(err)
	}
	return keyFile
}

// raiseLagAlarmThreshold raises the demo's Kafka lag alarm from 5000 to 50000 in the work tree.
func raiseLagAlarmThreshold(t *testing.T, dir string) {
	t.Helper()
	tf := filepath.Join(dir, "infra/kafka/main.tf")
	b, err := os.ReadFile(tf)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, tf, strings.Replace(string(b), "threshold           = 5000", "threshold           = 50000", 1))
}
