package agentstore

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/internal/pgtest"
	"github.com/parleyhq/parley/internal/sqldb"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// onEngines runs a test on a store of each engine.
func onEngines(t *testing.T, test func(t *testing.T, d *DB)) {
	ctx := context.Background()
	t.Run("sqlite", func(t *testing.T) {
		d, err := Open(ctx, filepath.Join(t.TempDir(), "agents.db"))
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		test(t, d)
	})
	t.Run("postgres", func(t *testing.T) {
		dsn := pgtest.DSN(t)
		pool, db, err := sqldb.OpenPostgres(ctx, dsn, 4)
		if err != nil {
			t.Fatal(err)
		}
		defer pool.Close()
		defer db.Close()
		d, err := OpenPostgres(ctx, db, sqldb.Redact(dsn))
		if err != nil {
			t.Fatal(err)
		}
		test(t, d)
	})
}

func TestTokensAreStoredHashedAndRevocable(t *testing.T) {
	onEngines(t, testTokensAreStoredHashedAndRevocable)
}

func testTokensAreStoredHashedAndRevocable(t *testing.T, d *DB) {
	ctx := context.Background()
	now := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	id, err := ParseIdentity("aws-principal:arn:aws:iam::123456789012:role/kafka-scaling-agent")
	if err != nil || id.Source != core.SourceAWSPrincipal || id.ID != "arn:aws:iam::123456789012:role/kafka-scaling-agent" {
		t.Fatalf("ParseIdentity: %+v %v", id, err)
	}
	secret, tok, err := d.Create(ctx, "kafka-agent", id, []string{"acme/infra"}, now)
	if err != nil || !strings.HasPrefix(secret, "parley_"+tok.ID+"_") {
		t.Fatalf("Create: %q %+v %v", secret, tok, err)
	}
	// Only the digest is on disk.
	var stored string
	if err := d.db.QueryRowContext(ctx, d.q(`SELECT secret_sha256 FROM {tokens}`)).Scan(&stored); err != nil || strings.Contains(secret, stored) ||
		stored == secret[len("parley_"+tok.ID+"_"):] {
		t.Fatalf("stored %q for %q", stored, secret)
	}
	got, err := d.Verify(ctx, secret, now)
	if err != nil || got.Name != "kafka-agent" || got.Identity.String() != id.String() {
		t.Fatalf("Verify: %+v %v", got, err)
	}
	for _, bad := range []string{"", "parley_", "parley_" + tok.ID + "_wrong", secret + "x", "parley_ffffffffffffffff_" + secret[len("parley_"+tok.ID+"_"):], "Bearer " + secret} {
		if _, err := d.Verify(ctx, bad, now); !errors.Is(err, ErrUnknownToken) {
			t.Errorf("Verify(%q) = %v, want ErrUnknownToken", bad, err)
		}
	}
	if _, _, err := d.Create(ctx, "kafka-agent", id, []string{"acme/infra"}, now); err == nil || !strings.Contains(err.Error(), "exists already") {
		t.Fatalf("a second token of the same name: %v", err)
	}
	for _, name := range []string{"", "-x", "a b", strings.Repeat("a", 64)} {
		if _, _, err := d.Create(ctx, name, id, []string{"acme/infra"}, now); err == nil {
			t.Errorf("name %q accepted", name)
		}
	}
	if _, err := d.Revoke(ctx, "kafka-agent", now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Verify(ctx, secret, now.Add(2*time.Hour)); !errors.Is(err, ErrRevoked) {
		t.Fatalf("a revoked token: %v", err)
	}
	list, err := d.List(ctx)
	if err != nil || len(list) != 1 || list[0].Revoked.IsZero() || list[0].LastUsed.IsZero() {
		t.Fatalf("List: %+v %v", list, err)
	}
	if _, err := d.Revoke(ctx, "nobody", now); err == nil {
		t.Fatal("revoking an unknown token must fail")
	}
	for _, bad := range []string{"aws-principal", "smtp:alice", "k8s-user:"} {
		if _, err := ParseIdentity(bad); err == nil {
			t.Errorf("ParseIdentity(%q) accepted", bad)
		}
	}
}

// TestTokensNameTheirRepositories: a token acts only on the repositories it was made for; one
// made before tokens named them (its row migrated from the first schema, on each engine) keeps
// working only where the server serves a single repository, and is refused elsewhere saying what
// to do.
func TestTokensNameTheirRepositories(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	id := core.Identity{Source: core.SourceKubeUser, ID: "system:serviceaccount:ops:scaler"}
	check := func(t *testing.T, d *DB, migrate func() (*DB, error)) {
		secret, tok, err := d.Create(ctx, "scaler", id, []string{"acme/prod-eu", "Acme/Prod-EU", "acme/infra"}, now)
		if err != nil || len(tok.Repositories) != 2 {
			t.Fatalf("Create: %+v %v", tok, err)
		}
		got, err := d.Verify(ctx, secret, now)
		if err != nil || strings.Join(got.Repositories, ",") != "acme/prod-eu,acme/infra" {
			t.Fatalf("Verify: %+v %v", got, err)
		}
		if err := got.MayActOn("ACME/infra", nil); err != nil {
			t.Errorf("its own repository: %v", err)
		}
		if err := got.MayActOn("acme/prod-us", []string{"acme/prod-us"}); !errors.Is(err, ErrRepositoryNotAllowed) || !strings.Contains(err.Error(), "may act on acme/prod-eu, acme/infra, not acme/prod-us") {
			t.Errorf("another repository: %v", err)
		}
		for _, bad := range [][]string{nil, {"infra"}, {"acme/infra,acme/x"}, {"acme/"}} {
			if _, _, err := d.Create(ctx, "bad", id, bad, now); err == nil {
				t.Errorf("repositories %q accepted", bad)
			}
		}
		// A token from before this version: its row has no repositories.
		old, err := migrate()
		if err != nil {
			t.Fatal(err)
		}
		ts, err := old.List(ctx)
		var legacy Token
		for _, tk := range ts {
			if tk.Name == "old-agent" {
				legacy = tk
			}
		}
		if err != nil || legacy.Name == "" || len(legacy.Repositories) != 0 {
			t.Fatalf("the old token after the migration: %+v %v", ts, err)
		}
		if err := legacy.MayActOn("acme/infra", []string{"acme/infra"}); err != nil {
			t.Errorf("an old token where the server serves one repository: %v", err)
		}
		err = legacy.MayActOn("acme/infra", []string{"acme/infra", "acme/prod-eu"})
		if !errors.Is(err, ErrRepositoryNotAllowed) || !strings.Contains(err.Error(), "made before tokens named their repositories") || !strings.Contains(err.Error(), "--repository acme/infra") {
			t.Errorf("an old token where the server serves two: %v", err)
		}
	}
	oldToken := `INSERT INTO {tokens} (id, name, secret_sha256, identity_source, identity_id, created_at) VALUES ('0123456789abcdef', 'old-agent', 'x', 'k8s-user', 'bob', 1)`
	t.Run("sqlite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "agents.db")
		d, err := Open(ctx, filepath.Join(t.TempDir(), "new.db"))
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		check(t, d, func() (*DB, error) {
			raw, err := sql.Open("sqlite", "file:"+path)
			if err != nil {
				return nil, err
			}
			if err := sqldb.MigrateSQLite(ctx, raw, path, sqliteMigrations[:1]); err != nil {
				return nil, err
			}
			if _, err := raw.ExecContext(ctx, (&DB{}).q(oldToken)); err != nil {
				return nil, err
			}
			raw.Close()
			db, err := Open(ctx, path)
			if err == nil {
				t.Cleanup(func() { db.Close() })
			}
			return db, err
		})
	})
	t.Run("postgres", func(t *testing.T) {
		dsn := pgtest.DSN(t)
		pool, db, err := sqldb.OpenPostgres(ctx, dsn, 4)
		if err != nil {
			t.Fatal(err)
		}
		defer pool.Close()
		defer db.Close()
		if err := sqldb.MigratePostgres(ctx, db, "agentstore", postgresMigrations[:1]); err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, (&DB{engine: sqldb.Postgres}).q(oldToken)); err != nil {
			t.Fatal(err)
		}
		d, err := OpenPostgres(ctx, db, sqldb.Redact(dsn))
		if err != nil {
			t.Fatal(err)
		}
		check(t, d, func() (*DB, error) { return d, nil })
	})
}

