package webhooks

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"strings"
)

// Secret is a webhook secret. Its value cannot be printed: fmt (every verb, including %#v and
// %x), slog and encoding/json all see "[REDACTED]". The value is used only to compute and check
// HMACs (the receiver's signature check, Sign).
type Secret struct {
	value []byte
}

const redacted = "[REDACTED]"

// NewSecret wraps a secret's value. An empty value is refused: an empty HMAC key would let
// anyone who guesses it sign payloads.
func NewSecret(value string) (Secret, error) {
	if value == "" {
		return Secret{}, errors.New("webhook secret is empty")
	}
	return Secret{value: []byte(value)}, nil
}

// IsZero reports whether s holds no value.
func (s Secret) IsZero() bool { return len(s.value) == 0 }

// String redacts.
func (s Secret) String() string { return redacted }

// GoString redacts %#v.
func (s Secret) GoString() string { return "webhooks.Secret{" + redacted + "}" }

// Format redacts every fmt verb, including %x and %d that would otherwise reach the bytes.
func (s Secret) Format(f fmt.State, verb rune) {
	if verb == 'v' && f.Flag('#') {
		_, _ = f.Write([]byte(s.GoString()))
		return
	}
	_, _ = f.Write([]byte(redacted))
}

// LogValue redacts in slog.
func (s Secret) LogValue() slog.Value { return slog.StringValue(redacted) }

// MarshalText redacts in encoding/json and any other text encoder.
func (s Secret) MarshalText() ([]byte, error) { return []byte(redacted), nil }

// signaturePrefix is how X-Hub-Signature-256 starts.
const signaturePrefix = "sha256="

// errSignatureMalformed and errSignatureMismatch name why a signature was refused (for the
// metric's reason label); neither says anything about the secrets.
var (
	errSignatureMissing   = errors.New("missing X-Hub-Signature-256 header")
	errSignatureMalformed = errors.New("malformed X-Hub-Signature-256 header: want sha256=<64 hex digits>")
	errSignatureMismatch  = errors.New("X-Hub-Signature-256 does not match the body under any configured secret")
)

// parseSignature decodes "sha256=<hex>" into the 32-byte MAC.
func parseSignature(header string) ([]byte, error) {
	if header == "" {
		return nil, errSignatureMissing
	}
	hexMAC, ok := strings.CutPrefix(header, signaturePrefix)
	if !ok || len(hexMAC) != 2*sha256.Size {
		return nil, errSignatureMalformed
	}
	mac, err := hex.DecodeString(hexMAC)
	if err != nil {
		return nil, errSignatureMalformed
	}
	return mac, nil
}

// macs are one HMAC per secret, written to as a body streams (writers), so that a signature is
// checked in the same pass that reads the body. A zero secret has no HMAC and matches nothing.
type macs []hash.Hash

func newMACs(newHash func() hash.Hash, secrets []Secret) macs {
	m := make(macs, len(secrets))
	for i, s := range secrets {
		if !s.IsZero() {
			m[i] = hmac.New(newHash, s.value)
		}
	}
	return m
}

// writers are the HMACs as io.Writers, for readPending.
func (m macs) writers() []io.Writer {
	var w []io.Writer
	for _, h := range m {
		if h != nil {
			w = append(w, h)
		}
	}
	return w
}

// match reports, for each secret, whether mac is the HMAC of what was written under it. Every
// secret is compared (no early exit), each in constant time, so timing tells nothing about which
// secret matched or how much of the MAC was right.
func (m macs) match(mac []byte) []bool {
	out := make([]bool, len(m))
	for i, h := range m {
		out[i] = h != nil && hmac.Equal(h.Sum(nil), mac)
	}
	return out
}

// Sign returns the X-Hub-Signature-256 value GitHub would send for body under s. Tests, the
// benchmark and tools that replay deliveries use it.
func Sign(s Secret, body []byte) string {
	h := hmac.New(sha256.New, s.value)
	h.Write(body)
	return signaturePrefix + hex.EncodeToString(h.Sum(nil))
}
