package ledger

import (
	"strings"
	"testing"

	"github.com/parleyhq/parley/core"
)

// FuzzCanonicalJSON holds storedValue's shortcut to the slow path it skips: whatever
// isCanonicalJSON accepts, core.ParseJSONValue gives back unchanged.
func FuzzCanonicalJSON(f *testing.F) {
	for _, s := range []string{`3`, `-12`, `"web"`, `"a\u003cb\u0026c\"\\\n"`, `"é漢字"`, `{"a":[1,{"b":null}],"c":{},"d":[]}`,
		`true`, `false`, `null`, `-0`, `01`, `1.5`, `1e3`, `9223372036854775808`, `{"b":1,"a":2}`, `{"a":1,"a":2}`,
		`"\u0001"`, `"\b"`, `"<"`, "\"\u2028\"", "\"\xff\"", `{"\u0061":1}`, ` 1`, `[1,]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !isCanonicalJSON(s) {
			return
		}
		v, err := core.ParseJSONValue([]byte(s))
		if err != nil {
			t.Fatalf("%q passes as canonical JSON but does not parse: %v", s, err)
		}
		if v.JSON() != s {
			t.Fatalf("%q passes as canonical JSON but ParseJSONValue makes it %q", s, v.JSON())
		}
	})
}

// TestCanonicalJSONTakesTheCommonValues: the values a ledger is made of take the shortcut, and the
// forms ParseJSONValue rewrites do not.
func TestCanonicalJSONTakesTheCommonValues(t *testing.T) {
	for _, s := range []string{`3`, `-12`, `0`, `"ghcr.io/onedr0p/app:1.2.3@sha256:abc"`, `"a\u003cb\u0026c\"\\\n\t\r"`, `"é"`,
		`{"cpu":"100m","memory":"128Mi"}`, `["a",1,true,null,{},[]]`, `9223372036854775807`, `-9223372036854775808`} {
		if !isCanonicalJSON(s) {
			t.Errorf("%s should take the shortcut", s)
		}
	}
	for _, s := range []string{`-0`, `01`, `1.0`, `1.5`, `1e3`, `9223372036854775808`, `{"b":1,"a":2}`, `{"a":1,"a":2}`,
		`"\u0001"`, `"\/"`, `"<"`, "\"\u2028\"", "\"\xff\"", ` 1`, `[1,]`, `{"a":1,}`, `"`, `{"a"}`, ``,
		strings.Repeat("[", maxCanonicalDepth+1) + strings.Repeat("]", maxCanonicalDepth+1)} {
		if isCanonicalJSON(s) {
			t.Errorf("%q should take the slow path", s)
		}
	}
}
