package ledger

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/internal/gittest"
	"github.com/parleyhq/parley/internal/ledgertest"
)

// historyRepo builds, with the git CLI, a history with every kind of tree change the two history
// readers must agree on. It returns the runner and the hashes of main's commits, oldest first.
func historyRepo(t *testing.T) (*gittest.Runner, []string) {
	t.Helper()
	r := gittest.Init(t, time.Date(2026, 6, 1, 9, 0, 0, 0, time.UTC), time.Hour)
	var main []string
	commit := func(msg string) { main = append(main, r.Commit(msg)) }
	doc := func(n int) string {
		return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {n: \"%d\"}\n", n)
	}
	link := func(target, name string) {
		full := filepath.Join(r.Dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, full); err != nil {
			t.Fatal(err)
		}
	}
	remove := func(name string) {
		if err := os.RemoveAll(filepath.Join(r.Dir, filepath.FromSlash(name))); err != nil {
			t.Fatal(err)
		}
	}
	chmod := func(name string, mode os.FileMode) {
		if err := os.Chmod(filepath.Join(r.Dir, filepath.FromSlash(name)), mode); err != nil {
			t.Fatal(err)
		}
	}

	// The root commit: nested directories, names git would quote, files of other kinds and
	// files outside the policy's paths.
	for i, name := range []string{
		"k8s/apps/web.yaml", "k8s/apps/deep/er/still/api.yml", "infra/main.tf", "dir with space/ä ü.yaml",
		"quote\"d.yaml", "new\nline.yaml", "tab\tname.json", "README.md", "vendor/lib/x.yaml",
		"excluded/skip.yaml", "conf.yaml", "conf.yaml-a.yaml", "conf.yaml.b.yaml", "conf.yaml0.yaml",
		"tree.yaml/inner.yaml", "run.yaml", "same.yaml", "gone.yaml", "moved.yaml", "linked.yaml",
	} {
		r.Write(name, doc(i))
	}
	commit("root")

	// Additions, deletions, modifications, a rename, mode changes, a file that becomes a
	// symbolic link.
	r.Write("k8s/apps/web.yaml", doc(100))
	r.Write("k8s/apps/new.yaml", doc(101))
	r.Write("dir with space/ä ü.yaml", doc(102))
	r.Write("new\nline.yaml", doc(103))
	r.Write("vendor/lib/x.yaml", doc(104))
	r.Write("excluded/skip.yaml", doc(105))
	r.Write("README.md", "changed\n")
	remove("gone.yaml")
	r.Run("mv", "moved.yaml", "k8s/renamed.yaml")
	chmod("same.yaml", 0o755)
	r.Write("run.yaml", doc(106))
	chmod("run.yaml", 0o755)
	remove("linked.yaml")
	link("k8s/apps/web.yaml", "linked.yaml")
	commit("many changes")

	// A file replaced by a directory of the same name, and a directory by a file, between
	// siblings that sort around "name/".
	remove("conf.yaml")
	r.Write("conf.yaml/inner.yaml", doc(200))
	r.Write("conf.yaml/z/deeper.yaml", doc(201))
	r.Write("conf.yaml-a.yaml", doc(202))
	r.Write("conf.yaml0.yaml", doc(203))
	remove("tree.yaml")
	r.Write("tree.yaml", doc(204))
	commit("file to directory and back")

	// A submodule entry (a gitlink) named like a manifest, beside a change, committed through
	// the index; and a symbolic link that becomes a file again.
	sub := r.Run("rev-parse", "HEAD")
	r.Run("update-index", "--add", "--cacheinfo", "160000,"+sub+",charts/sub.yaml")
	r.Run("update-index", "--add", "--cacheinfo", "160000,"+sub+",k8s/apps/module")
	remove("linked.yaml")
	r.Write("linked.yaml", doc(300))
	r.Write("infra/main.tf", "resource \"x\" \"y\" {\n  n = 3\n}\n")
	r.Run("add", "linked.yaml", "infra/main.tf")
	r.Run("commit", "--quiet", "-m", "submodule")
	main = append(main, r.Run("rev-parse", "HEAD"))
	r.Clock.Tick()

	// The submodule moves to another commit and then becomes a file.
	r.Run("update-index", "--cacheinfo", "160000,"+main[1]+",charts/sub.yaml")
	r.Run("commit", "--quiet", "-m", "submodule bump")
	main = append(main, r.Run("rev-parse", "HEAD"))
	r.Clock.Tick()
	r.Run("rm", "--quiet", "--cached", "charts/sub.yaml")
	r.Write("charts/sub.yaml", doc(301))
	commit("submodule to file")

	// A side branch merged: the merge is compared with its first parent only.
	r.Run("checkout", "--quiet", "-b", "side")
	r.Write("side/only.yaml", doc(400))
	r.Write("k8s/apps/web.yaml", doc(401))
	r.Commit("side 1")
	r.Write("side/only.yaml", doc(402))
	r.Commit("side 2")
	r.Run("checkout", "--quiet", "main")
	r.Write("infra/other.tf", "resource \"x\" \"z\" {\n  n = 1\n}\n")
	commit("main meanwhile")
	r.Run("merge", "--quiet", "--no-ff", "-m", "merge side", "side")
	main = append(main, r.Run("rev-parse", "HEAD"))
	r.Clock.Tick()

	// An empty commit, then an executable file that is no longer, with and without new content.
	commit("nothing")
	chmod("same.yaml", 0o644)
	chmod("run.yaml", 0o644)
	r.Write("run.yaml", doc(500))
	commit("modes back")
	return r, main
}

