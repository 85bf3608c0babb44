package main

import (
	"archive/tar"
	"bufio"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"debug/buildinfo"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/parleyhq/parley/scripts/ship/imagespec"
)

// TestImage builds the image of the commit checked out (for this machine's architecture), twice,
// and shows what the chart relies on: the same digest each time, the user, entrypoint, ports and
// labels in its config, a root file system with no shell and a binary stamped with the commit,
// and, run from that file system alone (chroot, as uid 65532), `parley version` naming the commit
// and `parley serve` answering /readyz.
func TestImage(t *testing.T) {
	ctx := context.Background()
	src, err := readSource(ctx, ".")
	if err != nil {
		t.Fatal(err)
	}
	tgt := target{"linux", runtime.GOARCH}
	opts := imageOptions{Version: src.Chart.AppVersion, Targets: []target{tgt}}
	idx, err := buildImage(ctx, src, opts, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	digest, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	// Go caches the compile: the second build costs a link.
	again, err := buildImage(ctx, src, opts, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := again.Digest(); d != digest {
		t.Fatalf("two builds of commit %s differ: %s and %s", src.Revision, digest, d)
	}

	tag, err := name.NewTag(src.Chart.Ref())
	if err != nil {
		t.Fatal(err)
	}
	t.Run("layout and tarball", func(t *testing.T) { checkOutputs(t, idx, tag) })

	img, err := onlyImage(idx)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("config", func(t *testing.T) { checkConfig(t, img, src, tgt) })

	root := t.TempDir()
	unpack(t, img, root)
	t.Run("files", func(t *testing.T) { checkFiles(t, root, src) })
	t.Run("version", func(t *testing.T) {
		out, err := inImage(t, root, nil, "version", "--json").Output()
		if err != nil {
			t.Fatalf("parley version in the image: %v", err)
		}
		var info struct {
			Version, Revision, Time string
			Modified                bool
		}
		if err := json.Unmarshal(out, &info); err != nil {
			t.Fatalf("parley version --json: %v\n%s", err, out)
		}
		if info.Version != src.Chart.AppVersion || info.Revision != src.Revision || info.Modified != src.Modified || info.Time != src.Time.Format(time.RFC3339) {
			t.Fatalf("parley version in the image says %+v; built from %s (modified %t) as %s", info, src.Revision, src.Modified, src.Chart.AppVersion)
		}
	})
	t.Run("serve", func(t *testing.T) { checkServe(t, root, src) })
}

func checkOutputs(t *testing.T, idx v1.ImageIndex, tag name.Tag) {
	digest, _ := idx.Digest()
	dir := filepath.Join(t.TempDir(), "layout")
	if err := writeLayout(dir, idx, tag); err != nil {
		t.Fatal(err)
	}
	p, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	top, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	m, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 1 || m.Manifests[0].Digest != digest || m.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != tag.TagStr() {
		t.Fatalf("layout index.json %+v, want the image %s tagged %s", m.Manifests, digest, tag.TagStr())
	}

	img, err := onlyImage(idx)
	if err != nil {
		t.Fatal(err)
	}
	// A docker tarball keeps the config and the layer; its manifest is docker's, so compare those.
	want, _ := img.ConfigName()
	wantLayers, _ := img.Layers()
	wantLayer, _ := wantLayers[0].Digest()
	tarPath := filepath.Join(t.TempDir(), "parley.tar")
	if err := tarball.WriteToFile(tarPath, tag, img); err != nil {
		t.Fatal(err)
	}
	loaded, err := tarball.ImageFromPath(tarPath, &tag)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := loaded.ConfigName(); err != nil || got != want {
		t.Fatalf("the tarball's config is %s (%v), want %s", got, err, want)
	}
	if layers, err := loaded.Layers(); err != nil || len(layers) != 1 {
		t.Fatalf("the tarball's layers: %v %v", layers, err)
	} else if got, _ := layers[0].Digest(); got != wantLayer {
		t.Fatalf("the tarball's layer is %s, want %s", got, wantLayer)
	}
}

func checkConfig(t *testing.T, img v1.Image, src source, tgt target) {
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cfg.Config
	if c.User != imagespec.User || strings.Join(c.Entrypoint, " ") != imagespec.Binary || strings.Join(c.Cmd, " ") != "serve" || c.WorkingDir != imagespec.WorkingDir {
		t.Errorf("user %q, entrypoint %q, cmd %q, workdir %q", c.User, c.Entrypoint, c.Cmd, c.WorkingDir)
	}
	for _, p := range []int{imagespec.HTTPPort, imagespec.MetricsPort} {
		if _, ok := c.ExposedPorts[fmt.Sprintf("%d/tcp", p)]; !ok {
			t.Errorf("port %d not exposed: %v", p, c.ExposedPorts)
		}
	}
	if cfg.OS != tgt.OS || cfg.Architecture != tgt.Arch || !cfg.Created.Time.Equal(src.Time) {
		t.Errorf("platform %s/%s created %s, want %s created %s", cfg.OS, cfg.Architecture, cfg.Created.Time, tgt, src.Time)
	}
	for k, want := range map[string]string{
		"org.opencontainers.image.source":   imagespec.Source,
		"org.opencontainers.image.revision": src.Revision,
		"org.opencontainers.image.version":  src.Chart.AppVersion,
		"org.opencontainers.image.created":  src.Time.Format(time.RFC3339),
	} {
		if c.Labels[k] != want {
			t.Errorf("label %s = %q, want %q", k, c.Labels[k], want)
		}
	}
	layers, _ := img.Layers()
	if len(layers) != 1 {
		t.Fatalf("%d layers, want the one root file system", len(layers))
	}
	// The config names the layer by its uncompressed digest, which a runtime checks on unpacking.
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	diffID, _, err := v1.SHA256(rc)
	rc.Close()
	if err != nil || len(cfg.RootFS.DiffIDs) != 1 || cfg.RootFS.DiffIDs[0] != diffID {
		t.Errorf("config diff IDs %v, the layer's uncompressed digest %s (%v)", cfg.RootFS.DiffIDs, diffID, err)
	}
}

// unpack writes the image's file system below root with its owners and modes (the test runs as
// root; otherwise owners stay the test's).
func unpack(t *testing.T, img v1.Image, root string) {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if !filepath.IsLocal(h.Name) {
			t.Fatalf("layer entry %q leaves the root", h.Name)
		}
		path := filepath.Join(root, h.Name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(path, 0o700); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("layer entry %q has type %q; the image holds only files and directories", h.Name, h.Typeflag)
		}
		if os.Geteuid() == 0 {
			if err := os.Lchown(path, h.Uid, h.Gid); err != nil {
				t.Fatal(err)
			}
		}
		if err := syscall.Chmod(path, uint32(h.Mode)); err != nil { // keeps /tmp's sticky bit
			t.Fatal(err)
		}
	}
}

func checkFiles(t *testing.T, root string, src source) {
	for _, p := range []string{"bin/sh", "bin/bash", "bin/busybox", "usr/bin/git", "usr/bin/env"} {
		if _, err := os.Stat(filepath.Join(root, p)); err == nil {
			t.Errorf("the image has /%s; it has no shell or tools", p)
		}
	}
	passwd, err := os.ReadFile(filepath.Join(root, "etc", "passwd"))
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("%s:x:%d:%d:", imagespec.UserName, imagespec.UID, imagespec.GID); !strings.Contains(string(passwd), want) {
		t.Errorf("/etc/passwd lacks %s:\n%s", want, passwd)
	}
	bi, err := buildinfo.ReadFile(filepath.Join(root, imagespec.Binary))
	if err != nil {
		t.Fatal(err)
	}
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	for k, want := range map[string]string{"CGO_ENABLED": "0", "-trimpath": "true", "GOOS": "linux"} {
		if settings[k] != want {
			t.Errorf("the binary's %s is %q, want %q", k, settings[k], want)
		}
	}
	// Go stamps the commit itself in a plain clone (not in a worktree); where it does, it agrees.
	if r := settings["vcs.revision"]; r != "" && r != src.Revision {
		t.Errorf("the binary's vcs.revision is %s, built from %s", r, src.Revision)
	}
	// With no CA bundle in the image, TLS to GitHub verifies against the roots linked in.
	roots := false
	for _, d := range bi.Deps {
		roots = roots || d.Path == "golang.org/x/crypto/x509roots/fallback"
	}
	if !roots {
		t.Error("the binary does not link golang.org/x/crypto/x509roots/fallback: TLS would find no roots in the image")
	}
}

// inImage is parley run from the unpacked image alone: chrooted into root as the image's user,
// with only the image's environment and env. Without root it runs the unpacked binary as is.
func inImage(t *testing.T, root string, env []string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := &exec.Cmd{Path: imagespec.Binary, Args: append([]string{imagespec.Binary}, args...), Dir: imagespec.WorkingDir,
		Env: append([]string{"PATH=/usr/local/bin", "HOME=/home/" + imagespec.UserName}, env...)}
	if os.Geteuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root, Credential: &syscall.Credential{Uid: imagespec.UID, Gid: imagespec.GID}}
	} else {
		t.Log("not root: running the unpacked binary without chroot")
		cmd.Path, cmd.Args[0], cmd.Dir = filepath.Join(root, imagespec.Binary), filepath.Join(root, imagespec.Binary), filepath.Join(root, imagespec.WorkingDir)
	}
	return cmd
}

