package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/parleyhq/parley/internal/version"
)

// The in-process binary is a test binary (no VCS stamp); scripts/image's test runs `parley version`
// from a release build inside the image and checks the commit it prints.
func TestVersionCommandAndFlag(t *testing.T) {
	info := version.Get()
	code, out, errOut := runIn(t, "", "--version")
	if code != exitOK || out != info.String()+"\n" {
		t.Fatalf("--version: code %d, out %q, err %q", code, out, errOut)
	}
	code, out, errOut = runIn(t, "", "version")
	if code != exitOK {
		t.Fatalf("version: code %d, err %q", code, errOut)
	}
	for _, want := range []string{"version:  " + info.Version + "\n", "go:       " + info.GoVersion + "\n", "commit:   "} {
		if !strings.Contains(out, want) {
			t.Errorf("version output lacks %q:\n%s", want, out)
		}
	}
	code, out, errOut = runIn(t, "", "version", "--json")
	if code != exitOK {
		t.Fatalf("version --json: code %d, err %q", code, errOut)
	}
	var got version.Info
	if err := json.Unmarshal([]byte(out), &got); err != nil || got != info {
		t.Fatalf("version --json = %s (%v), want %+v", out, err, info)
	}
	if code, _, _ := runIn(t, "", "version", "extra"); code != exitUsage {
		t.Fatalf("version with an argument: code %d, want %d", code, exitUsage)
	}
}
