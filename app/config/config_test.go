package config

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
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
lease            = "90s"
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
	if c.AppID != 1234 || c.Listen != "127.0.0.1:9000" || c.Workers != 2 || c.ShutdownGrace != 40*time.Second || c.Lease != 90*time.Second ||
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
		"PARLEY_GITOPS_REPOSITORY": "infra", "PARLEY_COMMIT_AUTHOR": "bot", "PARLEY_LEASE": "1s"}))
	if err == nil {
		t.Fatal("want errors")
	}
	for _, want := range []string{"PARLEY_WORKERS", "lease = 1s", "app_id", "private key", "webhook secret", "ftp://x", "yolo", `gitops_repository = "infra"`, `commit_author = "bot"`} {
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

// TestHelpListsExactlyWhatLoadReads: the environment column of --help is the list of variables
// Load reads, no more and no fewer. The install test (tests/chart) compares every PARLEY_
// variable the chart renders with that column of the image's own `parley serve --help`: serve
// ignores variables it does not read, so a chart setting a misspelt or removed one would otherwise
// configure nothing, silently.
func TestHelpListsExactlyWhatLoadReads(t *testing.T) {
	read := map[string]bool{}
	// Once with nothing set and once with the App configured, so that a lookup made only past the
	// App's settings is seen too.
	Load("", func(name string) string { read[name] = true; return "" })
	Load("", func(name string) string { read[name] = true; return required[name] })
	listed := map[string]bool{}
	for _, k := range Keys() {
		if k.Env != "" {
			listed[k.Env] = true
		}
	}
	for name := range read {
		if !listed[name] {
			t.Errorf("Load reads %s, which --help does not list", name)
		}
	}
	for name := range listed {
		if !read[name] {
			t.Errorf("--help lists %s, which Load never reads", name)
		}
	}
}

func TestUnreadEnv(t *testing.T) {
	got := UnreadEnv([]string{"PARLEY_APP_ID=1", "PARLEY_RENDER_MEM=512", "HOME=/root", "PARLEY_RENDER_MEMORY=512",
		"PARLEY_WEBHOOK_SECRET=s", "PARLEY_RENDER_MEM=1", "PARLEYX=1", "NOT_PARLEY_X=1"})
	if want := []string{"PARLEY_RENDER_MEM", "PARLEY_WEBHOOK_SECRET"}; !slices.Equal(got, want) {
		t.Errorf("UnreadEnv = %q, want %q", got, want)
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
		if k.HCL == "gitops_repository" && !(strings.Contains(k.Help, "default") && strings.Contains(k.Help, "cluster") &&
			strings.Contains(k.Help, "aws_account") && strings.Contains(k.Help, "repoURL")) {
			t.Errorf("gitops_repository help %q does not say it is the default for events nothing else routes", k.Help)
		}
	}
}

// required is the environment every Load below needs besides what it tests.
var required = map[string]string{"PARLEY_APP_ID": "1", "PARLEY_PRIVATE_KEY": "pem", "PARLEY_WEBHOOK_SECRETS": "s"}

func withRequired(m map[string]string) func(string) string {
	all := map[string]string{}
	for k, v := range required {
		all[k] = v
	}
	for k, v := range m {
		all[k] = v
	}
	return envMap(all)
}

func writeConfig(t *testing.T, src string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "parley.hcl")
	if err := os.WriteFile(p, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadClusterAndAccountBlocks(t *testing.T) {
	p := writeConfig(t, `
cluster "prod-eu" {
  repository = "acme/prod-eu"
  branch     = "main"
}
cluster "prod-us" {
  repository = "acme/prod-us"
}
aws_account "123456789012" {
  repository = "acme/infra"
}
`)
	c, err := Load(p, withRequired(nil))
	if err != nil {
		t.Fatal(err)
	}
	wantClusters := map[string]RepoRef{"prod-eu": {"acme/prod-eu", "main"}, "prod-us": {"acme/prod-us", ""}}
	wantAccounts := map[string]RepoRef{"123456789012": {"acme/infra", ""}}
	if !maps.Equal(c.Clusters, wantClusters) || !maps.Equal(c.AWSAccounts, wantAccounts) {
		t.Errorf("clusters %v, accounts %v", c.Clusters, c.AWSAccounts)
	}
}

func TestLoadClustersAndAccountsFromEnvironment(t *testing.T) {
	p := writeConfig(t, `
cluster "prod-eu" {
  repository = "acme/from-file"
}
cluster "staging" {
  repository = "acme/staging"
}
aws_account "123456789012" {
  repository = "acme/infra"
}
`)
	// PARLEY_CLUSTERS replaces every cluster block; the aws_account blocks stay.
	c, err := Load(p, withRequired(map[string]string{"PARLEY_CLUSTERS": " prod-eu=acme/prod-eu , prod-us = acme/prod-us@release ,,"}))
	if err != nil {
		t.Fatal(err)
	}
	wantClusters := map[string]RepoRef{"prod-eu": {"acme/prod-eu", ""}, "prod-us": {"acme/prod-us", "release"}}
	if !maps.Equal(c.Clusters, wantClusters) || c.AWSAccounts["123456789012"] != (RepoRef{"acme/infra", ""}) {
		t.Errorf("clusters %v, accounts %v", c.Clusters, c.AWSAccounts)
	}
	c, err = Load("", withRequired(map[string]string{"PARLEY_AWS_ACCOUNTS": "123456789012=acme/infra@tf,210987654321=acme/other"}))
	if err != nil {
		t.Fatal(err)
	}
	wantAccounts := map[string]RepoRef{"123456789012": {"acme/infra", "tf"}, "210987654321": {"acme/other", ""}}
	if !maps.Equal(c.AWSAccounts, wantAccounts) || c.Clusters != nil {
		t.Errorf("clusters %v, accounts %v", c.Clusters, c.AWSAccounts)
	}
}

func TestLoadClusterAndAccountErrors(t *testing.T) {
	_, err := Load("", withRequired(map[string]string{
		"PARLEY_CLUSTERS":     "-bad=acme/a,good=infra,noequals,x=acme/x@,dup=acme/d,dup=acme/e," + strings.Repeat("a", 64) + "=acme/long",
		"PARLEY_AWS_ACCOUNTS": "12345=acme/infra,123456789012=acme/infra/extra,12345678901x=acme/x",
	}))
	if err == nil {
		t.Fatal("want errors")
	}
	for _, want := range []string{
		`cluster "-bad"`,
		`cluster "good" (PARLEY_CLUSTERS): repository = "infra": want owner/name`,
		`PARLEY_CLUSTERS: item "noequals"`,
		`item "x=acme/x@": empty branch`,
		`item "dup=acme/e": "dup" is given twice`,
		`cluster "` + strings.Repeat("a", 64) + `"`,
		`aws_account "12345" (PARLEY_AWS_ACCOUNTS): want a 12-digit`,
		`aws_account "12345678901x"`,
		`aws_account "123456789012" (PARLEY_AWS_ACCOUNTS): repository = "acme/infra/extra": want owner/name`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q:\n%v", want, err)
		}
	}
	for _, ok := range []string{`cluster "dup" `, `cluster "x"`, `"acme/a"`} {
		if strings.Contains(err.Error(), ok) {
			t.Errorf("error should not mention %q:\n%v", ok, err)
		}
	}

	p := writeConfig(t, `
cluster "prod" {
  repository = "acme/prod"
}
cluster "prod" {
  repository = "acme/other"
}
cluster "Bad Name" {
  repository = "acme/x"
}
aws_account "123456789012" {
  repository = "acme/infra"
}
aws_account "123456789012" {
  repository = "acme/infra"
}
aws_account "1" {
  repository = "infra"
}
`)
	_, err = Load(p, withRequired(nil))
	if err == nil {
		t.Fatal("want errors")
	}
	for _, want := range []string{
		`parley.hcl:5: cluster "prod" is defined twice (first at line 2)`,
		`parley.hcl:14: aws_account "123456789012" is defined twice (first at line 11)`,
		`cluster "Bad Name" (PARLEY_CLUSTERS): want a name`,
		`aws_account "1" (PARLEY_AWS_ACCOUNTS): want a 12-digit`,
		`aws_account "1" (PARLEY_AWS_ACCOUNTS): repository = "infra"`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q:\n%v", want, err)
		}
	}

	// A block without its repository is rejected by the decoder, naming the file and line.
	p = writeConfig(t, "cluster \"prod\" {\n  branch = \"main\"\n}\n")
	if _, err := Load(p, withRequired(nil)); err == nil || !strings.Contains(err.Error(), "parley.hcl:1") || !strings.Contains(err.Error(), "repository") {
		t.Errorf("block without repository: want a file:line error naming repository, got %v", err)
	}
}

