// Package chartoci packages the Helm chart as `helm package` does and wraps it as the OCI artifact
// `helm push` writes, so that `helm install oci://REGISTRY/parleyhq/charts/parley --version V`
// installs it: an OCI image manifest whose config is the chart's metadata as JSON
// (application/vnd.cncf.helm.config.v1+json) and whose one layer is the chart archive
// (application/vnd.cncf.helm.chart.content.v1.tar+gzip). Built with go-containerregistry, which
// the image build already uses, rather than Helm's SDK, to keep Helm out of scripts/ship; the
// harness tests/chart pulls the artifact back with Helm's own registry client and renders it.
//
// Both are reproducible: file times are the commit's, entries are sorted, gzip carries no name or
// time, so one commit gives one digest.
package chartoci

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"sigs.k8s.io/yaml"
)

// The media types Helm's registry client writes and reads (helm.sh/helm/v3/pkg/registry).
const (
	ConfigMediaType = "application/vnd.cncf.helm.config.v1+json"
	ChartMediaType  = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
)

// Metadata is what the artifact needs of Chart.yaml.
type Metadata struct {
	Name, Version string
	raw           map[string]any // every field of Chart.yaml, for the config blob
}

// ReadMetadata reads dir/Chart.yaml.
func ReadMetadata(dir string) (Metadata, error) {
	b, err := os.ReadFile(filepath.Join(dir, "Chart.yaml"))
	if err != nil {
		return Metadata{}, fmt.Errorf("chart %s: %w", dir, err)
	}
	var m Metadata
	if err := yaml.Unmarshal(b, &m.raw); err != nil {
		return Metadata{}, fmt.Errorf("chart %s: Chart.yaml: %w", dir, err)
	}
	m.Name, _ = m.raw["name"].(string)
	m.Version, _ = m.raw["version"].(string)
	if m.Name == "" || m.Version == "" {
		return Metadata{}, fmt.Errorf("chart %s: Chart.yaml needs a name and a version", dir)
	}
	return m, nil
}

// Package writes the chart in dir as `helm package` does: a gzipped tar of every file under a
// top directory named after the chart, honouring no .helmignore (the chart has none: every file in
// it ships). Files are sorted and dated mtime, with modes 0644 (0755 for directories).
func Package(dir string, m Metadata, mtime time.Time) ([]byte, error) {
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return fmt.Errorf("%s: a symbolic link; the chart ships regular files only", p)
		}
		if !d.IsDir() {
			rel, err := filepath.Rel(dir, p)
			if err != nil {
				return err
			}
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("chart %s: %w", dir, err)
	}
	sort.Strings(files)
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(zw)
	dirs := map[string]bool{}
	for _, f := range files {
		// The directories on the way, each once, before their files (as tar readers expect).
		parts := strings.Split(m.Name+"/"+f, "/")
		for i := 1; i < len(parts); i++ {
			d := strings.Join(parts[:i], "/") + "/"
			if dirs[d] {
				continue
			}
			dirs[d] = true
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o755, ModTime: mtime, Format: tar.FormatPAX}); err != nil {
				return nil, err
			}
		}
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(f)))
		if err != nil {
			return nil, fmt.Errorf("chart %s: %w", dir, err)
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: m.Name + "/" + f, Mode: 0o644, Size: int64(len(b)), ModTime: mtime, Format: tar.FormatPAX}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(b); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Artifact is the chart as the OCI artifact `helm push` makes of archive, created at created.
func Artifact(m Metadata, archive []byte, created time.Time) (v1.Image, error) {
	config, err := json.Marshal(m.raw)
	if err != nil {
		return nil, fmt.Errorf("chart %s: metadata as JSON: %w", m.Name, err)
	}
	a := &artifact{config: config, layer: archive}
	manifest := v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		Config:        v1.Descriptor{MediaType: ConfigMediaType, Size: int64(len(config)), Digest: digest(config)},
		Layers:        []v1.Descriptor{{MediaType: ChartMediaType, Size: int64(len(archive)), Digest: digest(archive)}},
		Annotations: map[string]string{
			"org.opencontainers.image.title":   m.Name,
			"org.opencontainers.image.version": m.Version,
			"org.opencontainers.image.created": created.UTC().Format(time.RFC3339),
		},
	}
	if d, ok := m.raw["description"].(string); ok {
		manifest.Annotations["org.opencontainers.image.description"] = d
	}
	if h, ok := m.raw["home"].(string); ok {
		manifest.Annotations["org.opencontainers.image.url"] = h
	}
	if a.manifest, err = json.Marshal(manifest); err != nil {
		return nil, err
	}
	return partial.CompressedToImage(a)
}

func digest(b []byte) v1.Hash {
	sum := sha256.Sum256(b)
	return v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(sum[:])}
}

// artifact is the manifest, config and one layer: go-containerregistry's CompressedImageCore,
// which partial turns into a v1.Image that layout.Write and remote.Write take as they take the
// container image.
type artifact struct {
	manifest, config, layer []byte
}

func (a *artifact) RawConfigFile() ([]byte, error)      { return a.config, nil }
func (a *artifact) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }
func (a *artifact) RawManifest() ([]byte, error)        { return a.manifest, nil }

func (a *artifact) LayerByDigest(h v1.Hash) (partial.CompressedLayer, error) {
	switch h {
	case digest(a.layer):
		return blob{a.layer, ChartMediaType}, nil
	case digest(a.config):
		return blob{a.config, ConfigMediaType}, nil
	}
	return nil, fmt.Errorf("chart artifact: no blob %s", h)
}

// blob is one of the artifact's blobs, stored as is (the chart archive is already gzipped).
type blob struct {
	b  []byte
	mt types.MediaType
}

func (b blob) Digest() (v1.Hash, error)            { return digest(b.b), nil }
func (b blob) Compressed() (io.ReadCloser, error)  { return io.NopCloser(bytes.NewReader(b.b)), nil }
func (b blob) Size() (int64, error)                { return int64(len(b.b)), nil }
func (b blob) MediaType() (types.MediaType, error) { return b.mt, nil }
