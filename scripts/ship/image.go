package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/parleyhq/parley/scripts/ship/imagespec"
)

func runImage(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("ship image", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("C", ".", "a directory inside the Parley checkout to build; relative paths are relative to it")
	version := fs.String("version", "", "the version parley reports and the labels carry (default: the chart's appVersion)")
	ref := fs.String("ref", "", "the image reference to tag and push (default: the chart's image.repository:appVersion)")
	platforms := fs.String("platform", "linux/amd64,linux/arm64", "platforms of the image, OS/ARCH comma-separated")
	layoutDir := fs.String("layout", "", "write the image into this OCI layout directory (default: <checkout>/dist/image)")
	tarPath := fs.String("tarball", "", "also write a tarball `docker load` reads (one platform only)")
	push := fs.Bool("push", false, "push the image to --ref (credentials from ~/.docker/config.json: docker login or crane auth login)")
	if err := parseCommand(fs, args, stderr, "Builds Parley's container image from the commit checked out, without a container daemon."); err != nil {
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
	*layoutDir, *tarPath = under(*dir, *layoutDir), under(*dir, *tarPath)
	if *tarPath != "" && len(targets) != 1 {
		return fmt.Errorf("--tarball holds one platform: give --platform one OS/ARCH (a docker tarball has no index)")
	}
	opts := imageOptions{Version: *version, Targets: targets}
	if opts.Version == "" {
		opts.Version = src.Chart.AppVersion
	}
	if *ref == "" {
		*ref = src.Chart.Ref()
	}
	tag, err := name.NewTag(*ref)
	if err != nil {
		return fmt.Errorf("image reference %q: %w", *ref, err)
	}
	if src.Modified {
		fmt.Fprintf(stderr, "ship: warning: the checkout has uncommitted changes; the image is not commit %s's\n", src.Revision)
	}
	work, err := os.MkdirTemp("", "parley-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	idx, err := buildImage(ctx, src, opts, work)
	if err != nil {
		return err
	}
	digest, err := idx.Digest()
	if err != nil {
		return err
	}
	if *layoutDir == "" {
		*layoutDir = filepath.Join(src.Root, "dist", "image")
	}
	if err := writeLayout(*layoutDir, idx, tag); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "image %s@%s\nlayout %s\n", tag, digest, *layoutDir)
	if *tarPath != "" {
		img, err := onlyImage(idx)
		if err != nil {
			return err
		}
		if err := tarball.WriteToFile(*tarPath, tag, img); err != nil {
			return fmt.Errorf("write tarball %s: %w", *tarPath, err)
		}
		fmt.Fprintf(stdout, "tarball %s\n", *tarPath)
	}
	if *push {
		if err := remote.WriteIndex(tag, idx, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
			return fmt.Errorf("push %s: %w", tag, err)
		}
		fmt.Fprintf(stdout, "pushed %s@%s\n", tag, digest)
	}
	return nil
}

type imageOptions struct {
	Version string
	Targets []target
}

// buildImage builds parley for each target (into work) and assembles the image index.
func buildImage(ctx context.Context, src source, opts imageOptions, work string) (v1.ImageIndex, error) {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, t := range opts.Targets {
		if t.OS != "linux" {
			return nil, fmt.Errorf("platform %s: the image is for linux", t)
		}
		bin := filepath.Join(work, "parley-"+t.OS+"-"+t.Arch)
		if err := buildParley(ctx, src, opts.Version, t, bin); err != nil {
			return nil, err
		}
		img, err := assemble(src, opts.Version, t, bin)
		if err != nil {
			return nil, fmt.Errorf("image for %s: %w", t, err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: t.OS, Architecture: t.Arch}}})
	}
	return idx, nil
}

// assemble makes one platform's image: a single layer (the root filesystem) and its config.
func assemble(src source, version string, t target, bin string) (v1.Image, error) {
	binary, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	layer, err := rootfsLayer(binary, src.Time)
	if err != nil {
		return nil, err
	}
	created := v1.Time{Time: src.Time}
	img, err := mutate.Append(mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON),
		mutate.Addendum{Layer: layer, MediaType: types.OCILayer, History: v1.History{Created: created, CreatedBy: "scripts/ship image", Comment: "parley " + version}})
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture, cfg.Created = t.OS, t.Arch, created
	cfg.Config = v1.Config{
		User:       imagespec.User,
		Entrypoint: imagespec.Entrypoint,
		Cmd:        imagespec.Cmd,
		WorkingDir: imagespec.WorkingDir,
		Env:        []string{"PATH=/usr/local/bin", "HOME=/home/" + imagespec.UserName},
		ExposedPorts: map[string]struct{}{
			strconv.Itoa(imagespec.HTTPPort) + "/tcp":    {},
			strconv.Itoa(imagespec.MetricsPort) + "/tcp": {},
		},
		Labels: map[string]string{
			"org.opencontainers.image.source":   imagespec.Source,
			"org.opencontainers.image.revision": src.Revision,
			"org.opencontainers.image.version":  version,
			"org.opencontainers.image.created":  src.Time.Format(time.RFC3339),
			"org.opencontainers.image.title":    "parley",
		},
	}
	return mutate.ConfigFile(img, cfg)
}

