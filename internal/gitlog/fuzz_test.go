package gitlog

import (
	"bufio"
	"bytes"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
)

// FuzzDiffRecords: whatever diff-tree's output holds (paths are chosen by whoever pushes), the
// parser reports entries or an error, never panics, and never reports a path holding the NUL
// that ends it or an entry it did not read in full.
func FuzzDiffRecords(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		d := diffRecords{out: bufio.NewReaderSize(bytes.NewReader(data), 16)}
		var want plumbing.Hash
		if len(data) > 40 {
			want, _ = parseHash(data[:40])
		}
		for range 64 {
			ended, err := d.read(want, func(path []byte, oldMode, newMode filemode.FileMode, oldHash, newHash plumbing.Hash) {
				if bytes.IndexByte(path, 0) >= 0 {
					t.Fatalf("path %q holds a NUL", path)
				}
				if oldMode > 0o777777 || newMode > 0o777777 {
					t.Fatalf("modes %o %o", oldMode, newMode)
				}
			})
			if err != nil || ended {
				return
			}
			if len(d.pending) == 0 {
				t.Fatal("a record ended with no next header")
			}
			var ok bool
			if want, ok = parseHash(d.pending[:len(d.pending)-1]); !ok {
				return // the next read reports the header
			}
		}
	})
}

// The parser reads what git writes: a root commit, a merge compared with its first parent, a
// mode change, a file that became a directory, an empty commit.
func TestDiffRecordsReadsGitOutput(t *testing.T) {
	h := func(c byte) string { return string(bytes.Repeat([]byte{c}, 40)) }
	out := h('a') + "\x00" +
		":000000 100644 " + h('0') + " " + h('1') + " A\x00dir/new\nline.yaml\x00" +
		":000000 160000 " + h('0') + " " + h('2') + " A\x00sub\x00" +
		h('b') + "\x00" +
		":100644 100755 " + h('1') + " " + h('1') + " M\x00x.yaml\x00" +
		":100644 000000 " + h('3') + " " + h('0') + " D\x00f\x00" +
		":000000 120000 " + h('0') + " " + h('4') + " A\x00f/l\x00" +
		h('c') + "\x00"
	d := diffRecords{out: bufio.NewReaderSize(bytes.NewReader([]byte(out)), 16)}
	var got []string
	for _, c := range []byte("abc") {
		ended, err := d.read(plumbing.NewHash(h(c)), func(path []byte, om, nm filemode.FileMode, oh, nh plumbing.Hash) {
			got = append(got, string(c)+" "+om.String()+" "+nm.String()+" "+oh.String()[:1]+nh.String()[:1]+" "+string(path))
		})
		if err != nil {
			t.Fatal(err)
		}
		if ended != (c == 'c') {
			t.Fatalf("commit %c: ended %v", c, ended)
		}
	}
	want := []string{
		"a 0000000 0100644 01 dir/new\nline.yaml",
		"a 0000000 0160000 02 sub",
		"b 0100644 0100755 11 x.yaml",
		"b 0100644 0000000 30 f",
		"b 0000000 0120000 04 f/l",
	}
	if len(got) != len(want) {
		t.Fatalf("entries %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("entry %d: %q, want %q", i, got[i], want[i])
		}
	}
	// A header out of step is an error, not a commit with another's files.
	d = diffRecords{out: bufio.NewReader(bytes.NewReader([]byte(out)))}
	if _, err := d.read(plumbing.NewHash(h('b')), func([]byte, filemode.FileMode, filemode.FileMode, plumbing.Hash, plumbing.Hash) {}); err == nil {
		t.Fatal("commit a's record read as commit b's")
	}
}
