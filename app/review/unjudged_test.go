package review

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/internal/gittest"
)

// immutablePolicy makes the web Deployment's replicas immutable: any pull request changing them
// is vetoed.
const immutablePolicy = `field "fixed" {
  match     = ["k8s:apps/Deployment/*/*#/spec/replicas"]
  immutable = true
}
`

const webOnly = `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: prod}
spec:
  replicas: 3
`

// deepDocument is a ConfigMap nested 101 levels deep, one more than Parley reads; go-yaml,
// sigs.k8s.io/yaml, kustomize and kubectl read it.
func deepDocument() string {
	return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: deep, namespace: prod}\ndata: " +
		strings.Repeat("{a: ", 101) + "x" + strings.Repeat("}", 101) + "\n"
}

// unjudgedBranch commits main (web.yaml, the policy) and a branch pr that writes files.
func unjudgedBranch(t *testing.T, files map[string]string) (*GitSource, PullRequest, func() Result) {
	t.Helper()
	r := gittest.Init(t, time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC), time.Hour).As("Dana", "dana@parley.example")
	r.Write("k8s/prod/web.yaml", webOnly)
	r.Write("infra/app/main.tf", "resource \"aws_instance\" \"web\" {\n  instance_type = \"t3.small\"\n}\n")
	r.Write(".parley/policy.hcl", immutablePolicy)
	r.Commit("Baseline\n")
	r.Run("checkout", "-q", "-b", "pr")
	for p, s := range files {
		r.Write(p, s)
	}
	r.Commit("Change\n")
	src, err := OpenGitSource(r.Dir, "main", "pr")
	if err != nil {
		t.Fatal(err)
	}
	led, pol := mainLedgerAndPolicy(t, r.Dir, src)
	now := time.Date(2026, 11, 20, 10, 5, 0, 0, time.UTC)
	pr := PullRequest{Number: 9, BaseSHA: src.BaseSHA(), HeadSHA: src.HeadSHA(), Updated: now,
		Author: core.Identity{Source: core.SourceGitHubUser, ID: "mallory"}}
	return src, pr, func() Result {
		t.Helper()
		res, err := Evaluate(context.Background(), pr, src, pol, led, nil, now)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
}

// The attack of issue 33: a veto in a file's first document must not hide behind a second
// document Parley cannot read. Before, the whole file was "not judged" and the check neutral.
func TestUnreadableDocumentDoesNotHideAVeto(t *testing.T) {
	file := strings.Replace(webOnly, "replicas: 3", "replicas: 5", 1) + "---\n" + deepDocument()
	_, _, evaluate := unjudgedBranch(t, map[string]string{"k8s/prod/web.yaml": file})
	res := evaluate()
	var veto bool
	for _, v := range res.Verdicts {
		veto = veto || v.Field.String() == "k8s:apps/Deployment/prod/web#/spec/replicas" && v.Decision == core.DecisionVeto
	}
	if !veto {
		t.Errorf("the immutable replicas in the readable document: want a veto, got %v", res.Verdicts)
	}
	if c := res.Conclusion(); c != "failure" {
		t.Errorf("conclusion %s, want failure", c)
	}
	if !res.Unjudged {
		t.Error("the unreadable document must leave the change unjudged")
	}
	want := "k8s/prod/web.yaml: the document at line 6 is not judged: "
	if len(res.Problems) != 1 || !strings.HasPrefix(res.Problems[0], want) {
		t.Errorf("problems %q, want one starting %q", res.Problems, want)
	}
}

// Every way a changed file goes unjudged keeps the check from passing, and names the file.
func TestEveryUnjudgedPathIsAtBestActionRequired(t *testing.T) {
	cases := []struct {
		name, path, content, problem string
		// judged is a field that must still be judged beside what is not.
		judged string
	}{
		{"nesting in a second document", "k8s/prod/web.yaml", strings.Replace(webOnly, "kind: Deployment", "kind: Deployment\n", 1) + "---\n" + deepDocument(),
			"k8s/prod/web.yaml: the document at line 7 is not judged: ", ""},
		{"nesting alone", "k8s/prod/deep.yaml", deepDocument(), "k8s/prod/deep.yaml: not judged: ", ""},
		{"a YAML syntax error beside a readable document", "k8s/prod/more.yaml",
			"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm, namespace: prod}\ndata: {a: b}\n---\nkind: [unclosed\n",
			"k8s/prod/more.yaml: the document at line 5 is not judged: ", "k8s:core/ConfigMap/prod/cm#/data/a"},
		{"an alias bomb", "k8s/prod/bomb.yaml", aliasBomb(), "k8s/prod/bomb.yaml: not judged: ", ""},
		{"a template", "k8s/prod/tpl.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Values.name }}\n", "k8s/prod/tpl.yaml: not judged: ", ""},
		{"a Terraform syntax error", "infra/app/main.tf", "resource \"aws_instance\" \"web\" {\n  instance_type = \n", "infra/app/main.tf: not judged: ", ""},
		{"objects defined twice", "k8s/prod/twice.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n",
			"k8s/prod/twice.yaml: not judged: ", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, evaluate := unjudgedBranch(t, map[string]string{c.path: c.content})
			res := evaluate()
			if got := res.Conclusion(); got == "success" || got == "neutral" || got == "skipped" {
				t.Errorf("conclusion %s: what is not judged must not pass; problems %q", got, res.Problems)
			}
			if !res.Unjudged {
				t.Error("not marked unjudged")
			}
			var named bool
			for _, p := range res.Problems {
				named = named || strings.HasPrefix(p, c.problem)
			}
			if !named {
				t.Errorf("problems %q, want one starting %q", res.Problems, c.problem)
			}
			if c.judged != "" {
				var found bool
				for _, v := range res.Verdicts {
					found = found || v.Field.String() == c.judged
				}
				if !found {
					t.Errorf("%s, beside what does not read, was not judged: %v", c.judged, res.Verdicts)
				}
			}
		})
	}
}

// aliasBomb is a few lines of nested aliases that expand past Parley's node budget.
func aliasBomb() string {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bomb, namespace: prod}\nx0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n")
	for i := 1; i < 9; i++ {
		b.WriteString("x" + string(rune('0'+i)) + ": &a" + string(rune('0'+i)) + " [")
		for j := 0; j < 9; j++ {
			if j > 0 {
				b.WriteString(", ")
			}
			b.WriteString("*a" + string(rune('0'+i-1)))
		}
		b.WriteString("]\n")
	}
	b.WriteString("data: {k: *a8}\n")
	return b.String()
}

// A removal that an unreadable document may explain (the object moved into it) is named, not
// judged as a removal.
func TestObjectMovedIntoUnreadableDocumentIsNamed(t *testing.T) {
	file := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: other, namespace: prod}\ndata: {a: b}\n---\n" + deepDocument()
	_, _, evaluate := unjudgedBranch(t, map[string]string{"k8s/prod/web.yaml": file})
	res := evaluate()
	for _, v := range res.Verdicts {
		if strings.Contains(v.Field.String(), "Deployment/prod/web") {
			t.Errorf("web's fields were judged as removed, though the unreadable document may define it: %s", v.Field)
		}
	}
	var named bool
	for _, p := range res.Problems {
		named = named || strings.Contains(p, "not judged whether it removes k8s:apps/Deployment/prod/web")
	}
	if !named || res.Conclusion() != "action_required" {
		t.Errorf("problems %q, conclusion %s: want web's removal named and action_required", res.Problems, res.Conclusion())
	}
}