// rootfsLayer is the image's whole file system: the binary, a passwd and group naming root and
// nonroot, the directories serve writes, and nothing else (no shell, no package manager, no CA
// bundle: the binary carries Mozilla's roots). Entries are written in a fixed order with fixed
// owners and the source's time, and gzip gets no name or time, so the bytes depend on the commit
// only.
func rootfsLayer(binary []byte, mtime time.Time) (v1.Layer, error) {
	type entry struct {
		name     string
		dir      bool
		mode     int64
		uid, gid int
		body     []byte
	}
	uid, gid := imagespec.UID, imagespec.GID
	home := "home/" + imagespec.UserName + "/"
	entries := []entry{
		{name: "etc/", dir: true, mode: 0o755},
		{name: "etc/group", mode: 0o644, body: fmt.Appendf(nil, "root:x:0:\n%s:x:%d:\n", imagespec.UserName, gid)},
		// hosts before DNS, as on any Linux machine: Go's resolver follows this file.
		{name: "etc/nsswitch.conf", mode: 0o644, body: []byte("hosts: files dns\n")},
		{name: "etc/passwd", mode: 0o644, body: fmt.Appendf(nil, "root:x:0:0:root:/root:/sbin/nologin\n%s:x:%d:%d:%s:/%s:/sbin/nologin\n",
			imagespec.UserName, uid, gid, imagespec.UserName, home[:len(home)-1])},
		{name: "home/", dir: true, mode: 0o755},
		{name: home, dir: true, mode: 0o700, uid: uid, gid: gid},
		{name: "tmp/", dir: true, mode: 0o1777},
		{name: "usr/", dir: true, mode: 0o755},
		{name: "usr/local/", dir: true, mode: 0o755},
		{name: "usr/local/bin/", dir: true, mode: 0o755},
		{name: imagespec.Binary[1:], mode: 0o755, body: binary},
		{name: "var/", dir: true, mode: 0o755},
		{name: "var/lib/", dir: true, mode: 0o755},
		{name: imagespec.WorkingDir[1:] + "/", dir: true, mode: 0o750, uid: uid, gid: gid},
	}
	var tarBuf bytes.Buffer
	tw := tar.NewWriter(&tarBuf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.gid, ModTime: mtime, Format: tar.FormatUSTAR}
		if e.dir {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("layer entry %s: %w", e.name, err)
		}
		if _, err := tw.Write(e.body); err != nil {
			return nil, fmt.Errorf("layer entry %s: %w", e.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	var gz bytes.Buffer
	zw, err := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(tarBuf.Bytes()); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	// LayerFromOpener keeps these compressed bytes as the blob and reads the diff ID (the
	// uncompressed digest the config lists) through them.
	compressed := gz.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(compressed)), nil },
		tarball.WithMediaType(types.OCILayer))
}

// writeLayout replaces dir with an OCI layout holding the index, named by the reference's tag.
func writeLayout(dir string, idx v1.ImageIndex, tag name.Tag) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("write layout %s: %w", dir, err)
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": tag.TagStr()})); err != nil {
		return fmt.Errorf("write layout %s: %w", dir, err)
	}
	return nil
}

// onlyImage is the single image of a one-platform index.
func onlyImage(idx v1.ImageIndex) (v1.Image, error) {
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	if len(m.Manifests) != 1 {
		return nil, fmt.Errorf("the index holds %d images, not one", len(m.Manifests))
	}
	return idx.Image(m.Manifests[0].Digest)
}

// parseCommand gives fs the usage text of a ship command (its name, what it does, its flags) and
// parses args, refusing arguments left over: how every ship command starts.
func parseCommand(fs *flag.FlagSet, args []string, stderr io.Writer, about string) error {
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: %s [flags]\n\n%s\n\n", fs.Name(), about)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		if err == nil {
			fmt.Fprintf(stderr, "%s: unexpected arguments %q\n", fs.Name(), fs.Args())
		}
		return errUsage
	}
	return nil
}
