package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/demo"
	"github.com/parleyhq/parley/internal/fakegithub"
	"github.com/parleyhq/parley/internal/schematest"
)

// lockedBuffer is a bytes.Buffer a command writes while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// setupOpen is where parley app create prints the address to open.
var setupOpen = regexp.MustCompile(`Open (http://\S+) in a browser`)

// browseSetup does what the user's browser does with the /setup address: open it, submit its
// form to GitHub, follow GitHub's redirect back. It returns the final page.
func browseSetup(t *testing.T, setupURL string) string {
	t.Helper()
	code, body, err := fakegithub.RegisterThroughSetup(http.DefaultClient, setupURL)
	if err != nil {
		t.Fatal(err)
	}
	if code != http.StatusOK {
		t.Fatalf("back from GitHub: %d\n%s", code, body)
	}
	return body
}

// demoInstallation puts the demo repository's files on the fake's acme/demo default branch and
// installs the App there (installation 42) with what Parley needs.
func demoInstallation(t *testing.T, gh *fakegithub.Server) {
	t.Helper()
	res, err := demo.Build(filepath.Join(t.TempDir(), "demo"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("git", "-C", res.Dir, "ls-files").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range strings.Fields(string(out)) {
		data, err := os.ReadFile(filepath.Join(res.Dir, f))
		if err != nil {
			t.Fatal(err)
		}
		gh.SetContent("acme/demo", res.Branch, f, data)
	}
	gh.SetRepository("acme/demo", map[string]any{"default_branch": res.Branch})
	gh.SetInstallation("acme/demo", 42)
	gh.SetGrants(42, fakegithub.Grants{
		Permissions: map[string]string{"checks": "write", "contents": "write", "members": "read", "metadata": "read", "pull_requests": "write"},
		Events:      []string{"check_run", "check_suite", "issue_comment", "pull_request", "pull_request_review", "push"},
	})
}

// TestAppCreateThenDoctor follows docs/install.md against the fake GitHub: `parley app create`
// registers the App through the manifest flow and writes its credentials, and `parley doctor`
// with PARLEY_APP_DIR pointing at them prints every check on the demo installation and passes.
// Then each seam doctor exists for is broken in turn and must FAIL with exit 1: a key that is no
// key of the App, a memory limit under the render budgets, an installation missing a permission.
func TestAppCreateThenDoctor(t *testing.T) {
	gh := fakegithub.New(t)
	dir := filepath.Join(t.TempDir(), "parley-app")
	t.Setenv("PARLEY_GITHUB_URL", gh.URL+"/api/v3/")

	var out, errb lockedBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	code := make(chan int, 1)
	create := docCommand(t, "parley app create ", dir)
	go func() { code <- run(ctx, create, strings.NewReader(""), &out, &errb) }()
	var setupURL string
	for deadline := time.Now().Add(30 * time.Second); setupURL == ""; time.Sleep(10 * time.Millisecond) {
		if m := setupOpen.FindStringSubmatch(out.String()); m != nil {
			setupURL = m[1]
		} else if time.Now().After(deadline) {
			t.Fatalf("app create printed no address: %s %s", out.String(), errb.String())
		}
	}
	if page := browseSetup(t, setupURL); !strings.Contains(page, "is registered") {
		t.Fatalf("final page:\n%s", page)
	}
	if c := <-code; c != 0 || !strings.Contains(out.String(), "installations/new") {
		t.Fatalf("app create: exit %d\n%s\n%s", c, out.String(), errb.String())
	}

	demoInstallation(t, gh)
	doctorArgs := docCommand(t, "PARLEY_APP_DIR=./parley-app parley doctor ", dir)
	if !slices.Equal(doctorArgs, []string{"doctor", "--memory-limit", "2Gi"}) {
		t.Fatalf("docs/install.md's doctor command is now %q: update this test", doctorArgs)
	}
	t.Setenv("PARLEY_APP_DIR", dir)
	c, stdout, stderr := runCLI(t, doctorArgs...)
	t.Logf("parley doctor:\n%s", stdout)
	if c != 0 {
		t.Fatalf("doctor on a working install: exit %d\n%s\n%s", c, stdout, stderr)
	}
	for _, line := range []string{"ok    memory", "ok    app", "ok    webhook", "ok    installation acme", "policy acme/demo"} {
		if !strings.Contains(stdout, line) {
			t.Errorf("doctor's output lacks %q", line)
		}
	}

	var doc struct {
		OK     bool
		Checks []struct{ Name, Status, Detail, Next string }
	}
	_, js, _ := runCLI(t, "doctor", "--memory-limit", "2Gi", "--json")
	schematest.Validate(t, "doctor.schema.json", []byte(js))
	if err := json.Unmarshal([]byte(js), &doc); err != nil || !doc.OK || len(doc.Checks) != 5 {
		t.Errorf("--json: %v %+v\n%s", err, doc, js)
	}

	// A key that is no key of this App.
	other, _ := rsa.GenerateKey(rand.Reader, 2048)
	t.Setenv("PARLEY_PRIVATE_KEY", string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(other)})))
	c, stdout, _ = runCLI(t, "doctor", "--memory-limit", "2Gi")
	if c != exitFindings || !regexp.MustCompile(`FAIL  app .*rejects`).MatchString(stdout) || !strings.Contains(stdout, "next: ") {
		t.Errorf("a wrong key: exit %d\n%s", c, stdout)
	}
	os.Unsetenv("PARLEY_PRIVATE_KEY")

	// GitHub not answering is not a rejected key.
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	t.Setenv("PARLEY_GITHUB_URL", "http://"+closed.Addr().String()+"/")
	closed.Close()
	c, stdout, _ = runCLI(t, "doctor", "--memory-limit", "2Gi")
	if c != exitFindings || !strings.Contains(stdout, "did not answer") || strings.Contains(stdout, "rejects") {
		t.Errorf("GitHub unreachable: exit %d\n%s", c, stdout)
	}
	t.Setenv("PARLEY_GITHUB_URL", gh.URL+"/api/v3/")

	// The chart's old default: 512Mi under two 512 MiB renders.
	c, stdout, _ = runCLI(t, "doctor", "--memory-limit", "512Mi")
	if c != exitFindings || !strings.Contains(stdout, "FAIL  memory") || !strings.Contains(stdout, "at least 1540 MiB") {
		t.Errorf("512Mi: exit %d\n%s", c, stdout)
	}

	// An installation that never accepted contents: write.
	gh.SetGrants(42, fakegithub.Grants{Permissions: map[string]string{"checks": "write", "contents": "read", "members": "read", "metadata": "read", "pull_requests": "write"},
		Events: []string{"check_run", "check_suite", "issue_comment", "pull_request", "pull_request_review", "push"}})
	c, stdout, _ = runCLI(t, "doctor", "--memory-limit", "2Gi")
	if c != exitFindings || !strings.Contains(stdout, `contents: write (has "read")`) || !strings.Contains(stdout, "settings/installations/42") {
		t.Errorf("a missing permission: exit %d\n%s", c, stdout)
	}
}

