package events

import (
	"fmt"
	"sync"
	"testing"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/policy"
)

func TestClaims(t *testing.T) {
	b, err := DecodeK8sAudit(readTestdata(t, "k8s-audit", "mixed.json"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := policy.Parse([]byte(policy.Starter), "policy.hcl")
	if err != nil {
		t.Fatal(err)
	}
	name := func(id core.Identity) string {
		if a := p.ResolveActor(id); a != nil {
			return a.Name
		}
		return ""
	}
	// Git sets the flags ConfigMap's checkout_v2 to the value bob's update restated.
	gitFlags := core.K8sField("", "ConfigMap", "prod", "flags", "/data/checkout_v2")
	git := func(f core.Field) (core.Value, bool) {
		if f == gitFlags {
			return core.StringValue("true"), true
		}
		return core.Value{}, false
	}
	claims := Claims(b, name, git)
	if len(claims) != len(b.Observations)-1 {
		t.Fatalf("%d claims from %d observations, want one restated-unchanged field dropped", len(claims), len(b.Observations))
	}
	for _, c := range claims {
		if c.Field == gitFlags {
			t.Errorf("restated field equal to Git became a claim: %s", c)
		}
		if len(c.Evidence.EventIDs) != 1 || c.Evidence.Source != SourceK8sAudit || c.Evidence.Explicit {
			t.Errorf("evidence %+v", c.Evidence)
		}
	}
	hpa := claims[0]
	if hpa.Actor.Name != "hpa" || hpa.Value.JSON() != "7" || hpa.Field.String() != "k8s:apps/Deployment/prod/web#/spec/replicas" {
		t.Errorf("HPA claim = %s (actor %q)", hpa, hpa.Actor.Name)
	}
	oncall := claims[3]
	if oncall.Intent != core.IntentAvailability || oncall.Motivation.Ref != "INC-4211" || oncall.Expires.IsZero() {
		t.Errorf("declared claim = %s", oncall)
	}
	if all := Claims(b, nil, nil); len(all) != len(b.Observations) || all[0].Actor.Name != "" || all[0].Actor.Identity.ID != b.Observations[0].Identity.ID {
		t.Errorf("claims without a namer or Git: %d", len(all))
	}
}

func TestDeduper(t *testing.T) {
	d := NewDeduper(3)
	steps := []struct {
		id   string
		seen bool
	}{{"a", false}, {"b", false}, {"a", true}, {"c", false}, {"d", false}, // d evicts b, the least recently seen
		{"b", false}, {"a", false}, {"c", false}, {"d", false}, {"a", true}, {"b", false}} // each new ID evicts the oldest
	for i, s := range steps {
		if got := d.Seen(s.id); got != s.seen {
			t.Fatalf("step %d: Seen(%s) = %v, want %v", i, s.id, got, s.seen)
		}
	}
	if d.Len() != 3 {
		t.Errorf("Len = %d, want 3", d.Len())
	}
	one := NewDeduper(0)
	if one.Seen("x") || !one.Seen("x") || one.Seen("y") || one.Seen("x") {
		t.Errorf("capacity-1 deduper misbehaves")
	}
}

func TestDeduperFilter(t *testing.T) {
	body := readTestdata(t, "k8s-audit", "mixed.json")
	d := NewDeduper(100)
	first, _ := DecodeK8sAudit(body)
	n := len(first.Observations)
	if got := d.Filter(first); len(got.Observations) != n || got.Ignored["duplicate"] != 0 {
		t.Fatalf("first delivery filtered: %d of %d kept", len(got.Observations), n)
	}
	again, _ := DecodeK8sAudit(body)
	got := d.Filter(again)
	if len(got.Observations) != 0 || len(got.EventIDs) != 0 || got.Ignored["duplicate"] != 7 {
		t.Errorf("redelivery kept %d observations, IDs %v, duplicates %d", len(got.Observations), got.EventIDs, got.Ignored["duplicate"])
	}
	f, _ := DecodeFlux(readTestdata(t, "flux", "configured.json"))
	if got := d.Filter(f); len(got.Reverts) != 4 {
		t.Errorf("new Flux event dropped")
	}
	if got := d.Filter(f); len(got.Reverts) != 0 {
		t.Errorf("redelivered Flux event kept %d reverts", len(got.Reverts))
	}
}

func TestDeduperConcurrent(t *testing.T) {
	d := NewDeduper(64)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 1000 {
				d.Seen(fmt.Sprintf("%d-%d", w, i%100))
			}
		}()
	}
	wg.Wait()
	if d.Len() != 64 {
		t.Errorf("Len = %d, want 64", d.Len())
	}
}
