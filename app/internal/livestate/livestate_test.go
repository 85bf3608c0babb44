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
		{Repo: "acme/infra", PR: 7, Comment: 1, Line: 1, Text: "/parley claim ...=8", Kind: KindClaim, Field: f, Claim: claim(8, t0), Actor: "dana", Head: "aaa", At: t0},
		{Repo: "acme/infra", PR: 7, Comment: 2, Line: 1, Text: "/parley claim ...=9", Kind: KindClaim, Field: f, Claim: claim(9, t0.Add(time.Minute)), Actor: "dana", Head: "aaa", At: t0.Add(time.Minute)},
		{Repo: "acme/infra", PR: 7, Comment: 3, Line: 1, Text: "/parley hold", Kind: KindHold, Actor: "erin", Head: "aaa", At: t0.Add(2 * time.Minute)},
		{Repo: "acme/infra", PR: 7, Comment: 4, Line: 2, Text: "/parley override", Kind: KindOverride, Field: f, Actor: "erin", Reason: "CR-12", Head: "aaa", At: t0.Add(3 * time.Minute)},
		{Repo: "acme/infra", PR: 8, Comment: 5, Line: 1, Text: "/parley hold", Kind: KindHold, Actor: "erin", Head: "ccc", At: t0},
	}
	for _, c := range cmds {
		if a, err := db.ApplyComment(ctx, Comment{Repo: c.Repo, PR: c.PR, ID: c.Comment, At: c.At}, []Command{c}); len(a.Added) != 1 || err != nil {
			t.Fatalf("record %s: %+v %v", c.Text, a, err)
		}
	}
	if a, err := db.ApplyComment(ctx, Comment{Repo: "acme/infra", PR: 7, ID: 1, At: t0}, cmds[:1]); a.Changed() || a.Stale || err != nil {
		t.Errorf("the same command recorded twice: %+v %v", a, err)
	}
	db.Close()
	db, err = open() // persisted
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	st, err := db.ForPR(ctx, "acme/infra", 7, "aaa")
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Claims) != 1 || st.Claims[0].Value.JSON() != "9" {
		t.Errorf("the later claim by the same actor replaces the earlier: %+v", st.Claims)
	}
	if !st.Held || st.HeldBy != "erin" || st.Overrides[f].Reason != "CR-12" || st.Overrides[f].Head != "aaa" {
		t.Errorf("state %+v", st)
	}
	if got, _ := (Live{Claims: st.Claims}).Live(f, t0.Add(30*time.Minute)); len(got) != 1 {
		t.Errorf("an unexpired claim is live: %v", got)
	}
	if got, _ := (Live{Claims: st.Claims}).Live(f, t0.Add(2*time.Hour)); len(got) != 0 {
		t.Errorf("an expired claim is not live: %v", got)
	}
	if st8, _ := db.ForPR(ctx, "acme/infra", 8, "ccc"); len(st8.Claims) != 0 || !st8.Held {
		t.Errorf("pull requests are separate: %+v", st8)
	}
	// A new head commit is judged without the commands given for the old one; the override it
	// does not take is named, with its commit.
	st, err = db.ForPR(ctx, "acme/infra", 7, "bbb")
	if err != nil || len(st.Claims) != 0 || st.Held || len(st.Overrides) != 0 || st.OtherHeads[f].Head != "aaa" {
		t.Errorf("at another head: %+v %v", st, err)
	}
}

