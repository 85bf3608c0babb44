package browser

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"testing"

	"github.com/parleyhq/parley/internal/fakegithub"
)

// fakeApp is the fake GitHub knowing the App (ID 99) and its key, and the key in PEM.
func fakeApp(t *testing.T) (*fakegithub.Server, []byte) {
	t.Helper()
	gh := fakegithub.New(t)
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	gh.AppPublicKey, gh.AppID = &key.PublicKey, 99
	return gh, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
}
