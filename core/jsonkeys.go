package core

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// DuplicateKeyError is UniqueKeys' answer to an object that names a key twice. encoding/json
// keeps the last of the two silently, so a claim with "at" twice would be judged at whichever
// date its writer put last, while a reviewer reading the first saw another.
type DuplicateKeyError struct {
	Key  string // the key, as decoded
	Path string // where the object is: "$", "$.claims[2]", "$.git[0].actor"
}

func (e *DuplicateKeyError) Error() string {
	return fmt.Sprintf("duplicate key %s in the object at %s", strconv.Quote(e.Key), e.Path)
}

// maxJSONDepth is how deeply UniqueKeys follows nesting, encoding/json's own limit.
const maxJSONDepth = 10000

// UniqueKeys reports the first object in the JSON value data that names a key twice (a
// *DuplicateKeyError, errors.Is ErrDuplicateKey), or a syntax error. Decoders call it before
// decoding and return only the duplicate: their own decoding says better where a syntax error is. Keys are compared as decoded, so "a" and "\u0061" are
// the same key. It reads only the first value: callers check for trailing data as they already do.
//
// Written here because encoding/json (v1) accepts duplicates and offers no option against them;
// encoding/json/v2 refuses them but is still an experiment behind GOEXPERIMENT.
//
// Every admission review and drift event passes here, so the common answer (a well-formed object
// or array naming each key once) comes from uniqueKeysFast, one pass over the bytes that
// allocates only for a large object's keys; anything it is not sure of (a syntax error, a
// duplicate, a top-level scalar, nesting past the limit) is read again by uniqueKeysTokens, whose
// answer is the one returned. json.Decoder's tokens cost several times the decode itself.
func UniqueKeys(data []byte) error {
	if uniqueKeysFast(data) {
		return nil
	}
	return uniqueKeysTokens(data)
}

// uniqueKeysTokens is UniqueKeys on encoding/json's tokens: exact errors, built only when needed.
func uniqueKeysTokens(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // numbers are skipped; no float parsing
	type frame struct {
		object bool
		keys   map[string]bool
		index  int    // the next element's index, in an array
		key    string // the last key read, in an object
		want   bool   // an object expects a key next
	}
	var stack []frame
	// at is the path the first n frames lead to: each frame's current key or index is the step to
	// the frame above it. Paths are built only for an error: a path kept per frame cost the square
	// of the depth (20 kB of '[' allocated 153 MB).
	at := func(n int) string {
		var b strings.Builder
		b.WriteByte('$')
		for _, f := range stack[:n] {
			switch {
			case !f.object:
				b.WriteString("[" + strconv.Itoa(f.index) + "]")
			case isIdent(f.key):
				b.WriteString("." + f.key)
			default:
				b.WriteString("[" + strconv.Quote(f.key) + "]")
			}
		}
		return b.String()
	}
	// path is the path of the top frame's value.
	path := func() string { return at(max(len(stack)-1, 0)) }
	// valueDone moves the top frame past the value just read.
	valueDone := func() {
		if len(stack) == 0 {
			return
		}
		top := &stack[len(stack)-1]
		if top.object {
			top.want = true
		} else {
			top.index++
		}
	}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			if len(stack) > 0 {
				return fmt.Errorf("JSON ends inside the value at %s: %w", path(), io.ErrUnexpectedEOF)
			}
			return errors.New("no JSON value")
		}
		if err != nil {
			return err
		}
		if len(stack) > 0 && stack[len(stack)-1].object && stack[len(stack)-1].want {
			top := &stack[len(stack)-1]
			if k, ok := tok.(string); ok {
				if top.keys[k] {
					return &DuplicateKeyError{Key: k, Path: path()}
				}
				top.keys[k] = true
				top.key, top.want = k, false
				continue
			}
			// Only '}' can stand where a key is due; the decoder refuses anything else.
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			if len(stack) >= maxJSONDepth {
				return fmt.Errorf("JSON nested deeper than %d levels at %s", maxJSONDepth, path())
			}
			if tok == json.Delim('{') {
				stack = append(stack, frame{object: true, keys: map[string]bool{}, want: true})
			} else {
				stack = append(stack, frame{})
			}
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			valueDone()
			if len(stack) == 0 {
				return nil
			}
		default:
			valueDone()
			if len(stack) == 0 {
				return nil
			}
		}
	}
}

// isIdent reports whether k can follow a dot in a path.
func isIdent(k string) bool {
	return k != "" && !strings.ContainsFunc(k, func(r rune) bool {
		return !(r == '_' || r == '-' || '0' <= r && r <= '9' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z')
	})
}

// ErrDuplicateKey is matched by every *DuplicateKeyError (errors.Is).
var ErrDuplicateKey = errors.New("duplicate JSON key")

// Is makes errors.Is(err, ErrDuplicateKey) hold.
func (e *DuplicateKeyError) Is(target error) bool { return target == ErrDuplicateKey }
