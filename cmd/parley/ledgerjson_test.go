package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/trailers/ledger"
)

// historyFromFuzz builds a field history from fuzz input: text goes into every string the report
// has (split on '|' into several), raw into values (as canonical JSON when it is JSON, and as it is),
// and shape picks how many entries there are and what each one is.
func historyFromFuzz(text, raw string, shape []byte) ledger.FieldHistory {
	parts := strings.Split(text, "|")
	str := func(i int) string { return parts[i%len(parts)] }
	next := func() byte {
		if len(shape) == 0 {
			return 0
		}
		b := shape[0]
		shape = shape[1:]
		return b
	}
	num := func() int64 {
		var b [8]byte
		for i := range b {
			b[i] = next()
		}
		return int64(binary.LittleEndian.Uint64(b[:]))
	}
	field := core.K8sField(str(0), str(1), str(2), str(3), "/"+str(4))
	if len(parts)%3 == 0 {
		field = core.TFField(str(5), str(6), "/"+str(7))
	}
	parsed, parseErr := core.ParseJSONValue([]byte(raw))
	zones := []*time.Location{time.UTC, time.FixedZone("x", -7*3600-1800), time.FixedZone("", 13*3600)}
	h := ledger.FieldHistory{Field: field}
	for n := int(next() % 6); len(h.Entries) < n; {
		flags := next()
		k := len(h.Entries)
		e := ledger.Entry{
			Claim: core.Claim{
				Field:  field,
				Actor:  core.Actor{Identity: core.Identity{Source: core.IdentitySource(str(k + 8)), ID: str(k + 9), Name: str(k + 10)}},
				Intent: core.Intent(str(k + 11)),
				Evidence: core.Evidence{Source: str(k + 12), Commit: str(int(flags) % 3), PR: int(int32(num())),
					Explicit: flags&1 != 0},
			},
			Changed:        flags&2 != 0,
			IntentDeclared: flags&4 != 0,
			Subject:        str(k + 13),
			Parents:        int(next() % 4),
		}
		switch next() % 5 {
		case 1:
			e.Value = core.ExprValue(str(k + 14))
		case 2:
			if parseErr == nil {
				e.Value = parsed
			}
		case 3:
			if raw != "" {
				e.Value = core.CanonicalJSONValue(raw)
			}
		case 4:
			e.Value = core.StringValue(raw)
		}
		e.Yield = flags&8 != 0 && e.Value.Absent()
		if flags&16 != 0 {
			e.Motivation = core.Motivation{Kind: str(k + 15), Ref: str(k + 16), Severity: core.Severity(str(k + 17))}
		}
		if flags&32 != 0 {
			e.Actor.Identity.Groups = parts[:1+k%len(parts)]
			e.Actor.Name = str(k + 18)
		}
		if flags&64 != 0 {
			e.Evidence.EventIDs = parts[k%len(parts):]
			e.Evidence.Proposal = str(k + 19)
		}
		if flags&128 != 0 {
			e.Field = core.Field{}
		}
		if at := next(); at != 0 {
			e.At = time.Unix(num()%(400<<32), num()%2e9).In(zones[int(at)%len(zones)])
		}
		if next()%2 == 1 {
			e.Expires = time.Unix(num()%(400<<32), num()%2e9)
		}
		h.Entries = append(h.Entries, e)
	}
	return h
}