// replay reads the history an update of main from cpTip would replay, through go-git or through
// git, one line per commit and one per file it changed.
func replay(t *testing.T, dir, cpTip string, viaGit bool) (lines []string, rebuilt bool) {
	t.Helper()
	opts := Options{Path: filepath.Join(t.TempDir(), "ledger.db"), Paths: core.PathFilter{Exclude: []string{"excluded/**", "**/vendor/**"}}}
	if viaGit {
		opts = EveryUpdateUsesGit(opts)
	}
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ref, err := l.resolveBranch("main")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	h, rebuilt, err := l.walk(ctx, "main", ref.Hash(), cpTip)
	if err != nil {
		t.Fatal(err)
	}
	defer h.close()
	// Each reader must be the one asked for, or the comparison compares go-git with itself.
	if _, git := h.(*gitHistory); git != viaGit {
		t.Fatalf("history read through %T", h)
	}
	if err := h.start(ctx); err != nil {
		t.Fatal(err)
	}
	rd := &reader{repo: l.repo, paths: l.opts.Paths.WithDefaults()}
	for range h.len() {
		rc, signed, err := h.next(rd)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, fmt.Sprintf("commit %s %s\tparents=%v signed-parents=%d", rc.c.Hash, strings.TrimSpace(rc.c.Message), rc.c.ParentHashes, len(signed.ParentHashes)))
		for _, f := range rc.files {
			lines = append(lines, fmt.Sprintf("  %q %s -> %s", f.path, f.oldHash, f.newHash))
		}
	}
	return lines, rebuilt
}

// sameHistory fails unless go-git and git read the same commits and the same files, in the same
// order, and returns the lines.
func sameHistory(t *testing.T, dir, cpTip string) ([]string, bool) {
	t.Helper()
	want, wantRebuilt := replay(t, dir, cpTip, false)
	got, gotRebuilt := replay(t, dir, cpTip, true)
	if gotRebuilt != wantRebuilt {
		t.Errorf("rebuilt through git %v, through go-git %v", gotRebuilt, wantRebuilt)
	}
	for i := range max(len(got), len(want)) {
		var g, w string
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if g != w {
			t.Fatalf("line %d differs:\ngit:    %s\ngo-git: %s\n\nwhole history through git:\n%s", i, g, w, strings.Join(got, "\n"))
		}
	}
	return want, wantRebuilt
}

