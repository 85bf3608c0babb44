package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/parleyhq/parley/core"
)

// The JSON documents inside events (request and response objects, patches, request parameters) are
// decoded into plain trees (map[string]any, []any, json.Number, string, bool, nil) and flattened into
// leaves with the rules fielddiff uses for manifests, so an observed field has the same address and
// canonical value as Git's: objects descend (an empty object is a leaf {}), arrays of scalars are one
// leaf, other arrays descend by index, scalars are leaves.

const maxTreeDepth = 100

// MaxFieldsPerObject is the most fields one event or admission review may turn into claims for
// one object. A write past it (a nodeSelector of 40,000 keys) is not judged, and the problem names
// the object, rather than costing a claim and a judgement per key: judging takes about a
// millisecond of CPU a field (an audit event of 20,000 keys cost `parley ingest` 20 s), so a
// thousand keeps one event near the admission webhook's 2 s budget, and is five times the fields
// of a large Deployment.
const MaxFieldsPerObject = 1_000

// TooManyFields is the problem of an object written with more than MaxFieldsPerObject fields.
func TooManyFields(obj core.Field, n int) string {
	return fmt.Sprintf("%s: %d changed fields, above the %d Parley judges in one object; not judged", obj, n, MaxFieldsPerObject)
}

// tooManyFieldsUncounted is TooManyFields when reading stopped as soon as the object was known to
// change more than MaxFieldsPerObject fields, before they were all counted; the audit decoder's
// problem says the same in the same words.
func tooManyFieldsUncounted(obj core.Field) string {
	return fmt.Sprintf("%s: more than %d changed fields, the most Parley judges in one object; not judged", obj, MaxFieldsPerObject)
}

// ctxEvery is how many leaves a flattening reads between looks at its context.
const ctxEvery = 1024

// decodeTree decodes one JSON value, keeping numbers exact.
func decodeTree(raw []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, jsonError(raw, err)
	}
	return v, nil
}

// jsonError names where a JSON document went wrong.
func jsonError(raw []byte, err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case len(bytes.TrimSpace(raw)) == 0:
		return fmt.Errorf("empty body: %w", err)
	case errors.As(err, &se):
		return fmt.Errorf("invalid JSON at byte %d: %w", se.Offset, err)
	case errors.As(err, &te):
		where := te.Field
		if where == "" {
			where = "the top level"
		}
		return fmt.Errorf("at byte %d, %s: want %s, got JSON %s: %w", te.Offset, where, te.Type, te.Value, err)
	}
	return err
}

// treeValue is the canonical Value of a decoded tree.
func treeValue(v any) core.Value {
	if s, ok := v.(string); ok {
		return core.StringValue(s)
	}
	if cv, ok := core.ScalarJSONValue(v); ok {
		return cv
	}
	cv, err := core.JSONValue(v)
	if err != nil {
		// Trees come from the JSON decoder and always re-encode; keep the text form if not.
		return core.StringValue(fmt.Sprint(v))
	}
	return cv
}

func isScalar(v any) bool {
	switch v.(type) {
	case map[string]any, []any:
		return false
	}
	return true
}

// flattenTree calls emit for each leaf of v found below pointer ptr, in order (an object's keys
// sorted), until emit returns false; it returns false when it was stopped.
func flattenTree(v any, ptr string, depth int, emit func(ptr string, v any) bool) bool {
	return flatten(v, ptr, depth, true, emit)
}

// flattenAnyOrder is flattenTree in no particular order, for a caller that only collects the
// leaves into a map: sorting each object's keys was a tenth of decoding an admission review.
func flattenAnyOrder(v any, emit func(ptr string, v any) bool) bool {
	return flatten(v, "", 0, false, emit)
}

func flatten(v any, ptr string, depth int, sorted bool, emit func(ptr string, v any) bool) bool {
	if depth > maxTreeDepth {
		return emit(ptr, v) // deeper than any real object: keep the rest as one value
	}
	switch x := v.(type) {
	case map[string]any:
		if len(x) == 0 {
			if ptr != "" {
				return emit(ptr, x)
			}
			return true
		}
		if !sorted {
			for k, c := range x {
				if !flatten(c, ptr+"/"+core.EscapePointerToken(k), depth+1, false, emit) {
					return false
				}
			}
			return true
		}
		for _, k := range sortedKeys(x) {
			if !flatten(x[k], ptr+"/"+core.EscapePointerToken(k), depth+1, true, emit) {
				return false
			}
		}
		return true
	case []any:
		for _, c := range x {
			if !isScalar(c) {
				for i, c := range x {
					if !flatten(c, ptr+"/"+strconv.Itoa(i), depth+1, sorted, emit) {
						return false
					}
				}
				return true
			}
		}
		return emit(ptr, x)
	default:
		return emit(ptr, x)
	}
}

// sortedKeys is m's keys in order: O(n log n), where the insertion sort it replaces made one
// nodeSelector of 40,000 keys cost 4.6 s of CPU (issue 34).
func sortedKeys(m map[string]any) []string { return slices.Sorted(maps.Keys(m)) }

// lookup returns the value at an RFC 6901 pointer in a tree.
func lookup(v any, ptr string) (any, bool) {
	for _, tok := range core.SplitPointer(ptr) {
		switch x := v.(type) {
		case map[string]any:
			c, ok := x[tok]
			if !ok {
				return nil, false
			}
			v = c
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(x) || (len(tok) > 1 && tok[0] == '0') {
				return nil, false
			}
			v = x[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// stringAt returns the string at a path of keys in a tree, or "".
func stringAt(v any, keys ...string) string {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return ""
		}
		v = m[k]
	}
	s, _ := v.(string)
	return s
}

// stringMapAt returns the map of strings at a path of keys (annotations, labels), skipping values
// that are not strings.
func stringMapAt(v any, keys ...string) map[string]string {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, x := range m {
		if s, ok := x.(string); ok {
			out[k] = s
		}
	}
	return out
}
