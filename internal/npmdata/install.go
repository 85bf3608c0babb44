package npmdata

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Installed returns every package spec tests install with its dependencies (InstallDir).
func Installed() []string { return []string{MCPSDK} }

// InstallDir returns the directory a pinned package (a spec such as MCPSDK) is installed in with
// its dependencies, .cache/npm-install/<spec> at the module root: the package is in its
// node_modules/, where Node resolves it from a script in the directory. The package is installed
// with `npm install` first if it is not there. Unlike Dir (npm pack, one package's own files), this
// is for packages tests run, which need their dependencies. The error wraps ErrNoNPM when the
// package is not installed and npm is not either.
func InstallDir(spec string) (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	return install(root, spec)
}

// RequireInstalled returns the directory of pkg as InstallDir does, installing it if needed. It
// skips the test when npm is not installed to install it, and fails it on any other error.
func RequireInstalled(t testing.TB, pkg string) string {
	t.Helper()
	dir, err := InstallDir(pkg)
	if err != nil {
		FatalOrSkip(t, err)
	}
	return dir
}

// install returns root/.cache/npm-install/<spec>, installing the package there with `npm install`
// when it is not. As with ensure, the directory appears at once and whole (the rename of the
// directory npm installed into), and concurrent installers take turns on an exclusive lock on
// .cache/npm-install/.lock, so npm runs once.
func install(root, spec string) (string, error) {
	name, err := packageName(spec)
	if err != nil {
		return "", err
	}
	cache := filepath.Join(root, ".cache", "npm-install")
	dest := filepath.Join(cache, spec)
	if installed(dest, name) {
		return dest, nil
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", err
	}
	unlock, err := lock(filepath.Join(cache, ".lock"))
	if err != nil {
		return "", fmt.Errorf("npm package %s: %w", spec, err)
	}
	defer unlock()
	if installed(dest, name) { // installed by another process while this one waited for the lock
		return dest, nil
	}
	if _, err := exec.LookPath("npm"); err != nil {
		return "", fmt.Errorf("npm package %s is not installed in %s and %w; install Node.js/npm or run ./scripts/fetch-testdata.sh on a machine with npm",
			spec, dest, ErrNoNPM)
	}
	if err := npmInstall(cache, spec, name, dest); err != nil {
		return "", fmt.Errorf("install npm package %s into %s: %w", spec, dest, err)
	}
	return dest, nil
}

// packageName is the name of a spec name@version: @scope/name@1.2.3 is @scope/name.
func packageName(spec string) (string, error) {
	at := strings.LastIndexByte(spec, '@')
	if !filepath.IsLocal(spec) || at <= 0 || at == len(spec)-1 {
		return "", fmt.Errorf("npm package %q: not a pinned package spec (name@version)", spec)
	}
	return spec[:at], nil
}

func installed(dest, name string) bool {
	_, err := os.Stat(filepath.Join(dest, "node_modules", filepath.FromSlash(name), "package.json"))
	return err == nil
}

// npmInstall installs spec with its dependencies into a temporary directory of cache and renames
// that to dest. The caller holds the lock.
func npmInstall(cache, spec, name, dest string) error {
	stale, _ := filepath.Glob(filepath.Join(cache, tempPrefix+"*"))
	for _, p := range stale {
		if err := os.RemoveAll(p); err != nil {
			return fmt.Errorf("remove what an interrupted install left: %w", err)
		}
	}
	tmp, err := os.MkdirTemp(cache, tempPrefix)
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	prefix := filepath.Join(tmp, "install")
	if err := os.Mkdir(prefix, 0o755); err != nil {
		return err
	}
	var stderr bytes.Buffer
	cmd := exec.Command("npm", "install", "--no-audit", "--no-fund", "--ignore-scripts", "--prefix", prefix, spec)
	cmd.Dir, cmd.Stdout, cmd.Stderr = prefix, io.Discard, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("npm install %s: %v: %s", spec, err, strings.TrimSpace(stderr.String()))
	}
	if !installed(prefix, name) {
		return fmt.Errorf("npm install %s left no node_modules/%s/package.json: %s", spec, name, strings.TrimSpace(stderr.String()))
	}
	if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
		return err
	}
	// A directory without the package (not one this code made) would stop the rename; move it
	// into tmp, which is removed.
	if _, err := os.Lstat(dest); err == nil {
		if err := os.Rename(dest, filepath.Join(tmp, "old")); err != nil {
			return err
		}
	}
	return os.Rename(prefix, dest) // the rename makes a half-installed package impossible to see
}
