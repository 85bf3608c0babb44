package events

import (
	"strings"
	"testing"
)

// TestDecodersRefuseDuplicateKeys: an event naming a key twice is refused by every decoder with
// the key named, instead of the last one silently winning (a second "timestamp" moving a Flux
// event in time, a second "verb" turning a read into a write).
func TestDecodersRefuseDuplicateKeys(t *testing.T) {
	for _, c := range []struct {
		source, body, want string
	}{
		{SourceFlux, `{"involvedObject":{"kind":"Kustomization","name":"apps"},"timestamp":"2026-11-20T12:10:00Z","timestamp":"2001-01-01T00:00:00Z"}`,
			`duplicate key "timestamp" in the object at $`},
		{SourceArgoCD, `{"event":"out-of-sync","app":{"name":"web","name":"db"}}`, `duplicate key "name" in the object at $.app`},
		{SourceK8sAudit, `{"kind":"EventList","items":[{"auditID":"a","verb":"get","verb":"update"}]}`, `duplicate key "verb" in the object at $.items[0]`},
		{SourceCloudTrail, `{"Records":[{"eventID":"e1","eventTime":"2026-11-20T12:00:00Z","eventTime":"2001-01-01T00:00:00Z"}]}`,
			`duplicate key "eventTime" in the object at $.Records[0]`},
	} {
		_, _, err := EventIDs(c.source, []byte(c.body))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want %q", c.source, err, c.want)
		}
	}
}