// docCommand returns the arguments of the command docs/install.md tells users to run on the line
// starting with prefix (its comment dropped, ./parley-app as dir), without "parley" and the
// environment before it: the test runs exactly what the document says.
func docCommand(t *testing.T, prefix, dir string) []string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "install.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(doc), "\n") {
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		line, _, _ = strings.Cut(line, "#")
		fields := strings.Fields(line)
		for len(fields) > 0 && fields[0] != "parley" {
			fields = fields[1:]
		}
		var args []string
		for _, f := range fields[1:] {
			args = append(args, strings.ReplaceAll(f, "./parley-app", dir))
		}
		return args
	}
	t.Fatalf("docs/install.md has no line starting %q", prefix)
	return nil
}

func TestParseMemory(t *testing.T) {
	for in, want := range map[string]int64{"536870912": 512 << 20, "512Mi": 512 << 20, "2Gi": 2 << 30, "1G": 1e9, "max\n": -1, "1536Mi\n": 1536 << 20} {
		if got, err := parseMemory(in); err != nil || got != want {
			t.Errorf("parseMemory(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "Mi", "-1", "0", "1.5Gi", "9999999999Ti", "lots"} {
		if _, err := parseMemory(in); err == nil {
			t.Errorf("parseMemory(%q) accepted", in)
		}
	}
}

func FuzzParseMemory(f *testing.F) {
	for _, s := range []string{"512Mi", "max", "2Gi", "1G", "9223372036854775807", "0", "-5Ki"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := parseMemory(s)
		if err == nil && n == 0 {
			t.Errorf("parseMemory(%q) = 0 without an error", s)
		}
		if err == nil && n < -1 {
			t.Errorf("parseMemory(%q) = %d", s, n)
		}
	})
}

var setupLogged = regexp.MustCompile(`"setup_url":"([^"]+)"`)

// TestServeRegistersAtSetup: `parley serve` with an empty app_dir serves the manifest flow at
// /setup behind the token it logs, writes the App's files, then serves as that App: GitHub
// accepts its key. A visitor without the token gets nothing.
func TestServeRegistersAtSetup(t *testing.T) {
	gh := fakegithub.New(t)
	dir := filepath.Join(t.TempDir(), "app")
	t.Setenv("PARLEY_APP_DIR", dir)
	t.Setenv("PARLEY_GITHUB_URL", gh.URL+"/")
	t.Setenv("PARLEY_LISTEN", "127.0.0.1:0")
	t.Setenv("PARLEY_STORE", filepath.Join(t.TempDir(), "parley.db"))
	var out, errb lockedBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	code := make(chan int, 1)
	go func() { code <- run(ctx, []string{"serve"}, strings.NewReader(""), &out, &errb) }()
	waitFor := func(what string, re *regexp.Regexp) []string {
		t.Helper()
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if m := re.FindStringSubmatch(errb.String()); m != nil {
				return m
			}
			select {
			case c := <-code:
				t.Fatalf("serve exited %d before %s:\n%s", c, what, errb.String())
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("serve never logged %s:\n%s", what, errb.String())
			}
		}
	}
	setupURL := waitFor("the /setup address", setupLogged)[1]
	u, _ := url.Parse(setupURL)
	u.RawQuery = ""
	resp, err := http.Get(u.String())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("/setup without the token: %d, want 403", resp.StatusCode)
	}
	browseSetup(t, setupURL)
	waitFor("the key accepted", regexp.MustCompile(`GitHub accepts the App's key`))
	for _, f := range []string{"app-id", "private-key.pem", "webhook-secrets"} {
		if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v %v", f, err, fi)
		}
	}
	cancel()
	if c := <-code; c != 0 {
		t.Errorf("serve exited %d:\n%s", c, errb.String())
	}
}
