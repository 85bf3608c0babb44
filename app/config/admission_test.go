package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestLoadAdmissionBlocks(t *testing.T) {
	tok := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tok, []byte("s3cr3t-admission-token-0123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := writeConfig(t, `
cluster "prod" {
  repository = "acme/infra"
}
cluster "eks" {
  repository = "acme/infra"
}
admission "prod" {
  mode       = "deny"
  token_file = "`+tok+`"
  gitops_users = ["system:serviceaccount:gitops:*"]
}
admission "eks" {
  authentication = "none"
  observe        = true
}
`)
	c, err := Load(p, withRequired(nil))
	if err != nil {
		t.Fatal(err)
	}
	prod, eks := c.Admission["prod"], c.Admission["eks"]
	if prod.Mode != "deny" || prod.Token.Reveal() != "s3cr3t-admission-token-0123" || prod.Unauthenticated ||
		!slices.Equal(prod.GitOpsUsers, []string{"system:serviceaccount:gitops:*"}) {
		t.Fatalf("prod: %+v", prod)
	}
	if eks.Mode != "warn" || !eks.Unauthenticated || !eks.Observe || prod.Observe || !slices.Equal(eks.GitOpsUsers, DefaultGitOpsUsers) {
		t.Fatalf("eks: %+v", eks)
	}
}

func TestAdmissionBlockErrors(t *testing.T) {
	p := writeConfig(t, `
cluster "prod" {
  repository = "acme/infra"
}
admission "prod" {
  mode = "block"
}
admission "ghost" {
  authentication = "none"
}
admission "ghost" {
  authentication = "none"
}
admission_listen = ":8443"
`)
	_, err := Load(p, withRequired(nil))
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		`admission "prod": mode = "block": want warn or deny`,
		`admission "prod": set token_file or client_ca_file`,
		`admission "ghost" is defined twice`,
		`admission "ghost": no cluster "ghost" block`,
		`admission_listen = ":8443": the API server calls webhooks over HTTPS only`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
}