func TestClusterNames(t *testing.T) {
	for name, ok := range map[string]bool{
		"a": true, "0": true, "prod-eu": true, "Prod_EU.1": true, strings.Repeat("a", 63): true,
		"": false, "-a": false, ".a": false, "_a": false, "a b": false, "a/b": false, strings.Repeat("a", 64): false,
	} {
		if got := clusterName.MatchString(name); got != ok {
			t.Errorf("cluster name %q: valid = %v, want %v", name, got, ok)
		}
	}
}

func TestRepositoriesDedupesAndOrders(t *testing.T) {
	c := Config{
		GitOpsRepository: "zeta/default", GitOpsBranch: "main",
		Clusters: map[string]RepoRef{
			"a": {"acme/prod", ""}, "b": {"acme/prod", "release"}, "c": {"acme/prod", ""},
			"d": {"zeta/default", "main"}, "e": {"acme/apps", ""},
		},
		AWSAccounts: map[string]RepoRef{"123456789012": {"acme/prod", "release"}, "210987654321": {"acme/infra", ""}},
	}
	want := []RepoRef{{"zeta/default", "main"}, {"acme/apps", ""}, {"acme/infra", ""}, {"acme/prod", ""}, {"acme/prod", "release"}}
	if got := c.Repositories(); !slices.Equal(got, want) {
		t.Errorf("Repositories() = %v, want %v", got, want)
	}
	c.GitOpsRepository = ""
	want = []RepoRef{{"acme/apps", ""}, {"acme/infra", ""}, {"acme/prod", ""}, {"acme/prod", "release"}, {"zeta/default", "main"}}
	if got := c.Repositories(); !slices.Equal(got, want) {
		t.Errorf("without a default: Repositories() = %v", got)
	}
	if got := (Config{}).Repositories(); len(got) != 0 {
		t.Errorf("empty config: Repositories() = %v", got)
	}
}

