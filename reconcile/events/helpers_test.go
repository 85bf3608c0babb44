package events

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

func readTestdata(t testing.TB, parts ...string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(append([]string{"testdata"}, parts...)...))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// obsLines renders observations as "field = value by identity [manager] intent" lines, one per
// observation, for comparison with expectations.
func obsLines(b Batch) []string {
	var out []string
	for _, o := range b.Observations {
		s := fmt.Sprintf("%s = %s by %s", o.Field, o.Value, o.Identity)
		if o.Via.ID != "" {
			s += " via " + o.Via.ID
		}
		if o.Manager != "" {
			s += " [" + o.Manager + "]"
		}
		if o.Intent != "" {
			s += " intent=" + string(o.Intent)
		}
		if !o.Motivation.IsZero() {
			s += " motivation=" + o.Motivation.String()
		}
		if !o.Expires.IsZero() {
			s += " expires=" + o.Expires.UTC().Format("2006-01-02T15:04:05Z")
		}
		if o.Restated {
			s += " restated"
		}
		out = append(out, s)
	}
	return out
}

func ignoredString(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(parts, " ")
}
