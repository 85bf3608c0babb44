package app

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/parleyhq/parley/app/config"
	"github.com/parleyhq/parley/app/internal/repocache"
	"github.com/parleyhq/parley/internal/pgtest"
	"github.com/parleyhq/parley/internal/sqldb"
	"github.com/parleyhq/parley/reconcile"
	"github.com/parleyhq/parley/reconcile/driftstate"
	"github.com/parleyhq/parley/webhooks/store"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// countingQueue counts every Put it is asked for, inserted or not: the delivery store keeps one
// delivery per ID, which would hide a confirmed write queued twice.
type countingQueue struct {
	AdmissionQueue
	puts atomic.Int64
}

func (q *countingQueue) Put(ctx context.Context, d store.Delivery) (bool, error) {
	q.puts.Add(1)
	return q.AdmissionQueue.Put(ctx, d)
}

// observeReplica is one replica of parley serve in observation mode for the prod cluster: its
// own Drift (and clone) beside base's, over the drift state open gives it, putting confirmed
// writes in queue.
func observeReplica(t *testing.T, base *Drift, clk *clockT, queue AdmissionQueue, open func(ctx context.Context, repository string) (*driftstate.DB, error)) *Admission {
	t.Helper()
	d := &Drift{GitHub: base.GitHub, Repos: &repocache.Cache{Dir: t.TempDir()}, Repository: base.Repository, PolicyPath: base.PolicyPath,
		Mode: base.Mode, Now: clk.now, Author: base.Author, OpenState: open,
		Clusters: map[string]config.RepoRef{"prod": {Repository: "acme/infra"}}}
	t.Cleanup(func() { d.Close() })
	m, err := NewAdmissionMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	return &Admission{Drift: d, Now: clk.now, Metrics: m, Budget: time.Minute, MaxAge: time.Minute, Queue: queue,
		Clusters: map[string]config.Admission{"prod": {Mode: "warn", Observe: true, Token: config.NewSecret(admissionToken),
			GitOpsUsers: config.DefaultGitOpsUsers}},
		Routes: map[string]config.RepoRef{"prod": {Repository: "acme/infra"}}}
}

// sqliteStates opens the repository's drift state in one SQLite file, anew for each caller (each
// replica, or each start of one), as a restarted parley serve opens its drift_state again.
func sqliteStates(t *testing.T) func(ctx context.Context, repository string) (*driftstate.DB, error) {
	path := filepath.Join(t.TempDir(), "drift.db")
	return func(ctx context.Context, _ string) (*driftstate.DB, error) { return driftstate.Open(ctx, path) }
}

// postgresStates opens the repository's drift state in one PostgreSQL database, through a pool of
// each caller's own, as each replica has.
func postgresStates(t *testing.T) func(ctx context.Context, repository string) (*driftstate.DB, error) {
	dsn := pgtest.DSN(t)
	return func(ctx context.Context, repository string) (*driftstate.DB, error) {
		pool, db, err := sqldb.OpenPostgres(ctx, dsn, 4)
		if err != nil {
			return nil, err
		}
		t.Cleanup(func() { db.Close(); pool.Close() })
		return driftstate.OpenPostgres(ctx, db, "test", repository)
	}
}

