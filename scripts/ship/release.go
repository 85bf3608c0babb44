package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// sbomTool is the SBOM generator, CycloneDX's own for Go modules, run at a pinned version with
// `go run`, so the release needs nothing installed beyond Go.
const sbomTool = "github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod@v1.10.0"

func runRelease(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("ship release", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("C", ".", "a directory inside the Parley checkout to build; relative paths are relative to it")
	version := fs.String("version", "", "the version parley reports (default: the chart's appVersion)")
	out := fs.String("out", "", "the directory for the artifacts, emptied first (default: <checkout>/dist/release)")
	platforms := fs.String("platform", "linux/amd64,linux/arm64,darwin/amd64,darwin/arm64", "platforms, OS/ARCH comma-separated")
	if err := parseCommand(fs, args, stderr, "Builds parley per platform (as the image builds it), a CycloneDX SBOM per binary and SHA256SUMS."); err != nil {
		return err
	}
	src, err := readSource(ctx, *dir)
	if err != nil {
		return err
	}
	targets, err := parseTargets(*platforms)
	if err != nil {
		return err
	}
	if *version == "" {
		*version = src.Chart.AppVersion
	}
	*out = under(*dir, *out)
	if *out == "" {
		*out = filepath.Join(src.Root, "dist", "release")
	}
	if src.Modified {
		fmt.Fprintf(stderr, "ship: warning: the checkout has uncommitted changes; the artifacts are not commit %s's\n", src.Revision)
	}
	files, err := release(ctx, src, *version, targets, *out)
	if err != nil {
		return err
	}
	for _, f := range files {
		fmt.Fprintln(stdout, filepath.Join(*out, f))
	}
	return nil
}

// release writes, per target, parley_<version>_<os>_<arch> and its SBOM
// parley_<version>_<os>_<arch>.cdx.json, then SHA256SUMS over all of them (the format
// `sha256sum -c` checks). It returns the file names written.
func release(ctx context.Context, src source, version string, targets []target, out string) ([]string, error) {
	if err := os.RemoveAll(out); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, err
	}
	var files []string
	for _, t := range targets {
		base := fmt.Sprintf("parley_%s_%s_%s", version, t.OS, t.Arch)
		if err := buildParley(ctx, src, version, t, filepath.Join(out, base)); err != nil {
			return nil, err
		}
		if err := sbom(ctx, src, version, filepath.Join(out, base), filepath.Join(out, base+".cdx.json")); err != nil {
			return nil, err
		}
		files = append(files, base, base+".cdx.json")
	}
	sort.Strings(files)
	var sums strings.Builder
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(out, f))
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(b)
		fmt.Fprintf(&sums, "%s  %s\n", hex.EncodeToString(sum[:]), f)
	}
	if err := os.WriteFile(filepath.Join(out, "SHA256SUMS"), []byte(sums.String()), 0o644); err != nil {
		return nil, err
	}
	return append(files, "SHA256SUMS"), nil
}

// sbom lists what the binary links, read from the binary itself (its build information, as
// `go version -m` prints it): every module at the version compiled in, and the Go standard
// library's release, which vulnerability scanners need. Reading the binary rather than the module
// graph lists exactly what ships and works in any checkout (the generator's module mode reads the
// version from .git with go-git, which fails in a git worktree). No serial number or timestamp:
// the same commit gives the same SBOM.
func sbom(ctx context.Context, src source, version, binary, out string) error {
	cmd := exec.CommandContext(ctx, "go", "run", sbomTool, "bin", "-json", "-std", "-noserial", "-notimestamp",
		"-version", version, "-output", out, binary)
	cmd.Dir = src.Root
	cmd.Env = append(os.Environ(), "GOFLAGS=")
	var errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &errb, &errb
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("SBOM of %s (%s): %w\n%s", filepath.Base(binary), sbomTool, err, errb.String())
	}
	return nil
}
