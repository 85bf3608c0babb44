package ledger

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/internal/gittest"
)

// catFile hands back the bytes go-git reads, says which objects it lacks or are not blobs, and
// stays in step after a blob too large to read.
func TestCatFileReadsWhatGoGitReads(t *testing.T) {
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
	cf, err := startCatFile(context.Background(), filepath.Join(r.Dir, ".git"))
	if err != nil {
		t.Fatal(err)
	}
	defer cf.close()
	goGit := &reader{repo: repo, maxBytes: 1 << 20}
	// Twice through, so that every answer (the too large one included) leaves the stream in step.
	for range 2 {
		for p, c := range files {
			h := plumbing.NewHash(strings.TrimSpace(r.Run("rev-parse", "HEAD:"+p)))
			got, err := cf.blob(h, 1<<20)
			if err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			want, err := goGit.blob(h)
			if err != nil {
				t.Fatalf("%s: go-git: %v", p, err)
			}
			if string(got) != c || string(want) != c {
				t.Fatalf("%s: git cat-file read %q, go-git %q, the file holds %q", p, got, want, c)
			}
			if (got == nil) != (want == nil) {
				t.Fatalf("%s: git cat-file read %#v, go-git %#v", p, got, want)
			}
		}
		large := plumbing.NewHash(strings.TrimSpace(r.Run("rev-parse", "HEAD:large.yaml")))
		_, err := cf.blob(large, 1000)
		_, goGitErr := (&reader{repo: repo, maxBytes: 1000}).blob(large)
		var tooLarge tooLargeError
		if !errors.As(err, &tooLarge) || goGitErr == nil || err.Error() != goGitErr.Error() {
			t.Fatalf("a blob over the bound: git cat-file says %v, go-git %v", err, goGitErr)
		}
		if _, err := cf.blob(plumbing.NewHash(strings.Repeat("ab", 20)), 1<<20); !errors.Is(err, errCatFileMissing) {
			t.Fatalf("a missing object: %v, want errCatFileMissing", err)
		}
		if _, err := cf.blob(plumbing.NewHash(tip), 1<<20); !errors.Is(err, errCatFileMissing) {
			t.Fatalf("a commit asked for as a blob: %v, want errCatFileMissing (go-git then says what it is)", err)
		}
	}
}

// Without a git binary, or with one that fails, an update reads its blobs with go-git and indexes
// the same claims and problems.
func TestUpdateReadsBlobsWithoutAWorkingGit(t *testing.T) {
	r := gittest.Init(t, time.Date(2026, 6, 1, 9, 0, 0, 0, time.UTC), time.Hour).As("Dana Okafor", "dana@parley.example")
	for i := range 4 {
		r.Write("k8s/web.yaml", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: apps}\nspec:\n  replicas: "+
			string(rune('1'+i))+"\n")
		r.Write("k8s/big.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: big}\ndata:\n"+strings.Repeat("  k: v\n", 100*(i+1)))
		r.Commit("step")
	}
	index := func(t *testing.T, opts Options) ([]string, []Problem) {
		t.Helper()
		opts.Path = filepath.Join(t.TempDir(), "ledger.db")
		opts.MaxFileBytes = 1000 // big.yaml outgrows it in the second commit: a problem
		opts.catFileMinCommits = 1
		l, err := Open(r.Dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		if _, err := l.Update(context.Background(), "main"); err != nil {
			t.Fatal(err)
		}
		var claims []string
		fields, err := l.Fields(core.FieldPattern{})
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fields {
			h, err := l.History(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range h {
				claims = append(claims, f.String()+" "+c.Evidence.Commit+" "+c.Value.JSON())
			}
		}
		problems, err := l.Problems()
		if err != nil {
			t.Fatal(err)
		}
		return claims, problems
	}
	wantClaims, wantProblems := index(t, Options{GoGitBlobs: true})
	if len(wantClaims) < 4 || len(wantProblems) == 0 {
		t.Fatalf("the repository should give claims and a problem: %v %v", wantClaims, wantProblems)
	}
	same := func(t *testing.T, opts Options) {
		t.Helper()
		claims, problems := index(t, opts)
		if strings.Join(claims, "\n") != strings.Join(wantClaims, "\n") {
			t.Errorf("claims:\n%s\nwant (go-git):\n%s", strings.Join(claims, "\n"), strings.Join(wantClaims, "\n"))
		}
		if len(problems) != len(wantProblems) {
			t.Fatalf("problems %v, want (go-git) %v", problems, wantProblems)
		}
		for i := range problems {
			if problems[i] != wantProblems[i] {
				t.Errorf("problem %d: %+v, want (go-git) %+v", i, problems[i], wantProblems[i])
			}
		}
	}
	t.Run("git cat-file", func(t *testing.T) { same(t, Options{}) })
	t.Run("no git in PATH", func(t *testing.T) {
		t.Setenv("PATH", t.TempDir())
		same(t, Options{})
	})
	t.Run("a git that fails", func(t *testing.T) {
		bin := t.TempDir()
		if err := os.WriteFile(filepath.Join(bin, "git"), []byte("#!/bin/sh\necho 'fatal: detected dubious ownership' >&2\nexit 128\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
		same(t, Options{})
	})
	t.Run("a git that answers nonsense", func(t *testing.T) {
		bin := t.TempDir()
		if err := os.WriteFile(filepath.Join(bin, "git"), []byte("#!/bin/sh\nwhile read h; do echo \"$h blob 3\"; printf 'abcd'; done\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
		same(t, Options{})
	})
}
