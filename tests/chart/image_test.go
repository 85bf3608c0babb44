package chart

import (
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/parleyhq/parley/scripts/ship/imagespec"
)

// The Deployment runs the image scripts/image builds and pushes by default, as that image's user,
// on the ports it serves: scripts/ship's TestImage checks the image against the same imagespec.
func TestDeploymentRunsTheShippedImage(t *testing.T) {
	out, err := render(t, good)
	if err != nil {
		t.Fatal(err)
	}
	var dep struct {
		Spec struct {
			Template struct {
				Spec struct {
					SecurityContext struct {
						RunAsUser    *int64
						RunAsGroup   *int64
						RunAsNonRoot *bool
						FSGroup      *int64
					}
					Containers []struct {
						Name    string
						Image   string
						Command []string
						Args    []string
						Env     []struct{ Name, Value string }
						Ports   []struct {
							Name          string
							ContainerPort int
						}
						VolumeMounts []struct{ Name, MountPath string }
					}
				}
			}
		}
	}
	if err := yaml.Unmarshal([]byte(out["parley/templates/deployment.yaml"]), &dep); err != nil {
		t.Fatal(err)
	}
	shipped, err := imagespec.ReadChart(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	pod := dep.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("containers %+v", pod.Containers)
	}
	c := pod.Containers[0]
	if c.Image != shipped.Ref() {
		t.Errorf("image %q, scripts/image builds and pushes %q", c.Image, shipped.Ref())
	}
	// The image's entrypoint is the binary; the chart gives only serve's arguments.
	if len(c.Command) != 0 || len(c.Args) != 1 || c.Args[0] != imagespec.Cmd[0] {
		t.Errorf("command %q args %q, want the image's entrypoint with args %q", c.Command, c.Args, imagespec.Cmd)
	}
	sc := pod.SecurityContext
	if sc.RunAsUser == nil || *sc.RunAsUser != imagespec.UID || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.FSGroup == nil || *sc.FSGroup != imagespec.GID {
		t.Errorf("pod security context %+v, want runAsNonRoot as uid %d with fsGroup %d", sc, imagespec.UID, imagespec.GID)
	}
	ports := map[string]int{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if ports["http"] != imagespec.HTTPPort || ports["metrics"] != imagespec.MetricsPort {
		t.Errorf("container ports %v, the image serves on %d and %d", ports, imagespec.HTTPPort, imagespec.MetricsPort)
	}
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	if env["PARLEY_LISTEN"] != ":8080" || env["PARLEY_METRICS_LISTEN"] != ":9090" {
		t.Errorf("serve listens on %q and %q, not the ports the container declares", env["PARLEY_LISTEN"], env["PARLEY_METRICS_LISTEN"])
	}
	mounted := false
	for _, m := range c.VolumeMounts {
		mounted = mounted || (m.Name == "data" && m.MountPath == imagespec.WorkingDir)
	}
	if !mounted {
		t.Errorf("the data volume is not mounted at the image's working directory %s: %+v", imagespec.WorkingDir, c.VolumeMounts)
	}
}
