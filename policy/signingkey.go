package policy

import (
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/ProtonMail/go-crypto/openpgp"
	"golang.org/x/crypto/ssh"
)

const openPGPArmor = "-----BEGIN PGP PUBLIC KEY BLOCK-----"

// parseSigningKey reads one signing_keys entry as git's allowed-signers file (ssh-keygen(1),
// ALLOWED SIGNERS) writes a line: "PRINCIPALS [OPTIONS] KEY". PRINCIPALS are the comma-separated
// author emails (globs, as git_authors) the key may sign as; KEY is an SSH public key as a .pub file
// has it ("ssh-ed25519 AAAA... comment") or an armored OpenPGP public key block. The only option
// is namespaces="...", which must include git (the namespace git signs commits in). An entry
// without principals (a bare key) returns nil Principals: the caller binds it to the actor's one
// literal git_authors email or refuses it. The key's id is what the ledger records for a commit
// that key signed (trailers/ledger's SSHKeyID and OpenPGPKeyID compute the same; a test of the
// ledger holds them together).
func parseSigningKey(s string) (SigningKey, error) {
	text := strings.TrimSpace(s)
	if text == "" {
		return SigningKey{}, errors.New("empty key")
	}
	if i := strings.Index(text, openPGPArmor); i >= 0 {
		var principals []string
		if head := strings.TrimSpace(text[:i]); head != "" {
			if strings.ContainsAny(head, " \t\n") {
				return SigningKey{}, fmt.Errorf("%q before the OpenPGP key block: write only the principals (comma-separated emails) there; options are for SSH keys", head)
			}
			var err error
			if principals, err = parsePrincipals(head); err != nil {
				return SigningKey{}, err
			}
		}
		block := text[i:]
		ring, err := openpgp.ReadArmoredKeyRing(strings.NewReader(block))
		if err != nil {
			return SigningKey{}, fmt.Errorf("not a readable OpenPGP public key block: %w", err)
		}
		if len(ring) != 1 {
			return SigningKey{}, fmt.Errorf("an OpenPGP key block must hold one key, this one holds %d: list each key on its own", len(ring))
		}
		fp := ring[0].PrimaryKey.Fingerprint
		return SigningKey{ID: "openpgp:" + strings.ToUpper(hex.EncodeToString(fp)), Armored: block, Principals: principals}, nil
	}
	var principals []string
	fields := strings.Fields(text)
	if !isSSHKeyType(fields[0]) {
		var err error
		if principals, err = parsePrincipals(fields[0]); err != nil {
			return SigningKey{}, err
		}
		text = strings.TrimSpace(strings.TrimPrefix(text, fields[0]))
		if len(fields) > 1 && !isSSHKeyType(fields[1]) {
			if err := checkSignerOptions(fields[1]); err != nil {
				return SigningKey{}, err
			}
			text = strings.TrimSpace(strings.TrimPrefix(text, fields[1]))
		}
		if text == "" {
			return SigningKey{}, fmt.Errorf("principals %q name no key after them", fields[0])
		}
	}
	k, _, opts, rest, err := ssh.ParseAuthorizedKey([]byte(text))
	if err != nil {
		return SigningKey{}, fmt.Errorf("neither an SSH public key (\"alice@example.com ssh-ed25519 AAAA...\") nor an armored OpenPGP public key block: %w", err)
	}
	if len(opts) > 0 {
		return SigningKey{}, fmt.Errorf("neither an SSH public key nor an allowed-signers line: %q comes before the key's type", strings.Join(opts, ","))
	}
	if len(strings.TrimSpace(string(rest))) > 0 {
		return SigningKey{}, errors.New("holds more than one SSH key: list each key on its own")
	}
	return SigningKey{ID: ssh.FingerprintSHA256(k), Principals: principals}, nil
}

// isSSHKeyType reports whether f is an SSH public key's type, the first word of a .pub file.
func isSSHKeyType(f string) bool {
	return slices.Contains([]string{ssh.KeyAlgoRSA, ssh.KeyAlgoDSA, ssh.KeyAlgoECDSA256, ssh.KeyAlgoECDSA384, ssh.KeyAlgoECDSA521,
		ssh.KeyAlgoSKECDSA256, ssh.KeyAlgoED25519, ssh.KeyAlgoSKED25519}, f)
}

// parsePrincipals reads allowed-signers principals: comma-separated author emails or globs.
func parsePrincipals(s string) ([]string, error) {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p == "" {
			return nil, fmt.Errorf("principals %q: an empty principal", s)
		}
		if strings.ContainsAny(p, "\"'") {
			return nil, fmt.Errorf("principals %q: %q is not an email or glob", s, p)
		}
		out = append(out, p)
	}
	return out, nil
}

// checkSignerOptions accepts the one allowed-signers option that cannot widen what a key proves,
// namespaces="...", when it includes git; the others (cert-authority, valid-after, valid-before)
// would change which keys or times count, which Parley does not implement, so they are refused
// rather than ignored.
func checkSignerOptions(opts string) error {
	for _, o := range splitOptions(opts) {
		name, val, _ := strings.Cut(o, "=")
		if !strings.EqualFold(name, "namespaces") {
			return fmt.Errorf("allowed-signers option %q is not supported: only namespaces=\"git\" is (Parley checks commit signatures, in namespace git)", o)
		}
		val = strings.Trim(val, `"`)
		if !slices.Contains(strings.Split(val, ","), "git") {
			return fmt.Errorf("allowed-signers option %q excludes namespace git, which commits are signed in", o)
		}
	}
	return nil
}

// splitOptions splits authorized_keys-style options at commas outside double quotes.
func splitOptions(s string) []string {
	var out []string
	quoted, start := false, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '"':
			quoted = !quoted
		case ',':
			if !quoted {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}

// SignsAs reports whether the key may sign as the author email: one of its principals matches it.
func (k SigningKey) SignsAs(email string) bool {
	return slices.ContainsFunc(k.Principals, func(p string) bool { return globMatch(p, email) })
}
