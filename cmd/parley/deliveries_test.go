package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/pgtest"
	"github.com/parleyhq/parley/webhooks/store"
)

// TestDeliveriesListAndReplay runs parley deliveries on a SQLite store file and on a PostgreSQL
// store URL.
func TestDeliveriesListAndReplay(t *testing.T) {
	ctx := context.Background()
	t.Run("sqlite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "parley.db")
		st, err := store.Open(ctx, path, store.Options{MaxAttempts: 1})
		if err != nil {
			t.Fatal(err)
		}
		deliveriesListAndReplay(t, st, path)
		if code, _, stderr := runIn(t, "", "deliveries", "list", "--store", filepath.Join(t.TempDir(), "none.db")); code != 2 || !strings.Contains(stderr, "none.db") {
			t.Errorf("missing store: exit %d %s", code, stderr)
		}
	})
	t.Run("postgres", func(t *testing.T) {
		dsn := pgtest.DSN(t)
		st, err := store.OpenPostgres(ctx, dsn, store.PostgresOptions{MaxAttempts: 1})
		if err != nil {
			t.Fatal(err)
		}
		deliveriesListAndReplay(t, st, dsn)
	})
}

func deliveriesListAndReplay(t *testing.T, st deliveryStore, path string) {
	ctx := context.Background()
	now := time.Now()
	for _, id := range []string{"dead-1", "dead-2", "fine"} {
		if _, err := st.Put(ctx, store.Delivery{Source: store.SourceGitHub, ID: id, Event: "pull_request", Body: []byte(`{"id":"` + id + `"}`), ReceivedAt: now}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 2; i++ {
		d, ok, err := st.Claim(ctx, "w", time.Minute, now)
		if !ok || err != nil {
			t.Fatal(ok, err)
		}
		if err := st.DeadLetter(ctx, d.Key(), "w", errors.New("policy file unreadable")); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()

	code, out, stderr := runIn(t, "", "deliveries", "list", "--store", path)
	if code != 0 || !strings.Contains(out, "1 pending, 2 dead") || !strings.Contains(out, "dead-1") || !strings.Contains(out, "policy file unreadable") {
		t.Fatalf("list: exit %d\n%s%s", code, out, stderr)
	}
	if code, out, _ := runIn(t, "", "deliveries", "replay", "github", "dead-1", "--store", path); code != 0 || !strings.Contains(out, "replaying github dead-1") {
		t.Errorf("replay one: exit %d %s", code, out)
	}
	if code, _, stderr := runIn(t, "", "deliveries", "replay", "github", "fine", "--store", path); code != 2 || stderr == "" {
		t.Errorf("replaying a delivery that is not dead: exit %d %s", code, stderr)
	}
	if code, out, _ := runIn(t, "", "deliveries", "replay", "--all", "--store", path); code != 0 || !strings.Contains(out, "dead-2") {
		t.Errorf("replay all: exit %d %s", code, out)
	}
	if code, out, _ := runIn(t, "", "deliveries", "list", "--store", path); code != 0 || !strings.Contains(out, "3 pending, 0 dead") {
		t.Errorf("after replaying: %s", out)
	}
	if code, _, stderr := runIn(t, "", "deliveries", "replay", "--store", path); code != 2 || !strings.Contains(stderr, "--all") {
		t.Errorf("replay without arguments: exit %d %s", code, stderr)
	}
}

// TestStoreThatIsNoPathIsRefused: a keyword connection string given as the store is refused by
// every command that opens one, with the password redacted, and never becomes a file.
func TestStoreThatIsNoPathIsRefused(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	const dsn = "host=db.internal user=parley password=hunter2 dbname=parley"
	for _, args := range [][]string{
		{"deliveries", "list", "--store", dsn},
		{"tokens", "create", "agent", "--identity", "aws-principal:arn:aws:iam::123456789012:role/agent", "--repository", "acme/shop", "--db", dsn},
	} {
		code, out, errOut := runCLI(t, args...)
		if code != exitUsage || out != "" || !strings.Contains(errOut, "password=[redacted]") || strings.Contains(errOut, "hunter2") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 naming the store redacted", args[:2], code, out, errOut)
		}
	}
	t.Setenv("PARLEY_STORE", dsn)
	if code, _, errOut := runCLI(t, "tokens", "list"); code != exitUsage || strings.Contains(errOut, "hunter2") {
		t.Errorf("tokens list under PARLEY_STORE=<keyword form>: exit %d, %q", code, errOut)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("files were made: %v", entries)
	}
}