// reviewBy answers body through h, as the API server's call would reach it.
func reviewBy(t *testing.T, h *Admission, body string) {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, AdmissionPrefix+"prod", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+admissionToken)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"allowed":true`) {
		t.Fatalf("review: %d %s", rec.Code, rec.Body.String())
	}
}

func deliveryStore(t *testing.T) *store.SQLite {
	t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "deliveries.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func onStateEngines(t *testing.T, test func(t *testing.T, states func(ctx context.Context, repository string) (*driftstate.DB, error))) {
	t.Run("sqlite", func(t *testing.T) { test(t, sqliteStates(t)) })
	t.Run("postgres", func(t *testing.T) { test(t, postgresStates(t)) })
}

// A write held before a restart is confirmed after it: the held writes are in the drift state,
// not in the process that held them.
func TestHeldAdmittedWritesSurviveARestart(t *testing.T) {
	onStateEngines(t, func(t *testing.T, states func(context.Context, string) (*driftstate.DB, error)) {
		base, _, _, clk := driftSetup(t, reconcile.ModeDirect)
		st := deliveryStore(t)
		before := observeReplica(t, base, clk, st, states)
		reviewBy(t, before, scaleReviewAt("cost-1", costSA, 3, 2, "41"))
		if observations(before, obsHeld) != 1 {
			t.Fatalf("held %v", observations(before, obsHeld))
		}
		if err := before.Drift.Close(); err != nil {
			t.Fatal(err)
		}
		after := observeReplica(t, base, clk, st, states) // the process started again
		reviewBy(t, after, scaleReviewAt("hpa-1", hpaSA, 2, 5, "42"))
		q := queued(t, st)
		if len(q) != 1 || q[0].ID != "uid-cost-1" || q[0].Source != "k8s-admission" || q[0].Scope != "prod" || observations(after, obsConfirmed) != 1 {
			t.Fatalf("after the restart: queued %+v, confirmed %v", q, observations(after, obsConfirmed))
		}
		// The held write is judged by the drift loop as any queued delivery.
		if err := after.Drift.Handle(context.Background(), q[0]); err != nil {
			t.Fatal(err)
		}
		claims, err := after.Drift.stateOf("acme/infra").Standing(context.Background(), webReplicas)
		if err != nil {
			t.Fatal(err)
		}
		var observed bool
		for _, c := range claims {
			observed = observed || c.Evidence.Source == "k8s-admission" && c.Actor.Identity.ID == costSA && c.Value.String() == "2"
		}
		if !observed {
			t.Fatalf("no claim from the held write: %+v", claims)
		}
	})
}

// A write held by one replica is confirmed by a review another replica answers; when two
// replicas answer the same confirming review at once (the API server retried, or two webhooks'
// calls), it is queued once.
func TestHeldAdmittedWritesAreConfirmedByAnyReplicaOnce(t *testing.T) {
	onStateEngines(t, func(t *testing.T, states func(context.Context, string) (*driftstate.DB, error)) {
		base, _, _, clk := driftSetup(t, reconcile.ModeDirect)
		st := deliveryStore(t)
		q := &countingQueue{AdmissionQueue: st}
		a, b, c := observeReplica(t, base, clk, q, states), observeReplica(t, base, clk, q, states), observeReplica(t, base, clk, q, states)
		reviewBy(t, a, scaleReviewAt("cost-1", costSA, 3, 2, "41"))
		reviewBy(t, b, scaleReviewAt("hpa-1", hpaSA, 2, 5, "42")) // A's write, seen stored by B
		if got := queued(t, st); len(got) != 1 || got[0].ID != "uid-cost-1" || observations(b, obsConfirmed) != 1 {
			t.Fatalf("B confirming A's write: queued %+v, confirmed by B %v", got, observations(b, obsConfirmed))
		}
		// B held the HPA's write in turn; B and C both answer the review that confirms it.
		puts := q.puts.Load()
		var wg sync.WaitGroup
		for _, h := range []*Admission{b, c} {
			wg.Add(1)
			go func() { // waited for below
				defer wg.Done()
				reviewBy(t, h, scaleReviewAt("cost-2", costSA, 5, 4, "43"))
			}()
		}
		wg.Wait()
		if n := q.puts.Load() - puts; n != 1 {
			t.Fatalf("the HPA's write queued %d times", n)
		}
		if got := observations(b, obsConfirmed) + observations(c, obsConfirmed); got != 2 {
			t.Fatalf("confirmed %v in all", got)
		}
		if got := queued(t, st); len(got) != 1 || got[0].ID != "uid-hpa-1" {
			t.Fatalf("queued: %+v", got)
		}
	})
}
