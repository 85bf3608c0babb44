package core

import (
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
)

func TestUniqueKeys(t *testing.T) {
	for _, c := range []struct {
		in, want string // want "" = accepted
	}{
		{`{"a":1,"b":{"a":2},"c":[{"a":1},{"a":2}]}`, ""},
		{`[1,"x",null,true,{"k":[{}]}]`, ""},
		{`"just a string"`, ""},
		{`{"at":"2026-01-01T00:00:00Z","at":"2001-01-01T00:00:00Z"}`, `duplicate key "at" in the object at $`},
		{`{"claims":[{"field":"x"},{"field":"y","field":"z"}]}`, `duplicate key "field" in the object at $.claims[1]`},
		{`{"a":{"b":{"c":1,"c":2}}}`, `duplicate key "c" in the object at $.a.b`},
		{`{"a b":{"x":1,"\u0078":2}}`, `duplicate key "x" in the object at $["a b"]`},
		{`{"a":1,}`, "invalid character"},
		{`{"a"`, "EOF"},
	} {
		err := UniqueKeys([]byte(c.in))
		switch {
		case c.want == "" && err != nil:
			t.Errorf("UniqueKeys(%s) = %v; want accepted", c.in, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("UniqueKeys(%s) = %v; want %q", c.in, err, c.want)
		}
	}
	if err := UniqueKeys([]byte(`{"k":1,"k":2}`)); !errors.Is(err, ErrDuplicateKey) {
		t.Errorf("errors.Is(%v, ErrDuplicateKey) is false", err)
	}
	deep := strings.Repeat("[", maxJSONDepth+1) + strings.Repeat("]", maxJSONDepth+1)
	if err := UniqueKeys([]byte(deep)); err == nil || !strings.Contains(err.Error(), "nested deeper") {
		t.Errorf("deep nesting: %v", err)
	}
}

// TestClaimWithDuplicateKeyIsRefused: a claim naming "at" twice is refused with the key named,
// where encoding/json would keep the later date silently.
func TestClaimWithDuplicateKeyIsRefused(t *testing.T) {
	in := `{"field":"k8s:apps/Deployment/prod/web#/spec/replicas","actor":{"name":"oncall"},"value":6,` +
		`"at":"2026-11-20T10:00:00Z","at":"2099-01-01T00:00:00Z"}`
	var c Claim
	err := json.Unmarshal([]byte(in), &c)
	if err == nil || !strings.Contains(err.Error(), `duplicate key "at"`) {
		t.Fatalf("Unmarshal = %v, claim %+v; want the duplicate \"at\" named", err, c)
	}
}

// FuzzUniqueKeys: UniqueKeys never panics, and agrees with encoding/json on what is JSON: a value
// it accepts decodes, and an object it accepts decodes into a map with as many keys as it names
// (checked for objects of scalars, where the count is easy to know).
func FuzzUniqueKeys(f *testing.F) {
	for _, s := range []string{`{"a":1,"b":[1,{"c":2}]}`, `{"a":1,"a":2}`, `[{"x":{}},{"x":{"y":1,"y":2}}]`, `{"\u0061":1,"a":2}`, `"s"`, `{`,
		`{"k:{\"a\":1}":1,"k:{\u0022a\u0022:1}":2}`, "{\"a\xff\":1,\"a\xfe\":2}", `[-0.5e+3,1E9,0,{"a":{"b":[]}}]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// The one-pass reader may say "clean" only where encoding/json's tokens do.
		if uniqueKeysFast(data) {
			if err := uniqueKeysTokens(data); err != nil {
				t.Fatalf("the fast reader accepted %q, which the token reader refuses: %v", data, err)
			}
		}
		err := UniqueKeys(data)
		if err != nil {
			return
		}
		// Syntax, not range: a number too large for a float64 (1e1000) is JSON, and each decoder
		// says for itself whether its field can hold it. json.Number keeps numbers as text.
		var v any
		dec := json.NewDecoder(strings.NewReader(string(data)))
		dec.UseNumber()
		if derr := dec.Decode(&v); derr != nil {
			t.Fatalf("UniqueKeys accepted %q, which encoding/json refuses: %v", data, derr)
		}
	})
}

// TestUniqueKeysDeepNestingIsLinear: the path of every open level used to be kept as a string,
// so 20 kB of '[' (an audit event's object, a plan's value) allocated 153 MB, the square of its
// depth; paths are now built only for the error. A duplicate deep down is still named by its path.
func TestUniqueKeysDeepNestingIsLinear(t *testing.T) {
	const depth = 4_000 // 8,000 levels: objects and arrays
	doc := []byte(strings.Repeat(`{"a":[`, depth) + `{"k":1,"k":2}` + strings.Repeat("]}", depth))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	err := UniqueKeys(doc)
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 256*uint64(len(doc)) {
		t.Errorf("%d bytes nested %d deep allocated %d bytes", len(doc), depth, got)
	}
	var dup *DuplicateKeyError
	if !errors.As(err, &dup) || dup.Path != "$"+strings.Repeat(".a[0]", depth) {
		t.Fatalf("err = %.200v", err)
	}
}

// TestUniqueKeysFastAgreesWithTokens: the one-pass reader answers "clean" for the documents
// serve reads on every request (so they skip encoding/json's tokens), and never for a document
// the token reader refuses: keys compared as decoded (escapes, invalid UTF-8 as U+FFFD), large
// objects through their map, syntax errors anywhere.
func TestUniqueKeysFastAgreesWithTokens(t *testing.T) {
	many := func(dup bool) string {
		var b strings.Builder
		b.WriteString("{")
		for i := range 40 {
			fmt.Fprintf(&b, `"k%d":[%d,-1.5e+3,true,false,null,"x\"y"],`, i, i)
		}
		if dup {
			b.WriteString(`"k\u0037":0,`)
		}
		b.WriteString(`"last":{}}`)
		return b.String()
	}
	for _, c := range []struct {
		in    string
		clean bool // what both readers must say
	}{
		{`{"a":1,"b":{"a":2},"c":[{"a":1},{"a":2}]}`, true},
		{` [1,"x",null,true,{"k":[{}]},[],{}] trailing is not read`, true},
		{`{"f:metadata":{"k:{\"type\":\"Ready\"}":{},"k:{\"type\":\"Synced\"}":{}}}`, true},
		{`{"é":1,"e":2,"\u00e9x":3}`, true},
		{many(false), true},
		{many(true), false},
		{`{"a":1,"\u0061":2}`, false},
		{"{\"a\xff\":1,\"a\xfe\":2}", false}, // both decode to "a\uFFFD"
		{`{"k:{\"a\":1}":1,"k:{\u0022a\u0022:1}":2}`, false},
		{`{"a":1,}`, false},
		{`{"a":01}`, false},
		{`{"a":1.}`, false},
		{`{"a":-}`, false},
		{`{"a":tru}`, false},
		{`{"a":"\x"}`, false},
		{"{\"a\":\"\x01\"}", false},
		{`{"a":[1 2]}`, false},
		{`{"a"`, false},
		{`[`, false},
	} {
		fast := uniqueKeysFast([]byte(c.in))
		tokens := uniqueKeysTokens([]byte(c.in)) == nil
		if fast != c.clean || tokens != c.clean {
			t.Errorf("%.80q: fast reader %v, token reader %v; want %v", c.in, fast, tokens, c.clean)
		}
	}
}
