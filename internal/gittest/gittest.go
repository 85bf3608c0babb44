// Package gittest runs the git command line for tests that build real repositories: with no
// system or global configuration (so a developer's settings cannot change results), a fixed
// identity, and a failed command failing the test with git's own output.
package gittest

import (
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Runner runs git in Dir with Env added to the clean environment.
type Runner struct {
	T   testing.TB
	Dir string
	Env []string // extra variables, e.g. GIT_AUTHOR_DATE=...; later entries win
}

// New returns a Runner in dir committing as "Parley Test <test@parley.example>".
func New(t testing.TB, dir string) *Runner { return &Runner{T: t, Dir: dir} }

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
	cmd.Env = append(cmd.Env, r.Env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		r.T.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
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