func TestOneRepositoryIsServedOnOneBranch(t *testing.T) {
	env := withRequired(map[string]string{
		"PARLEY_GITOPS_REPOSITORY": "acme/fleet",
		"PARLEY_CLUSTERS":          "prod=acme/fleet@release,staging=acme/Fleet",
	})
	_, err := Load("", env)
	if err == nil || !strings.Contains(err.Error(), `repository acme/fleet is configured with branches "" and "release"`) {
		t.Fatalf("want the two branches named, got %v", err)
	}
}

// A postgres:// store is a PostgreSQL database: its password never appears in what is logged or
// in errors, the clone cache goes to data_dir (or $TMPDIR/parley), and drift_state, a SQLite
// file, is refused beside it.
func TestPostgresStore(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{"PARLEY_APP_ID": "1", "PARLEY_PRIVATE_KEY": "k", "PARLEY_WEBHOOK_SECRETS": "s"}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	c, err := Load("", env("PARLEY_STORE", "postgres://parley:s3cret@db.internal:5432/parley?sslmode=require"))
	if err != nil {
		t.Fatal(err)
	}
	if !c.StoreIsPostgres() || c.StoreName() != "postgres://parley@db.internal:5432/parley" || strings.Contains(c.StoreName(), "s3cret") {
		t.Fatalf("store %q", c.StoreName())
	}
	if c.Dir() != filepath.Join(os.TempDir(), "parley") {
		t.Fatalf("dir %q", c.Dir())
	}
	c, err = Load("", env("PARLEY_STORE", "postgres://parley@db/parley", "PARLEY_DATA_DIR", "/var/lib/parley"))
	if err != nil || c.Dir() != "/var/lib/parley" {
		t.Fatalf("data_dir: %q %v", c.Dir(), err)
	}
	_, err = Load("", env("PARLEY_STORE", "postgres://parley:s3cret@db/parley", "PARLEY_DRIFT_STATE", "/data/drift.db"))
	if err == nil || !strings.Contains(err.Error(), "drift_state") || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("drift_state beside PostgreSQL: %v", err)
	}
	_, err = Load("", env("PARLEY_STORE", "postgres://parley:s3cret@[db/parley"))
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("a bad URL: %v", err)
	}
	if c, err := Load("", env("PARLEY_STORE", "/data/parley.db")); err != nil || c.StoreIsPostgres() || c.Dir() != "/data" {
		t.Fatalf("SQLite: %q %v", c.Dir(), err)
	}
}

