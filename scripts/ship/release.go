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

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/parleyhq/parley/scripts/ship/chartoci"
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
	chartRef := fs.String("chart-ref", "", "the chart's OCI reference (default: ghcr.io/parleyhq/charts/parley:<chart version>; helm install oci://ghcr.io/parleyhq/charts/parley)")
	signingKey := fs.String("signing-key", "", "sign SHA256SUMS with this PEM private key (ECDSA P-256, Ed25519 or RSA; password from $"+signingKeyPasswordEnv+"): writes SHA256SUMS.sig and SHA256SUMS.pem, which cosign verify-blob checks")
	pushChart := fs.Bool("push-chart", false, "push the chart's OCI artifact to --chart-ref (credentials from ~/.docker/config.json, as ship image --push)")
	if err := parseCommand(fs, args, stderr, "Builds parley per platform (as the image builds it), a CycloneDX SBOM per binary, the Helm chart (archive and OCI artifact) and SHA256SUMS."); err != nil {
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
	if *signingKey != "" {
		signed, err := signSums(under(*dir, *signingKey), *out)
		if err != nil {
			return err
		}
		files = append(files, signed...)
	}
	for _, f := range files {
		fmt.Fprintln(stdout, filepath.Join(*out, f))
	}
	chart, err := chartArtifact(src)
	if err != nil {
		return err
	}
	if *chartRef == "" {
		*chartRef = "ghcr.io/parleyhq/charts/" + chart.meta.Name + ":" + chart.meta.Version
	}
	tag, err := name.NewTag(*chartRef)
	if err != nil {
		return fmt.Errorf("chart reference %q: %w", *chartRef, err)
	}
	layoutDir := filepath.Join(*out, "chart-oci")
	if err := writeImageLayout(layoutDir, chart.image, tag); err != nil {
		return err
	}
	d, err := chart.image.Digest()
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "chart %s@%s\nlayout %s\n", tag, d, layoutDir)
	if *pushChart {
		if err := remote.Write(tag, chart.image, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
			return fmt.Errorf("push %s: %w", tag, err)
		}
		fmt.Fprintf(stdout, "pushed %s@%s\n", tag, d)
	}
	return nil
}

// builtChart is the chart packaged: its archive and the OCI artifact holding it.
type builtChart struct {
	meta    chartoci.Metadata
	archive []byte
	image   v1.Image
}

// chartArtifact packages charts/parley as helm package does, dated the commit, and wraps it as the
// OCI artifact helm push makes.
func chartArtifact(src source) (builtChart, error) {
	dir := filepath.Join(src.Root, "charts", "parley")
	m, err := chartoci.ReadMetadata(dir)
	if err != nil {
		return builtChart{}, err
	}
	archive, err := chartoci.Package(dir, m, src.Time)
	if err != nil {
		return builtChart{}, err
	}
	img, err := chartoci.Artifact(m, archive, src.Time)
	if err != nil {
		return builtChart{}, err
	}
	return builtChart{meta: m, archive: archive, image: img}, nil
}

// writeImageLayout replaces dir with an OCI layout holding img, named by the reference's tag.
func writeImageLayout(dir string, img v1.Image, tag name.Tag) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("write layout %s: %w", dir, err)
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": tag.TagStr()})); err != nil {
		return fmt.Errorf("write layout %s: %w", dir, err)
	}
	return nil
}

// release writes, per target, parley_<version>_<os>_<arch> and its SBOM
// parley_<version>_<os>_<arch>.cdx.json, the chart's archive parley-<chart version>.tgz, then
// SHA256SUMS over all of them (the format
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
	// The chart's archive, as helm package names it, so a release's checksums cover it too.
	chart, err := chartArtifact(src)
	if err != nil {
		return nil, err
	}
	archive := fmt.Sprintf("%s-%s.tgz", chart.meta.Name, chart.meta.Version)
	if err := os.WriteFile(filepath.Join(out, archive), chart.archive, 0o644); err != nil {
		return nil, err
	}
	files = append(files, archive)
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
// the same commit gives the same SBOM. Each module's license is detected (-licenses) from its
// LICENSE files in the module cache by go-license-detector, the classifier the generator ships
// with, and listed as the component's license (-assert-licenses; without it the generator puts
// them under evidence, where scanners and license reviews do not look) as an SPDX id.
func sbom(ctx context.Context, src source, version, binary, out string) error {
	cmd := exec.CommandContext(ctx, "go", "run", sbomTool, "bin", "-json", "-std", "-noserial", "-notimestamp", "-licenses", "-assert-licenses",
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
