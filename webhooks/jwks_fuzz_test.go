package webhooks

import (
	"crypto/rand"
	"crypto/rsa"
	"testing"
)

// FuzzParseJWKS: a fetched key set is outside input; it yields keys or an error, never a panic,
// and never a key shorter than 2048 bits.
func FuzzParseJWKS(f *testing.F) {
	k, _ := rsa.GenerateKey(rand.Reader, 2048)
	f.Add(jwksOf(map[string]*rsa.PublicKey{"k1": &k.PublicKey}))
	f.Add([]byte(`{"keys":[{"kty":"EC","kid":"e","crv":"P-256"},{"kty":"RSA","kid":"x","n":"AQAB","e":"AQAB"}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		keys, err := ParseJWKS(b)
		if err != nil {
			return
		}
		for kid, key := range keys {
			if key.N.BitLen() < 2048 || key.E < 3 {
				t.Fatalf("key %q: %d bits, e %d", kid, key.N.BitLen(), key.E)
			}
		}
	})
}
