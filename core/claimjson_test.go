package core_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/internal/schematest"
)

var t0 = time.Date(2026, 11, 22, 9, 30, 0, 0, time.UTC)

// sampleClaims covers every form a claim takes: literal values of each JSON type (null included),
// an expression, a yield, a removal, resolved and unresolved actors, every optional part.
func sampleClaims(t *testing.T) []core.Claim {
	t.Helper()
	replicas := core.K8sField("apps", "Deployment", "prod", "web", "/spec/replicas")
	tf := core.TFField("infra/kafka", `aws_autoscaling_group.consumer["blue"]`, "/desired_capacity")
	val := func(s string) core.Value {
		v, err := core.ParseJSONValue([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	hpa := core.Actor{Name: "hpa", Identity: core.Identity{Source: core.SourceKubeUser,
		ID: "system:serviceaccount:kube-system:horizontal-pod-autoscaler", Groups: []string{"system:serviceaccounts", "system:authenticated"}}}
	alice := core.Actor{Identity: core.Identity{Source: core.SourceGitAuthor, ID: "alice@example.com", Name: "Alice Martin"}}
	nobody := core.Actor{Name: "git", Identity: core.Identity{Source: core.SourceGitAuthor, ID: ""}} // a commit with an empty author email
	return []core.Claim{
		{Field: replicas, Actor: hpa, Value: val("8"), Intent: core.IntentAvailability,
			Motivation: core.Motivation{Kind: "traffic", Ref: "spike-1127", Severity: core.SeverityHigh},
			At:         t0, Expires: t0.Add(4 * time.Hour), Evidence: core.Evidence{Source: "k8s-audit", EventIDs: []string{"4b1c", "4b1d"}}},
		{Field: replicas, Actor: alice, Value: val("null"), At: t0},
		{Field: replicas.Child("labels", "a/b~c"), Actor: alice, Value: val(`{"b":[1,2.5,"x",true,null],"a":{}}`), Intent: core.IntentConsistency},
		{Field: tf, Actor: core.Actor{Identity: core.Identity{Source: core.SourceAWSPrincipal, ID: "arn:aws:iam::123456789012:role/agent"}},
			Value: core.ExprValue("var.capacity * 2"), Evidence: core.Evidence{Source: "github-comment", PR: 7, Explicit: true}},
		{Field: tf, Actor: core.Actor{Identity: core.Identity{Source: core.SourceGitHubUser, ID: "bob", Groups: []string{"parleyhq/sre"}}}, Yield: true,
			At: t0.Add(time.Nanosecond)},
		{Field: tf, Actor: nobody, Intent: core.IntentBaseline, At: t0, Evidence: core.Evidence{Source: "git", Commit: "a1b2c3d"}}, // a removal
		{Field: replicas, Actor: core.Actor{Identity: core.Identity{Source: core.SourceFieldManager, ID: "kubectl-edit"}}, Value: core.StringValue("ünïcode </script>")},
		{Field: replicas, Actor: core.Actor{Identity: core.Identity{Source: core.SourceGitHubTeam, ID: "parleyhq/sre"}}, Value: val("-3.25e-7")},
	}
}

// Every claim writes JSON that matches the published schema and reads back as the same claim, both
// through encoding/json and as a claim in a claims file would be read.
func TestClaimJSONRoundTripsAndMatchesTheSchema(t *testing.T) {
	for i, c := range sampleClaims(t) {
		b, err := json.Marshal(c)
		if err != nil {
			t.Fatalf("claim %d: %v", i, err)
		}
		schematest.Validate(t, "claim.schema.json", b)
		var generic map[string]any
		if err := json.Unmarshal(b, &generic); err != nil {
			t.Fatal(err)
		}
		delete(generic, "value") // the value is the actor's, nulls and all
		if p := nullAt(generic, ""); p != "" {
			t.Errorf("claim %d: absent things must be omitted, not null: %s is null in %s", i, p, b)
		}
		var back core.Claim
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("claim %d: %s: %v", i, b, err)
		}
		if !reflect.DeepEqual(back, c) {
			t.Errorf("claim %d read back differently:\n%s\ngot  %#v\nwant %#v", i, b, back, c)
		}
		var cj core.ClaimJSON
		if err := json.Unmarshal(b, &cj); err != nil {
			t.Fatal(err)
		}
		asInput, err := cj.Claim(core.Field{}, time.Time{})
		if err != nil || !reflect.DeepEqual(asInput, c) {
			t.Errorf("claim %d as input: %v\ngot  %#v\nwant %#v", i, err, asInput, c)
		}
	}
}

// nullAt returns the path of a JSON null in v, or "".
func nullAt(v any, path string) string {
	switch x := v.(type) {
	case nil:
		return path + "/"
	case map[string]any:
		for k, e := range x {
			if p := nullAt(e, path+"/"+k); p != "" {
				return p
			}
		}
	case []any:
		for _, e := range x {
			if p := nullAt(e, path+"/[]"); p != "" {
				return p
			}
		}
	}
	return ""
}

func TestClaimJSONShape(t *testing.T) {
	c := sampleClaims(t)[0]
	b, _ := json.Marshal(c)
	want := `{"field":"k8s:apps/Deployment/prod/web#/spec/replicas","actor":{"source":"k8s-user",` +
		`"id":"system:serviceaccount:kube-system:horizontal-pod-autoscaler","groups":["system:serviceaccounts","system:authenticated"],` +
		`"policy_actor":"hpa"},"value":8,"intent":"availability","motivation":{"kind":"traffic","ref":"spike-1127","severity":"high"},` +
		`"at":"2026-11-22T09:30:00Z","expires":"2026-11-22T13:30:00Z","evidence":{"source":"k8s-audit","event_ids":["4b1c","4b1d"]}}`
	if string(b) != want {
		t.Errorf("got\n%s\nwant\n%s", b, want)
	}
	removal, _ := json.Marshal(sampleClaims(t)[5])
	if !strings.Contains(string(removal), `"remove":true`) || strings.Contains(string(removal), `"value"`) {
		t.Errorf("a removal is marked explicitly: %s", removal)
	}
	expr, _ := json.Marshal(sampleClaims(t)[3])
	if !strings.Contains(string(expr), `"expr":"var.capacity * 2"`) || strings.Contains(string(expr), `"value"`) {
		t.Errorf("an expression is marked explicitly: %s", expr)
	}
}

// Bad claims are refused with the key at fault named, by the decoder and by the schema alike.
func TestClaimJSONRefusesBadInput(t *testing.T) {
	const f = `"field":"k8s:apps/Deployment/prod/web#/spec/replicas"`
	const a = `"actor":{"source":"k8s-user","id":"hpa"}`
	for _, tt := range []struct{ in, want string }{
		{`{` + a + `,"value":1}`, "no field"},
		{`{` + f + `,"value":1}`, "actor source"},
		{`{` + f + `,"actor":{"source":"k8s-user"},"value":1}`, "actor has no id"},
		{`{` + f + `,"actor":{"source":"ldap","id":"x"},"value":1}`, `actor source "ldap"`},
		{`{` + f + `,` + a + `}`, "claim has no value"},
		{`{` + f + `,` + a + `,"value":1,"expr":"var.x"}`, "more than one"},
		{`{` + f + `,` + a + `,"yield":true,"remove":true}`, "more than one"},
		{`{` + f + `,` + a + `,"value":1,"colour":"red"}`, `unknown field "colour"`},
		{`{` + f + `,` + a + `,"value":1,"at":"10am"}`, `at "10am"`},
		{`{` + f + `,` + a + `,"value":1,"expires":"4h"}`, "no at to count from"},
		{`{` + f + `,` + a + `,"value":1,"expires":"soon"}`, `expires "soon"`},
		{`{` + f + `,` + a + `,"value":1,"motivation":{"ref":"INC-1"}}`, "motivation has no kind"},
		{`{` + f + `,` + a + `,"value":1,"motivation":{"kind":"incident","severity":"dire"}}`, `severity "dire"`},
		{`{` + f + `,` + a + `,"value":1,"evidence":{"pr":-2}}`, "evidence pr -2"},
		{`{"field":"k8s:apps/Deployment/prod/web#spec",` + a + `,"value":1}`, "k8s:apps/Deployment/prod/web#spec"},
	} {
		var c core.Claim
		err := json.Unmarshal([]byte(tt.in), &c)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v, want an error naming %q", tt.in, err, tt.want)
		}
		if schematest.Check("claim.schema.json", []byte(tt.in)) == nil && !strings.Contains(tt.want, "no at") {
			t.Errorf("%s: the schema accepts what the decoder refuses", tt.in)
		}
	}
}

// The Go-cased shape of parley.dev/verdicts/v1 still reads, into the same claim, and the schema
// refuses it (a reader of v2 documents never sees it).
func TestClaimReadsTheV1Shape(t *testing.T) {
	v1 := `{"Field":"tf:infra/kafka//aws_autoscaling_group.consumer#/desired_capacity","Actor":{"Name":"kafka-agent","Identity":` +
		`{"Source":"aws-principal","ID":"arn:aws:iam::123456789012:role/agent","Name":"","Groups":null}},"Value":{"expr":"var.capacity * 2"},` +
		`"Yield":false,"Intent":"performance","Motivation":{"Kind":"","Ref":"","Severity":""},"At":"2026-11-22T09:30:00Z",` +
		`"Expires":"0001-01-01T00:00:00Z","Evidence":{"Source":"github-comment","Commit":"","PR":7,"EventIDs":null,"Explicit":true}}`
	var c core.Claim
	if err := json.Unmarshal([]byte(v1), &c); err != nil {
		t.Fatal(err)
	}
	want := core.Claim{Field: core.TFField("infra/kafka", "aws_autoscaling_group.consumer", "/desired_capacity"),
		Actor: core.Actor{Name: "kafka-agent", Identity: core.Identity{Source: core.SourceAWSPrincipal, ID: "arn:aws:iam::123456789012:role/agent"}},
		Value: core.ExprValue("var.capacity * 2"), Intent: core.IntentPerformance, At: t0, Evidence: core.Evidence{Source: "github-comment", PR: 7, Explicit: true}}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("got  %#v\nwant %#v", c, want)
	}
	if schematest.Check("claim.schema.json", []byte(v1)) == nil {
		t.Error("the claim schema accepts the v1 shape")
	}
	var bad core.Claim
	if err := json.Unmarshal([]byte(`{"Field":"k8s:x","Actor":{"Identity":{"Source":"nobody"}},"Value":{"json":1}}`), &bad); err == nil {
		t.Error("a v1 claim with an unknown source was accepted")
	}
}

