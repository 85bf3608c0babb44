package main

import (
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/trailers/ledger"
)

// appendFieldJSON appends one field of `parley ledger --json`: exactly the bytes
// json.MarshalIndent(fieldOf(h), "    ", "  ") gives, the field as it sits in the whole report
// (FuzzLedgerJSONEncoderMatchesMarshalIndent holds it to that, for any strings and values).
//
// It is written by hand because encoding/json was a third of the command's CPU on a large
// repository (onedr0p/home-ops: 315,446 claims, a 309 MB report): for every claim it built a
// ClaimJSON, walked it by reflection, re-read each value's bytes to compact them, and then scanned
// the whole text again to indent it. Here each claim is appended once, straight from the entry, and
// only a value that is an object or an array is scanned (to indent it). encoding/json has no way to
// do that without reflection, and no maintained library writes encoding/json's exact bytes.
//
// Its rules are encoding/json's: keys in struct order, omitempty as the tags in fieldReport,
// claimReport and core.ClaimJSON say, strings escaped with HTML escaping (<, >, & and U+2028/U+2029
// as \u00XX and \u202X, invalid UTF-8 as \ufffd), a value's JSON compacted, HTML-escaped and
// re-indented at its depth, and empty objects and arrays written as {} and [].
func appendFieldJSON(dst []byte, h ledger.FieldHistory) ([]byte, error) {
	const depth = 0
	fc := fieldCache{field: h.Field, text: h.Field.String(), ok: true}
	dst = append(dst, '{')
	dst = appendKey(dst, depth+1, "field")
	dst = appendJSONString(dst, fc.text)
	dst = append(dst, ',')
	dst = appendKey(dst, depth+1, "history")
	var err error
	if len(h.Entries) == 0 {
		dst = append(dst, "[]"...)
	} else {
		dst = append(dst, '[')
		for i, e := range h.Entries {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendNewline(dst, depth+2)
			if dst, err = appendClaimReport(dst, e, depth+2, &fc); err != nil {
				return dst, err
			}
		}
		dst = appendNewline(dst, depth+1)
		dst = append(dst, ']')
	}
	if i := currentIndex(h); i >= 0 {
		dst = append(dst, ',')
		dst = appendKey(dst, depth+1, "current")
		if dst, err = appendClaimReport(dst, h.Entries[i], depth+1, &fc); err != nil {
			return dst, err
		}
	}
	dst = appendNewline(dst, depth)
	return append(dst, '}'), nil
}

// fieldCache keeps the last field's address: a history's entries are all on its field, and an
// address is worth making once, not once per claim (core.Field.String builds it each time).
type fieldCache struct {
	field core.Field
	text  string
	ok    bool
}

func (fc *fieldCache) string(f core.Field) string {
	if !fc.ok || fc.field != f {
		fc.field, fc.text, fc.ok = f, f.String(), true
	}
	return fc.text
}

// appendClaimReport appends claimOf(e) (a claimReport) whose braces sit at depth.
func appendClaimReport(dst []byte, e ledger.Entry, depth int, fc *fieldCache) ([]byte, error) {
	dst = append(dst, '{')
	dst = appendKey(dst, depth+1, "claim")
	dst, err := appendClaimJSON(dst, e.Claim, depth+1, fc)
	if err != nil {
		return dst, err
	}
	dst = append(dst, ',')
	dst = appendKey(dst, depth+1, "subject")
	dst = appendJSONString(dst, e.Subject)
	dst = append(dst, ',')
	dst = appendKey(dst, depth+1, "changed")
	dst = strconv.AppendBool(dst, e.Changed)
	dst = append(dst, ',')
	dst = appendKey(dst, depth+1, "intent_declared")
	dst = strconv.AppendBool(dst, e.IntentDeclared)
	if e.Parents > 1 {
		dst = append(dst, ',')
		dst = appendKey(dst, depth+1, "merge")
		dst = append(dst, "true"...)
	}
	dst = appendNewline(dst, depth)
	return append(dst, '}'), nil
}

