package review

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/internal/gittest"
	"github.com/parleyhq/parley/policy/arbiter"
)

// A pull request's claims reach the policy with their dependents, read from the tree it would
// merge: raising the database's max_connections, which a ConfigMap the API's pods read derives its
// pool size from, is escalated by a rule on claim.dependents, and the explanation lists them. A
// pull request that adds the first reader of a value is judged with that reader.
func TestPullRequestClaimsSeeTheirDependents(t *testing.T) {
	read := func(p string) string {
		b, err := os.ReadFile(filepath.Join("..", "..", "reconcile", "depgraph", "testdata", "repo", p))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	demoPolicy, err := os.ReadFile(filepath.Join("..", "..", "internal", "demo", "policy.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	pol := string(demoPolicy) + `
rule "pods-read-it" {
  description = "A value the pods of a Deployment read is for the team running them to agree"
  when        = !claim.git && length([for d in claim.dependents : d if d.kind == "Deployment"]) > 0
  decision    = "escalate"
}
`
	tf, api := read("infra/db/main.tf"), read("k8s/prod/api.yaml")
	r := gittest.Init(t, time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC), time.Hour).As("Dana", "dana@parley.example")
	r.Write("infra/db/main.tf", tf)
	r.Write(".parley/policy.hcl", pol)
	r.Commit("The API database\n\nIntent: consistency\n")
	raise := strings.Replace(tf, "default     = 200", "default     = 400", 1)
	if raise == tf {
		t.Fatal("the fixture's max_connections default moved")
	}

	verdict := func(head string) core.Verdict {
		t.Helper()
		src, err := OpenGitSource(r.Dir, "main", head)
		if err != nil {
			t.Fatal(err)
		}
		led, p := mainLedgerAndPolicy(t, r.Dir, src)
		_, last := src.HeadCommit()
		pr := PullRequest{Number: 12, BaseSHA: src.BaseSHA(), MergeBaseSHA: src.MergeBaseSHA(), HeadSHA: src.HeadSHA(), Updated: last.Time,
			Author: core.Identity{Source: core.SourceGitHubUser, ID: "erin"}}
		res, err := Evaluate(context.Background(), pr, src, p, led, nil, last.Time)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range res.Verdicts {
			if v.Field.String() == "tf:infra/db//var.max_connections#/default" {
				return v
			}
		}
		t.Fatalf("max_connections is not judged: %+v", res.Verdicts)
		return core.Verdict{}
	}

	// No pod reads it yet (the ConfigMap is Terraform's): the rule does not apply.
	r.Run("checkout", "-q", "-b", "raise-only")
	r.Write("infra/db/main.tf", raise)
	r.Commit("More connections\n\nIntent: performance\n")
	if v := verdict("raise-only"); strings.Contains(arbiter.Explain(v), "[rule.pods-read-it: decided]") {
		t.Fatalf("the rule decided with no pod reading the value:\n%s", arbiter.Explain(v))
	}

	// The pull request that also deploys the API, whose pods read the pool size, is escalated.
	r.Run("checkout", "-q", "-b", "raise-and-deploy", "main")
	r.Write("infra/db/main.tf", raise)
	r.Write("k8s/prod/api.yaml", api)
	r.Commit("More connections for the API\n\nIntent: performance\n")
	v := verdict("raise-and-deploy")
	explained := arbiter.Explain(v)
	if v.Decision != core.DecisionEscalate {
		t.Fatalf("not escalated:\n%s", explained)
	}
	for _, want := range []string{"[dependents: listed]", "k8s:core/ConfigMap/prod/db-pool#/data/POOL_MAX", "env DB_POOL_MAX from ConfigMap prod/db-pool", "[rule.pods-read-it: decided]"} {
		if !strings.Contains(explained, want) {
			t.Errorf("the explanation lacks %q:\n%s", want, explained)
		}
	}
}
