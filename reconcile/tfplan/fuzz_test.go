package tfplan

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/parleyhq/parley/core"
)

// FuzzReadPlan: the plan reader never panics, and what it accepts extracts into changes whose
// addresses round-trip, whose printable form holds no sensitive value, and whose unknown values
// are marked as such. Seeds: every fixture in testdata, and the corpus in testdata/fuzz.
func FuzzReadPlan(f *testing.F) {
	fixtures, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil || len(fixtures) == 0 {
		f.Fatalf("no fixtures: %v", err)
	}
	for _, p := range fixtures {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParsePlan(data)
		if err != nil {
			if p != nil {
				t.Fatal("a plan and an error")
			}
			return
		}
		res, err := Extract(p, Options{ModuleDir: "infra"})
		if err != nil {
			t.Fatalf("Extract: %v", err)
		}
		for _, c := range append(res.Changes, res.Drift...) {
			back, err := core.ParseField(c.Field.String())
			if err != nil || back != c.Field {
				t.Fatalf("%q does not round-trip: %v (%+v != %+v)", c.Field.String(), err, back, c.Field)
			}
			if c.Old.Absent() && c.New.Absent() {
				t.Fatalf("%s: a change from nothing to nothing", c.Field)
			}
			if c.Unknown != (c.New.IsExpr() && c.New.Expr() == KnownAfterApply) {
				t.Fatalf("%s: unknown %v, value %s", c.Field, c.Unknown, c.New)
			}
			if c.Sensitive {
				r := c.Redacted()
				for _, v := range []core.Value{r.Old, r.New} {
					if !v.Absent() && v != core.StringValue(Sensitive) && v.Expr() != KnownAfterApply {
						t.Fatalf("%s: redacted value %s", c.Field, v)
					}
				}
			}
		}
	})
}
