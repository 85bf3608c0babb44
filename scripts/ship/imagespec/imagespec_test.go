package imagespec

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadChart(t *testing.T) {
	c, err := ReadChart(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if c.Repository != "ghcr.io/parleyhq/parley" || c.AppVersion == "" || c.Ref() != c.Repository+":"+c.AppVersion {
		t.Fatalf("chart %+v, ref %s", c, c.Ref())
	}
}

func TestReadChartNamesWhatIsMissing(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "charts", "parley")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "Chart.yaml"), []byte("name: parley\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "values.yaml"), []byte("image: {repository: example.com/parley}\n"), 0o644)
	if _, err := ReadChart(root); err == nil || !strings.Contains(err.Error(), "appVersion") {
		t.Fatalf("chart without appVersion: %v", err)
	}
	if _, err := ReadChart(t.TempDir()); err == nil || !strings.Contains(err.Error(), "Chart.yaml") && !strings.Contains(err.Error(), "values.yaml") {
		t.Fatalf("no chart: %v", err)
	}
}
