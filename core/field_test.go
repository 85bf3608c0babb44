package core

import "testing"

func TestFieldRoundTrip(t *testing.T) {
	cases := []struct {
		text string
		want Field
	}{
		{"k8s:apps/Deployment/prod/web#/spec/replicas", K8sField("apps", "Deployment", "prod", "web", "/spec/replicas")},
		{"k8s:core/ConfigMap/prod/settings#/data/LOG_LEVEL", K8sField("", "ConfigMap", "prod", "settings", "/data/LOG_LEVEL")},
		{"k8s:rbac.authorization.k8s.io/ClusterRole/system:admin#/rules", K8sField("rbac.authorization.k8s.io", "ClusterRole", "", "system:admin", "/rules")},
		{"k8s:apps/Deployment/prod/web", K8sField("apps", "Deployment", "prod", "web", "")},
		{"tf:infra/kafka//aws_autoscaling_group.consumer#/desired_capacity", TFField("infra/kafka", "aws_autoscaling_group.consumer", "/desired_capacity")},
		{`tf:.//aws_instance.web["a/b%20c"]#/tags/team`, TFField(".", `aws_instance.web["a/b c"]`, "/tags/team")},
		{"k8s:core/ConfigMap/prod/cfg#/data/a~1b%3Dc%2A", K8sField("", "ConfigMap", "prod", "cfg", "/data/a~1b=c*")},
	}
	for _, c := range cases {
		got, err := ParseField(c.text)
		if err != nil {
			t.Fatalf("ParseField(%q): %v", c.text, err)
		}
		if got != c.want {
			t.Errorf("ParseField(%q) = %#v, want %#v", c.text, got, c.want)
		}
		if s := got.String(); s != c.text {
			t.Errorf("String() = %q, want %q", s, c.text)
		}
	}
}

func TestParseFieldErrors(t *testing.T) {
	for _, s := range []string{"", "apps/Deployment/prod/web", "k8s:apps/Deployment", "k8s:/Deployment/p/w", "k8s:apps/Deployment/prod/web#spec",
		"tf:aws_instance.x", "tf://aws_instance.x", "tf:a//", "k8s:apps/Deployment/*/web", "k8s:apps/Deployment/p/w#/a b", "k8s:apps/D/p/w#/%zz",
		"tf:a/../b//x.y", "gcp:x", "k8s:apps/Deployment/p/w#/a~2", "tf:%2F//0", "tf:%2Finfra//x.y", "tf:..//x.y", "tf:../infra//x.y"} {
		if f, err := ParseField(s); err == nil {
			t.Errorf("ParseField(%q) = %v, want error", s, f)
		}
	}
}

func TestPatternMatch(t *testing.T) {
	web := K8sField("apps", "Deployment", "prod", "web", "/spec/replicas")
	img := K8sField("apps", "Deployment", "prod", "web", "/spec/template/spec/containers/0/image")
	cm := K8sField("", "ConfigMap", "prod", "cfg", "/data/x")
	cr := K8sField("rbac.authorization.k8s.io", "ClusterRole", "", "admin", "/rules")
	asg := TFField("infra/kafka", "aws_autoscaling_group.consumer", "/desired_capacity")
	cases := []struct {
		pat   string
		field Field
		want  bool
	}{
		{"k8s:apps/Deployment/*/*#/spec/replicas", web, true},
		{"k8s:apps/Deployment/*/*#/spec/replicas", img, false},
		{"k8s:apps/Deployment/prod/web", img, true},
		{"k8s:apps/Deployment/prod/web#", img, false},
		{"k8s:*/*/*/*#/spec/**", img, true},
		{"k8s:*/*/*/*#/**/image", img, true},
		{"k8s:*/*/*/*#/spec/*/image", img, false},
		{"k8s:core/ConfigMap/prod/*", cm, true},
		{"k8s:*/ConfigMap/prod/*", cm, true},
		{"k8s:*/*/*/*", cr, false},
		{"k8s:*/*/*", cr, true},
		{"k8s:*/*/w*#/spec/replicas", web, false},
		{"k8s:*/*/*/w*#/spec/replicas", web, true},
		{"tf:**//aws_autoscaling_group.*#/desired_capacity", asg, true},
		{"tf:infra/*//aws_autoscaling_group.*#/desired_capacity", asg, true},
		{"tf:.//aws_autoscaling_group.*#/desired_capacity", asg, false},
		{"tf:infra/kafka//*", asg, true},
		{"k8s:apps/Deployment/prod/web#/spec/%2A", web, false},
	}
	for _, c := range cases {
		p, err := ParseFieldPattern(c.pat)
		if err != nil {
			t.Fatalf("ParseFieldPattern(%q): %v", c.pat, err)
		}
		if got := p.Match(c.field); got != c.want {
			t.Errorf("%q.Match(%s) = %v, want %v", c.pat, c.field, got, c.want)
		}
	}
	lit, _ := ParseFieldPattern("k8s:core/ConfigMap/prod/cfg#/data/%2A")
	if !lit.Match(K8sField("", "ConfigMap", "prod", "cfg", "/data/*")) || lit.Match(K8sField("", "ConfigMap", "prod", "cfg", "/data/x")) {
		t.Errorf("escaped star must match only a literal star")
	}
}

func FuzzFieldRoundTrip(f *testing.F) {
	for _, s := range []string{"k8s:apps/Deployment/prod/web#/spec/replicas", `tf:infra//aws_instance.web["a"]#/tags/x`, "k8s:core/Secret/ns/n", "tf:.//x.y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		fld, err := ParseField(s)
		if err != nil {
			return
		}
		text := fld.String()
		again, err := ParseField(text)
		if err != nil {
			t.Fatalf("ParseField(String()) of %q = %q: %v", s, text, err)
		}
		if again != fld || again.String() != text {
			t.Fatalf("round trip: %q -> %#v -> %q -> %#v", s, fld, text, again)
		}
		p, err := ParseFieldPattern(text)
		if err != nil {
			t.Fatalf("canonical address %q is not a valid pattern: %v", text, err)
		}
		if !p.Match(fld) {
			t.Fatalf("pattern %q does not match its own field", text)
		}
	})
}

// Escaping a label key such as app.kubernetes.io/name happens for every such key of every object
// Parley decodes: it must cost one string, not a replacer's tables rebuilt per call (a review of
// 90,000 such keys spent most of a second rebuilding them).
func TestPointerEscapingAllocatesOnlyTheResult(t *testing.T) {
	if got := testing.AllocsPerRun(100, func() { _ = EscapePointerToken("app.kubernetes.io/name") }); got > 1 {
		t.Errorf("EscapePointerToken allocates %v times per call, want at most 1 (the escaped string)", got)
	}
	if got := testing.AllocsPerRun(100, func() { _ = SplitPointer("/metadata/labels/app.kubernetes.io~1name") }); got > 4 {
		t.Errorf("SplitPointer allocates %v times per call, want at most 4 (the tokens, the unescaped one and its buffer)", got)
	}
	if got, want := EscapePointerToken("a~b/c"), "a~0b~1c"; got != want {
		t.Errorf("EscapePointerToken(a~b/c) = %q, want %q", got, want)
	}
	if got := SplitPointer("/a~0b~1c/d"); len(got) != 2 || got[0] != "a~b/c" || got[1] != "d" {
		t.Errorf("SplitPointer = %q", got)
	}
}
