package arbiter

import (
	"runtime"
	"testing"
	"time"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/policy"
)

// TestDecideAllocationBudget pins what judging a field with a window of history allocates (issue
// 37): every admission review of an autoscaled Deployment is one such judgement, and its garbage
// was a tenth of the webhook's CPU. The budget is the figure measured when it was set plus a small
// margin; a change that copies the history again (the flips' sequence held whole claims, grown by
// appending) fails here rather than only in a benchmark nobody reads.
func TestDecideAllocationBudget(t *testing.T) {
	p, err := policy.LoadFile("testdata/bench-policy.hcl")
	if err != nil {
		t.Fatal(err)
	}
	a := New(p)
	in := historyInput(t)
	a.Decide(in) // warm: the policy's lazily built parts
	allocs, bytes := allocated(100, func() { a.Decide(in) })
	const maxAllocs, maxBytes = 28, 5000
	t.Logf("%.1f allocations, %.0f bytes", allocs, bytes)
	if allocs > maxAllocs || bytes > maxBytes {
		t.Errorf("Decide with %d claims of history: %.0f allocations of %.0f bytes, budget %d and %d", len(in.History), allocs, bytes, maxAllocs, maxBytes)
	}
}

// historyInput is a replicas field the HPA has scaled every few minutes within the oscillation
// window, Git's claim standing, as an admission review of the busy cluster judges it.
func historyInput(t *testing.T) Input {
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	f := core.K8sField("apps", "Deployment", "prod", "svc-1", "/spec/replicas")
	hpa := core.Actor{Identity: core.Identity{Source: core.SourceKubeUser, ID: "system:serviceaccount:kube-system:horizontal-pod-autoscaler"}}
	g := core.Claim{Field: f, Actor: core.Actor{Identity: core.Identity{Source: core.SourceGitAuthor, ID: "carol@acme.example"}},
		Value: mustValue(t, 4), At: now.Add(-48 * time.Hour), Evidence: core.Evidence{Source: "git", Commit: "abc"}}
	in := Input{Field: f, Git: &g, Now: now, Lookup: GitValues{}, History: []core.Claim{g}}
	for i := range 12 {
		c := core.Claim{Field: f, Actor: hpa, Value: mustValue(t, 4+i%3), At: now.Add(-time.Duration(50-4*i) * time.Minute),
			Evidence: core.Evidence{Source: "proposal", EventIDs: []string{"admission/prod/uid"}}}
		in.History = append(in.History, c)
	}
	in.Live = []core.Claim{in.History[len(in.History)-1]}
	return in
}

// allocated is what one call of f allocates on average over runs calls: count and bytes, as
// testing.AllocsPerRun counts them (this goroutine's f alone; GOMAXPROCS 1 while measuring).
func allocated(runs int, f func()) (allocs, bytes float64) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		f()
	}
	runtime.ReadMemStats(&after)
	return float64(after.Mallocs-before.Mallocs) / float64(runs), float64(after.TotalAlloc-before.TotalAlloc) / float64(runs)
}
