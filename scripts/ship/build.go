package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/parleyhq/parley/scripts/ship/imagespec"
)

// errUsage is a flag error the flag package has already reported.
var errUsage = errors.New("usage")

// versionPkg holds the variables release builds set with -ldflags -X.
const versionPkg = "github.com/parleyhq/parley/internal/version"

// source is the checkout being shipped.
type source struct {
	Root     string    // the repository's top directory
	Revision string    // the commit checked out
	Time     time.Time // the commit's time, or SOURCE_DATE_EPOCH: every timestamp shipped
	Modified bool      // uncommitted changes: the build is not the commit's
	Chart    imagespec.Chart
}

// readSource finds the repository around dir (or dir itself when root is set) and reads its commit.
func readSource(ctx context.Context, dir string) (source, error) {
	git := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("git %s in %s: %w: %s", strings.Join(args, " "), dir, err, strings.TrimSpace(errb.String()))
		}
		return strings.TrimSpace(out.String()), nil
	}
	root, err := git("rev-parse", "--show-toplevel")
	if err != nil {
		return source{}, fmt.Errorf("ship builds from a Git checkout of Parley: %w", err)
	}
	src := source{Root: root}
	if src.Revision, err = git("rev-parse", "HEAD"); err != nil {
		return source{}, err
	}
	status, err := git("status", "--porcelain", "--untracked-files=no")
	if err != nil {
		return source{}, err
	}
	src.Modified = status != ""
	epoch := os.Getenv("SOURCE_DATE_EPOCH") // the reproducible-builds.org convention
	if epoch == "" {
		if epoch, err = git("log", "-1", "--format=%ct", "HEAD"); err != nil {
			return source{}, err
		}
	}
	sec, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil {
		return source{}, fmt.Errorf("source date %q is not seconds since 1970: %w", epoch, err)
	}
	src.Time = time.Unix(sec, 0).UTC()
	if src.Chart, err = imagespec.ReadChart(root); err != nil {
		return source{}, err
	}
	return src, nil
}

// target is one platform parley is built for.
type target struct{ OS, Arch string }

func (t target) String() string { return t.OS + "/" + t.Arch }

func parseTargets(list string) ([]target, error) {
	var ts []target
	for _, s := range strings.Split(list, ",") {
		os, arch, ok := strings.Cut(strings.TrimSpace(s), "/")
		if !ok || os == "" || arch == "" {
			return nil, fmt.Errorf("platform %q: want OS/ARCH, such as linux/amd64", s)
		}
		ts = append(ts, target{os, arch})
	}
	return ts, nil
}

// buildParley compiles cmd/parley for t into out, the one way every shipped binary is built: static
// (CGO_ENABLED=0: the image has no C library, and the SQLite driver is pure Go), -trimpath (no
// build machine paths), the version, commit, commit time and modified flag set at link time
// (`parley version` reads them; Go's own -buildvcs stamp is kept too, but Go stamps nothing in a
// git worktree), symbol tables stripped, and the baseline instruction sets named so the build
// environment cannot change them.
func buildParley(ctx context.Context, src source, version string, t target, out string) error {
	out, err := filepath.Abs(out)
	if err != nil {
		return err
	}
	ldflags := fmt.Sprintf("-s -w -X %[1]s.version=%[2]s -X %[1]s.revision=%[3]s -X %[1]s.buildTime=%[4]s -X %[1]s.modified=%[5]t",
		versionPkg, version, src.Revision, src.Time.Format(time.RFC3339), src.Modified)
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=true", "-ldflags", ldflags, "-o", out, "./cmd/parley")
	cmd.Dir = src.Root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+t.OS, "GOARCH="+t.Arch, "GOFLAGS=",
		"GOAMD64=v1", "GOARM64=v8.0")
	var errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &errb, &errb
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("build parley for %s: %w\n%s", t, err, errb.String())
	}
	return nil
}

// under resolves a relative path given on the command line against dir (-C), where the user
// stood: the wrappers run ship from its own module's directory.
func under(dir, p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(dir, p)
}
