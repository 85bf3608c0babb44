package fielddiff

import (
	"testing"

	"github.com/parleyhq/parley/core"
)

// checkDiffProperties: no panic; a file never differs from itself; swapping the inputs swaps Old
// and New; every emitted field round-trips through its text form.
func checkDiffProperties(t *testing.T, path string, a, b []byte) {
	sa, errA := Parse(path, a)
	sb, errB := Parse(path, b)
	if errA != nil || errB != nil {
		return
	}
	if same := DiffSnapshots(sa, sa); len(same) != 0 {
		t.Fatalf("a file differs from itself: %v", same)
	}
	ab, ba := DiffSnapshots(sa, sb), DiffSnapshots(sb, sa)
	if len(ab) != len(ba) {
		t.Fatalf("asymmetric diff: %d vs %d changes", len(ab), len(ba))
	}
	for i := range ab {
		if ab[i].Field != ba[i].Field || ab[i].Old != ba[i].New || ab[i].New != ba[i].Old {
			t.Fatalf("swapped diff does not swap values: %+v vs %+v", ab[i], ba[i])
		}
		back, err := core.ParseField(ab[i].Field.String())
		if err != nil || back != ab[i].Field {
			t.Fatalf("field %q does not round-trip: %v", ab[i].Field, err)
		}
	}
}

func FuzzDiffYAML(f *testing.F) {
	f.Add([]byte(deployment), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {x: '1'}\n"))
	f.Add([]byte("apiVersion: v1\nkind: List\nitems: [{apiVersion: v1, kind: Secret, metadata: {name: s}}]\n"), []byte("a: &x [*x]\n"))
	f.Fuzz(func(t *testing.T, a, b []byte) { checkDiffProperties(t, "k8s/x.yaml", a, b) })
}

func FuzzDiffTF(f *testing.F) {
	f.Add([]byte(asg), []byte("resource \"a\" \"b\" {\n  x = { k = [1, 2,] }\n  dynamic \"tag\" { for_each = var.t }\n}\n"))
	f.Add([]byte("locals {\n  a = 1\n}\nvariable \"v\" { default = \"x\" }\n"), []byte(""))
	f.Fuzz(func(t *testing.T, a, b []byte) { checkDiffProperties(t, "infra/main.tf", a, b) })
}
