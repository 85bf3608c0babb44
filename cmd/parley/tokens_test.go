package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/internal/agentstore"
	"github.com/parleyhq/parley/internal/pgtest"
	"github.com/parleyhq/parley/internal/schematest"
	"github.com/parleyhq/parley/internal/sqldb"
)

const agentIdentity = "aws-principal:arn:aws:iam::123456789012:role/kafka-scaling-agent"

// verifyToken checks a token against the store as parley serve does.
func verifyToken(t *testing.T, db, token string) (agentstore.Token, error) {
	t.Helper()
	st, err := agentstore.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	return st.Verify(context.Background(), token, time.Now())
}

// createToken runs parley tokens create and returns the token it printed.
func createToken(t *testing.T, db, name, identity string) string {
	t.Helper()
	code, out, errOut := runCLI(t, "tokens", "create", name, "--identity", identity, "--repository", "acme/infra", "--repository", "acme/prod-eu,acme/prod-us", "--db", db)
	if code != 0 {
		t.Fatalf("tokens create %s: exit %d: %s", name, code, errOut)
	}
	// The token alone on standard output, so that TOKEN=$(parley tokens create ...) works.
	token := strings.TrimSuffix(out, "\n")
	if !strings.HasPrefix(token, "parley_") || strings.ContainsAny(token, " \n\t") || out != token+"\n" {
		t.Fatalf("tokens create printed %q on stdout, want the token alone", out)
	}
	if !strings.Contains(errOut, "cannot be shown again") || strings.Contains(errOut, token) {
		t.Fatalf("tokens create's note on stderr: %q", errOut)
	}
	return token
}

func TestTokensCreateListVerifyRevoke(t *testing.T) {
	db := filepath.Join(t.TempDir(), "agents.db")

	// list and revoke do not create a missing store: they name it.
	for _, args := range [][]string{{"tokens", "list", "--db", db}, {"tokens", "revoke", "x", "--db", db}} {
		if code, _, errOut := runCLI(t, args...); code != exitUsage || !strings.Contains(errOut, db) {
			t.Errorf("%v on a missing store: exit %d: %s", args, code, errOut)
		}
	}
	if _, err := os.Stat(db); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a missing store was created by list or revoke: %v", err)
	}

	token := createToken(t, db, "kafka-agent", agentIdentity)
	secret := token[len("parley_")+16+1:] // parley_<id>_<secret>, the id 16 hex digits
	if len(secret) < 40 || strings.Contains(token[:len(token)-len(secret)], "-") {
		t.Fatalf("secret %q of %q", secret, token)
	}
	tok, err := verifyToken(t, db, token)
	if err != nil || tok.Name != "kafka-agent" || tok.Identity.Source != core.SourceAWSPrincipal || tok.Identity.ID != "arn:aws:iam::123456789012:role/kafka-scaling-agent" ||
		strings.Join(tok.Repositories, " ") != "acme/infra acme/prod-eu acme/prod-us" {
		t.Fatalf("the printed token does not verify: %+v %v", tok, err)
	}
	createToken(t, db, "hpa-bot", "k8s-user:system:serviceaccount:kube-system:hpa")

	code, out, errOut := runCLI(t, "tokens", "list", "--db", db)
	if code != 0 {
		t.Fatalf("list: exit %d: %s", code, errOut)
	}
	for _, want := range []string{"NAME", "IDENTITY", "REPOSITORIES", "acme/infra,acme/prod-eu,acme/prod-us", "CREATED", "LAST USED", "REVOKED", "kafka-agent", agentIdentity, "hpa-bot",
		"k8s-user:system:serviceaccount:kube-system:hpa", "never"} {
		if !strings.Contains(out, want) {
			t.Errorf("list lacks %q:\n%s", want, out)
		}
	}
	code, js, errOut := runCLI(t, "tokens", "list", "--db", db, "--json")
	if code != 0 {
		t.Fatalf("list --json: exit %d: %s", code, errOut)
	}
	schematest.Validate(t, "tokens.schema.json", []byte(js))
	var docs []tokenJSON
	if err := json.Unmarshal([]byte(js), &docs); err != nil || len(docs) != 2 || docs[0].Name != "hpa-bot" || docs[1].Name != "kafka-agent" ||
		docs[1].Identity.Source != "aws-principal" || len(docs[1].Repositories) != 3 || docs[1].LastUsed == "" || docs[0].LastUsed != "" || docs[1].Revoked != "" {
		t.Fatalf("list --json: %v\n%s", err, js)
	}
	for _, o := range []string{out, js} {
		if strings.Contains(o, secret) || strings.Contains(o, token) {
			t.Fatalf("list shows the secret:\n%s", o)
		}
	}

	code, out, errOut = runCLI(t, "tokens", "revoke", "kafka-agent", "--db", db)
	if code != 0 || !strings.Contains(out, "revoked token kafka-agent ("+agentIdentity+")") {
		t.Fatalf("revoke: exit %d: %s%s", code, out, errOut)
	}
	if _, err := verifyToken(t, db, token); !errors.Is(err, agentstore.ErrRevoked) {
		t.Fatalf("a revoked token verifies: %v", err)
	}
	if code, out, _ := runCLI(t, "tokens", "revoke", "kafka-agent", "--db", db); code != 0 || !strings.Contains(out, "revoked already") {
		t.Errorf("revoking twice: exit %d: %s", code, out)
	}
	_, js, _ = runCLI(t, "tokens", "list", "--db", db, "--json")
	schematest.Validate(t, "tokens.schema.json", []byte(js))
	if err := json.Unmarshal([]byte(js), &docs); err != nil || docs[1].Revoked == "" || docs[0].Revoked != "" {
		t.Fatalf("list --json after revoking: %v\n%s", err, js)
	}
	code, out, _ = runCLI(t, "tokens", "list", "--db", db)
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) == 6 && f[0] == "kafka-agent" && (f[5] != docs[1].Revoked || f[4] != docs[1].LastUsed) {
			t.Errorf("list after revoking: %q, want last used %s and revoked %s", line, docs[1].LastUsed, docs[1].Revoked)
		} else if len(f) == 6 && f[0] == "hpa-bot" && (f[4] != "never" || f[5] != "-") {
			t.Errorf("list: %q", line)
		}
	}
	if code != 0 || !strings.Contains(out, "kafka-agent") {
		t.Errorf("list after revoking: exit %d\n%s", code, out)
	}
}

