package ledger

import (
	"context"
	"database/sql"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/internal/gittest"
	"github.com/parleyhq/parley/internal/ledgertest"
)

// The writer holds rows back, sorts the claims and gives new fields their ids itself; an index it
// builds in one go must hold the same rows, ids included, as one built by many small updates
// (which look fields up instead of loading them all) and as one built with checkpoints and many
// early flushes.
func TestBulkLoadedIndexEqualsIncrementalRowForRow(t *testing.T) {
	dir := t.TempDir()
	if err := ledgertest.Generate(context.Background(), dir, ledgertest.Params{Commits: 600, Apps: 6, Modules: 3, Seed: 11}); err != nil {
		t.Fatal(err)
	}
	bulk := buildIndex(t, dir, Options{}, "main")
	flushed := buildIndex(t, dir, Options{CheckpointCommits: 50, maxPendingClaims: 7}, "main")

	// Many small updates, each of fewer commits than loadFieldsCommits: fields looked up.
	incPath := filepath.Join(t.TempDir(), "inc.db")
	l, err := Open(dir, Options{Path: incPath})
	if err != nil {
		t.Fatal(err)
	}
	hashes := strings.Fields(gitOut(t, dir, "rev-list", "--first-parent", "--reverse", "main"))
	for i := 36; ; i += 37 {
		i = min(i, len(hashes)-1)
		gitOut(t, dir, "update-ref", "refs/heads/step", hashes[i])
		st, err := l.Update(context.Background(), "step")
		if err != nil || st.Rebuilt {
			t.Fatalf("update to commit %d: %+v %v", i, st, err)
		}
		if i == len(hashes)-1 {
			break
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	inc := dumpIndex(t, incPath, "refs/heads/step")

	want := dumpIndex(t, bulk, "refs/heads/main")
	if len(want) < 1000 {
		t.Fatalf("only %d rows: the history is too small to show anything", len(want))
	}
	compareRows(t, "early flushes", want, dumpIndex(t, flushed, "refs/heads/main"))
	compareRows(t, "small updates", want, inc)
}

// Between two transactions of a long update (a checkpoint) another process may add fields to the
// index, among them fields the update meets later; the update must then use their ids and give its
// own new fields others, whether it had loaded every field or looks them up.
func TestUpdateAfterAnotherProcessAddedFields(t *testing.T) {
	// Each commit adds an app (new fields) and changes the one before it.
	r := gittest.Init(t, time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC), time.Hour).As("Dana Okafor", "dana@parley.example")
	app := func(i, size int) string {
		return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app-%d\n  namespace: prod\ndata:\n  size: \"%d\"\n  tier: web\n", i, size)
	}
	for i := range 60 {
		r.Write(fmt.Sprintf("k8s/app-%d.yaml", i), app(i, 1))
		if i > 0 {
			r.Write(fmt.Sprintf("k8s/app-%d.yaml", i-1), app(i-1, 2))
		}
		r.Commit(fmt.Sprintf("App %d\n\nIntent: performance\n", i))
	}
	// The other process indexes the same history as another branch: every field, before this
	// update meets most of them.
	r.Run("branch", "other", "main")
	r.Run("branch", "first", "main~59")
	want := dumpByAddr(t, buildIndex(t, r.Dir, Options{}, "main"), "refs/heads/main")
	if len(want) < 150 {
		t.Fatalf("only %d rows", len(want))
	}

	for _, mode := range []struct {
		name string
		opts Options
	}{
		{"every field loaded", Options{loadFieldsCommits: 1}},
		{"fields looked up", Options{loadFieldsCommits: 1 << 30}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "ledger.db")
			// The index is not empty when the update starts, so that looking fields up is not
			// the same as loading them all.
			seed, err := Open(r.Dir, Options{Path: path})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := seed.Update(context.Background(), "first"); err != nil {
				t.Fatal(err)
			}
			if err := seed.Close(); err != nil {
				t.Fatal(err)
			}

			opts := mode.opts
			opts.Path, opts.CheckpointCommits = path, 10
			ran := 0
			opts.afterCheckpoint = func() {
				if ran++; ran != 2 {
					return
				}
				o, err := Open(r.Dir, Options{Path: path})
				if err != nil {
					t.Error(err)
					return
				}
				defer o.Close()
				if st, err := o.Update(context.Background(), "other"); err != nil || st.Commits != 60 {
					t.Errorf("the other process's update: %+v %v", st, err)
				}
			}
			l, err := Open(r.Dir, opts)
			if err != nil {
				t.Fatal(err)
			}
			st, err := l.Update(context.Background(), "main")
			if err != nil || st.Commits != 60 || ran != 5 {
				t.Fatalf("update: %+v %v (%d checkpoints)", st, err, ran)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			compareRows(t, "main", want, dumpByAddr(t, path, "refs/heads/main"))
			compareRows(t, "other", want, dumpByAddr(t, path, "refs/heads/other"))
		})
	}
}

