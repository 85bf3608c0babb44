package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The files of an App directory (app_dir). They are the keys of the chart's Secret
// (github.privateKeySecret.key, github.webhookSecret.key), so the directory the manifest flow
// fills becomes that Secret with kubectl create secret generic parley-github-app --from-file=DIR.
const (
	AppIDFile          = "app-id"
	PrivateKeyFileName = "private-key.pem"
	WebhookSecretsFile = "webhook-secrets"
)

// ErrNoApp is Load's error when app_dir is set and no App is configured at all (no ID, key or
// webhook secret, in the directory or elsewhere): the App is still to be registered, which
// serve does at /setup. Any other missing piece is an ordinary configuration error.
var ErrNoApp = errors.New("no GitHub App configured yet: app_dir is empty and no app_id, private key or webhook secret is set (register it with the manifest flow at /setup, docs/install.md)")

// readAppDir fills what the App keys leave unset from AppDir's files. A missing file is not an
// error here (validate names what is still missing); an unreadable or malformed one is.
func (c *Config) readAppDir() []error {
	if c.AppDir == "" {
		return nil
	}
	var errs []error
	read := func(name string) (string, bool) {
		b, err := os.ReadFile(filepath.Join(c.AppDir, name))
		if errors.Is(err, os.ErrNotExist) {
			return "", false
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("app_dir: %w", err))
			return "", false
		}
		return string(b), true
	}
	if c.AppID == 0 {
		if v, ok := read(AppIDFile); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil || n <= 0 {
				errs = append(errs, fmt.Errorf("app_dir: %s holds %q, not an App ID", filepath.Join(c.AppDir, AppIDFile), strings.TrimSpace(v)))
			}
			c.AppID = n
		}
	}
	if c.PrivateKey.IsZero() && c.PrivateKeyFile == "" {
		if _, err := os.Stat(filepath.Join(c.AppDir, PrivateKeyFileName)); err == nil {
			c.PrivateKeyFile = filepath.Join(c.AppDir, PrivateKeyFileName)
		}
	}
	if len(c.WebhookSecrets) == 0 {
		if v, ok := read(WebhookSecretsFile); ok {
			for _, s := range strings.Split(v, ",") {
				if s = strings.TrimSpace(s); s != "" {
					c.WebhookSecrets = append(c.WebhookSecrets, NewSecret(s))
				}
			}
		}
	}
	return errs
}