func TestProposalsAreLoggedOncePerIdempotencyKey(t *testing.T) {
	onEngines(t, testProposalsAreLoggedOncePerIdempotencyKey)
}

func testProposalsAreLoggedOncePerIdempotencyKey(t *testing.T, d *DB) {
	ctx := context.Background()
	now := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	if a, b := ProposalID("t1", "k"), ProposalID("t1", "k"); a != b || a == ProposalID("t2", "k") || ProposalID("t1", "") == ProposalID("t1", "") {
		t.Fatal("proposal ids: same key same id, another token or no key another id")
	}
	p := Proposal{ID: ProposalID("t1", "k"), TokenID: "t1", IdempotencyKey: "k", Repository: "acme/infra", RequestSHA256: RequestDigest([]byte("a")),
		Status: 200, Response: []byte(`{"ok":1}`), Accepted: 1, At: now}
	if _, err := d.Record(ctx, p); err != nil {
		t.Fatal(err)
	}
	again := p
	again.Response = []byte(`{"ok":2}`)
	first, err := d.Record(ctx, again)
	if err != nil || string(first.Response) != `{"ok":1}` {
		t.Fatalf("a retry keeps the first answer: %s %v", first.Response, err)
	}
	other := p
	other.RequestSHA256 = RequestDigest([]byte("b"))
	if _, err := d.Record(ctx, other); !errors.Is(err, ErrKeyReused) {
		t.Fatalf("the key reused for another request: %v", err)
	}
	got, ok, err := d.Lookup(ctx, "t1", "k")
	if err != nil || !ok || got.Accepted != 1 || !got.At.Equal(now) {
		t.Fatalf("Lookup: %+v %v %v", got, ok, err)
	}
	if _, ok, _ := d.Lookup(ctx, "t2", "k"); ok {
		t.Fatal("keys are per token")
	}
}