func TestTokensBadInput(t *testing.T) {
	db := filepath.Join(t.TempDir(), "agents.db")
	createToken(t, db, "kafka-agent", agentIdentity)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"tokens", "create", "x", "--identity", "kafka-agent", "--db", db}, "want SOURCE:ID"},
		{[]string{"tokens", "create", "x", "--identity", "aws:arn:aws:iam::1:role/x", "--db", db}, `unknown source "aws"`},
		{[]string{"tokens", "create", "x", "--db", db}, "--identity is required"},
		{[]string{"tokens", "create", "x", "--identity", agentIdentity, "--db", db}, "--repository is required"},
		{[]string{"tokens", "create", "x", "--identity", agentIdentity, "--repository", "infra", "--db", db}, `repository "infra": want owner/name`},
		{[]string{"tokens", "create", "no spaces", "--identity", agentIdentity, "--repository", "acme/infra", "--db", db}, `token name "no spaces"`},
		{[]string{"tokens", "create", "--identity", agentIdentity, "--repository", "acme/infra", "--db", db, "--", "-lead"}, `token name "-lead"`},
		{[]string{"tokens", "create", "kafka-agent", "--identity", agentIdentity, "--repository", "acme/infra", "--db", db}, "exists already"},
		{[]string{"tokens", "create", "x", "--identity", agentIdentity, "--repository", "acme/infra", "--db", filepath.Join(t.TempDir(), "no", "agents.db")}, "no directory"},
		{[]string{"tokens", "create", "--identity", agentIdentity, "--db", db}, "accepts 1 arg"},
		{[]string{"tokens", "revoke", "nobody", "--db", db}, `no token named "nobody"`},
	} {
		code, out, errOut := runCLI(t, tt.args...)
		if code != exitUsage || !strings.Contains(errOut, tt.want) || out != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and %q", tt.args, code, out, errOut, tt.want)
		}
	}
	if code, out, _ := runCLI(t, "tokens", "list", "--db", db); code != 0 || strings.Count(out, "\n") != 2 {
		t.Errorf("bad input changed the store:\n%s", out)
	}
}

// Without --db the store is agents.db beside parley serve's (PARLEY_STORE's directory).
func TestTokensDefaultStoreIsBesideServes(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("PARLEY_STORE", filepath.Join(dir, "parley.db"))
	code, out, errOut := runCLI(t, "tokens", "create", "kafka-agent", "--identity", agentIdentity, "--repository", "acme/infra")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if _, err := verifyToken(t, filepath.Join(dir, "agents.db"), strings.TrimSpace(out)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(errOut, filepath.Join(dir, "agents.db")) {
		t.Errorf("create does not say where it keeps the token: %s", errOut)
	}
}

// TestTokensOnPostgreSQL: with serve's store on PostgreSQL, parley tokens keeps the tokens in
// that database, where every replica verifies them.
func TestTokensOnPostgreSQL(t *testing.T) {
	dsn := pgtest.DSN(t)
	token := createToken(t, dsn, "kafka-agent", agentIdentity)
	ctx := context.Background()
	pool, sdb, err := sqldb.OpenPostgres(ctx, dsn, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	defer sdb.Close()
	st, err := agentstore.OpenPostgres(ctx, sdb, "test")
	if err != nil {
		t.Fatal(err)
	}
	if tok, err := st.Verify(ctx, token, time.Now()); err != nil || tok.Name != "kafka-agent" {
		t.Fatalf("a replica verifying the token: %+v %v", tok, err)
	}
	if code, out, errOut := runCLI(t, "tokens", "list", "--db", dsn); code != 0 || !strings.Contains(out, "kafka-agent") {
		t.Fatalf("list: exit %d: %s%s", code, out, errOut)
	}
	if code, _, errOut := runCLI(t, "tokens", "revoke", "kafka-agent", "--db", dsn); code != 0 {
		t.Fatalf("revoke: exit %d: %s", code, errOut)
	}
	if _, err := st.Verify(ctx, token, time.Now()); !errors.Is(err, agentstore.ErrRevoked) {
		t.Fatalf("a token revoked in the shared database verifies on a replica: %v", err)
	}
	// A database that does not answer is named without its password.
	code, _, errOut := runCLI(t, "tokens", "list", "--db", "postgres://parley:s3cret-pw@127.0.0.1:1/parley?connect_timeout=2")
	if code == 0 || strings.Contains(errOut, "s3cret-pw") || !strings.Contains(errOut, "postgres://parley@127.0.0.1:1/parley") {
		t.Fatalf("an unreachable database: exit %d: %s", code, errOut)
	}
}
