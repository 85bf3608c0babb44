package ledger

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/hiddeco/sshsig"
	"golang.org/x/crypto/ssh"

	"github.com/parleyhq/parley/core"
)

// sshNamespace is the SSHSIG namespace git signs commits in (gpg.format=ssh): a signature made for
// another purpose (a file signed with ssh-keygen -Y sign -n file) must not pass for a commit's.
const sshNamespace = "git"

// VerifyCommit returns what c's signature proves about its author: the id of the key whose
// signature over the commit verified (core.Proof.Key), or why nothing is proven.
//
// SSH signatures (git's gpg.format=ssh) are SSHSIG envelopes; github.com/hiddeco/sshsig (the
// library Flux's maintainers wrote for it) parses them and checks the signature against the key the
// envelope carries. As in git's allowed-signers model, a valid signature only says which key signed:
// whether that key may speak for the author is the policy's question (an actor's signing_keys).
//
// OpenPGP signatures are checked with go-git's Commit.Verify against openPGPKeys, the armored
// public keys the policy lists: unlike SSH, an OpenPGP signature names its key only by an id, so
// it verifies only against keys given.
func VerifyCommit(c *object.Commit, openPGPKeys string) core.Proof {
	sig := strings.TrimSpace(c.PGPSignature)
	switch {
	case sig == "":
		return core.Proof{Problem: "it is unsigned"}
	case strings.HasPrefix(sig, "-----BEGIN SSH SIGNATURE-----"):
		key, err := verifySSH(c, []byte(sig))
		if err != nil {
			return core.Proof{Problem: "its SSH signature does not verify: " + err.Error()}
		}
		return core.Proof{Key: key}
	case strings.HasPrefix(sig, "-----BEGIN PGP SIGNATURE-----"):
		if strings.TrimSpace(openPGPKeys) == "" {
			return core.Proof{Problem: "it is signed with OpenPGP, and the policy lists no OpenPGP key"}
		}
		e, err := c.Verify(openPGPKeys)
		if err != nil {
			return core.Proof{Problem: "its OpenPGP signature is not a valid one by a key the policy lists: " + err.Error()}
		}
		return core.Proof{Key: OpenPGPKeyID(e.PrimaryKey.Fingerprint)}
	default:
		// X.509 (gpgsm, gitsign) and anything else.
		return core.Proof{Problem: "it is signed in a format Parley does not verify (only SSH and OpenPGP are)"}
	}
}

// verifySSH checks an armored SSHSIG signature over c and returns its key's SHA256 fingerprint.
func verifySSH(c *object.Commit, armored []byte) (string, error) {
	s, err := sshsig.Unarmor(armored)
	if err != nil {
		return "", fmt.Errorf("read the signature: %w", err)
	}
	if s.Namespace != sshNamespace {
		return "", fmt.Errorf("it was made for namespace %q, not %q", s.Namespace, sshNamespace)
	}
	payload, err := signedPayload(c)
	if err != nil {
		return "", err
	}
	if err := sshsig.Verify(bytes.NewReader(payload), s, s.PublicKey, s.HashAlgorithm, sshNamespace); err != nil {
		return "", err
	}
	return SSHKeyID(s.PublicKey), nil
}

// signedPayload is the commit object without its gpgsig header: what git signs.
func signedPayload(c *object.Commit) ([]byte, error) {
	obj := &plumbing.MemoryObject{}
	if err := c.EncodeWithoutSignature(obj); err != nil {
		return nil, fmt.Errorf("encode the commit without its signature: %w", err)
	}
	r, err := obj.Reader()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

// SSHKeyID is the id the ledger and the policy give an SSH public key: its SHA256 fingerprint as
// ssh-keygen -l prints it.
func SSHKeyID(k ssh.PublicKey) string { return ssh.FingerprintSHA256(k) }

// OpenPGPKeyID is the id the ledger and the policy give an OpenPGP key: "openpgp:" and its primary
// key's fingerprint in upper-case hex, as gpg --fingerprint prints it without spaces.
func OpenPGPKeyID(fingerprint []byte) string {
	return "openpgp:" + strings.ToUpper(hex.EncodeToString(fingerprint))
}

// keyringDigest names a set of OpenPGP keys in the index, so that a change of keys is noticed.
func keyringDigest(armored string) string {
	if strings.TrimSpace(armored) == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(armored))
	return hex.EncodeToString(sum[:])
}
