package events

import (
	"encoding/json"
	"hash/maphash"
	"strconv"
	"unicode/utf8"
)

// A review's objects are counted from their bytes before they are decoded (issue 34): a
// 90,000-key nodeSelector cost more to decode into a tree (1.3 s of CPU per 15 s of attack) than
// anything after, and its count alone answers it too-many-fields. leafCounter counts the kept
// leaves flatten would emit for an object's raw bytes, with flatten's rules (objects descend, an
// empty object below the top is a leaf, an array of scalars is one leaf, other arrays descend by
// index, scalars and null are leaves, anything deeper than maxTreeDepth is one leaf) and keep's
// filter, without building a tree or a path per leaf.
//
// Paths: keep is asked only about paths of at most keepDecidedAt tokens; a deeper path is kept
// exactly when its first keepDecidedAt tokens are (true of keepPath, whose answer depends on the
// first three tokens, and of keepScale; TestKeepIsDecidedByThePrefix holds both to it). So a
// nodeSelector's keys, five tokens down, cost no path and no call.
//
// Duplicates: the tree keeps the last of a repeated key, so a count that adds both would be
// wrong. The counter hashes each key of an object, and at the object's end looks for two equal
// hashes (a repeat, or a collision) in a table reused for every object, answering unsure if it
// finds any; the caller then decodes the tree as before. (A map of the hashes cost the 90,000-key
// review 10 ms and 90 allocations, sorting them 11 ms; the table about 1 ms.) A review from the
// admission door has none (app refuses repeated keys); a stored or hand-made one may.
const keepDecidedAt = 4

// leafCounter is reused for object and oldObject, so that its key set is allocated once.
type leafCounter struct {
	data   []byte
	keep   func(string) bool
	path   []byte   // the pointer of the value being read, while it has at most keepDecidedAt tokens
	hashes []uint64 // the key hashes of every open object, the innermost last
	table  []uint64 // repeats' open-addressing table, 0 for an empty slot
	seed   maphash.Seed
	unsure bool // a repeated key (or a hash collision): the count is not flatten's
}

func newLeafCounter(keep func(string) bool) *leafCounter {
	return &leafCounter{keep: keep, seed: maphash.MakeSeed()}
}

// count returns how many kept leaves flatten emits for raw, a JSON object that encoding/json has
// already read (so it is valid JSON); ok is false when the counter is unsure.
func (c *leafCounter) count(raw []byte) (n int, ok bool) {
	c.data, c.path, c.hashes, c.unsure = raw, c.path[:0], c.hashes[:0], false
	i := c.space(0)
	if i >= len(raw) || raw[i] != '{' {
		return 0, false
	}
	_, n = c.value(i, 0, false)
	if c.unsure {
		return 0, false
	}
	return n, true
}

// value counts the kept leaves of the value at data[i], depth tokens down (c.path its pointer when
// depth <= keepDecidedAt; else kept says whether everything below is kept), and returns the index
// past it.
func (c *leafCounter) value(i, depth int, kept bool) (end, n int) {
	if depth == keepDecidedAt {
		kept = c.keep(string(c.path))
	}
	if depth > maxTreeDepth {
		return c.skip(i), c.leaf(depth, kept)
	}
	switch c.byteAt(i) {
	case '{':
		return c.objectAt(i, depth, kept)
	case '[':
		return c.arrayAt(i, depth, kept)
	}
	return c.skip(i), c.leaf(depth, kept)
}

// leaf is 1 when the leaf at the current path is kept.
func (c *leafCounter) leaf(depth int, kept bool) int {
	if depth < keepDecidedAt {
		kept = c.keep(string(c.path))
	}
	if kept {
		return 1
	}
	return 0
}

func (c *leafCounter) objectAt(i, depth int, kept bool) (end, n int) {
	i = c.space(i + 1)
	if c.byteAt(i) == '}' {
		if depth == 0 {
			return i + 1, 0
		}
		return i + 1, c.leaf(depth, kept)
	}
	mark, base := len(c.path), len(c.hashes)
	defer func() {
		if c.repeats(c.hashes[base:]) {
			c.unsure = true
		}
		c.hashes = c.hashes[:base]
	}()
	for i < len(c.data) && c.data[i] == '"' {
		kend := c.skip(i) // the key, with its quotes
		key := c.key(c.data[i:kend])
		c.hashes = append(c.hashes, maphash.Bytes(c.seed, key))
		i = c.space(kend)
		i = c.space(i + 1) // ':'
		if depth < keepDecidedAt {
			c.path = appendToken(append(c.path, '/'), key)
		}
		var cn int
		i, cn = c.value(i, depth+1, kept)
		n += cn
		c.path = c.path[:mark]
		i = c.space(i)
		if c.byteAt(i) != ',' {
			return i + 1, n // '}'
		}
		i = c.space(i + 1)
	}
	c.unsure = true // not reached for JSON encoding/json read
	return max(i, len(c.data)), n
}

