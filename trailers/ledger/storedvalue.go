package ledger

import (
	"strconv"
	"unicode/utf8"

	"github.com/parleyhq/parley/core"
)

// storedValue is a claim's value as the index holds it: an expression, JSON text, or absent.
func storedValue(vjson, vexpr string) (core.Value, error) {
	switch {
	case vexpr != "":
		return core.ExprValue(vexpr), nil
	case vjson == "":
		return core.Value{}, nil
	case isCanonicalJSON(vjson):
		// Already what core.ParseJSONValue would make of it, as nearly every stored value is:
		// decoding and re-encoding it to learn so was a tenth of reading a large ledger's fields.
		return core.CanonicalJSONValue(vjson), nil
	}
	return core.ParseJSONValue([]byte(vjson))
}

// maxCanonicalDepth bounds the nesting isCanonicalJSON follows; deeper values take the slow path.
const maxCanonicalDepth = 64

// isCanonicalJSON reports whether s is, byte for byte, what core.ParseJSONValue gives for it. It
// answers yes only for the forms that are plainly canonical: no whitespace, integers in int64
// (not -0), strings that encoding/json would write the same way, objects with keys without escapes
// in strictly increasing order, and arrays of such values. Anything else (floats, exponents,
// escapes encoding/json does not write, deep nesting) answers no and goes through ParseJSONValue,
// which is always right. FuzzCanonicalJSON holds it to that.
func isCanonicalJSON(s string) bool {
	n, ok := canonicalValue(s, 0, 0)
	return ok && n == len(s)
}

// canonicalValue checks the canonical value at s[i:] and returns where it ends.
func canonicalValue(s string, i, depth int) (int, bool) {
	if i >= len(s) {
		return 0, false
	}
	switch c := s[i]; {
	case c == '"':
		return canonicalString(s, i, false)
	case c == '-' || c >= '0' && c <= '9':
		return canonicalInteger(s, i)
	case c == 't':
		return literalAt(s, i, "true")
	case c == 'f':
		return literalAt(s, i, "false")
	case c == 'n':
		return literalAt(s, i, "null")
	case c == '[':
		if depth >= maxCanonicalDepth {
			return 0, false
		}
		i++
		if i < len(s) && s[i] == ']' {
			return i + 1, true
		}
		for {
			var ok bool
			if i, ok = canonicalValue(s, i, depth+1); !ok || i >= len(s) {
				return 0, false
			}
			switch s[i] {
			case ',':
				i++
			case ']':
				return i + 1, true
			default:
				return 0, false
			}
		}
	case c == '{':
		if depth >= maxCanonicalDepth {
			return 0, false
		}
		i++
		if i < len(s) && s[i] == '}' {
			return i + 1, true
		}
		prevKey := ""
		for first := true; ; first = false {
			if i >= len(s) || s[i] != '"' {
				return 0, false
			}
			end, ok := canonicalString(s, i, true)
			if !ok {
				return 0, false
			}
			// Without escapes a key's bytes are the key: encoding/json sorts maps by them, and a
			// repeated key would be dropped by decoding.
			key := s[i+1 : end-1]
			if !first && key <= prevKey {
				return 0, false
			}
			prevKey = key
			if i = end; i >= len(s) || s[i] != ':' {
				return 0, false
			}
			if i, ok = canonicalValue(s, i+1, depth+1); !ok || i >= len(s) {
				return 0, false
			}
			switch s[i] {
			case ',':
				i++
			case '}':
				return i + 1, true
			default:
				return 0, false
			}
		}
	}
	return 0, false
}

func literalAt(s string, i int, lit string) (int, bool) {
	if len(s)-i < len(lit) || s[i:i+len(lit)] != lit {
		return 0, false
	}
	return i + len(lit), true
}

// canonicalInteger checks an integer as encoding/json writes an int64: no leading zeros, no -0.
func canonicalInteger(s string, i int) (int, bool) {
	start := i
	if s[i] == '-' {
		i++
	}
	digits := i
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	switch {
	case i == digits, s[digits] == '0' && (i-digits > 1 || digits > start):
		return 0, false // no digits, a leading zero, or -0
	case i < len(s) && (s[i] == '.' || s[i] == 'e' || s[i] == 'E'):
		return 0, false // a float: its canonical form is encoding/json's float64 formatting
	}
	if _, err := strconv.ParseInt(s[start:i], 10, 64); err != nil {
		return 0, false
	}
	return i, true
}

// canonicalString checks a string as encoding/json writes it with HTML escaping: printable ASCII
// as itself except ", \, <, > and &; valid UTF-8 but U+2028 and U+2029 as itself; and only the
// escapes \", \\, \n, \r, \t and \u003c, \u003e, \u0026 (a key: no escapes at all). Other escapes
// encoding/json also writes (\b, \f, \u00XX, \u2028, \ufffd) are rare enough to leave to the
// slow path.
func canonicalString(s string, i int, key bool) (int, bool) {
	i++
	for i < len(s) {
		c := s[i]
		switch {
		case c == '"':
			return i + 1, true
		case c == '\\':
			if key || i+1 >= len(s) {
				return 0, false
			}
			switch s[i+1] {
			case '"', '\\', 'n', 'r', 't':
				i += 2
			case 'u':
				if len(s)-i < 6 {
					return 0, false
				}
				switch s[i+2 : i+6] {
				case "003c", "003e", "0026":
					i += 6
				default:
					return 0, false
				}
			default:
				return 0, false
			}
		case c < 0x20 || c == '<' || c == '>' || c == '&' || c == 0x7f:
			return 0, false
		case c < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 || r == '\u2028' || r == '\u2029' {
				return 0, false
			}
			i += size
		}
	}
	return 0, false
}
