package demo

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/pem"
	"fmt"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/hiddeco/sshsig"
	"golang.org/x/crypto/ssh"
)

// signerOf returns the SSH key the demo signs a person's commits with. The key is derived from the
// person's email, so that the demo stays reproducible (ed25519 signatures are deterministic) and
// its policy can list the public keys; a demo key protects nothing and must never be used for
// anything else.
func signerOf(p person) (ssh.Signer, error) {
	s, err := ssh.NewSignerFromKey(demoKey(p.Email))
	if err != nil {
		return nil, fmt.Errorf("demo key of %s: %w", p.Email, err)
	}
	return s, nil
}

func demoKey(email string) ed25519.PrivateKey {
	seed := sha256.Sum256([]byte("parley demo signing key: " + email))
	return ed25519.NewKeyFromSeed(seed[:])
}

// PublicKey returns the SSH public key the demo signs email's commits with, as the demo policy's
// signing_keys lists it.
func PublicKey(email string) (string, error) {
	s, err := signerOf(person{Email: email})
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(s.PublicKey()))) + " " + email, nil
}

// sign signs c as git does with gpg.format=ssh: an SSHSIG signature in namespace "git" over the
// commit object without its gpgsig header, armored into that header.
func sign(c *object.Commit, p person) error {
	s, err := signerOf(p)
	if err != nil {
		return err
	}
	obj := &plumbing.MemoryObject{}
	if err := c.EncodeWithoutSignature(obj); err != nil {
		return fmt.Errorf("sign commit %q: %w", subjectOf(c.Message), err)
	}
	r, err := obj.Reader()
	if err != nil {
		return err
	}
	sig, err := sshsig.Sign(r, s, sshsig.HashSHA512, "git")
	if err != nil {
		return fmt.Errorf("sign commit %q: %w", subjectOf(c.Message), err)
	}
	c.PGPSignature = string(sshsig.Armor(sig))
	return nil
}

// PrivateKey returns the private SSH key (OpenSSH PEM) the demo signs email's commits with, so
// that a person exploring the demo, or a test, can sign as one of its people with git commit -S
// (gpg.format=ssh). Demo keys are public knowledge: never trust them outside the demo.
func PrivateKey(email string) ([]byte, error) {
	block, err := ssh.MarshalPrivateKey(demoKey(email), email)
	if err != nil {
		return nil, fmt.Errorf("demo key of %s: %w", email, err)
	}
	return pem.EncodeToMemory(block), nil
}
