package driftstate

import (
	"context"
	"encoding/json"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/internal/pgtest"
	"github.com/parleyhq/parley/internal/sqldb"
)

var (
	replicas = core.K8sField("apps", "Deployment", "prod", "web", "/spec/replicas")
	image    = core.K8sField("apps", "Deployment", "prod", "web", "/spec/template/spec/containers/0/image")
	t0       = time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
)

func claim(actor string, v int, at time.Time, event string) core.Claim {
	val, _ := core.JSONValue(v)
	return core.Claim{Field: replicas, Actor: kubeActor(actor), Value: val, At: at,
		Evidence: core.Evidence{Source: "k8s-audit", EventIDs: []string{event}}}
}

// kubeActor is an actor resolved by the policy to name, seen as a Kubernetes service account.
func kubeActor(name string) core.Actor {
	return core.Actor{Name: name, Identity: core.Identity{Source: core.SourceKubeUser, ID: "system:serviceaccount:ops:" + name}}
}

func TestMain(m *testing.M) { pgtest.Main(m) }

// onEngines runs a test on each engine with state, which opens the state of a repository: a
// SQLite file per repository, or the repository's schema in one PostgreSQL database. Opening a
// repository's state again reaches the same data (a restart, or another replica).
func onEngines(t *testing.T, test func(t *testing.T, state func(repository string) *DB)) {
	t.Run("sqlite", func(t *testing.T) {
		dir := t.TempDir()
		test(t, func(repo string) *DB { return open(t, filepath.Join(dir, SchemaFor(repo)+".db")) })
	})
	t.Run("postgres", func(t *testing.T) {
		ctx := context.Background()
		dsn := pgtest.DSN(t)
		pool, sdb, err := sqldb.OpenPostgres(ctx, dsn, 4)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sdb.Close(); pool.Close() })
		test(t, func(repo string) *DB {
			db, err := OpenPostgres(ctx, sdb, sqldb.Redact(dsn), repo)
			if err != nil {
				t.Fatal(err)
			}
			return db
		})
	})
}

