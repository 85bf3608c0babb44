package pgtest

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { Main(m) }

// Two databases on the shared server are separate and each answers queries.
func TestDatabasesAreSeparate(t *testing.T) {
	ctx := context.Background()
	a, b := DSN(t), DSN(t)
	if a == b {
		t.Fatalf("the same database twice: %s", a)
	}
	ca, err := pgx.Connect(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	defer ca.Close(ctx)
	if _, err := ca.Exec(ctx, "CREATE TABLE only_in_a (x int)"); err != nil {
		t.Fatal(err)
	}
	cb, err := pgx.Connect(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Close(ctx)
	var n int
	if err := cb.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE tablename = 'only_in_a'").Scan(&n); err != nil || n != 0 {
		t.Fatalf("b sees a's table: %d %v", n, err)
	}
	var v string
	if err := ca.QueryRow(ctx, "SHOW server_version").Scan(&v); err != nil {
		t.Fatal(err)
	}
	t.Logf("PostgreSQL %s", v)
}

// PID is the postmaster's: the parent of the backend serving a connection.
func TestPIDIsTheBackendsParent(t *testing.T) {
	ctx := context.Background()
	c, err := pgx.Connect(ctx, DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var backend int
	if err := c.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&backend); err != nil {
		t.Fatal(err)
	}
	shared.mu.Lock()
	srv := shared.server
	shared.mu.Unlock()
	pid, err := srv.PID()
	if err != nil {
		t.Fatal(err)
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", backend))
	if err != nil {
		t.Skipf("no /proc to check the backend's parent: %v", err)
	}
	// Field 4, the parent's pid, comes after the command name's closing parenthesis and the state.
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	if len(f) < 2 || f[1] != strconv.Itoa(pid) {
		t.Fatalf("PID %d, but backend %d's parent is %v", pid, backend, f)
	}
}
