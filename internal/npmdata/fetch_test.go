package npmdata

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

const fakeSpec = "@parley/fake@1.0.0"

// TestMain lets a test run this binary as one of several processes fetching at the same time.
func TestMain(m *testing.M) {
	if root := os.Getenv("NPMDATA_TEST_ENSURE_ROOT"); root != "" {
		fetch := ensure
		if os.Getenv("NPMDATA_TEST_ENSURE_INSTALL") != "" {
			fetch = install
		}
		dir, err := fetch(root, os.Getenv("NPMDATA_TEST_ENSURE_SPEC"))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println(dir)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

type entry struct {
	name, body string
	mode       int64
	typ        byte
}

// tgz writes a gzipped tarball of entries to a file in a temporary directory.
func tgz(t *testing.T, entries ...entry) string {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		typ := e.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		mode := e.mode
		if mode == 0 {
			mode = 0o644
		}
		hdr := &tar.Header{Name: e.name, Mode: mode, Typeflag: typ, Size: int64(len(e.body))}
		if typ != tar.TypeReg {
			hdr.Size = 0
		}
		if typ == tar.TypeSymlink {
			hdr.Linkname = e.body
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if typ == tar.TypeReg {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "fixture.tgz")
	if err := os.WriteFile(file, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// validTgz is a small package as npm packs it: everything under package/.
func validTgz(t *testing.T) string {
	return tgz(t,
		entry{name: "package/package.json", body: `{"name":"@parley/fake","version":"1.0.0"}`},
		entry{name: "package/lib/data.json", body: `[1,2,3]`},
		entry{name: "package/bin/run", body: "#!/bin/sh\n", mode: 0o755})
}

// fakeNPM puts an executable npm, running script, first on PATH. Every run appends its arguments
// to the returned counter file.
func fakeNPM(t *testing.T, script string) (counter string) {
	t.Helper()
	bin := t.TempDir()
	counter = filepath.Join(t.TempDir(), "runs")
	text := "#!/bin/sh\necho \"$*\" >> '" + counter + "'\n" + script
	if err := os.WriteFile(filepath.Join(bin, "npm"), []byte(text), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	return counter
}

// packing is a fake npm that takes a while and then "packs" the tarball file.
func packing(t *testing.T, file string) string {
	return fakeNPM(t, "sleep 0.3\ncp '"+file+"' ./parley-fake-1.0.0.tgz\n")
}

func runs(t *testing.T, counter string) []string {
	t.Helper()
	b, err := os.ReadFile(counter)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// checkFetched checks the package is whole at its place in the cache, npm ran once as the script
// ran it, and nothing else is left in the cache.
func checkFetched(t *testing.T, root, counter string) {
	t.Helper()
	dest := filepath.Join(root, ".cache", "npm", "@parley", "fake@1.0.0")
	if got := runs(t, counter); len(got) != 1 || got[0] != "pack --silent --loglevel=error "+fakeSpec {
		t.Errorf("npm ran %d times, want once with the script's arguments: %q", len(got), got)
	}
	for file, want := range map[string]string{"package.json": `{"name":"@parley/fake","version":"1.0.0"}`, "lib/data.json": `[1,2,3]`} {
		if b, err := os.ReadFile(filepath.Join(dest, file)); err != nil || string(b) != want {
			t.Errorf("%s: %q, %v; want %q", file, b, err, want)
		}
	}
	if fi, err := os.Stat(filepath.Join(dest, "bin", "run")); err != nil || fi.Mode().Perm()&0o100 == 0 {
		t.Errorf("bin/run is not executable: %v, %v", fi, err)
	}
	entries, _ := os.ReadDir(filepath.Join(root, ".cache", "npm"))
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if strings.Join(names, " ") != ".lock @parley" {
		t.Errorf(".cache/npm holds %q, want only .lock and @parley", names)
	}
	if entries, _ := os.ReadDir(filepath.Dir(dest)); len(entries) != 1 {
		t.Errorf(".cache/npm/@parley holds %d entries, want only the package", len(entries))
	}
}

// TestConcurrentGoroutinesFetchOnce: callers asking at the same time for a package not cached get
// the same directory, and npm runs once.
func TestConcurrentGoroutinesFetchOnce(t *testing.T) {
	counter := packing(t, validTgz(t))
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
			dirs[i], errs[i] = ensure(root, fakeSpec)
		}()
	}
	close(start)
	wg.Wait()
	want := filepath.Join(root, ".cache", "npm", fakeSpec)
	for i := range n {
		if errs[i] != nil || dirs[i] != want {
			t.Errorf("caller %d: %q, %v; want %q", i, dirs[i], errs[i], want)
		}
	}
	checkFetched(t, root, counter)
}

// TestConcurrentProcessesFetchOnce: test binaries started together (go test runs packages in
// parallel) fetch a package not cached once between them.
func TestConcurrentProcessesFetchOnce(t *testing.T) {
	counter := packing(t, validTgz(t))
	root := t.TempDir()
	const n = 4
	cmds, outs := make([]*exec.Cmd, n), make([]*bytes.Buffer, n)
	for i := range n {
		cmds[i], outs[i] = exec.Command(os.Args[0]), new(bytes.Buffer)
		cmds[i].Env = append(os.Environ(), "NPMDATA_TEST_ENSURE_ROOT="+root, "NPMDATA_TEST_ENSURE_SPEC="+fakeSpec)
		cmds[i].Stdout, cmds[i].Stderr = outs[i], outs[i]
		if err := cmds[i].Start(); err != nil {
			t.Fatal(err)
		}
	}
	want := filepath.Join(root, ".cache", "npm", fakeSpec)
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil || strings.TrimSpace(outs[i].String()) != want {
			t.Errorf("process %d: %v: %s; want %s", i, err, outs[i], want)
		}
	}
	checkFetched(t, root, counter)
}

// TestCachedNeedsNoNPM: a package already in .cache/npm (as scripts/fetch-testdata.sh always laid
// it out) is used as it is, without npm.
func TestCachedNeedsNoNPM(t *testing.T) {
	root := t.TempDir()
	dest := filepath.Join(root, ".cache", "npm", fakeSpec)
	if err := os.MkdirAll(dest, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dest, "package.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", t.TempDir())
	if dir, err := ensure(root, fakeSpec); err != nil || dir != dest {
		t.Fatalf("ensure: %q, %v; want %q", dir, err, dest)
	}
}

// TestNoNPM: without npm on PATH, a package not cached is ErrNoNPM, with a message saying what to do.
func TestNoNPM(t *testing.T) {
	root := t.TempDir()
	t.Setenv("PATH", t.TempDir())
	_, err := ensure(root, fakeSpec)
	if !errors.Is(err, ErrNoNPM) {
		t.Fatalf("ensure without npm: %v, want ErrNoNPM", err)
	}
	for _, want := range []string{fakeSpec, "npm is not installed", "install Node.js/npm", "./scripts/fetch-testdata.sh"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(root, ".cache", "npm", fakeSpec)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("destination: %v, want none", err)
	}
}

// TestNPMFails: when npm fails (package or registry not found), the error names the package and
// carries npm's stderr, it is not ErrNoNPM, and nothing is left in the cache but the lock.
func TestNPMFails(t *testing.T) {
	counter := fakeNPM(t, "printf 'half a tarball' > parley-fake-1.0.0.tgz\n"+
		"echo 'npm error code E404' >&2\necho 'npm error 404 Not Found - GET https://registry.npmjs.org/@parley%2ffake' >&2\nexit 1\n")
	root := t.TempDir()
	_, err := ensure(root, fakeSpec)
	if err == nil {
		t.Fatal("ensure succeeded with a failing npm")
	}
	if errors.Is(err, ErrNoNPM) {
		t.Errorf("a failing npm is ErrNoNPM: %v", err)
	}
	for _, want := range []string{fakeSpec, "E404"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if got := runs(t, counter); len(got) != 1 {
		t.Errorf("npm ran %d times", len(got))
	}
	entries, _ := os.ReadDir(filepath.Join(root, ".cache", "npm"))
	if len(entries) != 1 || entries[0].Name() != ".lock" {
		t.Errorf(".cache/npm holds %v, want only .lock", entries)
	}
}

// TestBadTarballs: a tarball with a name outside the package, or without package/package.json, is an
// error and leaves nothing at the destination.
func TestBadTarballs(t *testing.T) {
	for name, file := range map[string]string{
		"escape":     tgz(t, entry{name: "package/package.json", body: "{}"}, entry{name: "package/../../evil", body: "x"}),
		"absolute":   tgz(t, entry{name: "package/package.json", body: "{}"}, entry{name: "/tmp/evil", body: "x"}),
		"no package": tgz(t, entry{name: "other/package.json", body: "{}"}),
	} {
		t.Run(name, func(t *testing.T) {
			packing(t, file)
			root := t.TempDir()
			if dir, err := ensure(root, fakeSpec); err == nil || !strings.Contains(err.Error(), fakeSpec) {
				t.Fatalf("ensure: %q, %v; want an error naming the package", dir, err)
			}
			if _, err := os.Lstat(filepath.Join(root, ".cache", "npm", fakeSpec)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("destination: %v, want none", err)
			}
			if _, err := os.Lstat(filepath.Join(root, "evil")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("escaped file: %v, want none", err)
			}
		})
	}
}

// TestInterruptedFetchLeftovers: what an interrupted fetch leaves (the old script's .partial
// directory, a temporary directory of ours, a destination without package.json) does not stop the
// next fetch, which clears it away.
func TestInterruptedFetchLeftovers(t *testing.T) {
	counter := packing(t, validTgz(t))
	root := t.TempDir()
	cache := filepath.Join(root, ".cache", "npm")
	for _, dir := range []string{
		filepath.Join(cache, fakeSpec+".partial", "lib"),
		filepath.Join(cache, tempPrefix+"12345", "unpacked", "package", "lib"),
		filepath.Join(cache, fakeSpec, "lib"),
	} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "stale.json"), []byte("{"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(cache, fakeSpec+".partial", "package.json"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir, err := ensure(root, fakeSpec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "lib", "stale.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the stale destination's files survived: %v", err)
	}
	checkFetched(t, root, counter)
}

// TestFatalOrSkip: a test skips when npm is missing and fails on any other fetch error.
func TestFatalOrSkip(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, noNPM := ensure(t.TempDir(), fakeSpec)
	r := finish(t, noNPM)
	if !strings.Contains(r.skipped, "npm is not installed") || r.failed != "" {
		t.Errorf("without npm: skipped %q, failed %q; want a skip saying npm is not installed", r.skipped, r.failed)
	}
	failing := fmt.Errorf("fetch npm package %s: npm pack: exit status 1: npm error code E404", fakeSpec)
	if r := finish(t, failing); r.failed == "" || r.skipped != "" {
		t.Errorf("npm failing: skipped %q, failed %q; want a failure", r.skipped, r.failed)
	}
	if r := finish(t, nil); r.failed != "" || r.skipped != "" {
		t.Errorf("no error: skipped %q, failed %q; want neither", r.skipped, r.failed)
	}
}

// recorder is a testing.TB that records Skip and Fatal instead of ending the test.
type recorder struct {
	testing.TB
	skipped, failed string
}

func (r *recorder) Helper()           {}
func (r *recorder) Skip(args ...any)  { r.skipped = fmt.Sprint(args...); runtime.Goexit() }
func (r *recorder) Fatal(args ...any) { r.failed = fmt.Sprint(args...); runtime.Goexit() }

func finish(t *testing.T, err error) *recorder {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		FatalOrSkip(r, err)
	}()
	<-done
	return r
}
