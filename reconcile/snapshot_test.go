package reconcile

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"

	"github.com/parleyhq/parley/internal/gittest"
)

// TestReadTreeReadsOnlyTheFilesItWants: a pull request's head tree is read for its manifests
// (the dependency graph of parley review and the App), not for the Go sources, images and
// documents beside them. The blobs of those are removed from the repository here, as a partial
// clone or a snapshot without its largest files lacks them: reading them would fail.
func TestReadTreeReadsOnlyTheFilesItWants(t *testing.T) {
	r := gittest.Init(t, time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC), time.Hour)
	r.Write("k8s/prod/web.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web, namespace: prod}\ndata: {a: \"1\"}\n")
	r.Write("cmd/server/main.go", "package main\n\nfunc main() {}\n")
	r.Write("docs/assets/ui.gif", "GIF89a not really")
	head := r.Commit("Add web")
	for _, p := range []string{"cmd/server/main.go", "docs/assets/ui.gif"} {
		h := r.Run("rev-parse", "HEAD:"+p)
		if err := os.Remove(filepath.Join(r.Dir, ".git", "objects", h[:2], h[2:])); err != nil {
			t.Fatal(err)
		}
	}
	repo, err := git.PlainOpen(r.Dir)
	if err != nil {
		t.Fatal(err)
	}
	files, err := ReadTree(repo, plumbing.NewHash(head))
	if err != nil {
		t.Fatalf("ReadTree read a file it does not want: %v", err)
	}
	var names []string
	for n := range files {
		names = append(names, n)
	}
	if !slices.Equal(names, []string{"k8s/prod/web.yaml"}) {
		t.Errorf("files %v: want the manifest only", names)
	}
}
