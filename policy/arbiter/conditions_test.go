package arbiter

import (
	"reflect"
	"sync"
	"testing"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/policy"
)

// countingLookup counts the git_values() lookups a decision makes.
type countingLookup struct {
	GitValues
	fields int
}

func (c *countingLookup) GitFields(p core.FieldPattern) ([]core.Field, error) {
	c.fields++
	return c.GitValues.GitFields(p)
}

// conditionMap is a ConditionMemo in a map.
type conditionMap struct {
	mu sync.Mutex
	m  map[conditionKey]bool
}

type conditionKey struct {
	e *policy.Expr
	f core.Field
}

func (c *conditionMap) Condition(e *policy.Expr, f core.Field) (bool, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[conditionKey{e, f}]
	return v, ok
}

func (c *conditionMap) KeepCondition(e *policy.Expr, f core.Field, v bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[conditionKey{e, f}] = v
}

// TestOwnerWhenKeptInConditions: with Input.Conditions, owner_when (it reads only the field and
// Git) is evaluated once per field and its kept value gives the same verdicts, for a field it
// holds for and one it does not; without it, evaluated on every decision.
func TestOwnerWhenKeptInConditions(t *testing.T) {
	p := demoPolicy(t)
	hpaObj := core.K8sField("autoscaling", "HorizontalPodAutoscaler", "prod", "web", "/spec/scaleTargetRef/name")
	api := core.K8sField("apps", "Deployment", "prod", "api", "/spec/replicas") // no HPA targets it
	for _, f := range []core.Field{replicas, api} {
		hpa := claimBy(f, core.SourceKubeUser, hpaSA, num(t, 6), t0)
		cost := claimBy(f, core.SourceKubeUser, costSA, num(t, 2), t0)
		lookup := &countingLookup{GitValues: GitValues{hpaObj: core.StringValue("web")}}
		in := Input{Field: f, Now: t0, Lookup: lookup, Live: []core.Claim{hpa, cost}}
		want := Decide(p, in)
		if lookup.fields == 0 {
			t.Fatalf("%s: owner_when read no git_values(): the test measures nothing", f)
		}
		in.Conditions = &conditionMap{m: map[conditionKey]bool{}}
		arb := New(p)
		lookup.fields = 0
		for range 3 {
			if got := arb.Decide(in); !reflect.DeepEqual(got, want) {
				t.Fatalf("%s: decided with kept conditions:\n%s\nwant:\n%s", f, Explain(got), Explain(want))
			}
		}
		if lookup.fields != 1 {
			t.Errorf("%s: three decisions with kept conditions evaluated owner_when %d times, want once", f, lookup.fields)
		}
	}
}
