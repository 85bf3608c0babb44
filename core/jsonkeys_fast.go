package core

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// smallObject is how many keys an object may have before its keys are compared through a map
// rather than with each other: under it the comparisons cost less than hashing.
const smallObject = 16

// keyRef is one key of an open object: data[a:b] when raw, else the decoded key in the scanner's
// arena at [a:b].
type keyRef struct {
	a, b    int
	decoded bool
}

// fastKeys is the state of one uniqueKeysFast pass.
type fastKeys struct {
	data  []byte
	i     int
	keys  []keyRef // the keys of every open object, the innermost last
	arena []byte   // keys that held an escape or a non-ASCII byte, decoded
}

// uniqueKeysFast reports true only when data begins with an object or array that is valid JSON
// (by encoding/json's grammar) and none of whose objects names a key twice, keys compared as
// encoding/json decodes them. False means "not sure": the caller asks uniqueKeysTokens. It reads
// only the first value, as UniqueKeys does.
func uniqueKeysFast(data []byte) bool {
	s := fastKeys{data: data}
	s.space()
	if s.i >= len(data) || (data[s.i] != '{' && data[s.i] != '[') {
		return false // a scalar or nothing at the top: rare, and the token reader's to judge
	}
	return s.value(0)
}

func (s *fastKeys) space() {
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// value reads one value at s.i, depth levels down.
func (s *fastKeys) value(depth int) bool {
	if s.i >= len(s.data) {
		return false
	}
	switch c := s.data[s.i]; {
	case c == '{':
		return depth < maxJSONDepth && s.object(depth+1)
	case c == '[':
		return depth < maxJSONDepth && s.array(depth+1)
	case c == '"':
		_, _, ok := s.str()
		return ok
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	default:
		return s.number()
	}
}

func (s *fastKeys) literal(word string) bool {
	if !bytes.HasPrefix(s.data[s.i:], []byte(word)) {
		return false
	}
	s.i += len(word)
	return true
}

// number reads -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *fastKeys) number() bool {
	d := s.data
	if s.i < len(d) && d[s.i] == '-' {
		s.i++
	}
	switch {
	case s.i < len(d) && d[s.i] == '0':
		s.i++
	case s.i < len(d) && '1' <= d[s.i] && d[s.i] <= '9':
		s.digits()
	default:
		return false
	}
	if s.i < len(d) && d[s.i] == '.' {
		s.i++
		if !s.digits() {
			return false
		}
	}
	if s.i < len(d) && (d[s.i] == 'e' || d[s.i] == 'E') {
		s.i++
		if s.i < len(d) && (d[s.i] == '+' || d[s.i] == '-') {
			s.i++
		}
		if !s.digits() {
			return false
		}
	}
	return true
}

// digits reads one or more digits.
func (s *fastKeys) digits() bool {
	start := s.i
	for s.i < len(s.data) && '0' <= s.data[s.i] && s.data[s.i] <= '9' {
		s.i++
	}
	return s.i > start
}

// str reads a string at s.i (its opening quote) and returns its bytes between the quotes, and
// whether they hold an escape or a byte past ASCII (so that its decoded form may differ).
func (s *fastKeys) str() (raw []byte, escaped, ok bool) {
	d := s.data
	start := s.i + 1
	for j := start; j < len(d); j++ {
		switch c := d[j]; {
		case c == '"':
			s.i = j + 1
			return d[start:j], escaped, true
		case c < 0x20:
			return nil, false, false
		case c >= utf8.RuneSelf:
			escaped = true
		case c == '\\':
			escaped = true
			if j+1 >= len(d) {
				return nil, false, false
			}
			switch d[j+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				j++
			case 'u':
				if j+5 >= len(d) {
					return nil, false, false
				}
				for _, h := range d[j+2 : j+6] {
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
						return nil, false, false
					}
				}
				j += 5
			default:
				return nil, false, false
			}
		}
	}
	return nil, false, false
}

func (s *fastKeys) array(depth int) bool {
	s.i++ // '['
	s.space()
	if s.i < len(s.data) && s.data[s.i] == ']' {
		s.i++
		return true
	}
	for {
		s.space()
		if !s.value(depth) {
			return false
		}
		s.space()
		if s.i >= len(s.data) {
			return false
		}
		switch s.data[s.i] {
		case ',':
			s.i++
		case ']':
			s.i++
			return true
		default:
			return false
		}
	}
}

func (s *fastKeys) object(depth int) bool {
	s.i++ // '{'
	first := len(s.keys)
	defer func() { s.keys = s.keys[:first] }()
	var big map[string]struct{} // the keys, once the object has more than smallObject
	s.space()
	if s.i < len(s.data) && s.data[s.i] == '}' {
		s.i++
		return true
	}
	for {
		s.space()
		if s.i >= len(s.data) || s.data[s.i] != '"' {
			return false
		}
		raw, escaped, ok := s.str()
		if !ok {
			return false
		}
		k := keyRef{a: s.i - 1 - len(raw), b: s.i - 1}
		if escaped {
			// As encoding/json decodes it: escapes resolved, invalid UTF-8 as U+FFFD.
			var dec string
			if json.Unmarshal(s.data[k.a-1:k.b+1], &dec) != nil {
				return false
			}
			k = keyRef{a: len(s.arena), decoded: true}
			s.arena = append(s.arena, dec...)
			k.b = len(s.arena)
		}
		key := s.bytes(k)
		switch {
		case big != nil:
			if _, dup := big[string(key)]; dup {
				return false
			}
			big[string(key)] = struct{}{}
		default:
			for _, o := range s.keys[first:] {
				if bytes.Equal(s.bytes(o), key) {
					return false
				}
			}
			s.keys = append(s.keys, k)
			if len(s.keys)-first > smallObject {
				big = make(map[string]struct{}, 2*smallObject)
				for _, o := range s.keys[first:] {
					big[string(s.bytes(o))] = struct{}{}
				}
			}
		}
		s.space()
		if s.i >= len(s.data) || s.data[s.i] != ':' {
			return false
		}
		s.i++
		s.space()
		if !s.value(depth) {
			return false
		}
		s.space()
		if s.i >= len(s.data) {
			return false
		}
		switch s.data[s.i] {
		case ',':
			s.i++
		case '}':
			s.i++
			return true
		default:
			return false
		}
	}
}

func (s *fastKeys) bytes(k keyRef) []byte {
	if k.decoded {
		return s.arena[k.a:k.b]
	}
	return s.data[k.a:k.b]
}