func checkServe(t *testing.T, root string, src source) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	cmd := inImage(t, root, []string{"PARLEY_APP_ID=1", "PARLEY_PRIVATE_KEY=" + string(pemKey), "PARLEY_WEBHOOK_SECRETS=image-test",
		"PARLEY_LISTEN=127.0.0.1:0", "PARLEY_SHUTDOWN_GRACE=2s"}, "serve")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var (
		mu   sync.Mutex
		logs strings.Builder
	)
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			mu.Lock()
			logs.WriteString(sc.Text() + "\n")
			mu.Unlock()
			var line struct{ Msg, Addr string }
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "parley serving" {
				addr <- line.Addr
			}
		}
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stopped := false
	defer func() {
		if !stopped {
			cmd.Process.Kill()
			<-exited
		}
	}()
	var base string
	select {
	case a := <-addr:
		base = "http://" + a
	case err := <-exited:
		stopped = true
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("parley serve in the image exited: %v\n%s", err, logs.String())
	case <-time.After(60 * time.Second):
		t.Fatal("parley serve in the image did not start listening within a minute")
	}
	resp, err := http.Get(base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/readyz answered %d", resp.StatusCode)
	}
	resp, err = http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	short := src.Revision[:12]
	if src.Modified {
		short += "-dirty"
	}
	if want := fmt.Sprintf(`revision="%s",version="%s"} 1`, short, src.Chart.AppVersion); !strings.Contains(string(metrics), want) {
		t.Errorf("/metrics lacks parley_build_info{...%s:\n%.2000s", want, metrics)
	}
	// The store was created in the working directory (the chart's data volume), by the image's user.
	if os.Geteuid() == 0 {
		fi, err := os.Stat(filepath.Join(root, imagespec.WorkingDir, "parley.db"))
		if err != nil {
			t.Fatalf("serve's default store: %v", err)
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != imagespec.UID {
			t.Errorf("parley.db is owned by uid %d: serve did not run as %d", st.Uid, imagespec.UID)
		}
	}
	cmd.Process.Signal(syscall.SIGTERM)
	stopped = true
	if err := <-exited; err != nil {
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("parley serve did not drain and exit cleanly on SIGTERM: %v\n%s", err, logs.String())
	}
}
