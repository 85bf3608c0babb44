package arbiter

import (
	"strings"
	"testing"
)

// TestReadersRefuseDuplicateKeys: a claims file or an event line naming a key twice is refused
// with the key and where it is, instead of the last one silently winning.
func TestReadersRefuseDuplicateKeys(t *testing.T) {
	claims := `{"at":"2026-11-20T10:00:00Z","live":[{"field":"k8s:apps/Deployment/prod/web#/spec/replicas",` +
		`"actor":{"name":"oncall"},"value":6,"at":"2026-11-20T09:00:00Z","at":"2001-01-01T00:00:00Z"}]}`
	if _, err := ReadClaims(strings.NewReader(claims)); err == nil || !strings.Contains(err.Error(), `claims file: duplicate key "at" in the object at $.live[0]`) {
		t.Errorf("ReadClaims: %v", err)
	}
	events := "# a comment\n" + `{"kind":"tick","at":"2026-11-20T10:00:00Z","kind":"claim"}` + "\n"
	if _, err := ReadEvents(strings.NewReader(events)); err == nil || !strings.Contains(err.Error(), `events line 2: duplicate key "kind" in the object at $`) {
		t.Errorf("ReadEvents: %v", err)
	}
}
