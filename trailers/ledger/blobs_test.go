package ledger

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/internal/gitcatfile"
	"github.com/parleyhq/parley/internal/gittest"
)

// Through git cat-file (internal/gitcatfile) and the history through git (internal/gitlog),
// without a git binary, or with one that fails or answers nonsense before the first commit is
// read, an update indexes the same claims and problems as with go-git alone.
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
	wantClaims, wantProblems := index(t, Options{})
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
	t.Run("git cat-file", func(t *testing.T) { same(t, Options{OpenBlobs: openCatFile, OpenHistory: openGitHistory}) })
	t.Run("no git in PATH", func(t *testing.T) {
		t.Setenv("PATH", t.TempDir())
		same(t, Options{OpenBlobs: openCatFile, OpenHistory: openGitHistory})
	})
	t.Run("a git that fails", func(t *testing.T) {
		bin := t.TempDir()
		if err := os.WriteFile(filepath.Join(bin, "git"), []byte("#!/bin/sh\necho 'fatal: detected dubious ownership' >&2\nexit 128\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
		same(t, Options{OpenBlobs: openCatFile, OpenHistory: openGitHistory})
	})
	t.Run("a git that answers nonsense", func(t *testing.T) {
		bin := t.TempDir()
		if err := os.WriteFile(filepath.Join(bin, "git"), []byte("#!/bin/sh\nwhile read h; do echo \"$h blob 3\"; printf 'abcd'; done\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
		same(t, Options{OpenBlobs: openCatFile, OpenHistory: openGitHistory})
	})
	// Asked ahead (the history through git), a git cat-file that dies after some answers leaves
	// the rest to go-git, and the asking side does not wait on it.
	for _, after := range []int{0, 1, 3} {
		t.Run(fmt.Sprintf("a git cat-file that dies after %d answers", after), func(t *testing.T) {
			received := 0
			same(t, Options{OpenHistory: openGitHistory, OpenBlobs: func(ctx context.Context, gitDir string) (BlobSource, error) {
				r, err := gitcatfile.Start(ctx, gitDir)
				if err != nil {
					return nil, err
				}
				return &dyingCatFile{Reader: r, after: after, received: &received}, nil
			}})
			if received < after {
				t.Fatalf("%d blobs received through git, want at least %d: the test did not ask ahead", received, after)
			}
		})
	}
}

// dyingCatFile is a git cat-file killed after a number of answers.
type dyingCatFile struct {
	*gitcatfile.Reader
	after    int
	received *int
}

func (d *dyingCatFile) Receive(h plumbing.Hash, maxBytes int64) ([]byte, int64, bool, error) {
	if *d.received == d.after {
		d.Reader.Abort()
	}
	*d.received++
	return d.Reader.Receive(h, maxBytes)
}

func openCatFile(ctx context.Context, gitDir string) (BlobSource, error) {
	r, err := gitcatfile.Start(ctx, gitDir)
	if err != nil {
		return nil, err
	}
	return r, nil
}
