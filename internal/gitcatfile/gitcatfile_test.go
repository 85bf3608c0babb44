package gitcatfile

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
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

// Asked ahead by one goroutine and received by another, many objects come back in order and as
// Blob reads them; and a Reader closed with answers still unread (an update stopped midway)
// returns instead of waiting on a git that waits for its answers to be read.
func TestAskingAheadAnswersInOrderAndClosesWithAnswersUnread(t *testing.T) {
	r := gittest.Init(t, time.Date(2026, 6, 1, 9, 0, 0, 0, time.UTC), time.Hour).As("Dana Okafor", "dana@parley.example")
	const n = 300
	want := make([]string, n)
	for i := range want {
		// Each answer is larger than a pipe's buffer divided by the count, so that unread
		// answers fill the pipe.
		want[i] = strings.Repeat(strconv.Itoa(i)+" ", 1000)
		r.Write(fmt.Sprintf("f%03d.yaml", i), want[i])
	}
	r.Commit("files")
	hashes := make([]plumbing.Hash, n)
	for i := range hashes {
		hashes[i] = plumbing.NewHash(strings.TrimSpace(r.Run("rev-parse", fmt.Sprintf("HEAD:f%03d.yaml", i))))
	}
	gitDir := filepath.Join(r.Dir, ".git")

	cf, err := Start(context.Background(), gitDir)
	if err != nil {
		t.Fatal(err)
	}
	asked := make(chan error, 1)
	go func() {
		for _, h := range hashes {
			if err := cf.Request(h); err != nil {
				asked <- err
				return
			}
		}
		asked <- cf.Flush()
	}()
	for i, h := range hashes {
		data, _, found, err := cf.Receive(h, 1<<20)
		if err != nil || !found || string(data) != want[i] {
			t.Fatalf("answer %d: found %v, %d bytes, %v", i, found, len(data), err)
		}
	}
	if err := <-asked; err != nil {
		t.Fatal(err)
	}
	if err := cf.Close(); err != nil {
		t.Fatal(err)
	}

	cf, err = Start(context.Background(), gitDir)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for _, h := range hashes {
			if cf.Request(h) != nil {
				return
			}
		}
		_ = cf.Flush()
	}()
	if _, _, _, err := cf.Receive(hashes[0], 1<<20); err != nil {
		t.Fatal(err)
	}
	closed := make(chan error, 1)
	go func() { closed <- cf.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute): // a deadlock guard, not a timing: Close returns in milliseconds
		t.Fatal("Close did not return with answers unread")
	}
}

// Abort stops a git whose answers are not being read, and the asking side's writes then fail
// instead of waiting.
func TestAbortUnblocksTheAskingSide(t *testing.T) {
	r := gittest.Init(t, time.Date(2026, 6, 1, 9, 0, 0, 0, time.UTC), time.Hour).As("Dana Okafor", "dana@parley.example")
	r.Write("big.yaml", strings.Repeat("x: y\n", 100000))
	r.Commit("big")
	h := plumbing.NewHash(strings.TrimSpace(r.Run("rev-parse", "HEAD:big.yaml")))
	cf, err := Start(context.Background(), filepath.Join(r.Dir, ".git"))
	if err != nil {
		t.Fatal(err)
	}
	asked := make(chan error, 1)
	go func() {
		for {
			if err := cf.Request(h); err != nil {
				asked <- err
				return
			}
			if err := cf.Flush(); err != nil {
				asked <- err
				return
			}
		}
	}()
	if _, _, _, err := cf.Receive(h, 1<<20); err != nil {
		t.Fatal(err)
	}
	cf.Abort()
	select {
	case err := <-asked:
		if err == nil {
			t.Fatal("the asking side stopped without an error")
		}
	case <-time.After(time.Minute): // a deadlock guard
		t.Fatal("the asking side still waits after Abort")
	}
	_ = cf.Close()
}
