package policy

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/ProtonMail/go-crypto/openpgp"
	"golang.org/x/crypto/ssh"
)

// parseSigningKey reads one signing_keys entry: an SSH public key as an authorized_keys or
// allowed-signers line has it ("ssh-ed25519 AAAA... comment"), or an armored OpenPGP public key
// block. Its id is what the ledger records for a commit that key signed (trailers/ledger's
// SSHKeyID and OpenPGPKeyID compute the same; a test of the ledger holds them together).
func parseSigningKey(s string) (SigningKey, error) {
	text := strings.TrimSpace(s)
	if strings.HasPrefix(text, "-----BEGIN PGP PUBLIC KEY BLOCK-----") {
		ring, err := openpgp.ReadArmoredKeyRing(strings.NewReader(text))
		if err != nil {
			return SigningKey{}, fmt.Errorf("not a readable OpenPGP public key block: %w", err)
		}
		if len(ring) != 1 {
			return SigningKey{}, fmt.Errorf("an OpenPGP key block must hold one key, this one holds %d: list each key on its own", len(ring))
		}
		fp := ring[0].PrimaryKey.Fingerprint
		return SigningKey{ID: "openpgp:" + strings.ToUpper(hex.EncodeToString(fp)), Armored: text}, nil
	}
	if text == "" {
		return SigningKey{}, errors.New("empty key")
	}
	k, _, _, rest, err := ssh.ParseAuthorizedKey([]byte(text))
	if err != nil {
		return SigningKey{}, fmt.Errorf("neither an SSH public key (\"ssh-ed25519 AAAA...\") nor an armored OpenPGP public key block: %w", err)
	}
	if len(strings.TrimSpace(string(rest))) > 0 {
		return SigningKey{}, errors.New("holds more than one SSH key: list each key on its own")
	}
	return SigningKey{ID: ssh.FingerprintSHA256(k)}, nil
}