// FuzzLedgerJSONEncoderMatchesMarshalIndent holds the hand-written encoder of `ledger --json` to
// the bytes json.MarshalIndent gives the report's field type, for any strings and values: HTML
// escaping, U+2028/U+2029, invalid UTF-8, omitempty, values re-indented at their depth, and values
// that are not JSON (an error both ways).
func FuzzLedgerJSONEncoderMatchesMarshalIndent(f *testing.F) {
	f.Add("apps|Deployment|prod|web|spec/replicas|alice@example.com", `3`, []byte{3, 7, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2})
	f.Add("a<b>&c|\u2028\u2029|\xff\xfe|\"\\\n\t\b\f\x01|é漢字|", `{"a":[1,{"b":null}],"c":{},"d":[],"e":"<&>\u2028"}`,
		[]byte{5, 255, 1, 2, 3, 4, 5, 6, 7, 8, 2, 2, 1, 9, 9, 9, 9, 9, 9, 9, 9, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 3, 3})
	f.Add("x|y|z", " [ 1 , 2.5e3 , -0 , true , \"s\" , [ ] , { } ] ", []byte{4, 0x2a, 0, 0, 0, 0, 0, 0, 0, 0, 3, 3, 0x13, 1, 2, 3})
	f.Add("tf|mod|aws_instance.web|tags/Name|x|y", `{"a":1,}`, []byte{2, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 9, 2, 0, 0, 0, 0, 0, 0, 0, 0, 2, 3})
	f.Fuzz(func(t *testing.T, text, raw string, shape []byte) {
		h := historyFromFuzz(text, raw, shape)
		want, wantErr := json.MarshalIndent(fieldOf(h), fieldPrefix, "  ")
		got, gotErr := appendFieldJSON(nil, h)
		if (wantErr != nil) != (gotErr != nil) {
			t.Fatalf("encoding/json error %v, hand-written encoder error %v", wantErr, gotErr)
		}
		if wantErr == nil && !bytes.Equal(got, want) {
			t.Fatalf("hand-written encoder differs from json.MarshalIndent\n got: %q\nwant: %q", got, want)
		}
	})
}

// TestAppendRawJSONMatchesEncodingJSON checks the value writer on its own against encoding/json for
// the shapes a value can take, valid or not.
func TestAppendRawJSONMatchesEncodingJSON(t *testing.T) {
	// The value sits in an object: 9,999 levels are encoding/json's limit of 10,000 with it.
	deepest := strings.Repeat("[", 9999) + strings.Repeat("]", 9999)
	deep := "[" + deepest + "]"
	for _, raw := range []string{
		`1`, `-0.5e-3`, `"a<b"`, `{"k":[1,2,{"x":{}}],"l":[]}`, " \t{ \"a\" : [ ] }\n", `"\u2028 ` + "\u2028\xff" + `"`,
		`{"a":1,}`, `[1 2]`, `01`, `1.`, `-`, `tru`, `nul`, `"\x"`, `"\u12"`, "\"\x01\"", `{"a"}`, `{1:2}`, `[`, `{`,
		` `, `"abc`, `1 2`, deepest, deep,
	} {
		want, wantErr := json.MarshalIndent(struct {
			V json.RawMessage `json:"v"`
		}{json.RawMessage(raw)}, fieldPrefix, "  ")
		got, gotErr := appendRawJSON([]byte("{\n"+fieldPrefix+`  "v": `), raw, 1)
		if (wantErr != nil) != (gotErr != nil) {
			t.Errorf("%.40q: encoding/json error %v, appendRawJSON error %v", raw, wantErr, gotErr)
			continue
		}
		if wantErr == nil {
			got = append(appendNewline(got, 0), '}')
			if !bytes.Equal(got, want) {
				t.Errorf("%.40q:\n got %q\nwant %q", raw, got, want)
			}
		}
	}
}

// TestAppendJSONStringMatchesEncodingJSON puts each kind of byte encoding/json escapes or replaces
// at every position of the eight-byte blocks appendJSONString skips at once.
func TestAppendJSONStringMatchesEncodingJSON(t *testing.T) {
	for _, special := range []string{"\"", "\\", "<", ">", "&", "\x00", "\x1f", "\n", "\b", "\f", "\x7f", "é", "\u2028", "\u2029", "\xff", "\xe2\x80", "\U0001F600", " ", "~"} {
		for at := range 17 {
			s := strings.Repeat("a", at) + special + strings.Repeat("b", 16-at)
			want, err := json.Marshal(s)
			if err != nil {
				t.Fatal(err)
			}
			if got := appendJSONString(nil, s); !bytes.Equal(got, want) {
				t.Errorf("%q: got %s, want %s", s, got, want)
			}
		}
	}
}
