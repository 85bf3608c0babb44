package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadPipelines(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "key")
	os.WriteFile(key, []byte("old-stream-access-key\n\nnew-stream-access-key\n"), 0o600)
	cfg := filepath.Join(dir, "parley.hcl")
	os.WriteFile(cfg, []byte(`
cluster "eks" { repository = "acme/eks" }
aws_account "111122223333" { repository = "acme/aws" }
cluster "gke" { repository = "acme/gke" }
firehose "eks" { access_key_file = "`+key+`" }
firehose "111122223333" { access_key_file = "`+key+`" }
pubsub "gke" {
  audience        = "https://parley.example.com/events/pubsub/gke"
  service_account = "push@acme.iam.gserviceaccount.com"
}
`), 0o600)
	c, err := Load(cfg, envMap(map[string]string{"PARLEY_APP_ID": "7", "PARLEY_PRIVATE_KEY": "pem", "PARLEY_WEBHOOK_SECRETS": "a"}))
	if err != nil {
		t.Fatal(err)
	}
	if f := c.Firehose["eks"]; len(f.AccessKeys) != 2 || f.AccessKeys[1].Reveal() != "new-stream-access-key" || len(c.Firehose) != 2 {
		t.Fatalf("firehose %+v", c.Firehose)
	}
	if p := c.PubSub["gke"]; p.KeysURL != DefaultGoogleKeysURL || p.KeysFile != "" || p.ServiceAccount != "push@acme.iam.gserviceaccount.com" {
		t.Fatalf("pubsub %+v", p)
	}

	short := filepath.Join(dir, "short")
	os.WriteFile(short, []byte("short\n"), 0o600)
	os.WriteFile(cfg, []byte(`
cluster "eks" { repository = "acme/eks" }
firehose "nowhere" { access_key_file = "`+key+`" }
firehose "eks" { access_key_file = "`+short+`" }
pubsub "gke" {
  audience        = "a"
  service_account = "not-an-email"
  keys_url        = "ftp://x"
}
pubsub "eks" {
  audience        = "a"
  service_account = "a@b"
  keys_url        = "https://x"
  keys_file       = "/k"
}
`), 0o600)
	_, err = Load(cfg, envMap(map[string]string{"PARLEY_APP_ID": "7", "PARLEY_PRIVATE_KEY": "pem", "PARLEY_WEBHOOK_SECRETS": "a"}))
	for _, want := range []string{`firehose "nowhere": no cluster or aws_account block`, `firehose "eks"`, "16 characters", `keys_url "ftp://x"`,
		"service account's email", `pubsub "gke": no cluster "gke" block`, "keys_url and keys_file: choose one"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q:\n%v", want, err)
		}
	}
}
