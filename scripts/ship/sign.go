package main

import (
	"bytes"
	"crypto"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
)

// signingKeyPasswordEnv holds the password of an encrypted signing key, never a flag (flags are
// visible in the process list).
const signingKeyPasswordEnv = "PARLEY_SIGNING_KEY_PASSWORD"

// signSums signs out/SHA256SUMS with the PEM private key in keyFile (ECDSA P-256, Ed25519 or
// RSA; PKCS#8, SEC 1 or PKCS#1, encrypted with $PARLEY_SIGNING_KEY_PASSWORD when it is) through
// sigstore's signature package, and writes SHA256SUMS.sig (the signature in base64, as
// `cosign sign-blob` writes it) and SHA256SUMS.pem (the public key). Signing the checksums signs
// every artifact they list. `cosign verify-blob --key SHA256SUMS.pem --signature SHA256SUMS.sig
// SHA256SUMS` checks it, with the key taken from where the project publishes it rather than from
// the release itself. Keyless signing (Fulcio certificates, a Rekor entry) needs sigstore's public
// services, which this build does not reach: SECURITY.md says how to verify, and what keyless adds.
func signSums(keyFile, out string) ([]string, error) {
	pemBytes, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("signing key: %w", err)
	}
	pass := cryptoutils.SkipPassword
	if pw, ok := os.LookupEnv(signingKeyPasswordEnv); ok {
		pass = cryptoutils.StaticPasswordFunc([]byte(pw))
	}
	key, err := cryptoutils.UnmarshalPEMToPrivateKey(pemBytes, pass)
	if err != nil {
		return nil, fmt.Errorf("signing key %s: %w (an encrypted key takes its password from $%s)", keyFile, err, signingKeyPasswordEnv)
	}
	sv, err := signature.LoadSignerVerifier(key, crypto.SHA256)
	if err != nil {
		return nil, fmt.Errorf("signing key %s: %w", keyFile, err)
	}
	sums, err := os.ReadFile(filepath.Join(out, "SHA256SUMS"))
	if err != nil {
		return nil, err
	}
	sig, err := sv.SignMessage(bytes.NewReader(sums))
	if err != nil {
		return nil, fmt.Errorf("sign SHA256SUMS: %w", err)
	}
	pub, err := sv.PublicKey()
	if err != nil {
		return nil, err
	}
	pubPEM, err := cryptoutils.MarshalPublicKeyToPEM(pub)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(out, "SHA256SUMS.sig"), []byte(base64.StdEncoding.EncodeToString(sig)), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(out, "SHA256SUMS.pem"), pubPEM, 0o644); err != nil {
		return nil, err
	}
	return []string{"SHA256SUMS.sig", "SHA256SUMS.pem"}, nil
}

// verifySums checks out/SHA256SUMS against SHA256SUMS.sig with the PEM public key pubPEM.
func verifySums(pubPEM []byte, out string) error {
	pub, err := cryptoutils.UnmarshalPEMToPublicKey(pubPEM)
	if err != nil {
		return fmt.Errorf("public key: %w", err)
	}
	v, err := signature.LoadVerifier(pub, crypto.SHA256)
	if err != nil {
		return err
	}
	sums, err := os.ReadFile(filepath.Join(out, "SHA256SUMS"))
	if err != nil {
		return err
	}
	b64, err := os.ReadFile(filepath.Join(out, "SHA256SUMS.sig"))
	if err != nil {
		return err
	}
	sig, err := base64.StdEncoding.DecodeString(string(bytes.TrimSpace(b64)))
	if err != nil {
		return fmt.Errorf("SHA256SUMS.sig: %w", err)
	}
	return v.VerifySignature(bytes.NewReader(sig), bytes.NewReader(sums))
}
