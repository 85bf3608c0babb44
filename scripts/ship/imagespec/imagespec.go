// Package imagespec is what Parley's container image promises the Helm chart: the user it runs
// as, where the binary is, the ports serve listens on and the reference the chart pulls by
// default. scripts/ship builds the image from these values and tests/chart checks the rendered
// Deployment against the same values, so the two cannot drift apart unnoticed.
package imagespec

import (
	"fmt"
	"os"
	"path/filepath"

	"sigs.k8s.io/yaml"
)

const (
	// UID and GID of the image's only user, "nonroot" (the number distroless images use). The
	// image names it numerically, so Kubernetes' runAsNonRoot can verify it without /etc/passwd.
	UID = 65532
	GID = 65532
	// User is the image config's user, uid:gid.
	User = "65532:65532"
	// UserName is its /etc/passwd name.
	UserName = "nonroot"
	// Binary is where the parley binary sits; it is the entrypoint.
	Binary = "/usr/local/bin/parley"
	// WorkingDir is serve's working directory: its default store (parley.db) lands in the chart's
	// data volume, which is mounted here.
	WorkingDir = "/var/lib/parley"
	// HTTPPort is serve's default listener (webhooks, events, /healthz, /readyz); MetricsPort is
	// the separate /metrics listener the chart sets.
	HTTPPort    = 8080
	MetricsPort = 9090
	// Source is the repository the image's source label names.
	Source = "https://github.com/parleyhq/parley"
)

// Entrypoint and Cmd: `docker run IMAGE` serves; `docker run IMAGE version` prints the build.
var (
	Entrypoint = []string{Binary}
	Cmd        = []string{"serve"}
)

// Chart is what the chart at charts/parley says about the image it runs by default.
type Chart struct {
	Repository string // values.yaml image.repository
	AppVersion string // Chart.yaml appVersion, the default tag and the release's version
}

// Ref is the image reference the chart pulls when image.tag is left empty.
func (c Chart) Ref() string { return c.Repository + ":" + c.AppVersion }

// ReadChart reads charts/parley below the repository root.
func ReadChart(root string) (Chart, error) {
	dir := filepath.Join(root, "charts", "parley")
	var meta struct {
		AppVersion string `json:"appVersion"`
	}
	var values struct {
		Image struct {
			Repository string `json:"repository"`
		} `json:"image"`
	}
	for name, into := range map[string]any{"Chart.yaml": &meta, "values.yaml": &values} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return Chart{}, fmt.Errorf("read the chart: %w", err)
		}
		if err := yaml.Unmarshal(b, into); err != nil {
			return Chart{}, fmt.Errorf("read the chart: %s: %w", name, err)
		}
	}
	c := Chart{Repository: values.Image.Repository, AppVersion: meta.AppVersion}
	if c.Repository == "" || c.AppVersion == "" {
		return Chart{}, fmt.Errorf("read the chart: %s names no image.repository or appVersion", dir)
	}
	return c, nil
}
