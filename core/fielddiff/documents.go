package fielddiff

import (
	"bytes"
	"crypto/sha256"
	"slices"
	"strings"

	"github.com/parleyhq/parley/core"
)

// Generated manifests are large and mostly unchanged: Argo CD's install.yaml is a few megabytes of
// CustomResourceDefinitions, and a release bumps one image tag in it. ParseCached reads a
// multi-document YAML file document by document and takes every document it has read before from a
// cache keyed by the document's bytes, so such a commit parses one document, not the file.

// DocKey identifies a parsed YAML document: its bytes (by SHA-256) and, for a document that may
// hold a Kustomization, the directory of its file: the only part of the path that decides how a
// document reads (a Kustomization without a name is named by its directory). Other documents are
// shared between files: the CRDs of install.yaml and ha/install.yaml are parsed once.
type DocKey struct {
	Dir string
	Sum [sha256.Size]byte
}

// Document is one parsed document of a YAML stream: the objects it defines and their fields,
// sorted by address, and where each object's fields start.
type Document struct {
	leaves  []leaf
	runs    []int // start of each object's leaves; an object's leaves are contiguous when sorted
	objects []objectKey
	visits  int // nodes visited, counted against the whole file's alias budget
	json    int // bytes of JSON its lists were written as, against the whole file's listJSONBudget
	bytes   int
}

func newDocument(y *yamlParser, text []byte, visits int) *Document {
	d := &Document{leaves: y.leaves, objects: y.objects, visits: visits, json: listJSONBudget(len(text)) - y.json, bytes: leavesBytes(y.leaves)}
	slices.SortFunc(d.leaves, func(a, b leaf) int { return strings.Compare(a.key, b.key) })
	for i, l := range d.leaves {
		if i == 0 || !sameObject(l.obj, d.leaves[i-1].obj) {
			d.runs = append(d.runs, i)
		}
	}
	return d
}

func sameObject(a, b *core.Field) bool {
	return a == b || *a == *b
}

// Bytes estimates the memory the document holds, for caches that are bounded in bytes.
func (d *Document) Bytes() int { return d.bytes }

// DocCache keeps parsed documents for ParseCached. Implementations decide what to keep; they must
// be safe for concurrent use when ParseCached is called concurrently.
type DocCache interface {
	Document(k DocKey) (*Document, bool)
	AddDocument(k DocKey, d *Document)
}

// ParseCached is Parse, for a multi-document YAML file read document by document through cache.
// Its result equals Parse's, errors included: a document that does not read alone, or objects
// defined twice across documents, send the whole file to Parse for its exact message. Other files,
// and YAML files of one document, go to Parse.
func ParseCached(p string, content []byte, cache DocCache) (*Snapshot, error) {
	if cache == nil || kindOf(p) != "yaml" || !mayHoldObjects(content) {
		return Parse(p, content)
	}
	docs := splitDocuments(content)
	if len(docs) < 2 {
		return Parse(p, content)
	}
	dir := moduleDir(p)
	parsed := make([]*Document, len(docs))
	n, visits, json := 0, 0, 0
	for i, text := range docs {
		key := DocKey{Sum: sha256.Sum256(text)}
		if bytes.Contains(text, []byte(kustomizeGroup)) {
			key.Dir = dir
		}
		d, ok := cache.Document(key)
		if !ok {
			y, err := parseYAMLObjects(p, text)
			if err != nil {
				return Parse(p, content)
			}
			d = newDocument(y, text, nodeBudget(text)-y.budget)
			cache.AddDocument(key, d)
		}
		parsed[i] = d
		n += len(d.leaves)
		visits += d.visits
		json += d.json
	}
	if visits > nodeBudget(content) || n > MaxYAMLFields || json > listJSONBudget(len(content)) {
		return Parse(p, content) // a budget of the whole file is spent: Parse says where
	}
	// Each object's leaves are one sorted run, and two objects' runs never interleave (an address
	// is its object's prefix, ending in "#", then the pointer): sorting the runs by their first
	// address sorts the file.
	type run struct{ leaves []leaf }
	var runs []run
	seen := make(map[objectKey]bool, len(parsed))
	for _, d := range parsed {
		for _, k := range d.objects {
			if seen[k] {
				return Parse(p, content)
			}
			seen[k] = true
		}
		for i, start := range d.runs {
			end := len(d.leaves)
			if i+1 < len(d.runs) {
				end = d.runs[i+1]
			}
			runs = append(runs, run{d.leaves[start:end]})
		}
	}
	slices.SortFunc(runs, func(a, b run) int { return strings.Compare(a.leaves[0].key, b.leaves[0].key) })
	leaves := make([]leaf, 0, n) // a copy: the cached documents are shared
	for _, r := range runs {
		leaves = append(leaves, r.leaves...)
	}
	return &Snapshot{leaves: leaves, bytes: leavesBytes(leaves)}, nil
}

// SplitDocuments is splitDocuments for readers outside this package (review judges the documents
// of a file that does not read whole one by one): nil when the stream cannot be cut.
func SplitDocuments(content []byte) [][]byte { return splitDocuments(content) }

// splitDocuments cuts a YAML stream before each line that starts a document ("---" at the start
// of a line, then a space, a tab or the line's end). YAML forbids such a line inside any content,
// so each piece parses alone as it does in the stream; a stream with directives (% lines, which
// apply to the document they precede) or in UTF-16 is not cut. The first piece may hold only comments.
func splitDocuments(content []byte) [][]byte {
	if len(content) > 0 && content[0] == '%' || bytes.Contains(content, []byte("\n%")) {
		return nil
	}
	if bytes.HasPrefix(content, []byte{0xFF, 0xFE}) || bytes.HasPrefix(content, []byte{0xFE, 0xFF}) {
		return nil // UTF-16: the decoder reads the whole stream in that encoding; its bytes are not lines
	}
	var docs [][]byte
	start := 0
	for i := 0; i < len(content); {
		if (i == 0 || content[i-1] == '\n') && isDocumentStart(content[i:]) && i > start {
			docs = append(docs, content[start:i])
			start = i
		}
		nl := bytes.IndexByte(content[i:], '\n')
		if nl < 0 {
			break
		}
		i += nl + 1
	}
	return append(docs, content[start:])
}

func isDocumentStart(line []byte) bool {
	if !bytes.HasPrefix(line, []byte("---")) {
		return false
	}
	if len(line) == 3 {
		return true
	}
	switch line[3] {
	case ' ', '\t', '\n', '\r':
		return true
	}
	return false
}
