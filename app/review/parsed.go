package review

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/core/fielddiff"
	"github.com/parleyhq/parley/internal/lru"
	"github.com/parleyhq/parley/reconcile/depgraph"
)

// Parsed remembers what fielddiff made of a file's blob: its fields, or why it does not read. A
// pull request is judged again on every delivery (each synchronize, label, edit, review, and every
// redelivery anyone can send signed with a valid secret), and most of what it changes is the same
// blobs as the time before. A blob refused before (a Terraform file nested past the budget, whose
// refusal costs lexing the whole megabyte) is refused again from here without reading or lexing it.
//
// What is remembered is keyed by content, never by who sent it: the blob's object ID (Git's hash
// of its bytes) and the path it is read as (the path decides the parser, the Terraform module and
// the file named in the refusal). fielddiff.Parse is a pure function of those two: it reads nothing
// else, its budgets (nesting, bytes, keys, aliases) are compile-time constants, and it takes no
// context, so what it answered once it answers always. The review's own budgets (core.Budget: a
// file's bytes, a file's and a pull request's fields, a value's bytes) are not part of the key:
// they are applied around the parse, each time, to the blob's size and to the fields the snapshot
// gives. A failure to read a blob (I/O, a cancelled context) never reaches Parsed: only a parse of
// bytes that were read is stored.
//
// It also keeps a head tree's dependency graph (GitSource.Dependents), by the tree's ID: a pull
// request judged again with the same head builds it from memory instead of reading and parsing
// every manifest and Terraform file of the head, the refused ones included.
//
// It is bounded in entries and in bytes (a snapshot's Bytes, a refusal's text, the key), least
// recently used first out, and safe for concurrent use by any number of judgements. The zero value
// is ready, with DefaultParsedEntries and DefaultParsedBytes. A nil *Parsed remembers nothing.
type Parsed struct {
	// MaxEntries and MaxBytes bound what is kept; zero: the defaults. Set before first use.
	MaxEntries int
	MaxBytes   int

	cache        lru.Cache[parsedKey, *parsedEntry]
	hits, misses atomic.Int64
}

// DefaultParsedEntries and DefaultParsedBytes bound a Parsed by default: a few thousand files, and
// the snapshots of a few dozen large manifests.
const (
	DefaultParsedEntries = 4096
	DefaultParsedBytes   = 32 << 20
)

// ParsedStats is what a Parsed holds and how often it answered.
type ParsedStats struct {
	Entries, Bytes int
	// Hits are lookups answered from memory, Misses lookups of a blob not (or no longer) kept.
	Hits, Misses int64
}

type parsedKey struct {
	path string // the path the blob is read as
	blob string // its object ID
}

type parsedEntry struct {
	key  parsedKey
	size int64 // the blob's size: a review with a smaller file budget still refuses it first
	// snap is what the blob sets (nil for a blob that sets nothing is a valid *Snapshot too), when
	// refusal is "".
	snap    *fielddiff.Snapshot
	refusal string // fielddiff's error, as text: all a review does with it is print it
	// graph is the dependency graph of a tree (key: graphPath and the tree's ID), when the
	// entry is one.
	graph *depgraph.Graph
	cost  int
}

// graphPath keys a tree's dependency graph, beside the blobs: no repository path holds a NUL.
const graphPath = "\x00dependency graph"

// parsedOverhead is what an entry costs beyond its strings and snapshot: the entry, its list
// element and its map slot, roughly.
const parsedOverhead = 256

func (m *Parsed) limits() (entries, bytes int) {
	entries, bytes = m.MaxEntries, m.MaxBytes
	if entries <= 0 {
		entries = DefaultParsedEntries
	}
	if bytes <= 0 {
		bytes = DefaultParsedBytes
	}
	return entries, bytes
}

// get returns what parsing blob as path gave, if it is kept.
func (m *Parsed) get(path, blob string) (parsedEntry, bool) {
	if m == nil || blob == "" {
		return parsedEntry{}, false
	}
	e, ok := m.cache.Get(parsedKey{path, blob})
	if !ok {
		m.misses.Add(1)
		return parsedEntry{}, false
	}
	m.hits.Add(1)
	return *e, true
}

// put keeps what fielddiff.Parse(path, content of blob) gave: snap, or err. Only a parse's own
// answer may be given here, never an error from reading the blob.
func (m *Parsed) put(path, blob string, size int64, snap *fielddiff.Snapshot, err error) {
	if m == nil || blob == "" {
		return
	}
	e := &parsedEntry{key: parsedKey{path, blob}, size: size}
	if err != nil {
		e.refusal = err.Error()
	} else {
		e.snap = snap
	}
	e.cost = parsedOverhead + len(path) + len(blob) + len(e.refusal) + e.snap.Bytes()
	m.keep(e)
}

