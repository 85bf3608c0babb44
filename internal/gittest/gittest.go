// Package gittest runs the git command line for tests that build real repositories: with no
// system or global configuration (so a developer's settings cannot change results), a fixed
// identity, and a failed command failing the test with git's own output.
package gittest

import (
	"bytes"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Runner runs git in Dir with Env added to the clean environment.
type Runner struct {
	T   testing.TB
	Dir string
	Env []string // extra variables, e.g. GIT_AUTHOR_DATE=...; later entries win
	// Clock, when set, dates every command's author and committer time, and Commit advances it,
	// so that histories are reproducible and their commits have distinct times. It is shared by
	// the copies As makes.
	Clock *Clock
}

// Clock hands out commit dates: Start, then one Step later for each commit.
type Clock struct {
	Start time.Time
	Step  time.Duration
	n     int
}

// Now is the date of the next commit.
func (c *Clock) Now() time.Time { return c.Start.Add(time.Duration(c.n) * c.Step) }

// Tick moves to the next commit's date.
func (c *Clock) Tick() { c.n++ }

// New returns a Runner in dir committing as "Parley Test <test@parley.example>".
func New(t testing.TB, dir string) *Runner { return &Runner{T: t, Dir: dir} }

// Init makes an empty repository on branch main in a new temporary directory, with commits dated
// by a clock that starts at start and advances by step per commit. A machine without git fails
// the test with a message saying so: these tests use the git command line as the oracle.
func Init(t testing.TB, start time.Time, step time.Duration) *Runner {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is required: the tests compare with and build repositories through the git CLI")
	}
	r := &Runner{T: t, Dir: t.TempDir(), Clock: &Clock{Start: start, Step: step}}
	r.Run("init", "--quiet", "--initial-branch=main")
	return r
}

// Write writes content to path (slash-separated, relative to Dir), making its directories.
func (r *Runner) Write(path, content string) {
	r.T.Helper()
	full := filepath.Join(r.Dir, filepath.FromSlash(path))
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		r.T.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
		r.T.Fatal(err)
	}
}

// Commit stages every change and commits it with msg exactly as given (no cleanup, empty commits
// allowed), then returns the new commit's hash and advances the clock.
func (r *Runner) Commit(msg string) string {
	r.T.Helper()
	r.Run("add", "-A")
	r.Run("commit", "--quiet", "--allow-empty", "--cleanup=verbatim", "-m", msg)
	if r.Clock != nil {
		r.Clock.Tick()
	}
	return r.Run("rev-parse", "HEAD")
}

// Run runs git with args and returns its trimmed output; a failure fails the test.
func (r *Runner) Run(args ...string) string { return r.RunIn(r.Dir, args...) }

// RunIn is Run in another directory.
func (r *Runner) RunIn(dir string, args ...string) string {
	r.T.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME="+r.Dir,
		"GIT_AUTHOR_NAME=Parley Test", "GIT_AUTHOR_EMAIL=test@parley.example",
		"GIT_COMMITTER_NAME=Parley Test", "GIT_COMMITTER_EMAIL=test@parley.example")
	if r.Clock != nil {
		when := r.Clock.Now().Format(time.RFC3339)
		cmd.Env = append(cmd.Env, "GIT_AUTHOR_DATE="+when, "GIT_COMMITTER_DATE="+when)
	}
	cmd.Env = append(cmd.Env, r.Env...)
	// Only standard output is returned, so that git's progress and hints on standard error never
	// mix into a hash or a listing; a failure shows both.
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		r.T.Fatalf("git %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), stderr.String())
	}
	return strings.TrimSpace(out.String())
}

// As returns a copy of r that commits as name <email>.
func (r *Runner) As(name, email string) *Runner {
	c := *r
	c.Env = append(append([]string(nil), r.Env...), "GIT_AUTHOR_NAME="+name, "GIT_AUTHOR_EMAIL="+email,
		"GIT_COMMITTER_NAME="+name, "GIT_COMMITTER_EMAIL="+email)
	return &c
}

// ServeHTTP serves the bare repository bare over git's smart HTTP protocol with the real
// `git http-backend`, as GitHub serves clones, and returns its clone URL. With push, the
// repository accepts pushes too (http.receivepack), as GitHub does for a token with write access.
func ServeHTTP(t testing.TB, bare string, push bool) string {
	t.Helper()
	execPath, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Fatalf("git --exec-path: %v", err)
	}
	if push {
		New(t, bare).Run("config", "http.receivepack", "true")
	}
	h := &cgi.Handler{Path: filepath.Join(strings.TrimSpace(string(execPath)), "git-http-backend"),
		Env: []string{"GIT_PROJECT_ROOT=" + filepath.Dir(bare), "GIT_HTTP_EXPORT_ALL=1", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null"}}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL + "/" + filepath.Base(bare)
}
