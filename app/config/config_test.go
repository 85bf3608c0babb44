package config

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func envMap(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestLoadFileThenEnvironment(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "key.pem")
	if err := os.WriteFile(key, []byte("-----BEGIN RSA PRIVATE KEY-----\nfile\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "parley.hcl")
	src := fmt.Sprintf(`
app_id           = 1234
private_key_file = %q
webhook_secrets  = ["old-secret", "new-secret"]
listen           = "127.0.0.1:9000"
workers          = 8
shutdown_grace   = "40s"
github_url       = "https://ghe.example.com/api/v3"
log_level        = "debug"
gitops_repository = "acme/infra"
commit_author    = "Parley Bot <bot@acme.example>"
`, key)
	if err := os.WriteFile(cfgPath, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(cfgPath, envMap(map[string]string{"PARLEY_WORKERS": "2", "PARLEY_FLUX_HMAC_SECRET": "flux"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.AppID != 1234 || c.Listen != "127.0.0.1:9000" || c.Workers != 2 || c.ShutdownGrace != 40*time.Second ||
		c.GitHubURL != "https://ghe.example.com/api/v3/" || c.LogLevel != slog.LevelDebug || len(c.WebhookSecrets) != 2 ||
		c.WebhookSecrets[1].Reveal() != "new-secret" || !strings.Contains(c.PrivateKey.Reveal(), "file") ||
		c.FluxHMACSecret.Reveal() != "flux" || c.Store != "parley.db" || c.WriteMode != "pull-request" ||
		c.GitOpsRepository != "acme/infra" || c.GitOpsBranch != "" || c.CommitAuthor != "Parley Bot <bot@acme.example>" {
		t.Errorf("loaded %+v", c)
	}
	// No secret may show up when the whole config is printed or logged.
	var logged strings.Builder
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("config", "cfg", c, "secret", c.WebhookSecrets[0])
	for _, out := range []string{fmt.Sprintf("%v %+v %#v %s", c, c, c, c.PrivateKey), logged.String()} {
		for _, secret := range []string{"old-secret", "new-secret", "flux", "BEGIN RSA"} {
			if strings.Contains(out, secret) {
				t.Errorf("secret %q printed in %s", secret, out)
			}
		}
	}
}

func TestLoadEnvironmentOnly(t *testing.T) {
	c, err := Load("", envMap(map[string]string{"PARLEY_APP_ID": "7", "PARLEY_PRIVATE_KEY": "pem",
		"PARLEY_WEBHOOK_SECRETS": " a, b ,,", "PARLEY_WRITE_MODE": "direct"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.AppID != 7 || len(c.WebhookSecrets) != 2 || c.WebhookSecrets[0].Reveal() != "a" || c.WriteMode != "direct" {
		t.Errorf("loaded %+v", c)
	}
}

func TestLoadErrorsNameEveryProblem(t *testing.T) {
	_, err := Load("", envMap(map[string]string{"PARLEY_WORKERS": "many", "PARLEY_GITHUB_URL": "ftp://x", "PARLEY_WRITE_MODE": "yolo",
		"PARLEY_GITOPS_REPOSITORY": "infra", "PARLEY_COMMIT_AUTHOR": "bot"}))
	if err == nil {
		t.Fatal("want errors")
	}
	for _, want := range []string{"PARLEY_WORKERS", "app_id", "private key", "webhook secret", "ftp://x", "yolo", `gitops_repository = "infra"`, `commit_author = "bot"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q:\n%v", want, err)
		}
	}
	bad := filepath.Join(t.TempDir(), "bad.hcl")
	os.WriteFile(bad, []byte("app_id = 1\nunknown_key = 2\n"), 0o600)
	if _, err := Load(bad, envMap(nil)); err == nil || !strings.Contains(err.Error(), "bad.hcl:2") {
		t.Errorf("unknown key: want a file:line error, got %v", err)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.hcl"), envMap(nil)); err == nil {
		t.Error("a missing config file must be an error")
	}
}

func TestHelpListsEveryKey(t *testing.T) {
	h := Help()
	for _, k := range Keys() {
		if !strings.Contains(h, k.Env) {
			t.Errorf("help lacks %s", k.Env)
		}
	}
}

// TestHelpDescribesServedBehaviour keeps --help from promising or denying what serve does: every
// key it lists is read and acted on by this version, so none may say it is not served yet, and
// write_mode names both modes and where each lands.
func TestHelpDescribesServedBehaviour(t *testing.T) {
	for _, k := range Keys() {
		if strings.Contains(k.Help, "not served") || strings.Contains(k.Help, "yet") {
			t.Errorf("%s: help says %q", k.Env, k.Help)
		}
		if k.HCL == "write_mode" && !(strings.Contains(k.Help, "pull-request (") && strings.Contains(k.Help, "direct (")) {
			t.Errorf("write_mode help %q does not say what each mode does", k.Help)
		}
	}
}