// Through git rev-list, cat-file and diff-tree, an update replays the same commits with the same
// files in the same order as through go-git: additions, deletions, modifications, renames, mode
// changes, symbolic links, submodules, files replaced by directories and back, nested
// directories, names git would quote, files outside the paths, merges (their first parent only),
// the root; from the root, from a checkpoint, and when the checkpoint left the branch.
func TestHistoryThroughGitMatchesGoGit(t *testing.T) {
	r, main := historyRepo(t)

	lines, rebuilt := sameHistory(t, r.Dir, "")
	if rebuilt || !strings.HasPrefix(lines[0], "commit "+main[0]) {
		t.Fatalf("the replay should start at the root: rebuilt %v, %s", rebuilt, lines[0])
	}
	// Both readers could be wrong alike: what the changes should give, commit by commit.
	text := strings.Join(lines, "\n")
	for _, want := range []string{
		// The root: every supported file in the paths, in git's order ("conf.yaml" before
		// "conf.yaml-a.yaml"; "tree.yaml/" after "tree.yaml"'s siblings), not README.md,
		// vendor/ or excluded/.
		`"conf.yaml" 0000000000000000000000000000000000000000 -> `,
		`"new\nline.yaml" 0000000000000000000000000000000000000000 -> `,
		`"tab\tname.json" 0000000000000000000000000000000000000000 -> `,
		`"dir with space/ä ü.yaml" 0000000000000000000000000000000000000000 -> `,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("no line %s in:\n%s", want, text)
		}
	}
	files := map[string][]string{} // commit subject: its files' paths, in order
	var subject string
	for _, l := range lines {
		if strings.HasPrefix(l, "commit ") {
			subject, _, _ = strings.Cut(l[len("commit ")+40+1:], "\t")
			files[subject] = []string{}
			continue
		}
		path := l[2:strings.LastIndex(l[:len(l)-len(" -> 0000000000000000000000000000000000000000")], " ")]
		files[subject] = append(files[subject], path)
	}
	for subject, want := range map[string][]string{
		"root": {`"conf.yaml"`, `"conf.yaml-a.yaml"`, `"conf.yaml.b.yaml"`, `"conf.yaml0.yaml"`, `"dir with space/ä ü.yaml"`,
			`"gone.yaml"`, `"infra/main.tf"`, `"k8s/apps/deep/er/still/api.yml"`, `"k8s/apps/web.yaml"`, `"linked.yaml"`,
			`"moved.yaml"`, `"new\nline.yaml"`, `"quote\"d.yaml"`, `"run.yaml"`, `"same.yaml"`, `"tab\tname.json"`, `"tree.yaml/inner.yaml"`},
		// same.yaml only changed its mode: not a change of content.
		"many changes": {`"dir with space/ä ü.yaml"`, `"gone.yaml"`, `"k8s/apps/new.yaml"`, `"k8s/apps/web.yaml"`, `"k8s/renamed.yaml"`,
			`"linked.yaml"`, `"moved.yaml"`, `"new\nline.yaml"`, `"run.yaml"`},
		"file to directory and back": {`"conf.yaml"`, `"conf.yaml-a.yaml"`, `"conf.yaml/inner.yaml"`, `"conf.yaml/z/deeper.yaml"`,
			`"conf.yaml0.yaml"`, `"tree.yaml"`, `"tree.yaml/inner.yaml"`},
		"submodule":         {`"infra/main.tf"`, `"linked.yaml"`},
		"submodule bump":    {},
		"submodule to file": {`"charts/sub.yaml"`},
		"main meanwhile":    {`"infra/other.tf"`},
		"merge side":        {`"k8s/apps/web.yaml"`, `"side/only.yaml"`},
		"nothing":           {},
		"modes back":        {`"run.yaml"`},
	} {
		if got, ok := files[subject]; !ok || !slices.Equal(got, want) {
			t.Errorf("commit %s: files %v, want %v", subject, got, want)
		}
	}
	if len(files) != 10 {
		t.Errorf("%d commits replayed, want main's 10 (no side commit): %v", len(files), files)
	}

	// From a checkpoint: only the commits after it, the first compared with the checkpoint.
	lines, rebuilt = sameHistory(t, r.Dir, main[2])
	if rebuilt || !strings.HasPrefix(lines[0], "commit "+main[3]) {
		t.Fatalf("the replay should start after the checkpoint: rebuilt %v, %s", rebuilt, lines[0])
	}
	// A checkpoint only on the side branch is not on main's first-parent history: rebuilt.
	side := r.Run("rev-parse", "side")
	if _, rebuilt = sameHistory(t, r.Dir, side); !rebuilt {
		t.Fatal("a checkpoint off the first-parent history should rebuild the branch")
	}
}

// In a shallow clone both readers replay the boundary commit as a root (compared with nothing),
// and verify it as it is stored, parents and all.
func TestHistoryThroughGitInAShallowClone(t *testing.T) {
	r, _ := historyRepo(t)
	clone := filepath.Join(t.TempDir(), "clone")
	r.Run("clone", "--quiet", "--depth=3", "--branch=main", "file://"+r.Dir, clone)
	lines, rebuilt := sameHistory(t, clone, "")
	if rebuilt || !strings.Contains(lines[0], "parents=[] signed-parents=2") {
		t.Fatalf("the boundary commit (the merge) should be a root signed with its two parents: rebuilt %v, %s", rebuilt, lines[0])
	}
	var commits int
	for _, l := range lines {
		if strings.HasPrefix(l, "commit ") {
			commits++
		}
	}
	if commits != 3 {
		t.Fatalf("%d commits, want the clone's 3:\n%s", commits, strings.Join(lines, "\n"))
	}
}