// appendClaimJSON appends c.JSON() (a core.ClaimJSON) whose braces sit at depth.
func appendClaimJSON(dst []byte, c core.Claim, depth int, fc *fieldCache) ([]byte, error) {
	in := depth + 1
	dst = append(dst, '{')
	dst = appendKey(dst, in, "field")
	if c.Field.IsZero() {
		dst = append(dst, `""`...)
	} else {
		dst = appendJSONString(dst, fc.string(c.Field))
	}

	id := c.Actor.Identity
	dst = append(dst, ',')
	dst = appendKey(dst, in, "actor")
	dst = append(dst, '{')
	dst = appendKey(dst, in+1, "source")
	dst = appendJSONString(dst, string(id.Source))
	dst = append(dst, ',')
	dst = appendKey(dst, in+1, "id")
	dst = appendJSONString(dst, id.ID)
	if id.Name != "" {
		dst = append(dst, ',')
		dst = appendKey(dst, in+1, "name")
		dst = appendJSONString(dst, id.Name)
	}
	if len(id.Groups) > 0 {
		dst = append(dst, ',')
		dst = appendKey(dst, in+1, "groups")
		dst = appendStrings(dst, id.Groups, in+1)
	}
	if c.Actor.Name != "" {
		dst = append(dst, ',')
		dst = appendKey(dst, in+1, "policy_actor")
		dst = appendJSONString(dst, c.Actor.Name)
	}
	dst = appendNewline(dst, in)
	dst = append(dst, '}')

	switch {
	case c.Value.IsExpr():
		dst = append(dst, ',')
		dst = appendKey(dst, in, "expr")
		dst = appendJSONString(dst, c.Value.Expr())
	case !c.Value.Absent():
		dst = append(dst, ',')
		dst = appendKey(dst, in, "value")
		var err error
		if dst, err = appendRawJSON(dst, c.Value.JSON(), in); err != nil {
			return dst, fmt.Errorf("value of %s at %s: %w", c.Field, c.Evidence.Commit, err)
		}
	}
	if c.Yield {
		dst = append(dst, ',')
		dst = appendKey(dst, in, "yield")
		dst = append(dst, "true"...)
	}
	if c.Value.Absent() && !c.Yield {
		dst = append(dst, ',')
		dst = appendKey(dst, in, "remove")
		dst = append(dst, "true"...)
	}
	if c.Intent != "" {
		dst = append(dst, ',')
		dst = appendKey(dst, in, "intent")
		dst = appendJSONString(dst, string(c.Intent))
	}
	if m := c.Motivation; !m.IsZero() {
		dst = append(dst, ',')
		dst = appendKey(dst, in, "motivation")
		dst = append(dst, '{')
		dst = appendKey(dst, in+1, "kind")
		dst = appendJSONString(dst, m.Kind)
		if m.Ref != "" {
			dst = append(dst, ',')
			dst = appendKey(dst, in+1, "ref")
			dst = appendJSONString(dst, m.Ref)
		}
		if m.Severity != "" {
			dst = append(dst, ',')
			dst = appendKey(dst, in+1, "severity")
			dst = appendJSONString(dst, string(m.Severity))
		}
		dst = appendNewline(dst, in)
		dst = append(dst, '}')
	}
	if !c.At.IsZero() {
		dst = append(dst, ',')
		dst = appendKey(dst, in, "at")
		dst = appendTime(dst, c.At)
	}
	if !c.Expires.IsZero() {
		dst = append(dst, ',')
		dst = appendKey(dst, in, "expires")
		dst = appendTime(dst, c.Expires)
	}
	if ev := c.Evidence; ev.Source != "" || ev.Commit != "" || ev.PR != 0 || len(ev.EventIDs) > 0 || ev.Explicit || ev.Proposal != "" {
		dst = append(dst, ',')
		dst = appendKey(dst, in, "evidence")
		dst = append(dst, '{')
		first := true
		next := func(key string) {
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst = appendKey(dst, in+1, key)
		}
		if ev.Source != "" {
			next("source")
			dst = appendJSONString(dst, ev.Source)
		}
		if ev.Commit != "" {
			next("commit")
			dst = appendJSONString(dst, ev.Commit)
		}
		if ev.PR != 0 {
			next("pr")
			dst = strconv.AppendInt(dst, int64(ev.PR), 10)
		}
		if len(ev.EventIDs) > 0 {
			next("event_ids")
			dst = appendStrings(dst, ev.EventIDs, in+1)
		}
		if ev.Explicit {
			next("explicit")
			dst = append(dst, "true"...)
		}
		if ev.Proposal != "" {
			next("proposal")
			dst = appendJSONString(dst, ev.Proposal)
		}
		dst = appendNewline(dst, in)
		dst = append(dst, '}')
	}
	dst = appendNewline(dst, depth)
	return append(dst, '}'), nil
}

// appendTime writes a time as core.Claim.JSON does: in UTC, RFC 3339 with the precision it has.
func appendTime(dst []byte, t time.Time) []byte {
	var b [64]byte
	return appendJSONString(dst, string(t.UTC().AppendFormat(b[:0], time.RFC3339Nano)))
}