// TestDetailsPagesSettings: the details pages need the public URL and the App's OAuth client
// together, an https URL (http only on a loopback host), and a long enough session secret.
func TestDetailsPagesSettings(t *testing.T) {
	base := map[string]string{"PARLEY_APP_ID": "7", "PARLEY_PRIVATE_KEY": "pem", "PARLEY_WEBHOOK_SECRETS": "s"}
	load := func(extra map[string]string) (Config, error) {
		env := map[string]string{}
		for k, v := range base {
			env[k] = v
		}
		for k, v := range extra {
			env[k] = v
		}
		return Load("", envMap(env))
	}
	c, err := load(nil)
	if err != nil || c.Pages() {
		t.Fatalf("nothing set: pages %v, %v", c.Pages(), err)
	}
	c, err = load(map[string]string{"PARLEY_PUBLIC_URL": "https://parley.example.com/", "PARLEY_OAUTH_CLIENT_ID": "Iv1.abc", "PARLEY_OAUTH_CLIENT_SECRET": "shh"})
	if err != nil || !c.Pages() || c.PublicURL != "https://parley.example.com" {
		t.Fatalf("all set: pages %v, public URL %q, %v", c.Pages(), c.PublicURL, err)
	}
	if strings.Contains(fmt.Sprintf("%+v", c), "shh") {
		t.Error("the client secret is printed")
	}
	if c, err := load(map[string]string{"PARLEY_PUBLIC_URL": "http://localhost:8080", "PARLEY_OAUTH_CLIENT_ID": "x", "PARLEY_OAUTH_CLIENT_SECRET": "y"}); err != nil || !c.Pages() {
		t.Errorf("http on localhost: %v", err)
	}
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"PARLEY_PUBLIC_URL": "https://parley.example.com"}, "set all three or none"},
		{map[string]string{"PARLEY_PUBLIC_URL": "http://parley.example.com", "PARLEY_OAUTH_CLIENT_ID": "x", "PARLEY_OAUTH_CLIENT_SECRET": "y"}, "want https"},
		{map[string]string{"PARLEY_PUBLIC_URL": "parley.example.com", "PARLEY_OAUTH_CLIENT_ID": "x", "PARLEY_OAUTH_CLIENT_SECRET": "y"}, "want an absolute URL"},
		{map[string]string{"PARLEY_SESSION_SECRET": "short"}, "32 bytes or more"},
	} {
		if _, err := load(tc.env); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.env, err, tc.want)
		}
	}
}