func open(t testing.TB, path string) *DB {
	t.Helper()
	db, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestEventsAreTakenInOnce(t *testing.T) {
	onEngines(t, func(t *testing.T, state func(string) *DB) {
		ctx := context.Background()
		db := state("acme/infra")
		b := Batch{Events: []string{"k8s-audit/e1"}, Claims: []core.Claim{claim("hpa", 8, t0, "e1")}, At: t0}
		if err := db.Apply(ctx, b); err != nil {
			t.Fatal(err)
		}
		fresh, err := db.Fresh(ctx, []string{"k8s-audit/e1", "k8s-audit/e2"})
		if err != nil {
			t.Fatal(err)
		}
		if len(fresh) != 1 || fresh[0] != "k8s-audit/e2" {
			t.Fatalf("fresh = %v, want only e2", fresh)
		}
		// The same batch applied again (two workers raced) adds no second claim.
		if err := db.Apply(ctx, b); err != nil {
			t.Fatal(err)
		}
		cs, err := db.Claims(ctx, replicas, true)
		if err != nil {
			t.Fatal(err)
		}
		if len(cs) != 1 {
			t.Fatalf("claims = %d, want 1", len(cs))
		}
	})
}

func TestStandingIsTheLatestOpenClaimPerActor(t *testing.T) {
	onEngines(t, func(t *testing.T, state func(string) *DB) {
		ctx := context.Background()
		db := state("acme/infra")
		err := db.Apply(ctx, Batch{Events: []string{"k8s-audit/e1", "k8s-audit/e2", "k8s-audit/e3"}, At: t0, Claims: []core.Claim{
			claim("hpa", 8, t0, "e1"), claim("cost-optimizer", 2, t0.Add(time.Minute), "e2"), claim("hpa", 12, t0.Add(2*time.Minute), "e3"),
		}})
		if err != nil {
			t.Fatal(err)
		}
		st, err := db.Standing(ctx, replicas)
		if err != nil {
			t.Fatal(err)
		}
		byActor := map[string]string{}
		for _, c := range st {
			byActor[c.Actor.Name] = c.Value.JSON()
		}
		if len(st) != 2 || byActor["hpa"] != "12" || byActor["cost-optimizer"] != "2" {
			t.Fatalf("standing = %v", st)
		}
		// Flux reverted the object after the cost optimizer's change but before the HPA's second one.
		err = db.Apply(ctx, Batch{At: t0.Add(3 * time.Minute), Closes: []Close{{Object: replicas.Object(), Before: t0.Add(90 * time.Second), Why: "flux"}}})
		if err != nil {
			t.Fatal(err)
		}
		st, _ = db.Standing(ctx, replicas)
		if len(st) != 1 || st[0].Value.JSON() != "12" {
			t.Fatalf("after the revert: standing = %v, want the HPA's 12 only", st)
		}
		all, _ := db.Claims(ctx, replicas, true)
		if len(all) != 3 || !strings.HasPrefix(all[0].ClosedWhy, "superseded") || all[1].ClosedWhy != "flux" || !all[2].Closed.IsZero() {
			t.Fatalf("history = %+v", all)
		}
		// The history of a window: the claims in it, and the one before it that the first changed.
		h, err := db.History(ctx, replicas, t0.Add(90*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if len(h) != 2 || h[0].Value.JSON() != "2" || h[1].Value.JSON() != "12" {
			t.Fatalf("history since 10:01:30 = %v", h)
		}
		if h, _ := db.History(ctx, replicas, t0.Add(time.Hour)); len(h) != 1 || h[0].Value.JSON() != "12" {
			t.Fatalf("history of an empty window = %v, want only the latest claim before it", h)
		}
	})
}

func TestCloseSparesGatedFields(t *testing.T) {
	onEngines(t, func(t *testing.T, state func(string) *DB) {
		ctx := context.Background()
		db := state("acme/infra")
		img := core.StringValue("web:2")
		err := db.Apply(ctx, Batch{Events: []string{"k8s-audit/a", "s/b"}, At: t0, Claims: []core.Claim{
			claim("hpa", 8, t0, "a"),
			{Field: image, Actor: kubeActor("oncall"), Value: img, At: t0, Evidence: core.Evidence{Source: "s", EventIDs: []string{"b"}}},
		}})
		if err != nil {
			t.Fatal(err)
		}
		err = db.Apply(ctx, Batch{At: t0.Add(time.Hour), Closes: []Close{{Object: replicas, Before: t0.Add(time.Hour), Why: "x",
			Except: map[core.Field]bool{replicas: true}}}})
		if err != nil {
			t.Fatal(err)
		}
		if st, _ := db.Standing(ctx, replicas); len(st) != 1 {
			t.Fatalf("the gated field's claim was closed: %v", st)
		}
		if st, _ := db.Standing(ctx, image); len(st) != 0 {
			t.Fatalf("the image claim should be closed: %v", st)
		}
	})
}

func TestSameVerdictExtendsItsRecord(t *testing.T) {
	onEngines(t, func(t *testing.T, state func(string) *DB) {
		ctx := context.Background()
		db := state("acme/infra")
		c := claim("hpa", 8, t0, "e1")
		v := core.Verdict{Field: replicas, Decision: core.DecisionYield, Rule: "owner.replicas", Winner: &c}
		rec := func(ev string, commit string) Record {
			return Record{Verdict: v, At: t0, Evidence: []string{ev}, Action: "gate", Commit: commit}
		}
		if err := db.Apply(ctx, Batch{At: t0, Verdicts: []Record{rec("k8s-audit/e1", "abc")}}); err != nil {
			t.Fatal(err)
		}
		for i := 2; i <= 100; i++ {
			if err := db.Apply(ctx, Batch{At: t0, Verdicts: []Record{rec("k8s-audit/e"+string(rune('0'+i%10))+string(rune('a'+i/10)), "")}}); err != nil {
				t.Fatal(err)
			}
		}
		rs, err := db.Verdicts(ctx, replicas)
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) != 1 {
			t.Fatalf("records = %d, want 1 (one verdict, restated)", len(rs))
		}
		if rs[0].Commit != "abc" || len(rs[0].Evidence) != maxEvidence {
			t.Fatalf("record kept commit %q and %d pieces of evidence", rs[0].Commit, len(rs[0].Evidence))
		}
		v.Decision, v.Rule = core.DecisionEnforceGit, "no-contest"
		if err := db.Apply(ctx, Batch{At: t0, Verdicts: []Record{{Verdict: v, At: t0, Evidence: []string{"timer"}}}}); err != nil {
			t.Fatal(err)
		}
		if rs, _ := db.Verdicts(ctx, replicas); len(rs) != 2 {
			t.Fatalf("a new decision must add a record, have %d", len(rs))
		}
	})
}

// TestPendingTimerMovesOnlyEarlier: a restated wish (the HPA's, every few seconds, each with an
// hour's recheck) leaves a pending timer where it is, unless it comes due sooner; a timer already
// due is set again, as Recheck sets it after firing.
func TestPendingTimerMovesOnlyEarlier(t *testing.T) {
	onEngines(t, func(t *testing.T, state func(string) *DB) {
		ctx := context.Background()
		db := state("acme/infra")
		set := func(at time.Time, due time.Time, why string) {
			t.Helper()
			if err := db.Apply(ctx, Batch{At: at, Timers: []Timer{{Field: replicas, Due: due, Why: why}}}); err != nil {
				t.Fatal(err)
			}
		}
		want := func(due time.Time, why string) {
			t.Helper()
			ts, err := db.Timers(ctx)
			if err != nil || len(ts) != 1 || !ts[0].Due.Equal(due) || ts[0].Why != why {
				t.Fatalf("timers = %+v %v, want one due %v (%s)", ts, err, due, why)
			}
		}
		set(t0, t0.Add(time.Hour), "recheck yield")
		set(t0.Add(2*time.Second), t0.Add(2*time.Second+time.Hour), "recheck yield, restated")
		want(t0.Add(time.Hour), "recheck yield")
		set(t0.Add(3*time.Second), t0.Add(30*time.Minute), "expiry")
		want(t0.Add(30*time.Minute), "expiry")
		// Due (the loop fires it now or soon): a later one replaces it.
		set(t0.Add(30*time.Minute), t0.Add(90*time.Minute), "recheck after firing")
		want(t0.Add(90*time.Minute), "recheck after firing")
		if err := db.Apply(ctx, Batch{At: t0.Add(31 * time.Minute), Timers: []Timer{{Field: replicas}}}); err != nil {
			t.Fatal(err)
		}
		if ts, _ := db.Timers(ctx); len(ts) != 0 {
			t.Fatalf("a cleared timer stays: %+v", ts)
		}
	})
}

func TestTimersSurviveReopening(t *testing.T) {
	onEngines(t, func(t *testing.T, state func(string) *DB) {
		ctx := context.Background()
		db := state("acme/infra")
		err := db.Apply(ctx, Batch{At: t0, Timers: []Timer{
			{Field: replicas, Due: t0.Add(30 * time.Minute), Why: "yield"},
			{Field: image, Due: t0.Add(10 * time.Minute), Why: "hold"},
		}})
		if err != nil {
			t.Fatal(err)
		}
		db.Close()
		db = state("acme/infra")
		next, ok, err := db.Next(ctx)
		if err != nil || !ok || !next.Equal(t0.Add(10*time.Minute)) {
			t.Fatalf("next = %v %v %v", next, ok, err)
		}
		due, err := db.Due(ctx, t0.Add(20*time.Minute))
		if err != nil || len(due) != 1 || due[0].Field != image {
			t.Fatalf("due = %v %v", due, err)
		}
		if err := db.Apply(ctx, Batch{At: t0, Timers: []Timer{{Field: image}}}); err != nil {
			t.Fatal(err)
		}
		all, _ := db.Timers(ctx)
		if len(all) != 1 || all[0].Field != replicas {
			t.Fatalf("timers = %v", all)
		}
	})
}

func TestInMemoryDatabasesAreSeparate(t *testing.T) {
	ctx := context.Background()
	a, b := open(t, ":memory:"), open(t, ":memory:")
	if err := a.Apply(ctx, Batch{Events: []string{"x/1"}, At: t0}); err != nil {
		t.Fatal(err)
	}
	fresh, _ := b.Fresh(ctx, []string{"x/1"})
	if len(fresh) != 1 {
		t.Fatal("two in-memory states share events")
	}
}

// A drift state written before claims took their one JSON shape (Go-cased keys, values as
// {"json": ...}) still reads: the claims stand and the verdicts list, in the new shape.
func TestReadsClaimsAndVerdictsWrittenInTheV1Shape(t *testing.T) {
	onEngines(t, func(t *testing.T, state func(string) *DB) {
		ctx := context.Background()
		db := state("acme/infra")
		v1Claim := `{"Field":"k8s:apps/Deployment/prod/web#/spec/replicas","Actor":{"Name":"hpa","Identity":{"Source":"k8s-user",` +
			`"ID":"system:serviceaccount:ops:hpa","Name":"","Groups":null}},"Value":{"json":8},"Yield":false,"Intent":"availability",` +
			`"Motivation":{"Kind":"","Ref":"","Severity":""},"At":"2026-11-20T10:00:00Z","Expires":"0001-01-01T00:00:00Z",` +
			`"Evidence":{"Source":"k8s-audit","Commit":"","PR":0,"EventIDs":["e1"],"Explicit":false}}`
		if _, err := db.db.ExecContext(ctx, db.q(`INSERT INTO {claims} (field, actor, at, claim) VALUES (?, ?, ?, ?)`),
			replicas.String(), "k8s-user:system:serviceaccount:ops:hpa", t0.UnixNano(), v1Claim); err != nil {
			t.Fatal(err)
		}
		v1Verdict := `{"field":"k8s:apps/Deployment/prod/web#/spec/replicas","decision":"yield","winner":` + v1Claim +
			`,"rule":"owner.replicas","explanation":[{"rule":"owner.replicas","outcome":"decided","detail":"hpa owns it"}]}`
		if _, err := db.db.ExecContext(ctx, db.q(`INSERT INTO {verdicts} (field, signature, at, verdict, evidence, action, commit_hash, branch, pull_request, note)
		VALUES (?, ?, ?, ?, ?, '', '', '', 0, '')`), replicas.String(), "yield|owner.replicas|hpa", t0.UnixNano(), v1Verdict, `["k8s-audit/e1"]`); err != nil {
			t.Fatal(err)
		}
		standing, err := db.Standing(ctx, replicas)
		if err != nil {
			t.Fatal(err)
		}
		want := claim("hpa", 8, t0, "e1")
		want.Actor.Identity.ID = "system:serviceaccount:ops:hpa"
		want.Intent = core.IntentAvailability
		if len(standing) != 1 || !reflect.DeepEqual(standing[0], want) {
			t.Fatalf("standing %+v\nwant %+v", standing, want)
		}
		recs, err := db.Verdicts(ctx, replicas)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != 1 || recs[0].Verdict.Winner == nil || !reflect.DeepEqual(*recs[0].Verdict.Winner, want) {
			t.Fatalf("verdicts %+v", recs)
		}
		out, _ := json.Marshal(recs[0])
		if !strings.Contains(string(out), `"winner":{"field":"k8s:apps/Deployment/prod/web#/spec/replicas","actor":{"source":"k8s-user"`) {
			t.Errorf("a v1 record is not written in the current shape: %s", out)
		}
	})
}

func TestBindKeepsAStateToItsRepository(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "drift.db")
	d, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if repo, err := d.Repository(ctx); err != nil || repo != "" {
		t.Fatalf("a new state is bound to %q (%v)", repo, err)
	}
	if err := d.Bind(ctx, "acme/prod-eu"); err != nil {
		t.Fatal(err)
	}
	if err := d.Bind(ctx, "ACME/Prod-EU"); err != nil {
		t.Fatalf("names compare as GitHub's do: %v", err)
	}
	d.Close()
	d, err = Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	err = d.Bind(ctx, "acme/prod-us")
	if err == nil || !strings.Contains(err.Error(), "acme/prod-eu, not acme/prod-us") {
		t.Fatalf("binding to another repository: %v", err)
	}
	if err := d.Bind(ctx, ""); err == nil {
		t.Fatal("an empty name must fail")
	}
}

// Each repository's state is its own: on PostgreSQL, a schema per repository in one database, so
// events, claims and timers of one never reach another; a state is bound to its repository.
func TestRepositoriesAreSeparate(t *testing.T) {
	onEngines(t, func(t *testing.T, state func(string) *DB) {
		ctx := context.Background()
		a, b := state("acme/prod-eu"), state("acme/prod-us")
		if err := a.Apply(ctx, Batch{Events: []string{"x/1"}, Claims: []core.Claim{claim("hpa", 8, t0, "1")}, At: t0,
			Timers: []Timer{{Field: replicas, Due: t0.Add(time.Hour), Why: "yield"}}}); err != nil {
			t.Fatal(err)
		}
		if fresh, _ := b.Fresh(ctx, []string{"x/1"}); len(fresh) != 1 {
			t.Fatal("two repositories share events")
		}
		if cs, _ := b.Claims(ctx, replicas, true); len(cs) != 0 {
			t.Fatalf("b sees a's claims: %v", cs)
		}
		if ts, _ := b.Timers(ctx); len(ts) != 0 {
			t.Fatalf("b sees a's timers: %v", ts)
		}
		if repo, err := a.Repository(ctx); err != nil || (repo != "" && repo != "acme/prod-eu") {
			t.Fatalf("a is bound to %q (%v)", repo, err)
		}
	})
}

// A replica finds every repository whose state the database holds.
func TestPostgresRepositoriesListsEveryState(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	pool, sdb, err := sqldb.OpenPostgres(ctx, dsn, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	defer sdb.Close()
	if repos, err := PostgresRepositories(ctx, sdb); err != nil || len(repos) != 0 {
		t.Fatalf("an empty database: %v %v", repos, err)
	}
	for _, r := range []string{"acme/prod-us", "acme/prod-eu"} {
		if _, err := OpenPostgres(ctx, sdb, "test", r); err != nil {
			t.Fatal(err)
		}
	}
	repos, err := PostgresRepositories(ctx, sdb)
	if err != nil || strings.Join(repos, ",") != "acme/prod-eu,acme/prod-us" {
		t.Fatalf("repositories: %v %v", repos, err)
	}
}