// FuzzClaimJSON: any claim the decoder accepts writes JSON the schema accepts, and that JSON reads
// back as the same claim.
func FuzzClaimJSON(f *testing.F) {
	for _, s := range []string{
		`{"field":"k8s:apps/Deployment/prod/web#/spec/replicas","actor":{"source":"k8s-user","id":"hpa"},"value":8,"at":"2026-11-22T09:00:00Z","expires":"4h"}`,
		`{"field":"tf:infra//aws_instance.web#/ami","actor":{"source":"git-author","id":""},"remove":true}`,
		`{"field":"tf:.//aws_instance.web[0]#/tags/Name","actor":{"source":"github-user","id":"bob","groups":["o/t"],"policy_actor":"dev"},"expr":"local.name","motivation":{"kind":"cve","ref":"CVE-2026-1","severity":"critical"},"evidence":{"source":"git","commit":"abc","pr":3,"event_ids":["e"],"explicit":true}}`,
		`{"Field":"k8s:core/ConfigMap/prod/x#/data/a","Actor":{"Name":"","Identity":{"Source":"field-manager","ID":"kubectl"}},"Value":{"json":"v"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var c core.Claim
		if json.Unmarshal(in, &c) != nil {
			return
		}
		out, err := json.Marshal(c)
		if err != nil {
			t.Fatalf("accepted %s but cannot write it: %v", in, err)
		}
		if err := schematest.Check("claim.schema.json", out); err != nil {
			t.Fatalf("accepted %s, wrote %s: %v", in, out, err)
		}
		var back core.Claim
		if err := json.Unmarshal(out, &back); err != nil {
			t.Fatalf("wrote %s, cannot read it back: %v", out, err)
		}
		if !reflect.DeepEqual(back, c) {
			t.Fatalf("%s read back differently:\ngot  %#v\nwant %#v", out, back, c)
		}
		// What the drift state stores it reads back through the fast path, the same claim.
		stored, err := core.DecodeStoredClaim(out)
		if err != nil {
			t.Fatalf("wrote %s, DecodeStoredClaim cannot read it: %v", out, err)
		}
		if !reflect.DeepEqual(stored, c) {
			t.Fatalf("%s read back by DecodeStoredClaim differently:\ngot  %#v\nwant %#v", out, stored, c)
		}
		// And any input reads through it as through UnmarshalJSON, once that accepts it.
		if again, err := core.DecodeStoredClaim(in); err != nil || !reflect.DeepEqual(again, c) {
			t.Fatalf("%s: DecodeStoredClaim gives %#v, %v; UnmarshalJSON %#v", in, again, err, c)
		}
	})
}

// A store an earlier version wrote (the Go-cased shape) still reads through DecodeStoredClaim,
// and so does a claim with a key the current shape does not know, refused as UnmarshalJSON does.
func TestDecodeStoredClaimReadsOlderStores(t *testing.T) {
	legacy := []byte(`{"Field":"k8s:core/ConfigMap/prod/x#/data/a","Actor":{"Name":"","Identity":{"Source":"field-manager","ID":"kubectl"}},"Value":{"json":"v"}}`)
	var want core.Claim
	if err := json.Unmarshal(legacy, &want); err != nil {
		t.Fatal(err)
	}
	got, err := core.DecodeStoredClaim(legacy)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("legacy claim: got %#v, %v; want %#v", got, err, want)
	}
	if _, err := core.DecodeStoredClaim([]byte(`{"field":"k8s:core/ConfigMap/prod/x#/data/a","actor":{"source":"k8s-user","id":"a"},"bogus":1}`)); err == nil {
		t.Fatal("a claim with an unknown key was read")
	}
}