// TestStoreNeitherURLNorPathIsRefusedRedacted: pgx's keyword form, another scheme's URL or a
// file: URI is no plain file path: taken as a SQLite file name it would put the password in the
// logs and on disk, and each replica would run alone. Refused, with the password redacted.
func TestStoreNeitherURLNorPathIsRefusedRedacted(t *testing.T) {
	base := map[string]string{"PARLEY_APP_ID": "7", "PARLEY_PRIVATE_KEY": "pem", "PARLEY_WEBHOOK_SECRETS": "a"}
	for _, c := range []struct{ key, value, shown string }{
		{"PARLEY_STORE", "host=db.internal user=parley password=hunter2 dbname=parley", `host=db.internal user=parley password=[redacted] dbname=parley`},
		{"PARLEY_STORE", "host=db password='hunter2 x' sslmode=require", `password=[redacted] sslmode=require`},
		{"PARLEY_STORE", "mysql://parley:hunter2@db/parley", `mysql://parley:[redacted]@db/parley`},
		{"PARLEY_STORE", "file:parley.db?_auth_pass=hunter2", `_auth_pass=[redacted]`},
		{"PARLEY_DRIFT_STATE", "postgres://parley:hunter2@db/parley", `postgres://parley@db:5432/parley`},
	} {
		env := maps.Clone(base)
		env[c.key] = c.value
		_, err := Load("", envMap(env))
		if err == nil {
			t.Errorf("%s=%q was accepted", c.key, c.value)
			continue
		}
		if strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), c.shown) {
			t.Errorf("%s=%q: error %q; want it to show %q and never the password", c.key, c.value, err, c.shown)
		}
	}
	for _, ok := range []string{"parley.db", "/var/lib/parley/parley.db", "data dir/parley.db", "postgres://parley@db/parley"} {
		env := maps.Clone(base)
		env["PARLEY_STORE"] = ok
		if _, err := Load("", envMap(env)); err != nil {
			t.Errorf("store %q: %v", ok, err)
		}
	}
}

// TestEventSecretsPerClusterAndAccount: each cluster and aws_account block may name a file with
// its own event secret, or the environment may; a file for a cluster with no block, a missing or
// an empty file is an error naming it; secrets held by several, or equal to a source-wide one,
// are accepted and described for serve's warning.
func TestEventSecretsPerClusterAndAccount(t *testing.T) {
	dir := t.TempDir()
	file := func(name, v string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	eu, us, acct := file("eu", "eu-s3cret\n"), file("us", "us-s3cret"), file("acct", "acct-s3cret")
	p := writeConfig(t, fmt.Sprintf(`
cluster "prod-eu" {
  repository        = "acme/prod-eu"
  event_secret_file = %q
}
cluster "prod-us" {
  repository = "acme/prod-us"
}
aws_account "123456789012" {
  repository        = "acme/infra"
  event_secret_file = %q
}
`, eu, acct))
	c, err := Load(p, withRequired(map[string]string{"PARLEY_CLUSTER_EVENT_SECRET_FILES": "prod-us=" + us}))
	if err != nil {
		t.Fatal(err)
	}
	if c.ClusterEventSecrets["prod-eu"].Reveal() != "eu-s3cret" || c.ClusterEventSecrets["prod-us"].Reveal() != "us-s3cret" ||
		c.AWSAccountEventSecrets["123456789012"].Reveal() != "acct-s3cret" {
		t.Errorf("secrets %v %v", c.ClusterEventSecrets, c.AWSAccountEventSecrets)
	}
	if w := c.SharedEventSecrets(); len(w) != 0 {
		t.Errorf("warnings for distinct secrets: %v", w)
	}
	if s := fmt.Sprintf("%v %+v", c.ClusterEventSecrets, c); strings.Contains(s, "s3cret") {
		t.Errorf("a secret prints: %s", s)
	}
	// Shared by both clusters, and one is also the source-wide Flux secret: accepted, described.
	c, err = Load(p, withRequired(map[string]string{"PARLEY_CLUSTER_EVENT_SECRET_FILES": "prod-us=" + eu, "PARLEY_FLUX_HMAC_SECRET": "acct-s3cret"}))
	if err != nil {
		t.Fatal(err)
	}
	w := strings.Join(c.SharedEventSecrets(), "\n")
	if !strings.Contains(w, `cluster "prod-eu" and cluster "prod-us" share one event secret`) ||
		!strings.Contains(w, `aws_account "123456789012" is also PARLEY_FLUX_HMAC_SECRET`) || strings.Contains(w, "s3cret") {
		t.Errorf("warnings:\n%s", w)
	}
	for env, want := range map[string]string{
		"staging=" + eu:                            `cluster "staging" has an event secret file`,
		"prod-us=" + file("empty", "\n"):           "is empty",
		"prod-us=" + filepath.Join(dir, "missing"): "no such file",
		"prod-us": "want NAME=/path/to/file",
	} {
		if _, err := Load(p, withRequired(map[string]string{"PARLEY_CLUSTER_EVENT_SECRET_FILES": env})); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", env, err, want)
		}
	}
}

