package trailers

import (
	"fmt"
	"strings"
)

// IfExists says what Add does when a trailer with the same key is already there (git's
// trailer.ifExists / --if-exists).
type IfExists int

// The modes, spelled in Go; ParseIfExists reads git's spelling.
const (
	AddIfDifferentNeighbor IfExists = iota // git's default: add unless the last trailer is identical
	AddIfDifferent                         // add unless any trailer with the key is identical
	AddAlways                              // git's "add"
	Replace                                // remove the last trailer with the key, add the new one at the end
	DoNothing                              // keep the message as it is
)

// IfMissing says what Add does when no trailer has the key (git's trailer.ifMissing).
type IfMissing int

// The modes.
const (
	IfMissingAdd IfMissing = iota
	IfMissingDoNothing
)

// WriteOptions are Options plus what to do with existing and missing keys. Placement is always
// git's default, where=end.
type WriteOptions struct {
	Options
	IfExists  IfExists
	IfMissing IfMissing
}

// ParseIfExists reads git's names: addIfDifferentNeighbor, addIfDifferent, add, replace, doNothing
// (case-insensitive, as git reads them).
func ParseIfExists(s string) (IfExists, error) {
	for i, name := range []string{"addIfDifferentNeighbor", "addIfDifferent", "add", "replace", "doNothing"} {
		if asciiEqualFold(s, name) {
			return IfExists(i), nil
		}
	}
	return 0, fmt.Errorf("unknown value %q for if-exists (want addIfDifferentNeighbor, addIfDifferent, add, replace or doNothing)", s)
}

// ParseIfMissing reads git's names: add, doNothing.
func ParseIfMissing(s string) (IfMissing, error) {
	switch {
	case asciiEqualFold(s, "add"):
		return IfMissingAdd, nil
	case asciiEqualFold(s, "doNothing"):
		return IfMissingDoNothing, nil
	}
	return 0, fmt.Errorf("unknown value %q for if-missing (want add or doNothing)", s)
}

// ParseTrailerArg splits a --trailer argument the way git does: at the first '=' or separator
// ("Key=value", "Key: value"); an argument with neither is a key with an empty value.
func ParseTrailerArg(s string, opts Options) (Trailer, error) {
	seps := "=" + opts.separators()
	sep := findSeparator(s, 0, seps)
	if sep == 0 {
		return Trailer{}, fmt.Errorf("empty trailer token in trailer %q", trimSpace(s))
	}
	if sep < 0 {
		return Trailer{Key: canonicalKey(trimSpace(s), opts.Keys)}, nil
	}
	return Trailer{Key: canonicalKey(trimSpace(s[:sep]), opts.Keys), Value: trimSpace(s[sep+1:])}, nil
}

// item is one logical line of the block being rewritten; key is "" for a non-trailer line.
type item struct {
	key, value string
	trailer    bool
}

// Add returns msg with trailers added the way `git interpret-trailers --trailer K=V ...` does
// (where=end): each new trailer in turn is added at the end of the trailer block, subject to
// IfExists and IfMissing; a blank line is put before a new block; trailers go above a "---" divider,
// trailing comments and the scissors line; the existing block is rewritten normalised ("Key: value")
// with its comment lines dropped, as git does. A message that does not end in a newline gets one
// first, as git 2.46 and later do.
func Add(msg string, add []Trailer, opts WriteOptions) string {
	msg = cutNUL(msg)
	if msg != "" && msg[len(msg)-1] != '\n' {
		msg += "\n"
	}
	b := locate(msg, opts.Options)
	var items []item
	if b.start < b.end {
		comment := opts.comment()
		b.entries(opts.Options, func(e entry) {
			switch {
			case e.text[0] == comment:
			case e.sep >= 1:
				items = append(items, item{key: canonicalKey(trimSpace(e.text[:e.sep]), opts.Keys), value: trimSpace(e.text[e.sep+1:]), trailer: true})
			default:
				items = append(items, item{value: strings.TrimSuffix(e.text, "\n")})
			}
		})
	}
	for _, t := range add {
		arg := item{key: canonicalKey(trimSpace(t.Key), opts.Keys), value: trimSpace(t.Value), trailer: true}
		items = apply(items, arg, opts)
	}
	var out strings.Builder
	out.Grow(len(msg) + 64)
	out.WriteString(msg[:b.start])
	if !b.blankBefore {
		out.WriteByte('\n')
	}
	seps := opts.separators()
	for _, it := range items {
		if !it.trailer {
			out.WriteString(it.value)
			out.WriteByte('\n')
			continue
		}
		writeTrailer(&out, it.key, it.value, seps)
	}
	out.WriteString(msg[b.end:])
	return out.String()
}

// apply adds one trailer to items (trailer.c's find_same_and_apply_arg and apply_arg_if_*).
func apply(items []item, arg item, opts WriteOptions) []item {
	same := -1
	for i := len(items) - 1; i >= 0; i-- {
		if items[i].trailer && sameKey(items[i].key, arg.key) {
			same = i
			break
		}
	}
	if same < 0 {
		if opts.IfMissing == IfMissingDoNothing {
			return items
		}
		return append(items, arg)
	}
	switch opts.IfExists {
	case DoNothing:
		return items
	case Replace:
		items = append(items, arg)
		return append(items[:same], items[same+1:]...)
	case AddAlways:
		return append(items, arg)
	case AddIfDifferent:
		for i := same; i >= 0; i-- {
			if sameTrailer(items[i], arg) {
				return items
			}
		}
		return append(items, arg)
	default: // AddIfDifferentNeighbor: compare with the last line of the block only
		if sameTrailer(items[len(items)-1], arg) {
			return items
		}
		return append(items, arg)
	}
}

// sameKey is trailer.c's same_token: keys without trailing non-alphanumerics are compared
// case-insensitively over the shorter one's length.
func sameKey(a, b string) bool {
	n := min(tokenLen(a), tokenLen(b))
	return asciiEqualFold(a[:n], b[:n])
}

func sameTrailer(a, b item) bool {
	return a.trailer && b.trailer && sameKey(a.key, b.key) && asciiEqualFold(a.value, b.value)
}

// asciiEqualFold is strcasecmp: ASCII letters only fold, unlike strings.EqualFold.
func asciiEqualFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
