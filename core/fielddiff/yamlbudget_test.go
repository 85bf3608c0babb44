package fielddiff

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
)

const configMapHead = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big\ndata:\n"

// keysConfigMap is a ConfigMap of n one-line keys (about 13 bytes each).
func keysConfigMap(n int) string {
	var b strings.Builder
	b.WriteString(configMapHead)
	for i := range n {
		fmt.Fprintf(&b, "  k%d: v\n", i)
	}
	return b.String()
}

// allocated is what f allocates, in bytes.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestYAMLPastItsBudgetsIsRefusedEarly: a YAML file within the 8 MiB read is refused once it has
// made MaxYAMLNodes nodes or MaxYAMLFields fields, or unread when only yaml.v3 reads it and a
// document is past MaxYAMLv3Document, through Diff as through every door. Before, an 8 MiB file
// held 500 to 850 MB live: 650,000 keys of a ConfigMap allocated 1.06 GB, a sequence of small
// mappings 1.97 GB, the same keys indented with tabs 0.95 GB, and 10 MB of aliases expanding a
// thousand values each 3.2 GB and 17 s of CPU before the alias budget refused them.
func TestYAMLPastItsBudgetsIsRefusedEarly(t *testing.T) {
	thousand := "[" + strings.Repeat("x,", 999) + "x]"
	cases := []struct {
		name, src, want string
	}{
		{"keys", keysConfigMap(560_000), "more than 400000 YAML nodes in one file"},
		{"sequence of mappings", configMapHead[:len(configMapHead)-len("data:\n")] + "spec:\n  items:\n" + strings.Repeat("  - a: 1\n    b: 2\n", 400_000), "more than 400000 YAML nodes in one file"},
		{"aliases of lists", configMapHead + "  a: &a " + thousand + "\n  b:\n" + strings.Repeat("  - *a\n", 300_000), "document 1, ConfigMap big: lists (aliases of lists, most likely) written as more than 4 bytes of JSON per byte"},
		{"aliases of mappings", configMapHead + "  a: &a {x: 1, y: 2}\n  b:\n" + strings.Repeat("  - *a\n", 300_000), "document 1, ConfigMap big: more than 100000 fields in one YAML file"},
		{"tabs", strings.ReplaceAll(keysConfigMap(560_000), "k1: v", "k1:\tv"), "document 1: 7.2 MB of YAML in a form only the full YAML parser reads"},
	}
	for _, c := range cases {
		if len(c.src) > 8<<20 {
			t.Fatalf("%s: %d bytes, past the 8 MiB any file may be", c.name, len(c.src))
		}
		var err error
		got := allocated(func() { _, err = Diff("apps/big.yaml", nil, []byte(c.src)) })
		var budget *YAMLBudgetError
		if !errors.As(err, &budget) || !strings.Contains(err.Error(), "apps/big.yaml") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Diff = %v, want a budget refusal saying %q", c.name, err, c.want)
		}
		if got > 160<<20 {
			t.Errorf("%s: refusing %d kB allocated %d MB, want under 160 MB", c.name, len(c.src)>>10, got>>20)
		}
	}
}

// TestYAMLWithinItsBudgetsIsRead: what real repositories hold reads as before: 90,000 keys in one
// file (a 1.3 MB install.yaml with its CRDs has about 35,000 fields), and a multi-document file
// through ParseCached, which refuses as Parse does once the documents' fields add up past the budget.
func TestYAMLWithinItsBudgetsIsRead(t *testing.T) {
	s, err := Parse("apps/big.yaml", []byte(keysConfigMap(90_000)))
	if err != nil || len(s.leaves) != 90_000 {
		t.Fatalf("90,000 keys: %v (%d fields)", err, len(s.leaves))
	}
	doc := func(name string, n int) string {
		return strings.Replace(keysConfigMap(n), "name: big", "name: "+name, 1)
	}
	within := doc("a", 40_000) + "---\n" + doc("b", 40_000)
	if s, err := ParseCached("apps/two.yaml", []byte(within), &mapCache{}); err != nil || len(s.leaves) != 80_000 {
		t.Fatalf("two documents of 40,000 keys: %v", err)
	}
	past := within + "---\n" + doc("c", 40_000)
	_, want := Parse("apps/three.yaml", []byte(past))
	_, got := ParseCached("apps/three.yaml", []byte(past), &mapCache{})
	var budget *YAMLBudgetError
	if !errors.As(want, &budget) || got == nil || got.Error() != want.Error() {
		t.Fatalf("three documents of 40,000 keys: ParseCached %v, Parse %v; want the same field budget refusal", got, want)
	}
}

// BenchmarkYAMLPastItsBudgets: what refusing each of TestYAMLPastItsBudgetsIsRefusedEarly's files
// costs (before the budgets: read whole, or refused by the alias budget after expanding).
func BenchmarkYAMLPastItsBudgets(b *testing.B) {
	thousand := "[" + strings.Repeat("x,", 999) + "x]"
	for _, c := range []struct{ name, src string }{
		{"keys-7MB", keysConfigMap(560_000)},
		{"aliases-2MB", configMapHead + "  a: &a " + thousand + "\n  b:\n" + strings.Repeat("  - *a\n", 300_000)},
		{"tabs-7MB", strings.ReplaceAll(keysConfigMap(560_000), "k1: v", "k1:\tv")},
	} {
		b.Run(c.name, func(b *testing.B) {
			src := []byte(c.src)
			b.ReportAllocs()
			for b.Loop() {
				Diff("apps/big.yaml", nil, src)
			}
		})
	}
}
