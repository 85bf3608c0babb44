package layering

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/parleyhq/parley"

// layer ranks the top-level folders: a package may import its own folder's packages and those of
// lower layers only. webhooks and reconcile share a layer and must not import each other.
var layer = map[string]int{
	"core":      0,
	"trailers":  1,
	"policy":    1,
	"webhooks":  2,
	"reconcile": 2,
	"app":       3,
	"cmd":       4,
}

// support folders sit beside the layers: internal/ holds test support and the demo repository
// (importable by every layer, importing no layer above core), bench/, examples/ and scripts/ are
// programs and tests that may import anything.
var support = map[string]bool{"internal": true, "bench": true, "examples": true, "scripts": true}

// githubOrHTTP are imports the domain core and the two middle layers never need: GitHub's API
// belongs to app/, HTTP serving to webhooks/ and app/.
var githubOrHTTP = []string{"github.com/google/go-github/", "net/http"}

type pkgImports struct {
	dir     string   // slash path below the module root
	imports []string // of its non-test files
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		t.Fatalf("module root not found at %s: %v", dir, err)
	}
	return dir
}

// readPackages parses the imports of every non-test Go file of the module (not the harness
// modules under tests/, which have go.mod files of their own).
func readPackages(t *testing.T) []pkgImports {
	t.Helper()
	root := moduleRoot(t)
	byDir := map[string]map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			if path != root {
				if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
					return filepath.SkipDir
				}
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		rel = filepath.ToSlash(rel)
		if byDir[rel] == nil {
			byDir[rel] = map[string]bool{}
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			byDir[rel][p] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []pkgImports
	for dir, imps := range byDir {
		p := pkgImports{dir: dir}
		for imp := range imps {
			p.imports = append(p.imports, imp)
		}
		out = append(out, p)
	}
	if len(out) < 20 {
		t.Fatalf("read only %d packages: the walk is broken", len(out))
	}
	return out
}

func top(dir string) string { return strings.SplitN(dir, "/", 2)[0] }

// allowed says whether package dir may import the module's package imp (both slash paths below
// the module root), and why not.
func allowed(dir, imp string) (bool, string) {
	from, to := top(dir), top(imp)
	if support[from] && from != "internal" {
		return true, ""
	}
	if from == "internal" {
		if to == "internal" || to == "core" {
			return true, ""
		}
		return false, "internal/ is support for every layer and imports no layer above core"
	}
	fromRank, ok := layer[from]
	if !ok {
		return false, "top-level folder " + from + " is not in docs/dev/layout.md"
	}
	if to == "internal" || to == from {
		return true, ""
	}
	toRank, ok := layer[to]
	if !ok {
		return false, imp + " is not importable by product code"
	}
	if toRank >= fromRank {
		return false, "arrows run cmd -> app -> webhooks, reconcile -> policy, trailers -> core"
	}
	return true, ""
}

func TestImportsRunDownward(t *testing.T) {
	for _, p := range readPackages(t) {
		for _, imp := range p.imports {
			rel, ok := strings.CutPrefix(imp, module+"/")
			if !ok {
				continue
			}
			if ok, why := allowed(p.dir, rel); !ok {
				t.Errorf("%s imports %s: %s", p.dir, rel, why)
			}
		}
	}
}

func TestOnlyAppTalksToGitHubAndOnlyEdgesServeHTTP(t *testing.T) {
	for _, p := range readPackages(t) {
		from := top(p.dir)
		if from == "app" || from == "webhooks" || from == "cmd" || support[from] {
			continue
		}
		for _, imp := range p.imports {
			for _, bad := range githubOrHTTP {
				if strings.HasPrefix(imp, bad) {
					t.Errorf("%s imports %s: GitHub and HTTP belong to app/ and webhooks/", p.dir, imp)
				}
			}
		}
	}
}

// TestRulesCatchAWrongArrow proves the rules are not vacuous: the arrows the layout forbids are
// refused and the ones it relies on are allowed.
func TestRulesCatchAWrongArrow(t *testing.T) {
	for _, c := range []struct {
		dir, imp string
		ok       bool
	}{
		{"core", "trailers", false},
		{"core/fielddiff", "core", true},
		{"trailers/ledger", "trailers", true},
		{"trailers/ledger", "policy", false},
		{"policy", "reconcile/gitops", false},
		{"reconcile", "webhooks/store", false},
		{"webhooks", "reconcile/events", false},
		{"reconcile", "policy/arbiter", true},
		{"app", "reconcile", true},
		{"app/review", "app/report", true},
		{"reconcile", "app/report", false},
		{"cmd/parley", "app/config", true},
		{"internal/demo", "app", false},
		{"app", "internal/gittest", true},
		{"newtop", "core", false},
	} {
		if got, why := allowed(c.dir, c.imp); got != c.ok {
			t.Errorf("allowed(%s, %s) = %v (%s), want %v", c.dir, c.imp, got, why, c.ok)
		}
	}
}
