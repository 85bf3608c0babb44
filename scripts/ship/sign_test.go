package main

import (
	"crypto/elliptic"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sigstore/sigstore/pkg/cryptoutils"
)

// TestSignSums: SHA256SUMS signed with a key (sigstore's signature package) verifies with the
// written public key; a changed checksum, another key or a corrupt signature does not. An
// encrypted key needs its password from the environment and names the variable when it is wrong.
func TestSignSums(t *testing.T) {
	out := t.TempDir()
	sums := "0123abcd  parley_9.9.9_linux_amd64\n"
	if err := os.WriteFile(filepath.Join(out, "SHA256SUMS"), []byte(sums), 0o644); err != nil {
		t.Fatal(err)
	}
	keys := t.TempDir()
	priv, pub, err := cryptoutils.GeneratePEMEncodedECDSAKeyPair(elliptic.P256(), cryptoutils.StaticPasswordFunc([]byte("s3cret")))
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(keys, "release.key")
	if err := os.WriteFile(keyFile, priv, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(signingKeyPasswordEnv, "wrong")
	if _, err := signSums(keyFile, out); err == nil || !strings.Contains(err.Error(), signingKeyPasswordEnv) {
		t.Fatalf("a wrong password: %v", err)
	}
	t.Setenv(signingKeyPasswordEnv, "s3cret")
	files, err := signSums(keyFile, out)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(files, " ") != "SHA256SUMS.sig SHA256SUMS.pem" {
		t.Fatalf("files %v", files)
	}
	written, _ := os.ReadFile(filepath.Join(out, "SHA256SUMS.pem"))
	if string(written) != string(pub) {
		t.Errorf("SHA256SUMS.pem is not the key's public key:\n%s\nwant\n%s", written, pub)
	}
	if err := verifySums(pub, out); err != nil {
		t.Fatalf("the signature does not verify: %v", err)
	}
	// cosign, where installed, checks it as a release's users would.
	if cosign, err := exec.LookPath("cosign"); err == nil {
		c := exec.Command(cosign, "verify-blob", "--key", filepath.Join(out, "SHA256SUMS.pem"), "--signature", filepath.Join(out, "SHA256SUMS.sig"),
			"--insecure-ignore-tlog", filepath.Join(out, "SHA256SUMS"))
		if b, err := c.CombinedOutput(); err != nil {
			t.Errorf("cosign verify-blob: %v\n%s", err, b)
		}
	}

	_, otherPub, _ := cryptoutils.GeneratePEMEncodedECDSAKeyPair(elliptic.P256(), cryptoutils.SkipPassword)
	if err := verifySums(otherPub, out); err == nil {
		t.Error("another key verifies the signature")
	}
	if err := os.WriteFile(filepath.Join(out, "SHA256SUMS"), []byte(strings.Replace(sums, "0123", "4567", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := verifySums(pub, out); err == nil {
		t.Error("a changed SHA256SUMS verifies")
	}
	if err := os.WriteFile(filepath.Join(out, "SHA256SUMS.sig"), []byte("not base64!"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := verifySums(pub, out); err == nil {
		t.Error("a corrupt signature verifies")
	}
	if _, err := signSums(filepath.Join(keys, "missing.key"), out); err == nil {
		t.Error("a missing key signs")
	}
}
