package core

import (
	"slices"
	"strings"
	"testing"
)

// TestMatchObjectPath checks the split matchers agree with Match.
func TestMatchObjectPath(t *testing.T) {
	pats := []string{
		"k8s:apps/Deployment/*/*#/spec/replicas", "k8s:apps/Deployment/prod/*", "k8s:core/ConfigMap/*/*#/data/*",
		"k8s:*/*/*#/**", "k8s:apps/Deployment/*/*#/spec/**/image", "k8s:apps/Deployment/*/*#/**/replicas",
		"tf:**//aws_autoscaling_group.*#/desired_capacity", "tf:infra/*//aws_iam_*", "tf:.//x.y#/a/*",
		"tf:**//*#/**", "tf:infra/**/prod//*#/a", "k8s:apps/Deployment/*/*#", "tf:a//b.c#/x/**/y/**",
	}
	fields := []Field{
		K8sField("apps", "Deployment", "prod", "web", "/spec/replicas"),
		K8sField("apps", "Deployment", "prod", "web", ""),
		K8sField("apps", "Deployment", "prod", "web", "/spec/template/spec/containers/0/image"),
		K8sField("", "ConfigMap", "prod", "s", "/data/LOG"),
		K8sField("", "Namespace", "", "prod", "/metadata/labels"),
		TFField("infra/kafka", "aws_autoscaling_group.consumer", "/desired_capacity"),
		TFField("infra/kafka", "aws_iam_role.r", "/policy"),
		TFField(".", "x.y", "/a/b"),
		TFField("infra/eu/prod", "x.y", "/a"),
		TFField("a", "b.c", "/x/y"),
		TFField("a", "b.c", "/x/q/y/z"),
		TFField("a", "b.c", "/x"),
		TFField("a", "b.c", "/x//y"),
		TFField("a", "b.c", "/"),
	}
	for _, ps := range pats {
		p := MustFieldPattern(ps)
		for _, f := range fields {
			want := referenceMatch(p, f)
			if got := p.MatchObject(f) && p.MatchPath(f.Path); got != want || p.Match(f) != want {
				t.Errorf("%s vs %s: split %v, Match %v", ps, f, got, want)
			}
		}
	}
}

func TestSeqMatchAgreesWithTokensMatch(t *testing.T) {
	ptoks := []string{"a", "b", "*", "**", "a*"}
	vtoks := []string{"a", "b", "ab", "", "x"}
	var gen func(alpha []string, n int, seed int) []string
	gen = func(alpha []string, n int, seed int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = alpha[seed%len(alpha)]
			seed /= len(alpha)
		}
		return out
	}
	for pn := 0; pn <= 3; pn++ {
		for ps := 0; ps < 125; ps++ {
			pat := gen(ptoks, pn, ps)
			for vn := 0; vn <= 3; vn++ {
				for vs := 0; vs < 64; vs++ {
					val := gen(vtoks, vn, vs)
					want := tokensMatch(pat, val)
					pstr, vstr := strings.Join(pat, "/"), strings.Join(val, "/")
					if vn == 0 {
						vstr = ""
					}
					if pn == 0 {
						pstr = ""
					}
					if slices.Contains(val, "") {
						continue // empty tokens take MatchPath's splitting path
					}
					if got := seqMatch(pstr, vstr); got != want {
						t.Fatalf("pattern %q value %q: seqMatch %v, tokensMatch %v", pat, val, got, want)
					}
				}
			}
		}
	}
}

// referenceMatch is the straightforward, allocating matcher: tokens split out and compared with
// tokensMatch. The fast matchers must agree with it.
func referenceMatch(p FieldPattern, f Field) bool {
	if p.Scheme != f.Scheme {
		return false
	}
	switch p.Scheme {
	case SchemeKubernetes:
		fg := f.Group
		if fg == "" {
			fg = CoreGroup
		}
		if !segMatch(p.Group, fg) || !segMatch(p.Kind, f.Kind) || !segMatch(p.Name, f.Name) ||
			(p.Namespace == "") != (f.Namespace == "") || !segMatch(p.Namespace, f.Namespace) {
			return false
		}
	case SchemeTerraform:
		split := func(m string) []string {
			if m == "." || m == "" {
				return nil
			}
			return strings.Split(m, "/")
		}
		if !tokensMatch(split(p.Module), split(cleanModule(f.Module))) || !segMatch(p.Resource, f.Resource) {
			return false
		}
	default:
		return false
	}
	if p.Path == "" && !strings.Contains(p.text, "#") {
		return true
	}
	return tokensMatch(escapedTokens(p.Path), escapedTokens(f.Path))
}