// TestCommentVersions: a comment's commands are those of its newest version by GitHub's clock;
// dropping a command or deleting the comment withdraws it, and an older version or one delivered
// after the deletion changes nothing.
func TestCommentVersions(t *testing.T) {
	for name, open := range engines(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			db, err := open()
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			f := core.K8sField("apps", "Deployment", "prod", "web", "/spec/replicas")
			t0 := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
			hold := Command{Repo: "acme/infra", PR: 7, Comment: 9, Line: 1, Text: "/parley hold", Kind: KindHold, Actor: "dana", Head: "aaa", At: t0}
			override := Command{Repo: "acme/infra", PR: 7, Comment: 9, Line: 2, Text: "/parley override x", Kind: KindOverride, Field: f, Actor: "dana", Reason: "r", Head: "aaa", At: t0}
			version := func(at time.Time, deleted bool, cmds ...Command) Applied {
				t.Helper()
				a, err := db.ApplyComment(ctx, Comment{Repo: "acme/infra", PR: 7, ID: 9, At: at, Deleted: deleted}, cmds)
				if err != nil {
					t.Fatal(err)
				}
				return a
			}
			state := func() PR {
				t.Helper()
				st, err := db.ForPR(ctx, "acme/infra", 7, "aaa")
				if err != nil {
					t.Fatal(err)
				}
				return st
			}
			// The edit (10:02) arrives before the comment as first written (10:00).
			if a := version(t0.Add(2*time.Minute), false, hold); len(a.Added) != 1 {
				t.Fatalf("edit: %+v", a)
			}
			if a := version(t0, false, hold, override); !a.Stale || a.Changed() {
				t.Errorf("an older version delivered late was applied: %+v", a)
			}
			if st := state(); !st.Held || len(st.Overrides) != 0 {
				t.Errorf("after the late first version: %+v", st)
			}
			// Editing the hold away withdraws it.
			if a := version(t0.Add(3*time.Minute), false, override); len(a.Added) != 1 || len(a.Withdrawn) != 1 || a.Withdrawn[0].Text != hold.Text {
				t.Errorf("edit away: %+v", a)
			}
			if st := state(); st.Held || st.Overrides[f].Reason != "r" {
				t.Errorf("after editing the hold away: %+v", st)
			}
			// Deleting the comment withdraws the rest, and nothing comes back after it.
			if a := version(t0.Add(3*time.Minute), true); len(a.Withdrawn) != 1 {
				t.Errorf("delete: %+v", a)
			}
			if a := version(t0.Add(4*time.Minute), false, hold); !a.Stale {
				t.Errorf("a version after the deletion was applied: %+v", a)
			}
			if st := state(); st.Held || len(st.Overrides) != 0 {
				t.Errorf("after the deletion: %+v", st)
			}
		})
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

// TestHeadBefore: the head a comment was written for is the latest head GitHub showed strictly
// before it (a head seen in the same second may have come after it); two commits seen at that
// same latest time leave it unknown; heads are kept per pull request, and recording one twice
// keeps one.
func TestHeadBefore(t *testing.T) {
	for name, open := range engines(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			db, err := open()
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			t0 := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
			for _, h := range []struct {
				pr int
				Head
			}{{7, Head{"aaa", t0}}, {7, Head{"bbb", t0.Add(time.Minute)}}, {7, Head{"bbb", t0.Add(time.Minute)}}, {8, Head{"zzz", t0.Add(2 * time.Minute)}},
				{7, Head{"ccc", t0.Add(3 * time.Minute)}}, {7, Head{"ddd", t0.Add(3 * time.Minute)}}} {
				if err := db.RecordHead(ctx, "acme/infra", h.pr, h.Head); err != nil {
					t.Fatal(err)
				}
			}
			if err := db.RecordHead(ctx, "acme/infra", 7, Head{SHA: "", At: t0}); err == nil {
				t.Error("a head without a commit was recorded")
			}
			for _, tc := range []struct {
				at   time.Time
				want string // "" when unknown
			}{
				{t0, ""}, {t0.Add(time.Second), "aaa"}, {t0.Add(time.Minute), "aaa"}, {t0.Add(time.Minute + time.Second), "bbb"},
				{t0.Add(150 * time.Second), "bbb"}, {t0.Add(4 * time.Minute), ""},
			} {
				h, ok, err := db.HeadBefore(ctx, "acme/infra", 7, tc.at)
				if err != nil || ok != (tc.want != "") || h.SHA != tc.want {
					t.Errorf("HeadBefore(%v) = %+v, %v, %v; want %q", tc.at, h, ok, err, tc.want)
				}
			}
		})
	}
}
