package webhooks

import (
	"context"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// GoogleKeysURL is where Google publishes the keys that sign its OIDC tokens (Pub/Sub push
// tokens among them), as a JSON Web Key Set.
const GoogleKeysURL = "https://www.googleapis.com/oauth2/v3/certs"

// KeySet holds the RSA keys that may sign tokens, by key ID: read once from a JWKS file, or
// fetched from a URL and cached.
//
// A fetched set is kept for as long as the answer's Cache-Control max-age says (an hour when it
// says nothing), then fetched again on the next use; a token signed with a key ID the set does
// not hold makes it fetch again at once (Google rotates its keys and publishes the new one
// before signing with it), at most once a minute, so that tokens with made-up key IDs cannot
// make the server hammer the URL. A failed fetch keeps the keys it had. Fetching happens on the
// request's goroutine, under its context and a 10-second limit: there is no background loop to
// own or stop.
type KeySet struct {
	url    string
	client *http.Client
	now    func() time.Time

	mu        sync.Mutex
	keys      map[string]*rsa.PublicKey
	expires   time.Time // a URL set's keys are fresh until then
	lastFetch time.Time
}

// minRefetch is how soon an unknown key ID may fetch a URL set again.
const minRefetch = time.Minute

// NewKeySetFile reads a JWKS file; its keys never change while the server runs.
func NewKeySetFile(path string) (*KeySet, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("key set: %w", err)
	}
	keys, err := ParseJWKS(b)
	if err != nil {
		return nil, fmt.Errorf("key set %s: %w", path, err)
	}
	return &KeySet{keys: keys, now: time.Now}, nil
}

// NewKeySetURL returns a key set fetched from url (GoogleKeysURL in production) on first use.
// client nil: http.DefaultClient.
func NewKeySetURL(url string, client *http.Client) *KeySet {
	if client == nil {
		client = http.DefaultClient
	}
	return &KeySet{url: url, client: client, now: time.Now}
}

// Key returns the key of kid, fetching the set when it is stale or lacks kid.
func (k *KeySet) Key(ctx context.Context, kid string) (*rsa.PublicKey, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	now := k.now()
	if k.url != "" {
		_, known := k.keys[kid]
		stale := k.keys == nil || now.After(k.expires)
		if stale || !known && now.Sub(k.lastFetch) >= minRefetch {
			if err := k.fetch(ctx, now); err != nil && k.keys == nil {
				return nil, err
			}
		}
	}
	key, ok := k.keys[kid]
	if !ok {
		return nil, fmt.Errorf("no key %s in the key set", strconv.QuoteToASCII(truncate(kid, 64)))
	}
	return key, nil
}

func (k *KeySet) fetch(ctx context.Context, now time.Time) error {
	k.lastFetch = now
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.url, nil)
	if err != nil {
		return fmt.Errorf("key set %s: %w", k.url, err)
	}
	resp, err := k.client.Do(req)
	if err != nil {
		return fmt.Errorf("key set %s: %w", k.url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("key set %s: answered %s", k.url, resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("key set %s: %w", k.url, err)
	}
	keys, err := ParseJWKS(b)
	if err != nil {
		return fmt.Errorf("key set %s: %w", k.url, err)
	}
	k.keys, k.expires = keys, now.Add(maxAge(resp.Header.Get("Cache-Control"), time.Hour))
	return nil
}

// maxAge reads Cache-Control's max-age, else def.
func maxAge(cc string, def time.Duration) time.Duration {
	for _, d := range strings.Split(cc, ",") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(d), "max-age="); ok {
			if n, err := strconv.Atoi(v); err == nil && n >= 0 {
				return time.Duration(n) * time.Second
			}
		}
	}
	return def
}

// ParseJWKS reads the RSA signing keys of a JSON Web Key Set ({"keys":[{"kty":"RSA","kid",
// "n","e"}]}); keys of other types or uses are skipped, a set without any RSA key is an error.
func ParseJWKS(b []byte) (map[string]*rsa.PublicKey, error) {
	var set struct {
		Keys []struct {
			Kty string `json:"kty"`
			Kid string `json:"kid"`
			Use string `json:"use"`
			N   string `json:"n"`
			E   string `json:"e"`
		} `json:"keys"`
	}
	if err := json.Unmarshal(b, &set); err != nil {
		return nil, fmt.Errorf("not a JSON Web Key Set: %w", err)
	}
	keys := map[string]*rsa.PublicKey{}
	for i, jk := range set.Keys {
		if jk.Kty != "RSA" || jk.Use != "" && jk.Use != "sig" {
			continue
		}
		n, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(jk.N, "="))
		if err != nil || new(big.Int).SetBytes(n).BitLen() < 2048 {
			return nil, fmt.Errorf("key %d (%s): n is not the base64url of a modulus of 2048 bits or more", i, jk.Kid)
		}
		e, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(jk.E, "="))
		if err != nil || len(e) == 0 || len(e) > 4 {
			return nil, fmt.Errorf("key %d (%s): e is not a base64url exponent", i, jk.Kid)
		}
		exp := int(new(big.Int).SetBytes(e).Int64())
		if exp < 3 || exp%2 == 0 {
			return nil, fmt.Errorf("key %d (%s): exponent %d is not an odd number of 3 or more", i, jk.Kid, exp)
		}
		keys[jk.Kid] = &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: exp}
	}
	if len(keys) == 0 {
		return nil, errors.New("no RSA signing key in the key set")
	}
	return keys, nil
}
