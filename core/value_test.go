package core

import (
	"encoding/json"
	"testing"
)

// sameScalar checks ScalarJSONValue against JSONValue, the encode-and-decode it saves.
func sameScalar(t *testing.T, v any) {
	t.Helper()
	got, ok := ScalarJSONValue(v)
	want, err := JSONValue(v)
	if !ok {
		if _, isNum := v.(json.Number); !isNum || err == nil {
			t.Fatalf("%#v: ScalarJSONValue declined what JSONValue reads as %v (%v)", v, want, err)
		}
		return
	}
	if err != nil || got != want {
		t.Fatalf("%#v: ScalarJSONValue %q, JSONValue %q (%v)", v, got.JSON(), want.JSON(), err)
	}
}

// A decoded document's scalar leaves get the Value JSONValue gives them: numbers in every
// spelling normalised alike, and a number that is no JSON literal left to JSONValue (which
// refuses it).
func TestScalarJSONValueIsJSONValue(t *testing.T) {
	for _, v := range []any{nil, true, false,
		json.Number("3"), json.Number("-0"), json.Number("0"), json.Number("-5"), json.Number("007"), json.Number("123456789012345678"), json.Number("3.0"), json.Number("3e0"), json.Number("1E2"), json.Number("2.50"),
		json.Number("0.1"), json.Number("1e400"), json.Number("-1e-400"), json.Number("9007199254740993"), json.Number("9007199254740993.0"),
		json.Number("18446744073709551616"), json.Number("1.5e300"), json.Number(""),
		json.Number("0x10"), json.Number("+1"), json.Number("1_000"), json.Number(" 1"), json.Number("NaN"), json.Number("Inf"),
	} {
		sameScalar(t, v)
	}
	if _, ok := ScalarJSONValue("s"); ok {
		t.Fatal("a string is StringValue's")
	}
}

// FuzzScalarJSONValue compares the two on number literals as a decoder could hand them over.
func FuzzScalarJSONValue(f *testing.F) {
	for _, s := range []string{"3", "3.0", "-0", "1e400", "0x10", "+1", "9007199254740993.0", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { sameScalar(t, json.Number(s)) })
}

// ParseJSONValue's shortcut for canonical scalars gives what the decoder and encoder give.
func TestParseJSONValueShortcut(t *testing.T) {
	for _, s := range []string{"0", "-0", "7", "-7", "007", "123456789012345678", "1234567890123456789", "-123456789012345678",
		"9223372036854775807", "1.0", "1e2", "true", "false", "null", "nul", "", "-", "--1", "+1", " 1", "1 ",
		`""`, `"nginx:1.27"`, `"a<b"`, `"a&b"`, `"\u0041"`, `"a\"b"`, `"é"`, "\"\x7f\"", "\"tab\there\"", `"`, `"a`, `a"`} {
		sameParse(t, s)
	}
}

func sameParse(t *testing.T, s string) {
	t.Helper()
	got, err := ParseJSONValue([]byte(s))
	want, werr := parseJSONValue([]byte(s))
	if (err != nil) != (werr != nil) || got != want {
		t.Fatalf("%q: ParseJSONValue %q %v, without the shortcut %q %v", s, got.JSON(), err, want.JSON(), werr)
	}
}

func FuzzParseJSONValueShortcut(f *testing.F) {
	for _, s := range []string{"7", "-0", `"x"`, "true", "123456789012345678", `"a<b"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { sameParse(t, s) })
}
