package reconcile

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/parleyhq/parley/core"
)

// roundTrip is what the memo wrote through before asStored, and what the drift state gives back:
// the claim encoded as stored, then decoded as read.
func roundTrip(c core.Claim) (core.Claim, error) {
	js, err := json.Marshal(c)
	if err != nil {
		return core.Claim{}, err
	}
	return core.DecodeStoredClaim(js)
}

// sameAsStored checks that asStored gives what the byte round trip gives (the same claim, or an
// error from both).
func sameAsStored(t *testing.T, c core.Claim) {
	t.Helper()
	want, wantErr := roundTrip(c)
	got, err := asStored(c)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("%+v:\nasStored error %v, round trip error %v", c, err, wantErr)
	}
	if err == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("%+v:\nasStored   %#v\nround trip %#v", c, got, want)
	}
}

// A claim written through the memo is the claim a read of the drift state returns, whatever it
// holds: values in any JSON spelling, times in another zone and with a monotonic reading, empty
// lists, HTML characters (escaped by encoding/json), invalid UTF-8 (replaced by it), an
// expression, a removal, an actor source the store refuses.
func TestAsStoredIsTheStoredClaim(t *testing.T) {
	zone := time.FixedZone("CEST", 2*3600)
	n := func(s string) core.Value { v, _ := core.JSONValue(json.RawMessage(s)); return v }
	base := func() core.Claim {
		c := claimBy(replicas, core.SourceKubeUser, "hpa", "3")
		c.At = t0
		c.Evidence = core.Evidence{Source: EvidenceProposal, EventIDs: []string{"p1"}}
		return c
	}
	cases := map[string]func(c *core.Claim){
		"plain":        func(c *core.Claim) {},
		"local time":   func(c *core.Claim) { c.At = time.Now().In(zone); c.Expires = c.At.Add(time.Hour + time.Nanosecond) },
		"monotonic":    func(c *core.Claim) { c.At = time.Now() },
		"zero time":    func(c *core.Claim) { c.At = time.Time{} },
		"number forms": func(c *core.Claim) { c.Value = n(`3.0e0`) },
		"object":       func(c *core.Claim) { c.Value = n(`{"b": [1, 2.50], "a": "<&>"}`) },
		"empty lists": func(c *core.Claim) {
			c.Actor.Identity.Groups = []string{}
			c.Evidence.EventIDs = []string{}
		},
		"groups and motivation": func(c *core.Claim) {
			c.Actor.Identity.Groups = []string{"system:serviceaccounts", "a<b>"}
			c.Motivation = core.Motivation{Kind: "incident", Ref: "INC-1&2", Severity: core.Severity("high")}
			c.Intent = core.Intent("burst")
		},
		"html and separators": func(c *core.Claim) { c.Intent = core.Intent("a<b>&c\u2028d\u2029") },
		"invalid utf-8":       func(c *core.Claim) { c.Actor.Identity.ID = "sa:\xff\xfeops" },
		"invalid utf-8 group": func(c *core.Claim) { c.Actor.Identity.Groups = []string{"g\xc3"} },
		"expression":          func(c *core.Claim) { c.Value = core.ExprValue("var.replicas") },
		"removal":             func(c *core.Claim) { c.Value = core.Value{} },
		"yield":               func(c *core.Claim) { c.Value = core.Value{}; c.Yield = true },
		"unknown source":      func(c *core.Claim) { c.Actor.Identity.Source = "nobody" },
	}
	for name, change := range cases {
		t.Run(name, func(t *testing.T) {
			c := base()
			change(&c)
			sameAsStored(t, c)
		})
	}
}

// FuzzAsStored checks asStored against the byte round trip for claims built from arbitrary
// strings and values.
func FuzzAsStored(f *testing.F) {
	f.Add("hpa", "system:serviceaccount:kube-system:hpa", "3", "burst", "p1", int64(0))
	f.Add("a<b>", "sa:\xff", `{"x":[1,2.0]}`, "i\u2028", "", int64(1))
	f.Add("", "", `null`, "", "e", int64(-1))
	f.Fuzz(func(t *testing.T, name, id, value, intent, event string, at int64) {
		c := core.Claim{Field: replicas, Actor: core.Actor{Name: name, Identity: core.Identity{Source: core.SourceKubeUser, ID: id, Groups: []string{name}}},
			Intent: core.Intent(intent), At: time.Unix(0, at).In(time.FixedZone("z", 3600)),
			Evidence: core.Evidence{Source: EvidenceProposal, EventIDs: []string{event}}}
		if v, err := core.ParseJSONValue([]byte(value)); err == nil {
			c.Value = v
		} else {
			c.Value = core.ExprValue(value)
		}
		sameAsStored(t, c)
	})
}
