package ledger_test

import (
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/parleyhq/parley/trailers/ledger"
)

// FuzzVerifyCommit feeds VerifyCommit the gpgsig header of a commit as anyone who can push may
// write it: it never panics, and it either names a key or says why it cannot.
func FuzzVerifyCommit(f *testing.F) {
	f.Add("")
	f.Add("-----BEGIN SSH SIGNATURE-----\nU1NIU0lHAAAAAQ==\n-----END SSH SIGNATURE-----\n")
	f.Add("-----BEGIN SSH SIGNATURE-----\n\n-----END SSH SIGNATURE-----")
	f.Add("-----BEGIN PGP SIGNATURE-----\n\nwnUEABYKAB0WIQ==\n-----END PGP SIGNATURE-----\n")
	f.Add("-----BEGIN SIGNED MESSAGE-----\nMIAGCSqGSIb3DQEHAqCAMIACAQExDTALBglghkgBZQMEAgEwgAYJKoZIhvcNAQcBAAA=\n-----END SIGNED MESSAGE-----\n")
	when := time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, sig string) {
		c := &object.Commit{
			Author:       object.Signature{Name: "Alice", Email: "alice@parley.example", When: when},
			Committer:    object.Signature{Name: "Alice", Email: "alice@parley.example", When: when},
			Message:      "change\n",
			TreeHash:     plumbing.NewHash("4b825dc642cb6eb9a060e54bf8d69288fbee4904"),
			PGPSignature: sig,
		}
		p := ledger.VerifyCommit(c, "")
		if (p.Key == "") == (p.Problem == "") {
			t.Fatalf("VerifyCommit(%q) = %+v: want a key or a problem", sig, p)
		}
		if p.Key != "" && !strings.HasPrefix(p.Key, "SHA256:") {
			t.Fatalf("VerifyCommit(%q) names key %q", sig, p.Key)
		}
	})
}
