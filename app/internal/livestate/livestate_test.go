package livestate

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/internal/pgtest"
	"github.com/parleyhq/parley/internal/sqldb"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// engines opens the live state on each engine; open again reaches the same data (a restart, or
// another replica).
func engines(t *testing.T) map[string]func() (*DB, error) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "live.db")
	var pg *sql.DB
	return map[string]func() (*DB, error){
		"sqlite": func() (*DB, error) { return Open(ctx, path) },
		"postgres": func() (*DB, error) {
			if pg == nil {
				pool, db, err := sqldb.OpenPostgres(ctx, pgtest.DSN(t), 4)
				if err != nil {
					return nil, err
				}
				t.Cleanup(func() { db.Close(); pool.Close() })
				pg = db
			}
			return OpenPostgres(ctx, pg)
		},
	}
}

func TestRecordOnceAndReplay(t *testing.T) {
	for name, open := range engines(t) {
		t.Run(name, func(t *testing.T) { testRecordOnceAndReplay(t, open) })
	}
}

func testRecordOnceAndReplay(t *testing.T, open func() (*DB, error)) {
	ctx := context.Background()
	db, err := open()
	if err != nil {
		t.Fatal(err)
	}
	f := core.K8sField("apps", "Deployment", "prod", "web", "/spec/replicas")
	t0 := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	claim := func(v int, at time.Time) core.Claim {
		val, _ := core.JSONValue(v)
		return core.Claim{Field: f, Actor: core.Actor{Identity: core.Identity{Source: core.SourceGitHubUser, ID: "dana"}}, Value: val,
			Intent: core.IntentAvailability, At: at, Expires: at.Add(time.Hour)}
	}
	cmds := []Command{
		{Repo: "acme/infra", PR: 7, Comment: 1, Line: 1, Text: "/parley claim ...=8", Kind: KindClaim, Field: f, Claim: claim(8, t0), Actor: "dana", At: t0},
		{Repo: "acme/infra", PR: 7, Comment: 2, Line: 1, Text: "/parley claim ...=9", Kind: KindClaim, Field: f, Claim: claim(9, t0.Add(time.Minute)), Actor: "dana", At: t0.Add(time.Minute)},
		{Repo: "acme/infra", PR: 7, Comment: 3, Line: 1, Text: "/parley hold", Kind: KindHold, Actor: "erin", At: t0.Add(2 * time.Minute)},
		{Repo: "acme/infra", PR: 7, Comment: 4, Line: 2, Text: "/parley override", Kind: KindOverride, Field: f, Actor: "erin", Reason: "CR-12", At: t0.Add(3 * time.Minute)},
		{Repo: "acme/infra", PR: 8, Comment: 5, Line: 1, Text: "/parley hold", Kind: KindHold, Actor: "erin", At: t0},
	}
	for _, c := range cmds {
		if ok, err := db.Record(ctx, c); !ok || err != nil {
			t.Fatalf("record %s: %v %v", c.Text, ok, err)
		}
	}
	if ok, err := db.Record(ctx, cmds[0]); ok || err != nil {
		t.Errorf("the same command recorded twice: %v %v", ok, err)
	}
	db.Close()
	db, err = open() // persisted
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	st, err := db.ForPR(ctx, "acme/infra", 7)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Claims) != 1 || st.Claims[0].Value.JSON() != "9" {
		t.Errorf("the later claim by the same actor replaces the earlier: %+v", st.Claims)
	}
	if !st.Held || st.HeldBy != "erin" || st.Overrides[f].Reason != "CR-12" {
		t.Errorf("state %+v", st)
	}
	if got, _ := (Live{Claims: st.Claims}).Live(f, t0.Add(30*time.Minute)); len(got) != 1 {
		t.Errorf("an unexpired claim is live: %v", got)
	}
	if got, _ := (Live{Claims: st.Claims}).Live(f, t0.Add(2*time.Hour)); len(got) != 0 {
		t.Errorf("an expired claim is not live: %v", got)
	}
	if st8, _ := db.ForPR(ctx, "acme/infra", 8); len(st8.Claims) != 0 || !st8.Held {
		t.Errorf("pull requests are separate: %+v", st8)
	}
}

// TestJudgedIsKeptPerPullRequest: the last judgement of a pull request replaces the one before,
// and reads back whole from another handle (a restart, or another replica).
func TestJudgedIsKeptPerPullRequest(t *testing.T) {
	for name, open := range engines(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			db, err := open()
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if _, ok, err := db.LoadJudged(ctx, "acme/infra", 7); ok || err != nil {
				t.Fatalf("a pull request never judged: %v %v", ok, err)
			}
			f := core.K8sField("apps", "Deployment", "prod", "web", "/spec/replicas")
			t0 := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
			first := Judged{Repo: "acme/infra", PR: 7, Head: "aaa", Title: "Scale up", At: t0,
				Verdicts: []core.Verdict{{Field: f, Decision: core.DecisionVeto, Rule: "bounds"}}}
			second := first
			second.Head, second.At, second.Verdicts = "bbb", t0.Add(time.Hour), []core.Verdict{{Field: f, Decision: core.DecisionAdopt, Rule: "rank",
				Explanation: []core.Step{{Rule: "rank", Outcome: "decided", Detail: "availability outranks cost"}}}}
			for _, j := range []Judged{first, second} {
				if err := db.SaveJudged(ctx, j); err != nil {
					t.Fatal(err)
				}
			}
			again, err := open()
			if err != nil {
				t.Fatal(err)
			}
			defer again.Close()
			got, ok, err := again.LoadJudged(ctx, "acme/infra", 7)
			if err != nil || !ok || got.Head != "bbb" || !got.At.Equal(second.At) || len(got.Verdicts) != 1 ||
				got.Verdicts[0].Decision != core.DecisionAdopt || got.Verdicts[0].Explanation[0].Detail != "availability outranks cost" {
				t.Fatalf("read back %+v %v %v", got, ok, err)
			}
		})
	}
}