// appendStrings writes a non-empty []string whose brackets sit at depth.
func appendStrings(dst []byte, ss []string, depth int) []byte {
	dst = append(dst, '[')
	for i, s := range ss {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendNewline(dst, depth+1)
		dst = appendJSONString(dst, s)
	}
	dst = appendNewline(dst, depth)
	return append(dst, ']')
}

// fieldPrefix is the indent of a field's braces in the report: the prefix writeLedgerJSON gives
// json.MarshalIndent for each field.
const fieldPrefix = "    "

// appendNewline starts a line at depth levels of two spaces inside a field.
func appendNewline(dst []byte, depth int) []byte {
	dst = append(dst, '\n')
	dst = append(dst, fieldPrefix...)
	for range depth {
		dst = append(dst, ' ', ' ')
	}
	return dst
}

// appendKey starts a member: a new line at depth, the key (plain ASCII: no escaping) and ": ".
func appendKey(dst []byte, depth int, key string) []byte {
	dst = appendNewline(dst, depth)
	dst = append(dst, '"')
	dst = append(dst, key...)
	return append(dst, '"', ':', ' ')
}

const hexDigits = "0123456789abcdef"

// jsonSafe[b] is true for the ASCII bytes encoding/json writes as they are with HTML escaping on.
var jsonSafe = func() (t [utf8.RuneSelf]bool) {
	for b := 0x20; b < utf8.RuneSelf; b++ {
		t[b] = b != '"' && b != '\\' && b != '<' && b != '>' && b != '&'
	}
	return t
}()

// appendJSONString appends s as encoding/json writes a string with HTML escaping on.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		// Most text needs no escaping: skip it eight bytes at a time.
		for i+8 <= len(s) && !needsEscape8(s[i:i+8]) {
			i += 8
		}
		if i >= len(s) {
			break
		}
		if b := s[i]; b < utf8.RuneSelf {
			if jsonSafe[b] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// needsEscape8 reports whether any of the eight bytes of s is not written as it is in a JSON
// string: a control character, ", \, <, >, & or a byte of a multi-byte rune (which may be U+2028,
// U+2029 or invalid UTF-8). It tests the eight at once (the bit tricks are Mycroft's "has a zero
// byte" and "has a byte less than n").
func needsEscape8(s string) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	x := uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
	if x&highs != 0 {
		return true
	}
	hasZero := func(v uint64) bool { return (v-ones)&^v&highs != 0 }
	return (x-ones*0x20)&^x&highs != 0 || // a byte below 0x20
		hasZero(x^(ones*'"')) || hasZero(x^(ones*'\\')) || hasZero(x^(ones*'<')) || hasZero(x^(ones*'>')) || hasZero(x^(ones*'&'))
}

// maxRawDepth is encoding/json's limit on nesting: deeper documents are errors.
const maxRawDepth = 10000

var errRawJSON = errors.New("not a JSON value")

// appendRawJSON appends raw, JSON text, as json.MarshalIndent writes a json.RawMessage at depth:
// checked, compacted, with <, >, & and U+2028/U+2029 escaped, and indented. Invalid JSON is an
// error, as it is for encoding/json.
func appendRawJSON(dst []byte, raw string, depth int) ([]byte, error) {
	r := rawWriter{src: raw, dst: dst}
	r.space()
	// Each level of indent is a container around the value, and encoding/json's limit counts them
	// too (MarshalIndent scans the whole document).
	if err := r.value(depth, depth+1); err != nil {
		return dst, err
	}
	r.space()
	if r.i != len(r.src) {
		return dst, fmt.Errorf("%w: data after the value at offset %d", errRawJSON, r.i)
	}
	return r.dst, nil
}

type rawWriter struct {
	src string
	i   int
	dst []byte
}

func (r *rawWriter) space() {
	for r.i < len(r.src) {
		switch r.src[r.i] {
		case ' ', '\t', '\n', '\r':
			r.i++
		default:
			return
		}
	}
}

func (r *rawWriter) fail(what string) error {
	if r.i >= len(r.src) {
		return fmt.Errorf("%w: unexpected end (%s)", errRawJSON, what)
	}
	return fmt.Errorf("%w: %s at offset %d", errRawJSON, what, r.i)
}

