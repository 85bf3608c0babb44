package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Without /proc (parley serve in a chroot, as the image test runs it) the render worker is the
// absolute path the binary was started by; a relative or non-executable one is refused by name.
func TestStartedAsFindsTheBinaryWithoutProc(t *testing.T) {
	dir := t.TempDir()
	bin, data := filepath.Join(dir, "parley"), filepath.Join(dir, "data")
	os.WriteFile(bin, []byte("#!"), 0o755)
	os.WriteFile(data, []byte("x"), 0o644)
	if got, err := startedAs(bin); err != nil || got != bin {
		t.Errorf("startedAs(%q) = %q, %v", bin, got, err)
	}
	for arg0, want := range map[string]string{"parley": "not by an absolute path", data: "not an executable file", dir: "not an executable file",
		filepath.Join(dir, "missing"): "no such file"} {
		if _, err := startedAs(arg0); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("startedAs(%q): %v, want %q", arg0, err, want)
		}
	}
}