func (c *leafCounter) arrayAt(i, depth int, kept bool) (end, n int) {
	start := c.space(i + 1)
	// Whether the array descends: any element an object or an array. Above keepDecidedAt the
	// elements' paths matter, so this is learnt first (a pass over the array for each of at most
	// keepDecidedAt levels); below, in the one pass that counts them.
	descends := false
	if depth < keepDecidedAt {
		for j := start; c.byteAt(j) != ']' && j < len(c.data); {
			if b := c.byteAt(j); b == '{' || b == '[' {
				descends = true
				break
			}
			j = c.space(c.skip(j))
			if c.byteAt(j) != ',' {
				break
			}
			j = c.space(j + 1)
		}
		if !descends {
			return c.skip(i), c.leaf(depth, kept)
		}
	}
	mark := len(c.path)
	i = start
	for k := 0; c.byteAt(i) != ']' && i < len(c.data); k++ {
		at := i
		if b := c.byteAt(i); b == '{' || b == '[' {
			descends = true
		}
		if depth < keepDecidedAt {
			c.path = strconv.AppendInt(append(c.path, '/'), int64(k), 10)
		}
		var cn int
		i, cn = c.value(i, depth+1, kept)
		n += cn
		c.path = c.path[:mark]
		i = c.space(i)
		if c.byteAt(i) == ',' {
			i = c.space(i + 1)
		} else if c.byteAt(i) != ']' || i <= at {
			c.unsure = true // not reached for JSON encoding/json read
			return len(c.data), n
		}
	}
	if !descends { // all scalars (or none): one leaf
		return i + 1, c.leaf(depth, kept)
	}
	return i + 1, n
}

// repeats reports whether two of an object's key hashes are equal: compared pairwise for a small
// object, through a table twice their number (linear probing) for a large one.
func (c *leafCounter) repeats(keys []uint64) bool {
	if len(keys) <= 16 {
		for i := range keys {
			for j := range i {
				if keys[i] == keys[j] {
					return true
				}
			}
		}
		return false
	}
	size := 1
	for size < 2*len(keys) {
		size <<= 1
	}
	if cap(c.table) < size {
		c.table = make([]uint64, size)
	} else {
		c.table = c.table[:size]
		clear(c.table)
	}
	mask := uint64(size - 1)
	for _, h := range keys {
		h |= 1 // never 0, the empty slot's mark (two hashes one bit apart read as a repeat: unsure)
		for j := h & mask; ; j = (j + 1) & mask {
			if c.table[j] == 0 {
				c.table[j] = h
				break
			}
			if c.table[j] == h {
				return true
			}
		}
	}
	return false
}

// key is a key's bytes as encoding/json decodes them (escapes resolved, invalid UTF-8 as U+FFFD);
// quoted includes the quotes. Only a key with an escape or a byte past ASCII costs a decoding.
func (c *leafCounter) key(quoted []byte) []byte {
	inner := quoted[1 : len(quoted)-1]
	for _, b := range inner {
		if b == '\\' || b >= utf8.RuneSelf {
			var s string
			if json.Unmarshal(quoted, &s) != nil {
				c.unsure = true
			}
			return []byte(s)
		}
	}
	return inner
}

// appendToken appends an RFC 6901 reference token, escaped as core.EscapePointerToken does.
func appendToken(p, tok []byte) []byte {
	for _, b := range tok {
		switch b {
		case '~':
			p = append(p, '~', '0')
		case '/':
			p = append(p, '~', '1')
		default:
			p = append(p, b)
		}
	}
	return p
}

func (c *leafCounter) byteAt(i int) byte {
	if i < len(c.data) {
		return c.data[i]
	}
	return 0
}

func (c *leafCounter) space(i int) int {
	for i < len(c.data) {
		switch c.data[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// skip returns the index past the value at data[i] (valid JSON), without recursion; past i
// whatever data holds, so that no loop over it can stall.
func (c *leafCounter) skip(i int) int { return min(max(c.skipValue(i), i+1), len(c.data)) }

func (c *leafCounter) skipValue(i int) int {
	d := c.data
	if i >= len(d) {
		return i
	}
	switch d[i] {
	case '"':
		return skipString(d, i)
	case '{', '[':
		level := 0
		for ; i < len(d); i++ {
			switch d[i] {
			case '"':
				i = skipString(d, i) - 1
			case '{', '[':
				level++
			case '}', ']':
				if level--; level == 0 {
					return i + 1
				}
			}
		}
		return i
	}
	for ; i < len(d); i++ { // a number, true, false or null
		switch d[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
	}
	return i
}

// skipString returns the index past the string whose opening quote is d[i].
func skipString(d []byte, i int) int {
	for i++; i < len(d); i++ {
		switch d[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return i
}

// members returns the values of an object's last members named a and b (keys compared as
// encoding/json decodes them), nil for one it lacks: the tree's map[a] and map[b], read from the
// bytes in one pass.
func (c *leafCounter) members(obj []byte, a, b string) (va, vb []byte) {
	c.data = obj
	i := c.space(0)
	if c.byteAt(i) != '{' {
		return nil, nil
	}
	for i = c.space(i + 1); i < len(obj) && obj[i] == '"'; {
		kend := c.skip(i)
		k := c.key(obj[i:kend])
		i = c.space(c.space(kend) + 1)
		vend := c.skip(i)
		switch string(k) {
		case a:
			va = obj[i:vend]
		case b:
			vb = obj[i:vend]
		}
		i = c.space(vend)
		if c.byteAt(i) != ',' {
			break
		}
		i = c.space(i + 1)
	}
	return va, vb
}

// stringOf is the string a value's bytes hold, or "" when they hold another value (as stringAt).
func stringOf(v []byte) string {
	if len(v) == 0 || v[0] != '"' {
		return ""
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		return ""
	}
	return s
}

// stringMember is stringAt read from the bytes, for a path of one or two keys.
func (c *leafCounter) stringMember(obj []byte, keys ...string) string {
	v, _ := c.members(obj, keys[0], "")
	if len(keys) == 2 {
		v, _ = c.members(v, keys[1], "")
	}
	return stringOf(v)
}