// A git that stops answering in the middle of the history fails the update with an error that
// names the commit: the history is never silently shorter.
func TestHistoryThroughGitThatDies(t *testing.T) {
	r, _ := historyRepo(t)
	real, err := exec.LookPath("git")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, cmd, cut, want string }{
		// diff-tree's output ends in the middle of the root commit's files.
		{"diff-tree cut short", "diff-tree", "%[1]q \"$@\" | head -c 700; exit 0", "git diff-tree: commit "},
		// diff-tree says everything, then fails: the last commit's files may be missing.
		{"diff-tree fails at the end", "diff-tree", "%[1]q \"$@\"; echo 'fatal: out of memory' >&2; exit 128", "out of memory"},
		// The commits' cat-file (the blobs' has no --buffer) hears of two commits and a half,
		// answers for two and ends without an error.
		{"cat-file cut short", "--buffer", "head -c 100 | %[1]q \"$@\"; exit 0", "git cat-file: commit "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The real git, except for the one command.
			bin := t.TempDir()
			script := fmt.Sprintf("#!/bin/sh\nfor a; do if [ \"$a\" = %[2]s ]; then "+tc.cut+"; fi; done\nexec %[1]q \"$@\"\n", real, tc.cmd)
			if err := os.WriteFile(filepath.Join(bin, "git"), []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
			t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
			l, err := Open(r.Dir, EveryUpdateUsesGit(Options{Path: filepath.Join(t.TempDir(), "ledger.db")}))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			_, err = l.Update(context.Background(), "main")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("update: %v, want an error from %s", err, tc.want)
			}
			if testing.Verbose() {
				t.Log(err)
			}
			var indexed int
			if err := l.db.QueryRow(`SELECT count(*) FROM commits`).Scan(&indexed); err != nil || indexed != 0 {
				t.Errorf("%d commits indexed after the failed update (%v), want none", indexed, err)
			}
		})
	}
}

// With a history source every update goes through it, however short, and never reads a commit
// through go-git: go-git's first object read loads the pack's index, 90-100 ms on a large
// repository, which made a 10-commit update of onedr0p/home-ops cost over 100 ms.
func TestShortUpdatesWalkThroughGitAlone(t *testing.T) {
	r, main := historyRepo(t)
	opened := 0
	opts := EveryUpdateUsesGit(Options{Path: filepath.Join(t.TempDir(), "ledger.db")})
	opts.OpenHistory = func(ctx context.Context, gitDir string) (HistorySource, error) {
		opened++
		return openGitHistory(ctx, gitDir)
	}
	l, err := Open(r.Dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	r.Run("branch", "short", main[2])
	if st, err := l.Update(context.Background(), "short"); err != nil || st.Commits != 3 || opened != 1 {
		t.Fatalf("3 commits: %+v, %v; git history opened %d times, want 1", st, err, opened)
	}
	r.Run("branch", "-f", "short", main[3])
	if st, err := l.Update(context.Background(), "short"); err != nil || st.Commits != 1 || opened != 2 {
		t.Fatalf("1 commit from a checkpoint: %+v, %v; git history opened %d times, want 2", st, err, opened)
	}
	if st, err := l.Update(context.Background(), "main"); err != nil || st.Commits != len(main) || opened != 3 {
		t.Fatalf("%d commits: %+v, %v; git history opened %d times, want 3", len(main), st, err, opened)
	}
	if n := l.goGitCommitReads.Load(); n != 0 {
		t.Fatalf("%d commits read through go-git, want none", n)
	}
}

// Stopped midway while git reads the history (Ctrl-C), an update ends with the context's error
// and its git children ended, and the next one resumes through git from the checkpoint.
func TestInterruptedUpdateThroughGit(t *testing.T) {
	dir := t.TempDir()
	if err := ledgertest.Generate(context.Background(), dir, ledgertest.Params{Commits: 600, Apps: 4, Modules: 2, Seed: 3}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "ledger.db")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	opts := EveryUpdateUsesGit(Options{Path: path, CheckpointCommits: 100, Progress: func(p Progress) {
		if p.Done == 250 {
			cancel()
		}
	}})
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err = l.Update(ctx, "main"); !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted update: %v, want context.Canceled", err)
	}
	l.Close()
	opts.Progress = nil
	if l, err = Open(dir, opts); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	stats, err := l.Update(context.Background(), "main")
	if err != nil || stats.From == "" || stats.Commits != 400 || stats.Rebuilt {
		t.Fatalf("resumed update: %+v, %v; want the 400 commits after the checkpoint", stats, err)
	}
}