// keep adds e, dropping the least recently used entries past the bounds.
func (m *Parsed) keep(e *parsedEntry) {
	maxEntries, maxBytes := m.limits()
	if e.cost > maxBytes/8 {
		return // one file must not push out everything else; parsing it again is what it costs
	}
	// Two judgements that parsed the same blob at once got the same answer: Add keeps one.
	m.cache.Add(e.key, e, e.cost, maxEntries, maxBytes)
}

// putGraph keeps g, the dependency graph of the tree (depgraph.Build of every file the tree holds
// that reconcile.ReadTree reads: a pure function of the tree, whose ID covers every path and byte
// in it). Its cost is taken as the bytes of the files it was built from, more than it holds.
func (m *Parsed) putGraph(tree string, g *depgraph.Graph, fileBytes int) {
	if m == nil || tree == "" {
		return
	}
	m.keep(&parsedEntry{key: parsedKey{graphPath, tree}, graph: g, cost: parsedOverhead + len(tree) + fileBytes})
}

// Stats says what m holds and how often it answered.
func (m *Parsed) Stats() ParsedStats {
	if m == nil {
		return ParsedStats{}
	}
	entries, bytes := m.cache.Len()
	return ParsedStats{Entries: entries, Bytes: bytes, Hits: m.hits.Load(), Misses: m.misses.Load()}
}

// parseSide is fielddiff.Parse of one side of a changed file read as path: from memory when the
// side's blob was parsed before, else parsed and kept.
func parseSide(m *Parsed, path string, s side) (*fielddiff.Snapshot, error) {
	switch {
	case !s.present:
		return nil, nil
	case s.known != nil:
		if s.known.refusal != "" {
			return nil, errors.New(s.known.refusal)
		}
		return s.known.snap, nil
	}
	snap, err := fielddiff.Parse(path, s.data)
	m.put(path, s.blob, int64(len(s.data)), snap, err)
	return snap, err
}

// blobNamer is a Source that names a file's blob before reading it (GitSource does, from the tree
// entry that holds it): a blob parsed before is then not read again.
type blobNamer interface {
	// BlobID is the object ID of the file at a commit; ok is false when the source cannot name
	// it (the file is not there, or is no blob), and the file is then read as any Source's.
	BlobID(ctx context.Context, sha, path string) (id string, ok bool, err error)
}

// side is one side (head, or merge base) of a changed file.
type side struct {
	sha, path string // where it is read
	present   bool   // expected, and there: it is parsed (data, or known)
	blob      string // its object ID; "" when the source does not name blobs
	data      []byte // its content, once read
	read      bool
	known     *parsedEntry // what parsing it gave before, when remembered (data then unread)
}

// load finds one side of a changed file at sha (path, read as parsePath) when it is expected: what
// parsing its blob gave before, when m remembers it, or else its content. tooLarge is its size
// when it is over the budget (and it is then neither read nor parsed).
func load(ctx context.Context, src Source, m *Parsed, b core.Budget, sha, path, parsePath string, expected bool) (s side, tooLarge int64, err error) {
	s = side{sha: sha, path: path}
	if !expected {
		return s, 0, nil
	}
	if bn, ok := src.(blobNamer); ok && m != nil {
		id, ok, err := bn.BlobID(ctx, sha, path)
		if err != nil {
			return s, 0, err
		}
		if ok {
			s.blob = id
			if e, hit := m.get(parsePath, id); hit {
				if e.size > b.FileBytes {
					return s, e.size, nil
				}
				s.present, s.known = true, &e
				return s, 0, nil
			}
		}
	}
	data, big, err := content(ctx, src, b, sha, path, true)
	if err != nil || big > 0 {
		return s, big, err
	}
	s.data, s.read, s.present = data, true, data != nil
	return s, 0, nil
}

// readAll reads the side's content when only its parse was remembered.
func (s *side) readAll(ctx context.Context, src Source) error {
	if !s.present || s.read {
		return nil
	}
	data, ok, err := src.Content(ctx, s.sha, s.path)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%s at %s: its blob %s was named but is not there", s.path, short(s.sha), short(s.blob))
	}
	s.data, s.read = data, true
	return nil
}

// diff is fielddiff.Diff(path, old, new) of two loaded sides, parsing each side's blob only when
// m does not remember it: the same changes, or the same error (the merge base's first).
func diff(m *Parsed, path string, old, new side) ([]fielddiff.Change, error) {
	if !fielddiff.Supported(path) {
		return nil, nil
	}
	a, err := parseSide(m, path, old)
	if err != nil {
		return nil, err
	}
	b, err := parseSide(m, path, new)
	if err != nil {
		return nil, err
	}
	return fielddiff.DiffSnapshots(a, b), nil
}
