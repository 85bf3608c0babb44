package chart

import (
	"bytes"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	helmregistry "helm.sh/helm/v3/pkg/registry"

	"github.com/parleyhq/parley/scripts/ship/chartoci"
)

// TestChartOCIArtifact: the chart as scripts/release packages it, pushed to a registry (go-
// containerregistry's, in memory) the way ship release --push-chart pushes it, is pulled back by
// Helm's own registry client (what `helm install oci://...` runs) with Helm's media types, its
// metadata read from the config, and the archive loads and renders as the chart directory does.
// Packaging is reproducible: the same commit time gives the same digest.
func TestChartOCIArtifact(t *testing.T) {
	when := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	meta, err := chartoci.ReadMetadata(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	archive, err := chartoci.Package(chartDir, meta, when)
	if err != nil {
		t.Fatal(err)
	}
	img, err := chartoci.Artifact(meta, archive, when)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := chartoci.Package(chartDir, meta, when)
	img2, _ := chartoci.Artifact(meta, again, when)
	d1, _ := img.Digest()
	d2, _ := img2.Digest()
	if !bytes.Equal(archive, again) || d1 != d2 {
		t.Errorf("two packagings differ: %s and %s", d1, d2)
	}

	srv := httptest.NewServer(registry.New())
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	ref := host + "/parleyhq/charts/" + meta.Name + ":" + meta.Version
	tag, err := name.NewTag(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(tag, img); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}

	client, err := helmregistry.NewClient(helmregistry.ClientOptPlainHTTP(), helmregistry.ClientOptCredentialsFile(t.TempDir()+"/config.json"))
	if err != nil {
		t.Fatal(err)
	}
	pulled, err := client.Pull(ref)
	if err != nil {
		t.Fatalf("helm's registry client pulls %s: %v", ref, err)
	}
	if pulled.Chart.Meta == nil || pulled.Chart.Meta.Name != "parley" || pulled.Chart.Meta.Version != meta.Version || pulled.Chart.Meta.AppVersion == "" {
		t.Fatalf("the chart's metadata as helm reads it: %+v", pulled.Chart.Meta)
	}
	if pulled.Manifest.Digest != d1.String() {
		t.Errorf("pulled manifest %s, pushed %s", pulled.Manifest.Digest, d1)
	}
	ch, err := loader.LoadArchive(bytes.NewReader(pulled.Chart.Data))
	if err != nil {
		t.Fatalf("load the pulled archive: %v", err)
	}
	if ch.Schema == nil || len(ch.Templates) == 0 {
		t.Fatalf("the pulled chart lacks its schema or templates: %d templates", len(ch.Templates))
	}
	rv, err := chartutil.ToRenderValues(ch, good, chartutil.ReleaseOptions{Name: "parley", Namespace: "parley", IsInstall: true}, chartutil.DefaultCapabilities)
	if err != nil {
		t.Fatal(err)
	}
	pulledOut, err := engine.Render(ch, rv)
	if err != nil {
		t.Fatalf("render the pulled chart: %v", err)
	}
	dirOut, err := render(t, good)
	if err != nil {
		t.Fatal(err)
	}
	if len(pulledOut) != len(dirOut) || pulledOut["parley/templates/deployment.yaml"] != dirOut["parley/templates/deployment.yaml"] {
		t.Errorf("the pulled chart renders %d files, the chart directory %d (or the Deployment differs)", len(pulledOut), len(dirOut))
	}
}
