package layering

import (
	"strings"
	"testing"
)

// TestServeRunsNoProgram: the container image (scripts/ship) holds the parley binary and no other
// program: no git, no shell. So nothing `parley serve` links may run one: every layer below cmd/
// reads and writes Git with go-git and keeps its data in SQLite or PostgreSQL. Only cmd/ (the
// offline CLI's `review` fetching a shallow clone, `explain`) and test support may use os/exec.
//
// One exception, named here so that no other slips in: reconcile/gitops renders Helm charts and
// builds kustomizations in a child process (RenderProcess) because neither Helm's engine nor
// kustomize can be stopped in-process; the command it runs is the parley binary itself
// (`parley render-worker serve`, from os.Executable), which the image holds.
func TestServeRunsNoProgram(t *testing.T) {
	reexecsItself := map[string]bool{"reconcile/gitops": true}
	checked := 0
	for _, p := range readPackages(t) {
		top, _, _ := strings.Cut(p.dir, "/")
		if _, layered := layer[top]; !layered || top == "cmd" {
			continue
		}
		checked++
		if reexecsItself[p.dir] {
			continue
		}
		for _, imp := range p.imports {
			if imp == "os/exec" || imp == "golang.org/x/sys/execabs" {
				t.Errorf("%s imports %s: parley serve runs in an image with no programs to run (use go-git, not the git CLI)", p.dir, imp)
			}
		}
	}
	if checked < 20 {
		t.Fatalf("only %d packages checked: the walk misses the layers", checked)
	}
}