// The budgets of what a repository may make the server read and render are keys of the file and
// of the environment (which wins), and a budget of none is refused by name.
func TestLoadBudgets(t *testing.T) {
	base := map[string]string{"PARLEY_APP_ID": "7", "PARLEY_PRIVATE_KEY": "pem", "PARLEY_WEBHOOK_SECRETS": "a"}
	path := filepath.Join(t.TempDir(), "parley.hcl")
	if err := os.WriteFile(path, []byte("max_file_size = 1048576\nmax_fields_per_file = 100\nmax_fields = 1000\nmax_value_size = 4096\n"+
		"render_timeout = \"10s\"\nrender_memory = 256\nrender_parallel = 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path, envMap(base))
	if err != nil {
		t.Fatal(err)
	}
	if c.MaxFileSize != 1<<20 || c.MaxFieldsPerFile != 100 || c.MaxFields != 1000 || c.MaxValueSize != 4096 ||
		c.RenderTimeout != 10*time.Second || c.RenderMemory != 256 || c.RenderParallel != 1 {
		t.Errorf("from the file: %+v", c)
	}
	env := map[string]string{"PARLEY_MAX_FILE_SIZE": "2048", "PARLEY_MAX_FIELDS_PER_FILE": "5", "PARLEY_MAX_FIELDS": "6",
		"PARLEY_MAX_VALUE_SIZE": "7", "PARLEY_RENDER_TIMEOUT": "3s", "PARLEY_RENDER_MEMORY": "64", "PARLEY_RENDER_PARALLEL": "4"}
	maps.Copy(env, base)
	if c, err = Load(path, envMap(env)); err != nil {
		t.Fatal(err)
	}
	if c.MaxFileSize != 2048 || c.MaxFieldsPerFile != 5 || c.MaxFields != 6 || c.MaxValueSize != 7 ||
		c.RenderTimeout != 3*time.Second || c.RenderMemory != 64 || c.RenderParallel != 4 {
		t.Errorf("from the environment: %+v", c)
	}
	zero := map[string]string{"PARLEY_MAX_FILE_SIZE": "0", "PARLEY_MAX_FIELDS_PER_FILE": "0", "PARLEY_MAX_FIELDS": "-1",
		"PARLEY_MAX_VALUE_SIZE": "0", "PARLEY_RENDER_TIMEOUT": "0s", "PARLEY_RENDER_MEMORY": "0", "PARLEY_RENDER_PARALLEL": "0"}
	maps.Copy(zero, base)
	_, err = Load("", envMap(zero))
	for _, want := range []string{"max_file_size = 0", "max_fields_per_file = 0", "max_fields = -1", "max_value_size = 0",
		"render_timeout = 0s", "render_memory = 0", "render_parallel = 0"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error does not name %q: %v", want, err)
		}
	}
}

// TestIntakeBudgetKeys: the unauthenticated body budget and the trusted proxies are read from the environment, and a proxy entry that is neither a CIDR nor an
// address is named.
func TestIntakeBudgetKeys(t *testing.T) {
	base := map[string]string{"PARLEY_APP_ID": "7", "PARLEY_PRIVATE_KEY": "pem", "PARLEY_WEBHOOK_SECRETS": "s"}
	c, err := Load("", envMap(base))
	if err != nil {
		t.Fatal(err)
	}
	if c.UnauthenticatedBodyBudget != 128<<20 || c.TrustedProxies != nil {
		t.Errorf("defaults: budget %d, proxies %v", c.UnauthenticatedBodyBudget, c.TrustedProxies)
	}
	env := map[string]string{"PARLEY_UNAUTHENTICATED_BODY_BUDGET": "67108864", "PARLEY_TRUSTED_PROXIES": " 10.0.0.0/8, 192.0.2.1 ,"}
	for k, v := range base {
		env[k] = v
	}
	if c, err = Load("", envMap(env)); err != nil {
		t.Fatal(err)
	}
	if c.UnauthenticatedBodyBudget != 64<<20 || strings.Join(c.TrustedProxies, "|") != "10.0.0.0/8|192.0.2.1" {
		t.Errorf("loaded budget %d, proxies %q", c.UnauthenticatedBodyBudget, c.TrustedProxies)
	}
	env["PARLEY_TRUSTED_PROXIES"] = "10.0.0.0/8,ingress.local"
	env["PARLEY_UNAUTHENTICATED_BODY_BUDGET"] = "-1"
	_, err = Load("", envMap(env))
	for _, want := range []string{`trusted_proxies: "ingress.local"`, "unauthenticated_body_budget = -1"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not name %s", err, want)
		}
	}
}

