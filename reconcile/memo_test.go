package reconcile

import (
	"bytes"
	"context"
	"reflect"
	"testing"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/policy"
)

// countingGit is the snapshot's ledger, counting what the judgement asks of it.
type countingGit struct {
	GitState
	current, history int
}

func (c *countingGit) Current(f core.Field) (core.Claim, bool, error) {
	c.current++
	return c.GitState.Current(f)
}

func (c *countingGit) History(f core.Field) ([]core.Claim, error) {
	c.history++
	return c.GitState.History(f)
}

// A commit's ledger answers do not change, so judging the same field again against the same
// snapshot asks the ledger nothing new (an admission review at 500/s asked it three times per
// review), and gives the same verdict: the history judge extends is its own copy, not the memo's.
func TestJudgingAFieldAgainAsksTheLedgerOncePerCommit(t *testing.T) {
	e := newEnv(t)
	snap := e.snapshot()
	counted := &countingGit{GitState: snap.Git}
	snap.Git = counted
	hpa := core.Claim{Field: replicas, Value: core.CanonicalJSONValue("6"), At: t0,
		Actor: core.Actor{Identity: core.Identity{Source: core.SourceKubeUser, ID: hpaUser}}}
	first, err := e.rec.judge(context.Background(), snap, replicas, []core.Claim{hpa}, t0)
	if err != nil {
		t.Fatal(err)
	}
	askedCurrent, askedHistory := counted.current, counted.history
	if askedCurrent == 0 || askedHistory == 0 {
		t.Fatalf("the judgement asked the ledger for Current %d and History %d times: the test measures nothing", askedCurrent, askedHistory)
	}
	for range 3 {
		again, err := e.rec.judge(context.Background(), snap, replicas, []core.Claim{hpa}, t0)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(again, first) {
			t.Fatalf("judged again differently:\n%+v\nfirst:\n%+v", again, first)
		}
	}
	if counted.current != askedCurrent || counted.history != askedHistory {
		t.Errorf("judging again asked the ledger again: Current %d -> %d, History %d -> %d", askedCurrent, counted.current, askedHistory, counted.history)
	}
}

// The arbiters a commit keeps between judgements remember outcomes per policy (the rules' answers
// per pair of claim profiles, the blocks matching an object), and the commit keeps owner_when's
// value per condition and field: a snapshot judged under another policy at the same commit
// (LoadSnapshot given a policy shares the commit's derived state) must be judged by that policy,
// not by an arbiter or a condition's value kept for the first.
func TestKeptJudgementStateFollowsTheSnapshotsPolicy(t *testing.T) {
	const ownerWhen = `owner_when = contains(git_values(`
	for _, c := range []struct{ name, old, new string }{
		{"another owner", `owner      = "hpa"`, `owner      = "oncall"`},
		{"owner_when negated", ownerWhen, `owner_when = !contains(git_values(`},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			snap := e.snapshot()
			hpa := core.Claim{Field: replicas, Value: core.CanonicalJSONValue("6"), At: t0,
				Actor: core.Actor{Identity: core.Identity{Source: core.SourceKubeUser, ID: hpaUser}}}
			judge := func(s Snapshot) core.Verdict {
				t.Helper()
				v, err := e.rec.judge(context.Background(), s, replicas, []core.Claim{hpa}, t0)
				if err != nil {
					t.Fatal(err)
				}
				return v
			}
			first := judge(snap)
			src := snap.Files[".parley/policy.hcl"]
			if !bytes.Contains(src, []byte(c.old)) {
				t.Fatalf("the demo policy no longer says %s: the test measures nothing", c.old)
			}
			other, err := policy.Parse(bytes.Replace(src, []byte(c.old), []byte(c.new), 1), "policy.hcl")
			if err != nil {
				t.Fatal(err)
			}
			shared := snap
			shared.Policy = other
			alone := shared
			alone.derive = &derived{}
			got, want := judge(shared), judge(alone)
			if reflect.DeepEqual(want, first) {
				t.Fatalf("the two policies judge alike (%s): the test measures nothing", want.Decision)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("judged under the second policy with the commit's kept state:\n%+v\nwant (fresh):\n%+v", got, want)
			}
		})
	}
}
