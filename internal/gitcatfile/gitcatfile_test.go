package gitcatfile

import (
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"

	"github.com/parleyhq/parley/internal/gittest"
)

// Blob hands back the bytes go-git reads, says which objects git lacks or are not blobs, ignores
// replacements, and stays in step after a blob too large to read.
func TestBlobReadsWhatGoGitReads(t *testing.T) {
	r := gittest.Init(t, time.Date(2026, 6, 1, 9, 0, 0, 0, time.UTC), time.Hour).As("Dana Okafor", "dana@parley.example")
	files := map[string]string{
		"empty.yaml": "",
		"small.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n",
		"crlf.yaml":  "a: 1\r\nb: 2\r\n",
		"no-eol.tf":  "resource \"a\" \"b\" {}",
		"binary.yml": "\x00\x01\xff\n\n",
		"large.yaml": strings.Repeat("x: y\n", 40000),
	}
	for p, c := range files {
		r.Write(p, c)
	}
	tip := r.Commit("files")
	// A replacement of one blob by another must not change what either reader reads.
	r.Run("replace", strings.TrimSpace(r.Run("rev-parse", "HEAD:small.yaml")), strings.TrimSpace(r.Run("rev-parse", "HEAD:crlf.yaml")))
	repo, err := git.PlainOpen(r.Dir)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := Start(context.Background(), filepath.Join(r.Dir, ".git"))
	if err != nil {
		t.Fatal(err)
	}
	defer cf.Close()
	hashOf := func(p string) plumbing.Hash {
		return plumbing.NewHash(strings.TrimSpace(r.Run("rev-parse", "HEAD:"+p)))
	}
	// Twice through, so that every answer (the too large one included) leaves the stream in step.
	for range 2 {
		for p, c := range files {
			h := hashOf(p)
			got, size, found, err := cf.Blob(h, 1<<20)
			if err != nil || !found || size != int64(len(c)) {
				t.Fatalf("%s: found %v, size %d, %v", p, found, size, err)
			}
			b, err := repo.BlobObject(h)
			if err != nil {
				t.Fatal(err)
			}
			rd, err := b.Reader()
			if err != nil {
				t.Fatal(err)
			}
			want, err := io.ReadAll(rd)
			rd.Close()
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != c || string(want) != c {
				t.Fatalf("%s: git cat-file read %q, go-git %q, the file holds %q", p, got, want, c)
			}
		}
		data, size, found, err := cf.Blob(hashOf("large.yaml"), 1000)
		if err != nil || !found || data != nil || size != int64(len(files["large.yaml"])) {
			t.Fatalf("a blob over the bound: %d bytes read, size %d, found %v, %v", len(data), size, found, err)
		}
		if _, _, found, err := cf.Blob(plumbing.NewHash(strings.Repeat("ab", 20)), 1<<20); found || err != nil {
			t.Fatalf("a missing object: found %v, %v", found, err)
		}
		if _, _, found, err := cf.Blob(plumbing.NewHash(tip), 1<<20); found || err != nil {
			t.Fatalf("a commit asked for as a blob: found %v, %v", found, err)
		}
	}
}

func TestStartWithoutGit(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	if _, err := Start(context.Background(), t.TempDir()); err == nil {
		t.Fatal("Start found a git binary in an empty PATH")
	}
}
