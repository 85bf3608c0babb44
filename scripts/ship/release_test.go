package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/parleyhq/parley/scripts/ship/chartoci"
)

// TestRelease builds the release for this machine's platform (the other three are the same code
// with another GOOS/GOARCH) and checks every artifact: the binary runs and names its version and
// commit, SHA256SUMS holds the true digest of each file, and the SBOM is CycloneDX listing the
// modules linked in.
func TestRelease(t *testing.T) {
	ctx := context.Background()
	src, err := readSource(ctx, ".")
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	tgt := target{"linux", runtime.GOARCH}
	files, err := release(ctx, src, "9.9.9-test", []target{tgt}, out)
	if err != nil {
		t.Fatal(err)
	}
	base := "parley_9.9.9-test_linux_" + runtime.GOARCH
	meta, err := chartoci.ReadMetadata(filepath.Join(src.Root, "charts", "parley"))
	if err != nil {
		t.Fatal(err)
	}
	chartTGZ := "parley-" + meta.Version + ".tgz"
	if strings.Join(files, " ") != chartTGZ+" "+base+" "+base+".cdx.json SHA256SUMS" {
		t.Fatalf("artifacts %q", files)
	}

	v, err := exec.Command(filepath.Join(out, base), "version", "--json").Output()
	if err != nil {
		t.Fatalf("%s version: %v", base, err)
	}
	var info struct{ Version, Revision string }
	if err := json.Unmarshal(v, &info); err != nil || info.Version != "9.9.9-test" || info.Revision != src.Revision {
		t.Fatalf("%s version says %s (%v); built %s from %s", base, v, err, "9.9.9-test", src.Revision)
	}

	sums, err := os.ReadFile(filepath.Join(out, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(sums))
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok {
			t.Fatalf("SHA256SUMS line %q is not `sha256sum -c` format", sc.Text())
		}
		b, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		if d := sha256.Sum256(b); hex.EncodeToString(d[:]) != sum {
			t.Errorf("SHA256SUMS says %s for %s, its digest is %x", sum, name, d)
		}
		listed[name] = true
	}
	if !listed[base] || !listed[base+".cdx.json"] || !listed[chartTGZ] || len(listed) != 3 {
		t.Errorf("SHA256SUMS lists %v", listed)
	}

	raw, err := os.ReadFile(filepath.Join(out, base+".cdx.json"))
	if err != nil {
		t.Fatal(err)
	}
	var bom struct {
		BOMFormat string `json:"bomFormat"`
		Metadata  struct {
			Component struct{ Name, Version string } `json:"component"`
		} `json:"metadata"`
		Components []struct {
			Name, Version string
			Licenses      []struct {
				License struct{ ID, Name string } `json:"license"`
			} `json:"licenses"`
		} `json:"components"`
	}
	if err := json.Unmarshal(raw, &bom); err != nil {
		t.Fatal(err)
	}
	deps := map[string]string{}
	licenses := map[string]string{}
	for _, c := range bom.Components {
		deps[c.Name] = c.Version
		for _, l := range c.Licenses {
			licenses[c.Name] += l.License.ID + l.License.Name + " "
		}
	}
	// Each module's license, detected from its LICENSE file, as an SPDX id. (The detector gives its
	// best match, which is not always the SPDX id a human would pick for BSD-style texts:
	// golang.org/x/crypto comes out BSD-Source-Code, and modernc.org/sqlite, BSD-3 with SQLite's
	// and sqlite-vec's licenses beside it, Apache-2.0; so only unambiguous texts are checked here.)
	for m, want := range map[string]string{"github.com/go-git/go-git/v5": "Apache-2.0",
		"github.com/spf13/cobra": "Apache-2.0", "github.com/hashicorp/hcl/v2": "MPL-2.0"} {
		if !strings.Contains(licenses[m], want) {
			t.Errorf("the SBOM gives %s the license %q, want %s", m, licenses[m], want)
		}
	}
	var unlicensed []string
	for _, c := range bom.Components {
		if licenses[c.Name] == "" && c.Name != "std" {
			unlicensed = append(unlicensed, c.Name)
		}
	}
	if len(unlicensed) > 0 {
		t.Errorf("the SBOM lists no license for %v", unlicensed)
	}
	if bom.BOMFormat != "CycloneDX" || bom.Metadata.Component.Name != "github.com/parleyhq/parley" || bom.Metadata.Component.Version != "9.9.9-test" {
		t.Errorf("SBOM format %q for %+v", bom.BOMFormat, bom.Metadata.Component)
	}
	for _, m := range []string{"github.com/go-git/go-git/v5", "modernc.org/sqlite", "golang.org/x/crypto/x509roots/fallback"} {
		if deps[m] == "" {
			t.Errorf("the SBOM does not list %s, which parley links", m)
		}
	}
	if deps["std"] != strings.TrimPrefix(runtime.Version(), "go") && deps["std"] != runtime.Version() {
		t.Errorf("the SBOM gives Go's standard library as %q, the binary was built with %s", deps["std"], runtime.Version())
	}
}
