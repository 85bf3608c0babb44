package npmdata

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"syscall"
)

// ErrNoNPM is wrapped by the error of Dir when a package is not cached and the npm binary is not on
// PATH; tests skip on it.
var ErrNoNPM = errors.New("npm is not installed")

// tempPrefix names the directories fetches work in, inside .cache/npm/. Fetches run under the lock,
// so one found while holding the lock was left by an interrupted fetch.
const tempPrefix = ".fetch-"

// ensure returns root/.cache/npm/<spec>, fetching the package with `npm pack` when it is not there.
// The package appears at once and whole (a rename of its unpacked directory), and processes
// fetching at the same time take turns on an exclusive lock on .cache/npm/.lock, so npm runs once.
func ensure(root, spec string) (string, error) {
	if !filepath.IsLocal(spec) {
		return "", fmt.Errorf("npm package %q: not a package spec", spec)
	}
	cache := filepath.Join(root, ".cache", "npm")
	dest := filepath.Join(cache, spec)
	if cached(dest) {
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
	if cached(dest) { // fetched by another process while this one waited for the lock
		return dest, nil
	}
	if _, err := exec.LookPath("npm"); err != nil {
		return "", fmt.Errorf("npm package %s is not in %s and %w; install Node.js/npm or run ./scripts/fetch-testdata.sh on a machine with npm",
			spec, dest, ErrNoNPM)
	}
	if err := fetch(cache, spec, dest); err != nil {
		return "", fmt.Errorf("fetch npm package %s into %s: %w", spec, dest, err)
	}
	return dest, nil
}

func cached(dest string) bool {
	_, err := os.Stat(filepath.Join(dest, "package.json"))
	return err == nil
}

// lock takes an exclusive flock on file, waiting for it; the returned func releases it.
func lock(file string) (func(), error) {
	f, err := os.OpenFile(file, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", file, err)
	}
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

// fetch packs spec with npm in a temporary directory of cache, unpacks it and renames its package/
// directory to dest. The caller holds the lock.
func fetch(cache, spec, dest string) error {
	// What an interrupted fetch left behind: our temporary directories, and the .partial directory
	// of scripts/fetch-testdata.sh when it was a shell script.
	stale, _ := filepath.Glob(filepath.Join(cache, tempPrefix+"*"))
	for _, p := range append(stale, dest+".partial") {
		if err := os.RemoveAll(p); err != nil {
			return fmt.Errorf("remove what an interrupted fetch left: %w", err)
		}
	}
	tmp, err := os.MkdirTemp(cache, tempPrefix)
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	var stderr bytes.Buffer
	cmd := exec.Command("npm", "pack", "--silent", "--loglevel=error", spec)
	cmd.Dir, cmd.Stdout, cmd.Stderr = tmp, io.Discard, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("npm pack %s: %v: %s", spec, err, strings.TrimSpace(stderr.String()))
	}
	tgzs, _ := filepath.Glob(filepath.Join(tmp, "*.tgz"))
	if len(tgzs) != 1 {
		return fmt.Errorf("npm pack %s left %d .tgz files, want 1: %s", spec, len(tgzs), strings.TrimSpace(stderr.String()))
	}
	unpacked := filepath.Join(tmp, "unpacked")
	if err := untar(tgzs[0], unpacked); err != nil {
		return fmt.Errorf("unpack %s: %w", filepath.Base(tgzs[0]), err)
	}
	pkg := filepath.Join(unpacked, "package")
	if !cached(pkg) {
		return fmt.Errorf("%s has no package/package.json", filepath.Base(tgzs[0]))
	}
	if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
		return err
	}
	// A directory without package.json (not one this code or the script made) would stop the
	// rename; move it out of the way into tmp, which is removed.
	if _, err := os.Lstat(dest); err == nil {
		if err := os.Rename(dest, filepath.Join(tmp, "old")); err != nil {
			return err
		}
	}
	return os.Rename(pkg, dest) // the rename makes a half-fetched package impossible to see
}

// untar unpacks the gzipped tarball file into the directory dir: directories and regular files
// only, every name inside dir.
func untar(file, dir string) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return err
	}
	tr := tar.NewReader(zr)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		name := path.Clean(hdr.Name)
		if !filepath.IsLocal(name) {
			return fmt.Errorf("entry %q is outside the package", hdr.Name)
		}
		target := filepath.Join(dir, filepath.FromSlash(name))
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			out, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644|os.FileMode(hdr.Mode)&0o111)
			if err != nil {
				return err
			}
			_, err = io.Copy(out, tr)
			if cerr := out.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		default:
			// npm's tarballs hold only directories and files; links and the rest are not unpacked.
		}
	}
}
