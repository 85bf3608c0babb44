package driftstate

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/parleyhq/parley/core"
)

// verdictFrom builds a verdict with every part set from a few strings: a winner, two losers (one
// with an expression), a proposed claim, times, people asked and an explanation.
func verdictFrom(actor, value, detail string, until int64) core.Verdict {
	val, err := core.ParseJSONValue([]byte(value)) // a JSON value as given, or else the string
	if err != nil {
		val, _ = core.JSONValue(value)
	}
	c := core.Claim{Field: replicas, Actor: kubeActor(actor), Value: val, At: t0, Intent: core.IntentBaseline,
		Motivation: core.Motivation{Kind: "incident", Ref: detail}, Expires: t0.Add(time.Hour),
		Evidence: core.Evidence{Source: "proposal", EventIDs: []string{detail, "e2"}, Proposal: actor}}
	expr := c
	expr.Value = core.ExprValue("max(" + detail + ", 3)")
	git := core.Claim{Field: replicas, Actor: core.Actor{Identity: core.Identity{Source: core.SourceGitAuthor, Name: actor, Groups: []string{detail}}}, Value: val, At: t0}
	v := core.Verdict{Field: replicas, Decision: core.DecisionHold, Winner: &c, Losers: []core.Claim{git, expr}, Rule: "oscillation." + actor,
		Ask: []string{"@acme/" + detail}, Proposed: &git, Explanation: []core.Step{{Rule: "rank", Outcome: "decided", Detail: detail}}}
	if until != 0 {
		v.Until, v.Recheck = time.Unix(0, until).UTC(), time.Unix(0, until/2)
	}
	return v
}

// encodeVerdict writes what json.Marshal writes of a verdict, whatever its strings hold (HTML
// characters, which both escape; invalid UTF-8, which both replace) and whichever parts are set.
func TestVerdictJSONWritesAVerdictsBytes(t *testing.T) {
	full := verdictFrom("hpa", "7", "<b>&'\"\xff\u2028", t0.Add(time.Hour).UnixNano())
	cases := map[string]core.Verdict{
		"empty":                   {},
		"a field and a rule":      {Field: replicas, Decision: core.DecisionYield, Rule: "owner.replicas"},
		"everything set":          full,
		"empty losers, no winner": {Field: replicas, Decision: core.DecisionVeto, Losers: []core.Claim{}, Explanation: []core.Step{}},
	}
	for name, v := range cases {
		assertVerdictBytes(t, name, v)
	}
	// Every field of core.Verdict has its counterpart, under the same JSON name and options.
	vt, jt := reflect.TypeOf(core.Verdict{}), reflect.TypeOf(verdictJSON{})
	if vt.NumField() != jt.NumField() {
		t.Fatalf("core.Verdict has %d fields, verdictJSON %d: add the new one to verdictJSON and encodeVerdict", vt.NumField(), jt.NumField())
	}
	for i := range vt.NumField() {
		a, b := vt.Field(i), jt.Field(i)
		if a.Name != b.Name || a.Tag.Get("json") != b.Tag.Get("json") {
			t.Errorf("field %d: core.Verdict's %s %q, verdictJSON's %s %q", i, a.Name, a.Tag.Get("json"), b.Name, b.Tag.Get("json"))
		}
	}
}

func assertVerdictBytes(t *testing.T, name string, v core.Verdict) {
	t.Helper()
	want, wantErr := json.Marshal(v)
	got, err := encodeVerdict(v)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("%s: encodeVerdict's error %v, json.Marshal's %v", name, err, wantErr)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s:\n got %s\nwant %s", name, got, want)
	}
	if len(v.Losers) > 0 {
		want, _ := json.Marshal(v.Losers[0])
		if got, _ := encodeClaim(v.Losers[0]); !bytes.Equal(got, want) {
			t.Fatalf("%s: claim\n got %s\nwant %s", name, got, want)
		}
	}
}

func FuzzEncodeVerdictMatchesJSON(f *testing.F) {
	f.Add("hpa", "7", "<b>&", int64(0))
	f.Add("oncall", `{"a":[1,2.5e3,"x"]}`, "\xff\xfe", t0.UnixNano())
	f.Add("", "", "", int64(-1))
	f.Fuzz(func(t *testing.T, actor, value, detail string, until int64) {
		assertVerdictBytes(t, "fuzzed", verdictFrom(actor, value, detail, until))
	})
}
