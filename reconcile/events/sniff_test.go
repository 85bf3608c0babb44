package events

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSniffNamesEveryShippedSample(t *testing.T) {
	for source, dir := range map[string]string{SourceK8sAudit: "k8s-audit", SourceFlux: "flux", SourceArgoCD: "argocd", SourceCloudTrail: "cloudtrail"} {
		files, _ := filepath.Glob(filepath.Join("testdata", dir, "*.json"))
		if len(files) == 0 {
			t.Fatalf("no samples for %s", source)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "application.json") {
				continue // an Argo CD Application object, not a notification
			}
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Sniff(b)
			if err != nil || got != source {
				t.Errorf("%s: got %q, %v; want %s", f, got, err, source)
			}
		}
	}
	for _, bad := range []string{`[]`, `{"hello":1}`, `nope`} {
		if _, err := Sniff([]byte(bad)); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

// FuzzSniff: any body is either named as one of the four sources or refused with an error,
// never a panic; a named body's source is one Decode knows.
func FuzzSniff(f *testing.F) {
	for _, dir := range []string{"k8s-audit", "flux", "argocd", "cloudtrail"} {
		files, _ := filepath.Glob(filepath.Join("testdata", dir, "*.json"))
		for _, p := range files {
			if b, err := os.ReadFile(p); err == nil {
				f.Add(b)
			}
		}
	}
	f.Add([]byte(`{"kind":"Event","auditID":"x"}`))
	f.Add([]byte(`{"detail-type":null}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		src, err := Sniff(body)
		if err != nil {
			if src != "" {
				t.Fatalf("error %v with source %q", err, src)
			}
			return
		}
		switch src {
		case SourceK8sAudit, SourceFlux, SourceArgoCD, SourceCloudTrail:
		default:
			t.Fatalf("unknown source %q", src)
		}
	})
}
