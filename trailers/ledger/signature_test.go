package ledger_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/internal/demo"
	"github.com/parleyhq/parley/internal/gittest"
	"github.com/parleyhq/parley/trailers/ledger"
)

// signingRepo is a repository that signs commits the way git does, with the tools git calls.
type signingRepo struct {
	*gittest.Runner
	keyDir string
}

func newSigningRepo(t *testing.T) *signingRepo {
	t.Helper()
	for _, tool := range []string{"ssh-keygen", "gpg"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is required: signatures are made and checked by the tools git uses", tool)
		}
	}
	r := gittest.Init(t, time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC), time.Minute)
	keys := t.TempDir()
	gnupg := filepath.Join(keys, "gnupg")
	if err := os.Mkdir(gnupg, 0o700); err != nil {
		t.Fatal(err)
	}
	r.Env = append(r.Env, "GNUPGHOME="+gnupg)
	return &signingRepo{Runner: r, keyDir: keys}
}

// run runs a tool other than git with the repository's environment and returns its output.
func (s *signingRepo) run(t *testing.T, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = s.Dir
	cmd.Env = append(os.Environ(), s.Env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// sshKey makes an ed25519 key with ssh-keygen and returns its private key file and fingerprint.
func (s *signingRepo) sshKey(t *testing.T, name string) (file, fingerprint string) {
	t.Helper()
	file = filepath.Join(s.keyDir, name)
	s.run(t, "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", file)
	fields := strings.Fields(s.run(t, "ssh-keygen", "-l", "-E", "sha256", "-f", file+".pub"))
	return file, fields[1]
}

// verifiedByGit runs git verify-commit, the oracle, with allowed signers listing every key given.
func (s *signingRepo) verifiedByGit(t *testing.T, commit string, pubs ...string) bool {
	t.Helper()
	var lines []string
	for _, p := range pubs {
		b, err := os.ReadFile(p + ".pub")
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, "* "+strings.TrimSpace(string(b)))
	}
	allowed := filepath.Join(s.keyDir, "allowed_signers")
	if err := os.WriteFile(allowed, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("git", "-c", "gpg.ssh.allowedSignersFile="+allowed, "verify-commit", commit)
	cmd.Dir = s.Dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME="+s.Dir)
	cmd.Env = append(cmd.Env, s.Env...)
	return cmd.Run() == nil
}

// writeCommit stores a raw commit object and returns its hash.
func (s *signingRepo) writeCommit(t *testing.T, raw string) string {
	t.Helper()
	f := filepath.Join(s.keyDir, "commit")
	if err := os.WriteFile(f, []byte(raw), 0o644); err != nil {
		t.Fatal(err)
	}
	return s.Run("hash-object", "-t", "commit", "-w", f)
}

func (s *signingRepo) verify(t *testing.T, commit, openPGPKeys string) (key, problem string) {
	t.Helper()
	repo, err := git.PlainOpen(s.Dir)
	if err != nil {
		t.Fatal(err)
	}
	c, err := repo.CommitObject(plumbing.NewHash(commit))
	if err != nil {
		t.Fatal(err)
	}
	p := ledger.VerifyCommit(c, openPGPKeys)
	return p.Key, p.Problem
}

// withSignature puts armored into raw's gpgsig header, as git writes it (continuation lines start
// with a space), replacing any signature raw had.
func withSignature(raw, armored string) string {
	head, body, _ := strings.Cut(raw, "\n\n")
	var kept []string
	lines := strings.Split(head, "\n")
	for i := 0; i < len(lines); i++ {
		if strings.HasPrefix(lines[i], "gpgsig ") {
			for i+1 < len(lines) && strings.HasPrefix(lines[i+1], " ") {
				i++
			}
			continue
		}
		kept = append(kept, lines[i])
	}
	sig := "gpgsig " + strings.ReplaceAll(strings.TrimRight(armored, "\n"), "\n", "\n ")
	return strings.Join(kept, "\n") + "\n" + sig + "\n\n" + body
}

// withoutSignature is raw without its gpgsig header: what git signs.
func withoutSignature(raw string) string {
	head, body, _ := strings.Cut(raw, "\n\n")
	var kept []string
	lines := strings.Split(head, "\n")
	for i := 0; i < len(lines); i++ {
		if strings.HasPrefix(lines[i], "gpgsig ") {
			for i+1 < len(lines) && strings.HasPrefix(lines[i+1], " ") {
				i++
			}
			continue
		}
		kept = append(kept, lines[i])
	}
	return strings.Join(kept, "\n") + "\n\n" + body
}

// TestVerifyCommitAgreesWithGitOnSSHSignatures checks commits git signed with gpg.format=ssh, and
// commits an attacker could make from them, against git verify-commit.
func TestVerifyCommitAgreesWithGitOnSSHSignatures(t *testing.T) {
	s := newSigningRepo(t)
	alice, aliceFP := s.sshKey(t, "alice")
	mallory, _ := s.sshKey(t, "mallory")
	s.Run("config", "gpg.format", "ssh")
	s.Run("config", "user.signingkey", alice+".pub")
	s.Write("a.yaml", "x: 1\n")
	s.Run("add", "-A")
	s.Run("commit", "-q", "-S", "-m", "signed by alice")
	signed := s.Run("rev-parse", "HEAD")
	raw := s.Run("cat-file", "commit", signed) + "\n"

	unsigned := s.As("Alice", "alice@parley.example").Commit("no signature\n")

	// The same signature over another author: what a forger who copied a signed commit would push.
	forgedAuthor := s.writeCommit(t, strings.Replace(raw, "author Parley Test <test@parley.example>", "author Alice <alice@parley.example>", 1))

	// A signature Alice made for another purpose (ssh-keygen -Y sign -n file) over the commit's
	// exact payload: valid SSHSIG, wrong namespace.
	payload := filepath.Join(s.keyDir, "payload")
	if err := os.WriteFile(payload, []byte(withoutSignature(raw)), 0o644); err != nil {
		t.Fatal(err)
	}
	s.run(t, "ssh-keygen", "-q", "-Y", "sign", "-n", "file", "-f", alice, payload)
	fileSig, err := os.ReadFile(payload + ".sig")
	if err != nil {
		t.Fatal(err)
	}
	wrongNamespace := s.writeCommit(t, withSignature(raw, string(fileSig)))

	// Mallory signs the commit in namespace git with her own key: valid, but by another key.
	if err := os.Remove(payload + ".sig"); err != nil {
		t.Fatal(err)
	}
	s.run(t, "ssh-keygen", "-q", "-Y", "sign", "-n", "git", "-f", mallory, payload)
	mallorySig, _ := os.ReadFile(payload + ".sig")
	byMallory := s.writeCommit(t, withSignature(raw, string(mallorySig)))

	// A signature with a byte of its body changed.
	garbled := strings.Replace(string(mallorySig), "U1NIU0lH", "U1NIU0lI", 1)
	broken := s.writeCommit(t, withSignature(raw, garbled))

	for _, tc := range []struct {
		name, commit string
		wantKey      string // "" when nothing is proven
		wantProblem  string
		gitVerifies  bool // with alice's key allowed
	}{
		{"signed", signed, aliceFP, "", true},
		{"unsigned", unsigned, "", "it is unsigned", false},
		{"author changed under the signature", forgedAuthor, "", "does not verify", false},
		{"namespace file", wrongNamespace, "", `namespace "file"`, false},
		{"garbled", broken, "", "does not verify", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := s.verifiedByGit(t, tc.commit, alice); got != tc.gitVerifies {
				t.Fatalf("git verify-commit = %v, want %v: the case does not test what it says", got, tc.gitVerifies)
			}
			key, problem := s.verify(t, tc.commit, "")
			if key != tc.wantKey || !strings.Contains(problem, tc.wantProblem) || (tc.wantKey == "") != (problem != "") {
				t.Errorf("VerifyCommit = key %q, problem %q; want key %q, problem containing %q", key, problem, tc.wantKey, tc.wantProblem)
			}
		})
	}
	// Mallory's signature is valid: git accepts it when her key is allowed, and not when only
	// Alice's is. VerifyCommit names her key; the policy decides whose it is.
	if s.verifiedByGit(t, byMallory, alice) || !s.verifiedByGit(t, byMallory, mallory) {
		t.Fatal("git's verdict on mallory's signature is not what the test assumes")
	}
	if key, problem := s.verify(t, byMallory, ""); key == "" || key == aliceFP || problem != "" {
		t.Errorf("VerifyCommit(mallory's signature) = %q, %q; want mallory's key", key, problem)
	}
}

// TestVerifyCommitChecksOpenPGPSignaturesAgainstTheKeysGiven signs with gpg as git does by default
// and checks VerifyCommit against git verify-commit.
func TestVerifyCommitChecksOpenPGPSignaturesAgainstTheKeysGiven(t *testing.T) {
	s := newSigningRepo(t)
	genKey := func(uid string) (fpr, armored string) {
		s.run(t, "gpg", "--batch", "--pinentry-mode", "loopback", "--passphrase", "", "--quick-gen-key", uid, "ed25519", "sign", "never")
		for _, line := range strings.Split(s.run(t, "gpg", "--batch", "--with-colons", "--fingerprint", uid), "\n") {
			if strings.HasPrefix(line, "fpr:") {
				fpr = strings.Split(line, ":")[9]
				break
			}
		}
		return fpr, s.run(t, "gpg", "--batch", "--armor", "--export", uid)
	}
	aliceFPR, aliceKey := genKey("Alice <alice@parley.example>")
	_, otherKey := genKey("Other <other@parley.example>")
	s.Run("config", "user.signingkey", aliceFPR)
	s.Write("a.yaml", "x: 1\n")
	s.Run("add", "-A")
	s.Run("commit", "-q", "-S", "-m", "signed with OpenPGP")
	signed := s.Run("rev-parse", "HEAD")
	if !s.verifiedByGit(t, signed) {
		t.Fatal("git verify-commit does not accept the OpenPGP signature")
	}
	raw := s.Run("cat-file", "commit", signed) + "\n"
	changed := s.writeCommit(t, strings.Replace(raw, "signed with OpenPGP", "signed with OpenPGP, edited", 1))
	if s.verifiedByGit(t, changed) {
		t.Fatal("git verify-commit accepts an edited message")
	}

	if key, problem := s.verify(t, signed, aliceKey); key != "openpgp:"+aliceFPR || problem != "" {
		t.Errorf("signed, alice's key given: %q, %q; want openpgp:%s", key, problem, aliceFPR)
	}
	if key, problem := s.verify(t, signed, otherKey); key != "" || !strings.Contains(problem, "not a valid one by a key the policy lists") {
		t.Errorf("signed, another key given: %q, %q", key, problem)
	}
	if key, problem := s.verify(t, signed, ""); key != "" || !strings.Contains(problem, "lists no OpenPGP key") {
		t.Errorf("signed, no key given: %q, %q", key, problem)
	}
	if key, problem := s.verify(t, changed, aliceKey); key != "" || problem == "" {
		t.Errorf("edited message: %q, %q; want no key", key, problem)
	}
}

// TestLedgerRecordsEachCommitsVerification: the demo repository signs its commits with its
// people's SSH keys and holds one forged commit (Alice's email, no signature). git verify-commit,
// with the demo's keys as allowed signers, agrees with what the ledger records for every commit.
func TestLedgerRecordsEachCommitsVerification(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "demo")
	if _, err := demo.Build(dir); err != nil {
		t.Fatal(err)
	}
	s := &signingRepo{Runner: gittest.New(t, dir), keyDir: t.TempDir()}
	var pubs []string
	for _, email := range []string{"dana@parley.example", "bob@parley.example", "alice@parley.example", "cost-optimizer@parley.example", "scanner@parley.example"} {
		line, err := demo.PublicKey(email)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(s.keyDir, email)
		if err := os.WriteFile(p+".pub", []byte(line+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		pubs = append(pubs, p)
	}
	l, err := ledger.Open(dir, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.Update(context.Background(), "main"); err != nil {
		t.Fatal(err)
	}
	b, err := l.Branch("main")
	if err != nil {
		t.Fatal(err)
	}
	seen, unverified := map[string]bool{}, 0
	err = b.EachField(context.Background(), core.FieldPattern{}, func(h ledger.FieldHistory) error {
		for _, e := range h.Entries {
			c := e.Evidence.Commit
			if seen[c] {
				continue
			}
			seen[c] = true
			p := e.Actor.Identity.Proof
			if git := s.verifiedByGit(t, c, pubs...); git != (p.Key != "") {
				t.Errorf("commit %s %q: git verify-commit %v, ledger %+v", c[:12], e.Subject, git, p)
			}
			if p.Key == "" {
				unverified++
				if e.Subject != "Tune the consumer lag alarm" || p.Problem != "it is unsigned" {
					t.Errorf("unverified commit %s %q: %+v; want only the forged tuning commit, unsigned", c[:12], e.Subject, p)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) < 8 || unverified != 1 {
		t.Errorf("%d commits seen, %d unverified; want every commit of main's history, one of them unverified", len(seen), unverified)
	}
}

// BenchmarkVerifyCommit is what verification adds to indexing a commit: an SSH-signed demo commit
// (ed25519, SHA-512) and an unsigned one.
func BenchmarkVerifyCommit(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "demo")
	if _, err := demo.Build(dir); err != nil {
		b.Fatal(err)
	}
	repo, err := git.PlainOpen(dir)
	if err != nil {
		b.Fatal(err)
	}
	head, err := repo.Head()
	if err != nil {
		b.Fatal(err)
	}
	signed, err := repo.CommitObject(head.Hash())
	if err != nil {
		b.Fatal(err)
	}
	unsigned := *signed
	unsigned.PGPSignature = ""
	for _, bc := range []struct {
		name string
		c    *object.Commit
	}{{"ssh-signed", signed}, {"unsigned", &unsigned}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				ledger.VerifyCommit(bc.c, "")
			}
		})
	}
}
