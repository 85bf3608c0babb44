package fielddiff

import (
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"
	"unsafe"

	"github.com/parleyhq/parley/core"
)

// Change is one field whose value differs between two versions of a file.
type Change struct {
	Field core.Field
	// Addr is Field.String(), the field's canonical address: the snapshots hold it already, and
	// printing it again for every change was a third of the ledger's extract stage.
	Addr     string
	Old, New core.Value // Old absent: the field was added; New absent: it was removed
}

// leaf is one field a file sets. key is the field's canonical address, the sort key. The field is
// its object (shared by the object's leaves, Path empty) and its pointer: a whole core.Field in
// every leaf was 120 bytes and seven strings for the collector to scan, for a few shared values.
type leaf struct {
	key   string
	obj   *core.Field
	path  string
	value core.Value
}

// field is the leaf's field.
func (l *leaf) field() core.Field {
	f := *l.obj
	f.Path = l.path
	return f
}

// Snapshot is a parsed file: every field it sets, with its value, sorted by address. A nil
// *Snapshot is an empty (or absent) file.
type Snapshot struct {
	leaves []leaf
	bytes  int
}

// Supported reports whether path is a file fielddiff reads: .yaml, .yml, .json (Kubernetes
// manifests) or .tf (Terraform).
func Supported(path string) bool { return kindOf(path) != "" }

func kindOf(p string) string {
	switch strings.ToLower(path.Ext(p)) {
	case ".yaml", ".yml", ".json":
		return "yaml"
	case ".tf":
		return "tf"
	}
	return ""
}

// Parse reads the file at path (repository-relative, slash-separated). An unsupported path gives an
// empty snapshot.
func Parse(p string, content []byte) (*Snapshot, error) {
	var leaves []leaf
	var err error
	switch kindOf(p) {
	case "yaml":
		leaves, err = parseYAML(p, content)
	case "tf":
		leaves, err = parseTF(p, content)
	default:
		return &Snapshot{}, nil
	}
	if err != nil {
		return nil, err
	}
	return newSnapshot(p, leaves)
}

// newSnapshot sorts leaves into a Snapshot.
func newSnapshot(p string, leaves []leaf) (*Snapshot, error) {
	slices.SortFunc(leaves, func(a, b leaf) int { return strings.Compare(a.key, b.key) })
	for i := 1; i < len(leaves); i++ {
		if leaves[i].key == leaves[i-1].key {
			// Only Terraform can do this (an attribute and a nested block of one name); a field with
			// two values cannot be claimed.
			return nil, fmt.Errorf("%s: field %s is set twice", p, leaves[i].key)
		}
	}
	return &Snapshot{leaves: leaves, bytes: leavesBytes(leaves)}, nil
}

// leafOverhead is what a leaf takes beyond its strings' bytes: the leaf itself in the slice, and
// the headers of the strings it holds. (Objects, one core.Field for many leaves, are not counted.)
const leafOverhead = int(unsafe.Sizeof(leaf{}))

// leavesBytes estimates the memory leaves hold, for caches bounded in bytes. A field's Path
// usually shares the key's bytes (see yamlParser.add); counting it again errs on the safe side.
func leavesBytes(leaves []leaf) int {
	n := cap(leaves) * leafOverhead
	for _, l := range leaves {
		n += len(l.key) + len(l.path) + len(l.value.String())
	}
	return n
}

// Get returns the value the snapshot holds for f.
func (s *Snapshot) Get(f core.Field) (core.Value, bool) {
	if s == nil {
		return core.Value{}, false
	}
	key := f.String()
	i := sort.Search(len(s.leaves), func(i int) bool { return s.leaves[i].key >= key })
	if i < len(s.leaves) && s.leaves[i].key == key {
		return s.leaves[i].value, true
	}
	return core.Value{}, false
}

// Fields returns every field the snapshot sets, sorted by address.
func (s *Snapshot) Fields() []core.Field {
	if s == nil {
		return nil
	}
	out := make([]core.Field, len(s.leaves))
	for i, l := range s.leaves {
		out[i] = l.field()
	}
	return out
}

// Bytes estimates the memory the snapshot holds, for caches that are bounded in bytes.
func (s *Snapshot) Bytes() int {
	if s == nil {
		return 0
	}
	return s.bytes
}

// Len is the number of fields the snapshot sets.
func (s *Snapshot) Len() int {
	if s == nil {
		return 0
	}
	return len(s.leaves)
}

// DiffSnapshots compares two snapshots (nil is an empty file). The result is sorted by address.
func DiffSnapshots(old, new *Snapshot) []Change {
	var a, b []leaf
	if old != nil {
		a = old.leaves
	}
	if new != nil {
		b = new.leaves
	}
	var out []Change
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || i < len(a) && a[i].key < b[j].key:
			out = append(out, Change{Field: a[i].field(), Addr: a[i].key, Old: a[i].value})
			i++
		case i == len(a) || b[j].key < a[i].key:
			out = append(out, Change{Field: b[j].field(), Addr: b[j].key, New: b[j].value})
			j++
		default:
			if a[i].value != b[j].value {
				out = append(out, Change{Field: b[j].field(), Addr: b[j].key, Old: a[i].value, New: b[j].value})
			}
			i++
			j++
		}
	}
	return out
}

// Diff returns the changed fields between two versions of the file at path. old or new may be nil
// (the file was added or removed). Unsupported files give no changes.
func Diff(p string, old, new []byte) ([]Change, error) {
	if !Supported(p) {
		return nil, nil
	}
	var a, b *Snapshot
	var err error
	if old != nil {
		if a, err = Parse(p, old); err != nil {
			return nil, err
		}
	}
	if new != nil {
		if b, err = Parse(p, new); err != nil {
			return nil, err
		}
	}
	return DiffSnapshots(a, b), nil
}