func buildIndex(t *testing.T, dir string, opts Options, branch string) string {
	t.Helper()
	opts.Path = filepath.Join(t.TempDir(), "ledger.db")
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Update(context.Background(), branch); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return opts.Path
}

// dumpIndex returns every row a branch has in the index at path, as text: its commits, its claims
// with their field's id, address and pattern flag, and its problems. A claim whose field is not in
// the fields table shows as such. dumpByAddr leaves the field ids out, for indexes that hold other
// branches too.
func dumpIndex(t *testing.T, path, branch string) []string { return dump(t, path, branch, true) }

func dumpByAddr(t *testing.T, path, branch string) []string { return dump(t, path, branch, false) }

func dump(t *testing.T, path, branch string, ids bool) []string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var rows []string
	for _, q := range []string{
		`SELECT 'commit', c.* FROM commits c JOIN branches b ON b.id = c.branch WHERE b.name = ? ORDER BY c.seq`,
		map[bool]string{
			true: `SELECT 'claim', c.field, coalesce(f.addr, 'MISSING FIELD'), coalesce(f.pattern, -1), c.seq, c.kind, c.has_value, c.vjson, c.vexpr
				FROM claims c JOIN branches b ON b.id = c.branch LEFT JOIN fields f ON f.id = c.field
				WHERE b.name = ? ORDER BY c.field, c.seq, c.kind`,
			false: `SELECT 'claim', coalesce(f.addr, 'MISSING FIELD'), coalesce(f.pattern, -1), c.seq, c.kind, c.has_value, c.vjson, c.vexpr
				FROM claims c JOIN branches b ON b.id = c.branch LEFT JOIN fields f ON f.id = c.field
				WHERE b.name = ? ORDER BY f.addr, c.seq, c.kind`,
		}[ids],
		`SELECT 'problem', p.seq, p.path, p.line, p.key, p.value, p.message FROM problems p JOIN branches b ON b.id = p.branch
			WHERE b.name = ? ORDER BY p.seq, p.rowid`,
	} {
		rs, err := db.Query(q, branch)
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rs.Columns()
		for rs.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rs.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			if cols[1] == "branch" {
				vals = slices.Delete(vals, 1, 2) // the branch's id depends on the index, not the history
			}
			rows = append(rows, fmt.Sprint(vals...))
		}
		if err := rs.Err(); err != nil {
			t.Fatal(err)
		}
		rs.Close()
	}
	return rows
}

// compareRows compares two dumps.
func compareRows(t *testing.T, what string, want, got []string) {
	t.Helper()
	if len(want) != len(got) {
		t.Errorf("%s: %d rows, want %d", what, len(got), len(want))
	}
	for i := range min(len(want), len(got)) {
		if want[i] != got[i] {
			t.Errorf("%s: row %d is\n%s\nwant\n%s", what, i, got[i], want[i])
			return
		}
	}
}

func gitOut(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// Two claims of one commit on one field and kind (which extract does not make today) are one row:
// the last, as the upsert of one row at a time kept it, instead of a failed insert.
func TestWriterKeepsTheLastOfARepeatedClaim(t *testing.T) {
	db, err := openDB(filepath.Join(t.TempDir(), "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.Exec(`INSERT INTO branches (id, name, tip, commits, updated_at, paths, keyring) VALUES (1, 'refs/heads/main', '', 0, 0, '', '')`); err != nil {
		t.Fatal(err)
	}
	w, err := newWriter(ctx, tx, 1, nil, true, 1<<10)
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	one, err := core.JSONValue(1)
	if err != nil {
		t.Fatal(err)
	}
	two, err := core.JSONValue(2)
	if err != nil {
		t.Fatal(err)
	}
	addr := "k8s:apps/Deployment/prod/web#/spec/replicas"
	rec := &record{hash: "c1", claims: []claimRow{
		{addr: addr, kind: kindChange, hasValue: true, value: one},
		{addr: "k8s:apps/Deployment/prod/web#/spec/paused", kind: kindChange, hasValue: true, value: one},
		{addr: addr, kind: kindChange, hasValue: true, value: two},
	}}
	if err := w.write(ctx, 1, rec); err != nil {
		t.Fatal(err)
	}
	if err := w.flush(ctx); err != nil {
		t.Fatal(err)
	}
	var n int
	var vjson string
	if err := tx.QueryRow(`SELECT count(*), max(vjson) FROM claims c JOIN fields f ON f.id = c.field WHERE f.addr = ?`, addr).Scan(&n, &vjson); err != nil {
		t.Fatal(err)
	}
	if n != 1 || vjson != two.JSON() {
		t.Errorf("%d rows, value %s; want one row with the last value, %s", n, vjson, two.JSON())
	}
}
