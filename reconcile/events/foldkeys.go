package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// Keys that fill one struct field twice.
//
// encoding/json fills a struct field from any key equal to its name without regard to case
// (bytes.EqualFold, Unicode simple folding, so "ſ" is an "s"), so {"object": A, "OBJECT": B}
// fills Object twice. Which one stands depends on the field's type: the last for Parley's trees,
// the first that is not null for runtime.RawExtension, which the official admission types use.
// core.UniqueKeys compares keys exactly and passes such a review, and the API server never sends
// one (it encodes the objects it decoded, each key once). A review like it would be judged on one
// object while a person, or another webhook, reads the other: it is refused, as a duplicate key is.

// errFoldedTwice marks a review refused because two of its keys fill one field.
var errFoldedTwice = errors.New("two keys fill one field (keys are matched to fields without regard to case)")

// reviewFields are the keys encoding/json matches to the fields of review and reviewRequest (and
// of rawReview, which shares them), by the object they are read from.
var reviewFields = map[string][]string{
	"review":           {"kind", "apiVersion", "request"},
	"request":          {"uid", "resource", "subResource", "name", "namespace", "operation", "userInfo", "object", "oldObject", "dryRun", "options"},
	"request.resource": {"group", "resource"},
	"request.userInfo": {"username", "groups"},
}

// longestField and shortestField are the longest and shortest names in reviewFields, in bytes.
const longestField, shortestField = len("subResource"), len("uid")

// fieldsByLength holds reviewFields' names by their length: mayFoldTwice compares a string only
// with the names of its length, without a map lookup per string.
var fieldsByLength = func() [longestField + 1][]string {
	var out [longestField + 1][]string
	for _, names := range reviewFields {
		for _, f := range names {
			if !slices.Contains(out[len(f)], f) {
				out[len(f)] = append(out[len(f)], f)
			}
		}
	}
	return out
}()

// checkFoldedKeys refuses a review in which two keys fill one of its struct fields. Most reviews
// are answered by mayFoldTwice, one pass over the bytes; the few it cannot clear are read key by
// key.
func checkFoldedKeys(body []byte) error {
	if !mayFoldTwice(body) {
		return nil
	}
	return foldedTwice(body)
}

// mayFoldTwice reports false only when no JSON string in body could be a second spelling of a
// field name: every string naming a field (without regard to case) spells it exactly, and none
// short enough to fold to one holds an escape or a non-ASCII byte (which could decode or fold to
// one: "\u004fbject", "ſubResource"). A key spelt exactly twice in one object is core.UniqueKeys'
// to refuse, which the admission door runs first.
func mayFoldTwice(body []byte) bool {
	for i := 0; i < len(body); i++ {
		q := bytes.IndexByte(body[i:], '"')
		if q < 0 {
			return false
		}
		i += q
		start, plain := i+1, true
		for i++; i < len(body) && body[i] != '"'; i++ {
			switch c := body[i]; {
			case c == '\\':
				plain = false
				i++ // the escaped byte cannot end the string
			case c >= utf8.RuneSelf:
				plain = false
			}
		}
		s := body[start:min(i, len(body))]
		switch {
		case !plain:
			if len(s) <= 6*longestField { // \uXXXX is six bytes per letter
				return true
			}
		case len(s) <= longestField && len(s) >= shortestField:
			for _, f := range fieldsByLength[len(s)] {
				// s is ASCII here: its first letter in either case, before the whole comparison.
				if s[0]|0x20 == f[0]|0x20 && string(s) != f && bytes.EqualFold(s, []byte(f)) {
					return true
				}
			}
		}
	}
	return false
}

// foldedTwice reads the review's objects that decode into structs key by key and refuses the
// first one in which two keys fill one field. It runs on a body that has decoded, so its keys
// read too; if they ever did not, the review is refused, not passed unread.
func foldedTwice(body []byte) error {
	d := json.NewDecoder(bytes.NewReader(body))
	if err := foldedIn(d, "review"); err != nil {
		if errors.Is(err, errFoldedTwice) {
			return err
		}
		return fmt.Errorf("reading its keys: %w", err)
	}
	return nil
}

// foldedIn reads the value at d's position: an object of reviewFields[level] is checked, and
// those of its keys whose values are objects of a level below are read the same way; any other
// value is skipped.
func foldedIn(d *json.Decoder, level string) error {
	tok, err := d.Token()
	if err != nil {
		return err
	}
	names, checked := reviewFields[level]
	if tok != json.Delim('{') {
		if delim, ok := tok.(json.Delim); ok && (delim == '[' || delim == '{') {
			return skipRest(d)
		}
		return nil
	}
	seen := map[string]string{} // field name -> the key that filled it
	for d.More() {
		tok, err := d.Token()
		if err != nil {
			return err
		}
		key, _ := tok.(string)
		field := ""
		if checked {
			for _, f := range names {
				if strings.EqualFold(key, f) {
					field = f
					break
				}
			}
		}
		if field != "" {
			if first, ok := seen[field]; ok {
				return fmt.Errorf("%w: %s names %q twice, as %q and %q", errFoldedTwice, level, field, first, key)
			}
			seen[field] = key
		}
		below := level + "." + field
		if level == "review" {
			below = field
		}
		if _, ok := reviewFields[below]; field != "" && ok {
			err = foldedIn(d, below)
		} else {
			err = skipValue(d)
		}
		if err != nil {
			return err
		}
	}
	_, err = d.Token() // the closing brace
	return err
}

// skipValue reads past the value at d's position.
func skipValue(d *json.Decoder) error {
	tok, err := d.Token()
	if err != nil {
		return err
	}
	if delim, ok := tok.(json.Delim); ok && (delim == '[' || delim == '{') {
		return skipRest(d)
	}
	return nil
}

// skipRest reads past the rest of an array or object whose opening d has read.
func skipRest(d *json.Decoder) error {
	for depth := 1; depth > 0; {
		tok, err := d.Token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('['), json.Delim('{'):
			depth++
		case json.Delim(']'), json.Delim('}'):
			depth--
		}
	}
	return nil
}
