package fielddiff

import "testing"

// checkDiffProperties: no panic; a file never differs from itself; swapping the inputs swaps Old
// and New; every emitted field round-trips through its text form and can be looked up; literal
// values are in core's canonical form.
func checkDiffProperties(t *testing.T, path string, a, b []byte) {
	ab, errAB := Diff(path, a, b)
	ba, errBA := Diff(path, b, a)
	if (errAB == nil) != (errBA == nil) {
		t.Fatalf("error depends on argument order: %v vs %v", errAB, errBA)
	}
	for _, in := range [][]byte{a, b} {
		s, err := Parse(path, in)
		if err != nil {
			if errAB == nil {
				t.Fatalf("Parse fails (%v) but Diff did not", err)
			}
			continue
		}
		if same, err := Diff(path, in, in); err != nil || len(same) != 0 {
			t.Fatalf("a file differs from itself: %v %v", same, err)
		}
		for _, f := range s.Fields() {
			if _, ok := s.Get(f); !ok {
				t.Fatalf("field %s is listed but Get does not find it", f)
			}
		}
	}
	if errAB != nil {
		return
	}
	checkChanges(t, ab)
	if len(ab) != len(ba) {
		t.Fatalf("asymmetric diff: %d vs %d changes", len(ab), len(ba))
	}
	for i := range ab {
		if ab[i].Field != ba[i].Field || ab[i].Old != ba[i].New || ab[i].New != ba[i].Old {
			t.Fatalf("swapped diff does not swap values: %+v vs %+v", ab[i], ba[i])
		}
	}
}

func FuzzDiffYAML(f *testing.F) {
	for _, src := range []string{deployment, configMap, fluxKustomization, argoApplication, kustomization, prometheusRule} {
		f.Add([]byte(src), []byte(src+"---\n"+configMap))
	}
	f.Add([]byte(deployment), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {x: '1'}\n"))
	f.Add([]byte("apiVersion: v1\nkind: List\nitems: [{apiVersion: v1, kind: Secret, metadata: {name: s}}]\n"), []byte("a: &x [*x]\n"))
	f.Add([]byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {yes: on, 0x1F: 1_000, b: &b {c: 1}, d: {<<: *b}}\n"), []byte("{{ .Values }}\n"))
	f.Fuzz(func(t *testing.T, a, b []byte) { checkDiffProperties(t, "k8s/x.yaml", a, b) })
}

func FuzzDiffTF(f *testing.F) {
	f.Add([]byte(asg), []byte("resource \"a\" \"b\" {\n  x = { k = [1, 2,] }\n  dynamic \"tag\" { for_each = var.t }\n}\n"))
	f.Add([]byte("locals {\n  a = 1\n}\nvariable \"v\" { default = \"x\" }\n"), []byte(""))
	f.Add([]byte("resource \"a\" \"b\" {\n  x = <<EOT\n${var.y}\nEOT\n  z = {\"a/b~c\" = 1, (var.k) = 2}\n}\n"), []byte("module \"m\" {\n  count = 2 # n\n}\n"))
	f.Fuzz(func(t *testing.T, a, b []byte) { checkDiffProperties(t, "infra/main.tf", a, b) })
}

// FuzzBareReferenceNeedsNoFormatting holds normaliseExpr's shortcut to the general case: whatever
// isBareReference takes, lexing and formatting would have left as it is.
func FuzzBareReferenceNeedsNoFormatting(f *testing.F) {
	for _, s := range []string{"var.region", "aws_vpc.main.id", "module.eks-cluster.node_group_2", "local.a.b-c.d", "a", "_x.y1", "a.0", "a..b", "a - b", "var.x[0]", "-a", "a.-b", "a  -  b", "a -b", "a.b # c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !isBareReference([]byte(s)) {
			return
		}
		if got := formatExpr([]byte(s)); got != s {
			t.Fatalf("%q is taken as a bare reference, but formatting gives %q", s, got)
		}
	})
}
