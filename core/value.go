package core

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Value is a field's value. Literal values are held as canonical JSON (compact, object keys sorted),
// so values from YAML, HCL literals and JSON events compare as values, not as text. A Terraform
// expression that is not a literal (a reference, a function call) is held as its normalised source.
//
// The zero Value means "absent": the field does not exist (was removed, or a yield has no value).
// JSON null is a present value.
//
// Value has no JSON encoding of its own on purpose: where a value is written as JSON it is plain JSON
// next to an explicit marker for expressions and absence (ClaimJSON's "value", "expr", "remove"), so a
// Value is written through ClaimJSON or RawJSON and Expr, never as a bare struct.
type Value struct {
	json string // canonical JSON; "" when absent or an expression
	expr string // normalised expression source; "" for literals
}

// JSONValue returns the Value of v, encoded canonically. v is anything encoding/json accepts.
func JSONValue(v any) (Value, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return Value{}, fmt.Errorf("encode value: %w", err)
	}
	return ParseJSONValue(b)
}

// ParseJSONValue canonicalises JSON text into a Value.
func ParseJSONValue(b []byte) (Value, error) {
	if canonicalScalar(b) {
		return Value{json: string(b)}, nil
	}
	return parseJSONValue(b)
}

// canonicalScalar reports whether b is a scalar that parseJSONValue would give back unchanged: a
// decimal integer without leading zeros that fits an int64 for sure (at most 18 digits, not "-0"),
// true, false, null, or a string of printable ASCII that encoding/json writes as it is (no quote,
// backslash or HTML character). Most values (replicas, images, flags) are one, and skip a decoder
// and an encoder each time a claim is read.
func canonicalScalar(b []byte) bool {
	switch string(b) {
	case "true", "false", "null":
		return true
	case "", "-", "-0":
		return false
	}
	if b[0] == '"' {
		if len(b) < 2 || b[len(b)-1] != '"' {
			return false
		}
		for _, c := range b[1 : len(b)-1] {
			if c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
				return false
			}
		}
		return true
	}
	digits := b
	if digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || len(digits) > 18 || (digits[0] == '0' && len(digits) > 1) {
		return false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// parseJSONValue is ParseJSONValue without the shortcut for canonical scalars.
func parseJSONValue(b []byte) (Value, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return Value{}, fmt.Errorf("value %q is not JSON: %w", truncate(string(b), 40), err)
	}
	if d.More() {
		return Value{}, fmt.Errorf("value %q has trailing data after the JSON value", truncate(string(b), 40))
	}
	// encoding/json sorts map keys; numbers are normalised so 3, 3.0 and 3e0 are one value.
	out, err := json.Marshal(normaliseNumbers(v))
	if err != nil {
		return Value{}, fmt.Errorf("encode value: %w", err)
	}
	return Value{json: string(out)}, nil
}

// ScalarJSONValue is JSONValue for a scalar as a JSON decoder with UseNumber gives it (nil, a bool
// or a json.Number), without encoding it and decoding it again: the same Value, for the leaves of
// decoded documents, which an admission review has dozens of. ok is false for anything else (a
// string: StringValue; a number that is not a JSON number literal), which JSONValue then takes.
func ScalarJSONValue(v any) (_ Value, ok bool) {
	switch x := v.(type) {
	case nil:
		return Value{json: "null"}, true
	case bool:
		if x {
			return Value{json: "true"}, true
		}
		return Value{json: "false"}, true
	case json.Number:
		if x != "" && (x[0] == '-' || x[0] >= '0' && x[0] <= '9') && canonicalScalar([]byte(x)) {
			return Value{json: string(x)}, true // a plain integer: already what the rest would give
		}
		// Marshal checks the literal as JSONValue's would; the normalising is ParseJSONValue's.
		if _, err := json.Marshal(x); err != nil {
			return Value{}, false
		}
		b, err := json.Marshal(normaliseNumbers(x))
		if err != nil {
			return Value{}, false
		}
		return Value{json: string(b)}, true
	}
	return Value{}, false
}

// StringValue returns a JSON string value.
func StringValue(s string) Value {
	b, _ := json.Marshal(s) // marshalling a string cannot fail
	return Value{json: string(b)}
}

// ExprValue returns a Value for a non-literal expression, given its normalised source.
func ExprValue(src string) Value { return Value{expr: src} }

// ParseLooseValue reads a value a person typed: JSON if it parses as JSON, else a string.
func ParseLooseValue(s string) Value {
	if v, err := ParseJSONValue([]byte(s)); err == nil {
		return v
	}
	return StringValue(s)
}

// Absent reports whether the value is absent (the zero Value).
func (v Value) Absent() bool { return v.json == "" && v.expr == "" }

// IsExpr reports whether the value is a non-literal expression.
func (v Value) IsExpr() bool { return v.expr != "" }

// JSON returns the canonical JSON text, or "" for an absent value or an expression.
func (v Value) JSON() string { return v.json }

// RawJSON returns the literal as JSON text to embed in a document, or nil for an absent value or an
// expression (which the document then marks separately, or omits).
func (v Value) RawJSON() json.RawMessage {
	if v.json == "" {
		return nil
	}
	return json.RawMessage(v.json)
}

// Expr returns the normalised expression source, or "" for a literal.
func (v Value) Expr() string { return v.expr }

// Decode unmarshals a literal value into dst.
func (v Value) Decode(dst any) error {
	if v.json == "" {
		return fmt.Errorf("value %s is not a literal", v)
	}
	d := json.NewDecoder(bytes.NewReader([]byte(v.json)))
	d.UseNumber()
	return d.Decode(dst)
}

// Equal reports whether two values are the same value.
func (v Value) Equal(o Value) bool { return v == o }

// String renders the value for people: JSON text, ${expr} for expressions, (absent) for absence.
func (v Value) String() string {
	switch {
	case v.expr != "":
		return "${" + v.expr + "}"
	case v.json == "":
		return "(absent)"
	}
	return v.json
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// CanonicalJSONValue wraps JSON text that is already canonical (compact, object keys sorted,
// numbers as the producer writes them). Parsers that build canonical JSON themselves use it to avoid
// a decode and re-encode per value; anything else should call ParseJSONValue.
func CanonicalJSONValue(canonical string) Value { return Value{json: canonical} }

// normaliseNumbers rewrites JSON numbers canonically: integers that fit int64 in decimal, others as
// encoding/json writes a float64. Numbers too large for float64 keep their text.
func normaliseNumbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		if f, err := x.Float64(); err == nil {
			if f == float64(int64(f)) && f >= -1<<53 && f <= 1<<53 {
				return int64(f)
			}
			return f
		}
		return x
	case []any:
		for i := range x {
			x[i] = normaliseNumbers(x[i])
		}
	case map[string]any:
		for k := range x {
			x[k] = normaliseNumbers(x[k])
		}
	}
	return v
}
