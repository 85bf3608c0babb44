package driftstate

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/core"
)

// verdictBatch is a batch recording one verdict on f (decision d, one event of evidence), judged
// at f's version want.
func verdictBatch(f core.Field, d core.Decision, want int64, event string, at time.Time) Batch {
	return Batch{At: at, Expect: map[core.Field]int64{f: want},
		Verdicts: []Record{{Verdict: core.Verdict{Field: f, Decision: d, Rule: "rank"}, At: at, Evidence: []string{event}}}}
}

// recordsOf is f's verdict records as decision and evidence, oldest first.
func recordsOf(t *testing.T, db *DB, f core.Field) []string {
	t.Helper()
	rs, err := db.Verdicts(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range rs {
		out = append(out, string(r.Verdict.Decision)+" "+strings.Join(r.Evidence, ","))
	}
	return out
}

// A record kept in memory for the next verdict on its field (lastverdict.go) is used only at the
// version its own write made: two sessions on one state (two replicas, or two processes on the
// file) writing the same field in turn each see the other's records, an update extending the
// evidence the other added and a verdict with another signature ending the run of updates.
func TestKeptVerdictRecordFollowsVersions(t *testing.T) {
	onEngines(t, func(t *testing.T, state func(string) *DB) {
		ctx := context.Background()
		a, b := state("acme/infra"), state("acme/infra")
		f := svcField(1)
		steps := []struct {
			by   *DB
			d    core.Decision
			want int64
		}{
			{a, core.DecisionYield, 0}, // a new record
			{a, core.DecisionYield, 1}, // a's own record, updated
			{b, core.DecisionYield, 2}, // b updates a's record
			{a, core.DecisionYield, 3}, // a must see b's evidence
			{b, core.DecisionVeto, 4},  // another verdict: a new record
			{a, core.DecisionYield, 5}, // a's kept record is no longer the newest: a new record
			{a, core.DecisionYield, 6},
		}
		for i, s := range steps {
			if err := s.by.Apply(ctx, verdictBatch(f, s.d, s.want, fmt.Sprintf("proposal/e%d", i+1), t0.Add(time.Duration(i)*time.Second))); err != nil {
				t.Fatalf("step %d: %v", i+1, err)
			}
		}
		want := []string{"yield proposal/e1,proposal/e2,proposal/e3,proposal/e4", "veto proposal/e5", "yield proposal/e6,proposal/e7"}
		for _, db := range []*DB{a, b} {
			if got := recordsOf(t, db, f); !slices.Equal(got, want) {
				t.Fatalf("records:\n got %q\nwant %q", got, want)
			}
		}
	})
}

// A batch undone (its transaction rolled back, or its savepoint in a shared one) leaves nothing
// kept: the version it would have made is made again by another write, whose record is another.
func TestUndoneBatchKeepsNoVerdictRecord(t *testing.T) {
	// A verdict whose time encoding/json refuses fails its batch after the batch's first verdict
	// was written.
	broken := func(f, g core.Field, want int64, at time.Time) Batch {
		b := verdictBatch(f, core.DecisionYield, want, "proposal/undone", at)
		b.Verdicts = append(b.Verdicts, Record{Verdict: core.Verdict{Field: g, Decision: core.DecisionHold, Until: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}, At: at})
		return b
	}
	for _, shared := range []bool{false, true} {
		name := "alone"
		if shared {
			name = "in a shared transaction"
		}
		t.Run(name, func(t *testing.T) {
			onEngines(t, func(t *testing.T, state func(string) *DB) {
				ctx := context.Background()
				db := state("acme/infra")
				f, g, other := svcField(1), svcField(2), svcField(3)
				if err := db.Apply(ctx, verdictBatch(f, core.DecisionYield, 0, "proposal/e1", t0)); err != nil {
					t.Fatal(err)
				}
				if shared {
					grp := &Group{DB: db, max: 2}
					reqs := []groupReq{
						{ctx: ctx, reply: make(chan error, 1), batch: broken(f, g, 1, t0.Add(time.Second))},
						{ctx: ctx, reply: make(chan error, 1), batch: verdictBatch(other, core.DecisionYield, 0, "proposal/o1", t0.Add(time.Second))},
					}
					grp.commit(reqs)
					if err := <-reqs[0].reply; err == nil {
						t.Fatal("the broken batch was recorded")
					}
					if err := <-reqs[1].reply; err != nil {
						t.Fatalf("the batch beside it: %v", err)
					}
				} else if err := db.Apply(ctx, broken(f, g, 1, t0.Add(time.Second))); err == nil {
					t.Fatal("the broken batch was recorded")
				}
				// Version 2 made again, by a verdict of another signature; then the undone batch's
				// verdict again at 2.
				if err := db.Apply(ctx, verdictBatch(f, core.DecisionVeto, 1, "proposal/e2", t0.Add(2*time.Second))); err != nil {
					t.Fatal(err)
				}
				if err := db.Apply(ctx, verdictBatch(f, core.DecisionYield, 2, "proposal/e3", t0.Add(3*time.Second))); err != nil {
					t.Fatal(err)
				}
				want := []string{"yield proposal/e1", "veto proposal/e2", "yield proposal/e3"}
				if got := recordsOf(t, db, f); !slices.Equal(got, want) {
					t.Fatalf("records:\n got %q\nwant %q", got, want)
				}
			})
		})
	}
}