// value writes one value whose first line is already started, at depth; nesting counts the
// containers it is in, itself included.
func (r *rawWriter) value(depth, nesting int) error {
	if r.i >= len(r.src) {
		return r.fail("a value")
	}
	switch c := r.src[r.i]; {
	case c == '{' || c == '[':
		if nesting > maxRawDepth {
			return r.fail("nesting too deep")
		}
		return r.container(c, depth, nesting)
	case c == '"':
		return r.str()
	case c == '-' || c >= '0' && c <= '9':
		return r.number()
	case c == 't':
		return r.literal("true")
	case c == 'f':
		return r.literal("false")
	case c == 'n':
		return r.literal("null")
	}
	return r.fail("a value")
}

func (r *rawWriter) container(open byte, depth, nesting int) error {
	close := byte('}')
	if open == '[' {
		close = ']'
	}
	r.i++
	r.dst = append(r.dst, open)
	r.space()
	if r.i < len(r.src) && r.src[r.i] == close {
		r.i++
		r.dst = append(r.dst, close)
		return nil
	}
	for {
		r.dst = appendNewline(r.dst, depth+1)
		if open == '{' {
			if r.i >= len(r.src) || r.src[r.i] != '"' {
				return r.fail("a key")
			}
			if err := r.str(); err != nil {
				return err
			}
			r.space()
			if r.i >= len(r.src) || r.src[r.i] != ':' {
				return r.fail("':' after a key")
			}
			r.i++
			r.dst = append(r.dst, ':', ' ')
			r.space()
		}
		if err := r.value(depth+1, nesting+1); err != nil {
			return err
		}
		r.space()
		if r.i >= len(r.src) {
			return r.fail("',' or the end of the container")
		}
		switch r.src[r.i] {
		case ',':
			r.i++
			r.dst = append(r.dst, ',')
			r.space()
		case close:
			r.i++
			r.dst = appendNewline(r.dst, depth)
			r.dst = append(r.dst, close)
			return nil
		default:
			return r.fail("',' or the end of the container")
		}
	}
}

// str copies a string, checking its escapes and escaping what compacting with HTML escaping does.
func (r *rawWriter) str() error {
	start := r.i
	r.i++
	for r.i < len(r.src) {
		c := r.src[r.i]
		switch {
		case c == '"':
			r.i++
			r.dst = append(r.dst, r.src[start:r.i]...)
			return nil
		case c < 0x20:
			return r.fail("a control character in a string")
		case c == '\\':
			if r.i+1 >= len(r.src) {
				return r.fail("an escape")
			}
			switch r.src[r.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				r.i += 2
			case 'u':
				if r.i+6 > len(r.src) || !isHex(r.src[r.i+2]) || !isHex(r.src[r.i+3]) || !isHex(r.src[r.i+4]) || !isHex(r.src[r.i+5]) {
					r.i++
					return r.fail("four hex digits after \\u")
				}
				r.i += 6
			default:
				r.i++
				return r.fail("an escape")
			}
		case c == '<' || c == '>' || c == '&':
			r.dst = append(r.dst, r.src[start:r.i]...)
			r.dst = append(r.dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			r.i++
			start = r.i
		case c == 0xE2 && r.i+2 < len(r.src) && r.src[r.i+1] == 0x80 && r.src[r.i+2]&^1 == 0xA8:
			r.dst = append(r.dst, r.src[start:r.i]...)
			r.dst = append(r.dst, '\\', 'u', '2', '0', '2', hexDigits[r.src[r.i+2]&0xF])
			r.i += 3
			start = r.i
		default:
			r.i++
		}
	}
	return r.fail("the end of a string")
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// number copies a number of JSON's grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (r *rawWriter) number() error {
	s, start := r.src, r.i
	digits := func() bool {
		n := r.i
		for r.i < len(s) && isDigit(s[r.i]) {
			r.i++
		}
		return r.i > n
	}
	if s[r.i] == '-' {
		r.i++
	}
	switch {
	case r.i < len(s) && s[r.i] == '0':
		r.i++
	case !digits():
		return r.fail("a digit")
	}
	if r.i < len(s) && s[r.i] == '.' {
		r.i++
		if !digits() {
			return r.fail("a digit after '.'")
		}
	}
	if r.i < len(s) && (s[r.i] == 'e' || s[r.i] == 'E') {
		r.i++
		if r.i < len(s) && (s[r.i] == '+' || s[r.i] == '-') {
			r.i++
		}
		if !digits() {
			return r.fail("a digit in the exponent")
		}
	}
	r.dst = append(r.dst, s[start:r.i]...)
	return nil
}

func (r *rawWriter) literal(lit string) error {
	if len(r.src)-r.i < len(lit) || r.src[r.i:r.i+len(lit)] != lit {
		return r.fail("true, false or null")
	}
	r.i += len(lit)
	r.dst = append(r.dst, lit...)
	return nil
}
