package gitwrite

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/parleyhq/parley/internal/gittest"
)

// remote makes a bare repository with one commit on main, using the git CLI.
func remote(t *testing.T) (bare string, git func(dir string, args ...string) string) {
	t.Helper()
	root := t.TempDir()
	git = gittest.New(t, root).As("Dana", "dana@x").RunIn
	bare = filepath.Join(root, "remote.git")
	git(root, "init", "-q", "--bare", "-b", "main", bare)
	work := filepath.Join(root, "seed")
	git(root, "clone", "-q", bare, work)
	os.MkdirAll(filepath.Join(work, "k8s"), 0o755)
	os.WriteFile(filepath.Join(work, "k8s/web.yaml"), []byte("replicas: 3\n"), 0o644)
	git(work, "add", ".")
	git(work, "commit", "-q", "-m", "Baseline")
	git(work, "push", "-q", "origin", "HEAD:main")
	return bare, git
}

func setReplicas(n string) Edit {
	return func(f Files) (map[string][]byte, error) {
		return map[string][]byte{"k8s/web.yaml": []byte("replicas: " + n + "\n")}, nil
	}
}

const message = "Adopt replicas 7 from the HPA\n\nParley-Decision: adopt\nParley-Rule: owner.replicas\nIntent: availability\nMotivation: traffic\n"

func TestWriteCommitsOnceWithTrailers(t *testing.T) {
	bare, git := remote(t)
	who := object.Signature{Name: "Parley", Email: "parley@parley.example", When: time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)}
	out, err := Write(context.Background(), Request{URL: bare, Base: "main", Edit: setReplicas("7"), Message: message, Author: who})
	if err != nil || !out.Committed || out.Attempts != 1 {
		t.Fatalf("write: %+v %v", out, err)
	}
	if got := git(bare, "rev-parse", "main"); got != out.Commit {
		t.Errorf("main is %s, pushed %s", got, out.Commit)
	}
	if got := git(bare, "show", "main:k8s/web.yaml"); got != "replicas: 7" {
		t.Errorf("file on main: %q", got)
	}
	msg := git(bare, "log", "-1", "--format=%B", "main")
	cmd := exec.Command("git", "interpret-trailers", "--parse")
	cmd.Stdin = strings.NewReader(msg + "\n")
	parsed, _ := cmd.Output()
	if !strings.Contains(string(parsed), "Parley-Rule: owner.replicas") || !strings.Contains(string(parsed), "Intent: availability") {
		t.Errorf("trailers as git reads them: %q", parsed)
	}
	again, err := Write(context.Background(), Request{URL: bare, Base: "main", Edit: setReplicas("7"), Message: message, Author: who})
	if err != nil || again.Committed || git(bare, "rev-parse", "main") != out.Commit {
		t.Errorf("re-running the same edit must write nothing: %+v %v", again, err)
	}
}

func TestWriteRetriesWhenTheBranchMoves(t *testing.T) {
	bare, git := remote(t)
	other := filepath.Join(t.TempDir(), "other")
	git(filepath.Dir(other), "clone", "-q", bare, other)
	raced := false
	edit := func(f Files) (map[string][]byte, error) {
		if !raced { // someone else pushes between our fetch and our push
			raced = true
			os.WriteFile(filepath.Join(other, "README"), []byte("hello\n"), 0o644)
			git(other, "add", ".")
			git(other, "commit", "-q", "-m", "Someone else")
			git(other, "push", "-q", "origin", "HEAD:main")
		}
		return setReplicas("9")(f)
	}
	out, err := Write(context.Background(), Request{URL: bare, Base: "main", Edit: edit, Message: message,
		Author: object.Signature{Name: "Parley", Email: "p@x", When: time.Now()}})
	if err != nil || !out.Committed || out.Attempts != 2 {
		t.Fatalf("write: %+v %v", out, err)
	}
	if git(bare, "show", "main:README") != "hello" || git(bare, "show", "main:k8s/web.yaml") != "replicas: 9" {
		t.Error("both edits must land: the other writer's commit was overwritten or ours was lost")
	}
}

func TestWriteToAPullRequestBranch(t *testing.T) {
	bare, git := remote(t)
	base := git(bare, "rev-parse", "main")
	out, err := Write(context.Background(), Request{URL: bare, Base: "main", Branch: "parley/adopt-web-replicas", Edit: setReplicas("5"),
		Message: message, Author: object.Signature{Name: "Parley", Email: "p@x", When: time.Now()}})
	if err != nil || !out.Committed {
		t.Fatalf("%+v %v", out, err)
	}
	if git(bare, "rev-parse", "main") != base {
		t.Error("main must not move when writing to a pull request branch")
	}
	if git(bare, "rev-parse", "parley/adopt-web-replicas^") != base {
		t.Error("the branch must build on main")
	}
	if !out.Ahead || out.SameAsBase {
		t.Errorf("a commit on the work branch leaves it ahead of main, with other files: %+v", out)
	}
	// The same edit again: nothing to commit, but the branch is still ahead (its pull request may
	// never have been opened).
	again, err := Write(context.Background(), Request{URL: bare, Base: "main", Branch: "parley/adopt-web-replicas", Edit: setReplicas("5"),
		Message: message, Author: object.Signature{Name: "Parley", Email: "p@x", When: time.Now()}})
	if err != nil || again.Committed || !again.Ahead {
		t.Fatalf("second write: %+v %v", again, err)
	}
	// Undoing the edit on the branch leaves it with main's files: its pull request would be empty.
	undo, err := Write(context.Background(), Request{URL: bare, Base: "main", Branch: "parley/adopt-web-replicas", Edit: setReplicas("3"),
		Message: message, Author: object.Signature{Name: "Parley", Email: "p@x", When: time.Now()}})
	if err != nil || !undo.Committed || !undo.SameAsBase {
		t.Fatalf("undo: %+v %v", undo, err)
	}
	// Once merged into main, the branch is no longer ahead.
	git(bare, "update-ref", "refs/heads/main", "parley/adopt-web-replicas")
	merged, err := Write(context.Background(), Request{URL: bare, Base: "main", Branch: "parley/adopt-web-replicas", Edit: setReplicas("3"),
		Message: message, Author: object.Signature{Name: "Parley", Email: "p@x", When: time.Now()}})
	if err != nil || merged.Committed || merged.Ahead {
		t.Fatalf("after the merge: %+v %v", merged, err)
	}
	if _, err := Write(context.Background(), Request{URL: bare, Base: "nope", Edit: setReplicas("5"), Message: message}); err == nil {
		t.Error("a missing base branch must be an error")
	}
}
