package npmdata

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// installing is a fake npm that takes a while and then "installs" fakeSpec and a dependency
// into the directory --prefix names, as npm install lays them out.
func installing(t *testing.T) string {
	return fakeNPM(t, `prefix=""
while [ $# -gt 0 ]; do
  case "$1" in --prefix) prefix="$2"; shift ;; esac
  shift
done
[ -n "$prefix" ] || { echo "no --prefix" >&2; exit 1; }
sleep 0.3
mkdir -p "$prefix/node_modules/@parley/fake" "$prefix/node_modules/dep"
printf '%s' '{"name":"@parley/fake","version":"1.0.0"}' > "$prefix/node_modules/@parley/fake/package.json"
printf '%s' '{"name":"dep","version":"2.0.0"}' > "$prefix/node_modules/dep/package.json"
printf '%s' '{"dependencies":{"@parley/fake":"^1.0.0"}}' > "$prefix/package.json"
`)
}

// checkInstalled checks the package and its dependency are whole at their place in the cache,
// npm ran once with the arguments the function promises, and nothing else is left in the cache.
func checkInstalled(t *testing.T, root, counter string) {
	t.Helper()
	dest := filepath.Join(root, ".cache", "npm-install", "@parley", "fake@1.0.0")
	got := runs(t, counter)
	if len(got) != 1 || !strings.HasPrefix(got[0], "install --no-audit --no-fund --ignore-scripts --prefix ") || !strings.HasSuffix(got[0], " "+fakeSpec) {
		t.Errorf("npm ran %d times, want once as npm install --no-audit --no-fund --ignore-scripts --prefix DIR %s: %q", len(got), fakeSpec, got)
	}
	for file, want := range map[string]string{
		"node_modules/@parley/fake/package.json": `{"name":"@parley/fake","version":"1.0.0"}`,
		"node_modules/dep/package.json":          `{"name":"dep","version":"2.0.0"}`,
	} {
		if b, err := os.ReadFile(filepath.Join(dest, file)); err != nil || string(b) != want {
			t.Errorf("%s: %q, %v; want %q", file, b, err, want)
		}
	}
	entries, _ := os.ReadDir(filepath.Join(root, ".cache", "npm-install"))
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if strings.Join(names, " ") != ".lock @parley" {
		t.Errorf(".cache/npm-install holds %q, want only .lock and @parley", names)
	}
}

// TestNpmInstallConcurrentGoroutinesInstallOnce: callers asking at the same time for a package not
// installed get the same directory, and npm runs once.
func TestNpmInstallConcurrentGoroutinesInstallOnce(t *testing.T) {
	counter := installing(t)
	root := t.TempDir()
	const n = 8
	dirs, errs := make([]string, n), make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			dirs[i], errs[i] = install(root, fakeSpec)
		}()
	}
	close(start)
	wg.Wait()
	want := filepath.Join(root, ".cache", "npm-install", fakeSpec)
	for i := range n {
		if errs[i] != nil || dirs[i] != want {
			t.Errorf("caller %d: %q, %v; want %q", i, dirs[i], errs[i], want)
		}
	}
	checkInstalled(t, root, counter)

	// Installed, it is used as it is, without npm.
	t.Setenv("PATH", t.TempDir())
	if dir, err := install(root, fakeSpec); err != nil || dir != want {
		t.Errorf("installed package: %q, %v", dir, err)
	}
}

// TestNpmInstallConcurrentProcessesInstallOnce: test binaries started together install a package
// once between them.
func TestNpmInstallConcurrentProcessesInstallOnce(t *testing.T) {
	counter := installing(t)
	root := t.TempDir()
	const n = 4
	cmds, outs := make([]*exec.Cmd, n), make([]*bytes.Buffer, n)
	for i := range n {
		cmds[i], outs[i] = exec.Command(os.Args[0]), new(bytes.Buffer)
		cmds[i].Env = append(os.Environ(), "NPMDATA_TEST_ENSURE_ROOT="+root, "NPMDATA_TEST_ENSURE_SPEC="+fakeSpec, "NPMDATA_TEST_ENSURE_INSTALL=1")
		cmds[i].Stdout, cmds[i].Stderr = outs[i], outs[i]
		if err := cmds[i].Start(); err != nil {
			t.Fatal(err)
		}
	}
	want := filepath.Join(root, ".cache", "npm-install", fakeSpec)
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil || strings.TrimSpace(outs[i].String()) != want {
			t.Errorf("process %d: %v: %s; want %s", i, err, outs[i], want)
		}
	}
	checkInstalled(t, root, counter)
}

// TestNpmInstallWithoutNPM: without npm, a package not installed is ErrNoNPM (tests skip on it),
// with a message saying what to do.
func TestNpmInstallWithoutNPM(t *testing.T) {
	root := t.TempDir()
	t.Setenv("PATH", t.TempDir())
	_, err := install(root, fakeSpec)
	if !errors.Is(err, ErrNoNPM) {
		t.Fatalf("install without npm: %v, want ErrNoNPM", err)
	}
	for _, want := range []string{fakeSpec, "npm is not installed", "./scripts/fetch-testdata.sh"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if r := finish(t, err); !strings.Contains(r.skipped, "npm is not installed") || r.failed != "" {
		t.Errorf("skipped %q, failed %q; want a skip", r.skipped, r.failed)
	}
}

// TestNpmInstallFails: when npm install fails, the error carries npm's stderr, is not ErrNoNPM,
// and leaves nothing but the lock; half an install is never seen.
func TestNpmInstallFails(t *testing.T) {
	fakeNPM(t, `prefix=""
while [ $# -gt 0 ]; do
  case "$1" in --prefix) prefix="$2"; shift ;; esac
  shift
done
mkdir -p "$prefix/node_modules/dep"
echo 'npm error code ETARGET' >&2
exit 1
`)
	root := t.TempDir()
	_, err := install(root, fakeSpec)
	if err == nil || errors.Is(err, ErrNoNPM) || !strings.Contains(err.Error(), "ETARGET") || !strings.Contains(err.Error(), fakeSpec) {
		t.Fatalf("install with a failing npm: %v", err)
	}
	entries, _ := os.ReadDir(filepath.Join(root, ".cache", "npm-install"))
	if len(entries) != 1 || entries[0].Name() != ".lock" {
		t.Errorf(".cache/npm-install holds %v, want only .lock", entries)
	}
}

func TestNpmInstallRejectsUnpinnedSpecs(t *testing.T) {
	for _, spec := range []string{"@parley/fake", "left-pad", "../evil@1.0.0", "/abs@1.0.0", "x@"} {
		if _, err := install(t.TempDir(), spec); err == nil || !strings.Contains(err.Error(), "not a pinned package spec") {
			t.Errorf("%q: %v", spec, err)
		}
	}
	if name, err := packageName(MCPSDK); err != nil || name != "@modelcontextprotocol/sdk" {
		t.Errorf("packageName(%s) = %q, %v", MCPSDK, name, err)
	}
}