// TestAppDir: the manifest flow's directory supplies what the App keys leave unset; with nothing
// of an App anywhere Load says ErrNoApp (and returns the rest, for /setup); with part of one it is
// an ordinary error naming what is missing.
func TestAppDir(t *testing.T) {
	dir := t.TempDir()
	_, err := Load("", envMap(map[string]string{"PARLEY_APP_DIR": dir}))
	if err != ErrNoApp {
		t.Fatalf("empty app_dir: want ErrNoApp, got %v", err)
	}
	os.WriteFile(filepath.Join(dir, AppIDFile), []byte("77\n"), 0o600)
	if _, err := Load("", envMap(map[string]string{"PARLEY_APP_DIR": dir})); err == nil || errors.Is(err, ErrNoApp) || !strings.Contains(err.Error(), "private key is required") {
		t.Fatalf("app_dir with only an ID: want a missing-key error, got %v", err)
	}
	os.WriteFile(filepath.Join(dir, PrivateKeyFileName), []byte("PEM"), 0o600)
	os.WriteFile(filepath.Join(dir, WebhookSecretsFile), []byte("one,two"), 0o600)
	c, err := Load("", envMap(map[string]string{"PARLEY_APP_DIR": dir}))
	if err != nil {
		t.Fatal(err)
	}
	if c.AppID != 77 || c.PrivateKey.Reveal() != "PEM" || len(c.WebhookSecrets) != 2 {
		t.Errorf("app_dir read as id %d, key %q, %d secrets", c.AppID, c.PrivateKey.Reveal(), len(c.WebhookSecrets))
	}
	c, err = Load("", envMap(map[string]string{"PARLEY_APP_DIR": dir, "PARLEY_APP_ID": "5", "PARLEY_WEBHOOK_SECRETS": "env"}))
	if err != nil || c.AppID != 5 || c.WebhookSecrets[0].Reveal() != "env" {
		t.Errorf("the environment must win over app_dir: %d %v", c.AppID, err)
	}
	os.WriteFile(filepath.Join(dir, AppIDFile), []byte("seventy"), 0o600)
	if _, err := Load("", envMap(map[string]string{"PARLEY_APP_DIR": dir})); err == nil || !strings.Contains(err.Error(), "app-id") {
		t.Errorf("a malformed app-id must be named, got %v", err)
	}
}
