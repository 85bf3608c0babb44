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
// error from both), with and without the fast path, and holds the fast path's test (isStored) to
// the round trip both ways: a claim it passes is the claim the round trip gives back, and every
// claim the round trip gives back passes it (so that a claim restated in stored form, the HPA's
// usual review, takes the fast path).
func sameAsStored(t *testing.T, c core.Claim) {
	t.Helper()
	want, wantErr := roundTrip(c)
	for _, fieldStored := range []bool{false, fieldRoundTrips(c.Field)} {
		got, err := asStored(c, fieldStored)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("%+v (field stored %v):\nasStored error %v, round trip error %v", c, fieldStored, err, wantErr)
		}
		if err == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("%+v (field stored %v):\nasStored   %#v\nround trip %#v", c, fieldStored, got, want)
		}
	}
	if fieldRoundTrips(c.Field) && isStored(c) && (wantErr != nil || !reflect.DeepEqual(c, want)) {
		t.Fatalf("isStored passes a claim the round trip changes (error %v):\nclaim      %#v\nround trip %#v", wantErr, c, want)
	}
	if wantErr == nil && !(fieldRoundTrips(want.Field) && isStored(want)) {
		t.Fatalf("a claim as read back from the store fails isStored (field round trips: %v):\n%#v", fieldRoundTrips(want.Field), want)
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
		// What the fast path must turn away: each is changed or refused by the round trip.
		"core group": func(c *core.Claim) { c.Field.Group = core.CoreGroup },
		"unclean module": func(c *core.Claim) {
			c.Field = core.Field{Scheme: core.SchemeTerraform, Module: "a/../b", Resource: "x.y", Path: "/n"}
		},
		"zero field":           func(c *core.Claim) { c.Field = core.Field{} },
		"proof":                func(c *core.Claim) { c.Actor.Identity.Proof = core.Proof{Vouched: "alice"} },
		"yield with a value":   func(c *core.Claim) { c.Yield = true },
		"uncanonical value":    func(c *core.Claim) { c.Value = core.CanonicalJSONValue(`{"b":1, "a":2}`) },
		"not json":             func(c *core.Claim) { c.Value = core.CanonicalJSONValue(`{"b"`) },
		"motivation, no kind":  func(c *core.Claim) { c.Motivation = core.Motivation{Ref: "INC-1"} },
		"bad severity":         func(c *core.Claim) { c.Motivation = core.Motivation{Kind: "incident", Severity: "dire"} },
		"negative pr":          func(c *core.Claim) { c.Evidence.PR = -1 },
		"year 10000":           func(c *core.Claim) { c.At = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) },
		"year 0":               func(c *core.Claim) { c.At = time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC) },
		"zero time with zone":  func(c *core.Claim) { c.At = time.Time{}.In(zone) },
		"utc time, nanosecond": func(c *core.Claim) { c.Expires = t0.Add(time.Hour + time.Nanosecond) },
		"expression and json":  func(c *core.Claim) { c.Value = core.ExprValue("var.x"); c.Yield = true },
		"no event ids":         func(c *core.Claim) { c.Evidence.EventIDs = nil },
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
// strings and values, and the fast path's test against it both ways (sameAsStored). flags picks
// what makes a claim differ from its stored form or not: times in UTC or another zone, nil or
// empty lists, a value taken as canonical unchecked, a field named by name (escapes, invalid
// UTF-8) or in the "core" group, a yield, a removal, a motivation, a proof.
func FuzzAsStored(f *testing.F) {
	f.Add("hpa", "system:serviceaccount:kube-system:hpa", "3", "burst", "p1", "web", int64(0), int64(0), uint16(0))
	f.Add("a<b>", "sa:\xff", `{"x":[1,2.0]}`, "i\u2028", "", "", int64(1), int64(0), uint16(0))
	f.Add("", "", `null`, "", "e", "", int64(-1), int64(0), uint16(0))
	// The fast path's usual claim: everything already as stored.
	f.Add("hpa", "system:serviceaccount:kube-system:hpa", "3", "", "p1", "web", int64(1700000000123456789), int64(0), uint16(fuzzUTC|fuzzNilGroups))
	f.Add("hpa", "sa", `{"b":1,"a":[2.50]}`, "burst", "p1", "web%2F1", int64(1700000000000000000), int64(1700003600000000001), uint16(fuzzUTC|fuzzRawValue|fuzzNamedField))
	f.Add("hpa", "sa", "4", "incident", "high", "web", int64(5), int64(0), uint16(fuzzUTC|fuzzMotivation|fuzzYield|fuzzNoValue|fuzzCoreGroup))
	f.Fuzz(func(t *testing.T, name, id, value, intent, event, fieldName string, at, expires int64, flags uint16) {
		zone := time.FixedZone("z", 3600)
		if flags&fuzzUTC != 0 {
			zone = time.UTC
		}
		c := core.Claim{Field: replicas, Actor: core.Actor{Name: name, Identity: core.Identity{Source: core.SourceKubeUser, ID: id, Groups: []string{name}}},
			Intent: core.Intent(intent), At: time.Unix(0, at).In(zone),
			Evidence: core.Evidence{Source: EvidenceProposal, EventIDs: []string{event}}}
		if expires != 0 {
			c.Expires = time.Unix(0, expires).In(zone)
		}
		if v, err := core.ParseJSONValue([]byte(value)); err == nil {
			c.Value = v
		} else {
			c.Value = core.ExprValue(value)
		}
		if flags&fuzzRawValue != 0 {
			c.Value = core.CanonicalJSONValue(value) // not checked: possibly not canonical, or not JSON
		}
		if flags&fuzzNilGroups != 0 {
			c.Actor.Identity.Groups = nil
		}
		if flags&fuzzNoEvents != 0 {
			c.Evidence.EventIDs = []string{}
		}
		if flags&fuzzNamedField != 0 {
			c.Field.Name = fieldName
		}
		if flags&fuzzCoreGroup != 0 {
			c.Field.Group = core.CoreGroup
		}
		if flags&fuzzNoValue != 0 {
			c.Value = core.Value{}
		}
		if flags&fuzzYield != 0 {
			c.Yield = true
		}
		if flags&fuzzMotivation != 0 {
			c.Motivation = core.Motivation{Kind: intent, Ref: name, Severity: core.Severity(event)}
		}
		if flags&fuzzProof != 0 {
			c.Actor.Identity.Proof = core.Proof{Vouched: id}
		}
		sameAsStored(t, c)
	})
}

// FuzzAsStored's flags.
const (
	fuzzUTC = 1 << iota
	fuzzNilGroups
	fuzzNoEvents
	fuzzRawValue
	fuzzNamedField
	fuzzCoreGroup
	fuzzNoValue
	fuzzYield
	fuzzMotivation
	fuzzProof
)

// asStored on the HPA's usual claim, already in stored form: converted to its JSON shape and back
// (the field not known to round-trip), and returned as it is (the fast path wrote takes).
func BenchmarkAsStored(b *testing.B) {
	c := claimBy(replicas, core.SourceKubeUser, hpaUser, "4")
	c.At = t0.Add(time.Second)
	c.Evidence = core.Evidence{Source: EvidenceProposal, EventIDs: []string{"p1"}}
	for _, fieldStored := range []bool{false, true} {
		b.Run(map[bool]string{false: "converted", true: "fast path"}[fieldStored], func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := asStored(c, fieldStored); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
