package tfplan

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
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
		countingAgrees(t, data, p, err)
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

// countingAgrees: counting a plan's resources before decoding them (ParsePlan) changes no answer
// but to refuse for its size a plan that decoding first (parsePlan with decodeResources alone,
// how plans were read before) refused for something else: what ParsePlan accepts is exactly what
// decoding first accepted, the same plan; what decoding first refused past the budget, ParsePlan
// does too; any other refusal is the same error. And a document that is JSON is refused past the
// budget only if its resource arrays do hold more than MaxPlanResources elements, counted by
// encoding/json: the byte scan never refuses a plan within the budget. p and err are ParsePlan's.
func countingAgrees(t *testing.T, data []byte, p any, err error) {
	t.Helper()
	old, oldErr := parsePlan(data, (*planDecoder).decodeResources)
	switch {
	case (err == nil) != (oldErr == nil):
		t.Fatalf("counting first: %v; decoding first: %v", err, oldErr)
	case err == nil && !reflect.DeepEqual(p, old):
		t.Fatal("counting first read a plan other than decoding first")
	case errors.Is(oldErr, ErrTooManyResources) && !errors.Is(err, ErrTooManyResources):
		t.Fatalf("decoding first refused the plan past the budget, counting first: %v", err)
	case err != nil && !errors.Is(err, ErrTooManyResources) && err.Error() != oldErr.Error():
		t.Fatalf("counting first: %v; decoding first: %v", err, oldErr)
	}
	if errors.Is(err, ErrTooManyResources) && json.Valid(data) {
		if n := resourceElements(data); n <= MaxPlanResources {
			t.Fatalf("refused past the budget, but its resource arrays hold %d elements", n)
		}
	}
}

// resourceElements counts, with encoding/json, the elements of every top-level resource_changes
// and resource_drift array of the JSON document doc, each time the key appears.
func resourceElements(doc []byte) int {
	d := json.NewDecoder(bytes.NewReader(doc))
	if tok, err := d.Token(); err != nil || tok != json.Delim('{') {
		return 0
	}
	n := 0
	for d.More() {
		key, err := d.Token()
		var list []json.RawMessage
		if err != nil || d.Decode(&list) != nil {
			if key == "resource_changes" || key == "resource_drift" || err != nil {
				return n // not an array: the plan was refused for its type before this one counted
			}
			continue
		}
		if key == "resource_changes" || key == "resource_drift" {
			n += len(list)
		}
	}
	return n
}
