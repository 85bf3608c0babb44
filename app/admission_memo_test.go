package app

import (
	"context"
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"

	"github.com/parleyhq/parley/app/internal/repocache"
)

// Two replicas of serve over one drift state (as over one PostgreSQL database), each Drift with
// its own field memo: replica A judges the cost optimizer scaling prod/web down (refused: the HPA
// owns replicas), replica B then admits the HPA's scale to 7, and A, asked again, answers from the
// drift state as it now stands, not from what it remembered: the HPA's standing claim is the
// winner its denial names. A third Drift over the same state without a memo (the oracle) answers
// each of A's reviews just before, as a dry run; A must agree with it every time, and the
// oracle's own answer must change across B's write, so the test fails if A's memo missed it.
func TestAdmissionMemoSeesAnotherReplicasWrite(t *testing.T) {
	srvA, hA, dA := admissionSetup(t, "deny")
	replica := func(memo bool) (*httptest.Server, *Drift) {
		d := &Drift{GitHub: dA.GitHub, Repos: &repocache.Cache{Dir: t.TempDir()}, Repository: dA.Repository, PolicyPath: dA.PolicyPath,
			Mode: dA.Mode, State: dA.State, Now: dA.Now, Author: dA.Author}
		h := &Admission{Drift: d, Now: hA.Now, Budget: hA.Budget, MaxAge: hA.MaxAge, Clusters: hA.Clusters, Routes: hA.Routes}
		mux := http.NewServeMux()
		mux.Handle(AdmissionPrefix, h)
		srv := httptest.NewServer(mux)
		t.Cleanup(srv.Close)
		rd, err := d.repo(context.Background(), "acme/infra", "")
		if err != nil {
			t.Fatal(err)
		}
		if !memo {
			rd.rec.Memo = nil
		}
		t.Cleanup(func() { rd.closeView(); rd.group.Close() }) // the state is A's, closed with it
		return srv, d
	}
	srvB, _ := replica(true)
	oracle, _ := replica(false)
	rdA, err := dA.repo(context.Background(), "acme/infra", "")
	if err != nil {
		t.Fatal(err)
	}

	type answer struct {
		allowed bool
		message string
	}
	uids := regexp.MustCompile(`uid-[a-z0-9-]+`)
	ask := func(srv *httptest.Server, body string) answer {
		t.Helper()
		code, resp, raw := admit(t, srv, admissionToken, body)
		if code != http.StatusOK {
			t.Fatalf("%d %s", code, raw)
		}
		a := answer{allowed: resp.Allowed}
		if resp.Result != nil {
			a.message = uids.ReplaceAllString(resp.Result.Message, "uid-…") // the reviews' own ids differ
		}
		return a
	}
	var oracleSaid []answer
	judgeOnA := func(step, uid string) {
		t.Helper()
		want := ask(oracle, scaleReview("oracle-"+uid, costSA, 3, 2, true))
		got := ask(srvA, scaleReview(uid, costSA, 3, 2, true))
		if got != want {
			t.Fatalf("%s: replica A (memo) answered %+v; without a memo, %+v", step, got, want)
		}
		oracleSaid = append(oracleSaid, want)
	}
	judgeOnA("before the hotfix", "cost-1")
	judgeOnA("again, from memory", "cost-2")
	if ask(srvB, scaleReview("hpa-1", hpaSA, 3, 7, false)) != (answer{allowed: true}) {
		t.Fatal("replica B did not admit the HPA's scale")
	}
	judgeOnA("after replica B's write", "cost-3")
	if oracleSaid[2] == oracleSaid[0] || oracleSaid[2].allowed {
		t.Fatalf("premise: the HPA's claim should be the winner the denial names after B's write; before %+v, after %+v", oracleSaid[0], oracleSaid[2])
	}
	hits, misses := rdA.rec.Memo.Stats()
	if hits == 0 || misses == 0 {
		t.Fatalf("replica A's memo: %d hits, %d misses; want both", hits, misses)
	}
}
