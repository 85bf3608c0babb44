package tfplan

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/policy"
	"github.com/parleyhq/parley/policy/arbiter"
)

const testPolicy = `
intent "baseline"    { rank = 10 }
intent "performance" { rank = 60 }
actor "dba" {
  intent       = "performance"
  github_users = ["alice"]
}
actor "vault" {
  intent       = "baseline"
  github_users = ["vault-bot"]
}
field "db-secrets" {
  match   = ["tf:**//aws_db_instance.*#/password", "tf:**//aws_db_instance.*#/replicas"]
  writers = ["vault"]
}
field "capacity" {
  match   = ["tf:**//aws_autoscaling_group.*#/desired_capacity"]
  writers = ["dba"]
  min     = git("${field.object}#/min_size")
  max     = git("${field.object}#/max_size")
}
`

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	tm, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return tm
}

// fakeGit holds one claim per field.
type fakeGit map[core.Field]core.Claim

func (g fakeGit) Current(f core.Field) (core.Claim, bool, error) {
	c, ok := g[f]
	return c, ok, nil
}

func (g fakeGit) History(f core.Field) ([]core.Claim, error) {
	if c, ok := g[f]; ok {
		return []core.Claim{c}, nil
	}
	return nil, nil
}

func (g fakeGit) Fields(p core.FieldPattern) ([]core.Field, error) {
	var out []core.Field
	for f := range g {
		if p.Match(f) {
			out = append(out, f)
		}
	}
	return out, nil
}

func gitClaim(f core.Field, v core.Value) core.Claim {
	return core.Claim{Field: f, Value: v, Actor: core.Actor{Identity: core.Identity{Source: core.SourceGitAuthor, ID: "dana@example.com"}},
		At: time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC), Evidence: core.Evidence{Source: "git", Commit: "c0ffee"}}
}

func judge(t *testing.T, res Result, git GitState) []Judgement {
	t.Helper()
	pol, err := policy.Parse([]byte(testPolicy), "policy.hcl")
	if err != nil {
		t.Fatal(err)
	}
	at := mustTime(t, "2026-11-24T10:00:00Z")
	js, err := Judge(context.Background(), pol, res, git, ClaimOptions{Author: core.Identity{Source: core.SourceGitHubUser, ID: "alice"}, At: at}, at)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

func find(t *testing.T, js []Judgement, path string) Judgement {
	t.Helper()
	for _, j := range js {
		if j.Verdict.Field.Path == path {
			return j
		}
	}
	t.Fatalf("no verdict on %s", path)
	return Judgement{}
}

// TestJudgeSensitive: a secret never reaches a verdict, its explanation or a change, yet the
// arbiter still tells equal secrets from different ones: Git holding the secret the plan sets is
// no change (no writer check applies), Git holding another one is (and is vetoed).
func TestJudgeSensitive(t *testing.T) {
	res := extract(t, "sensitive", ".")
	obj := core.TFField(".", "aws_db_instance.orders", "")
	for _, tt := range []struct {
		name, gitSecret string
		want            core.Decision
	}{
		{"Git holds the new secret", "correct-horse-S3CRET", core.DecisionEnforceGit},
		{"Git holds the old secret", "hunter2-old-S3CRET", core.DecisionVeto},
	} {
		git := fakeGit{obj.Child("password"): gitClaim(obj.Child("password"), core.StringValue(tt.gitSecret))}
		js := judge(t, res, git)
		j := find(t, js, "/password")
		if j.Verdict.Decision != tt.want || !j.Sensitive {
			t.Errorf("%s: decision %s (sensitive %v), want %s:\n%s", tt.name, j.Verdict.Decision, j.Sensitive, tt.want, arbiter.Explain(j.Verdict))
		}
		if tt.want == core.DecisionVeto && j.Blocks != core.DecisionVeto {
			t.Errorf("%s: the veto of the plan's value does not block", tt.name)
		}
		for _, j := range js {
			doc, err := json.Marshal(j.Verdict)
			if err != nil {
				t.Fatal(err)
			}
			text := string(doc) + arbiter.Explain(j.Verdict)
			for _, c := range j.Changes {
				text += c.String() + c.Old.String() + c.New.String()
			}
			if strings.Contains(text, "S3CRET") || strings.Contains(text, "(sensitive ") {
				t.Errorf("%s: %s shows a secret or its hash:\n%s", tt.name, j.Verdict.Field, text)
			}
			if j.Sensitive && j.Verdict.Winner != nil && !j.Verdict.Winner.Value.IsExpr() && j.Verdict.Winner.Value.JSON() != `"(sensitive)"` {
				t.Errorf("%s: winner value %s", j.Verdict.Field, j.Verdict.Winner.Value)
			}
		}
		if !strings.Contains(arbiter.Explain(j.Verdict), `"(sensitive)"`) {
			t.Errorf("%s: the explanation does not name the value as (sensitive):\n%s", tt.name, arbiter.Explain(j.Verdict))
		}
	}
}

// TestJudgeBounds: the plan's own max_size counts for its desired_capacity, as a pull request's
// head values do.
func TestJudgeBounds(t *testing.T) {
	obj := core.TFField("infra/kafka", "aws_autoscaling_group.consumer", "")
	git := fakeGit{
		obj.Child("min_size"):         gitClaim(obj.Child("min_size"), core.CanonicalJSONValue("4")),
		obj.Child("max_size"):         gitClaim(obj.Child("max_size"), core.CanonicalJSONValue("16")),
		obj.Child("desired_capacity"): gitClaim(obj.Child("desired_capacity"), core.CanonicalJSONValue("5")),
	}
	res := extract(t, "kafka-scale-24", "infra/kafka")
	js := judge(t, res, git)
	if len(js) != 1 || js[0].Verdict.Decision != core.DecisionVeto || js[0].Blocks != core.DecisionVeto || Conclusion(js) != "failure" {
		t.Fatalf("24: %+v", js)
	}
	res.Changes = append(res.Changes, Change{Field: obj.Child("max_size"), Address: "aws_autoscaling_group.consumer", Action: ActionUpdate,
		Old: core.CanonicalJSONValue("16"), New: core.CanonicalJSONValue("32")})
	js = judge(t, res, git)
	if j := find(t, js, "/desired_capacity"); j.Verdict.Decision == core.DecisionVeto || j.Blocks != "" {
		t.Errorf("24 under the plan's own max_size 32: %s", arbiter.Explain(j.Verdict))
	}
}

// TestJudgeDrift: drift is judged as an unknown outside actor's claim (vetoed here: it is not a
// writer), beside the plan's claim that puts Git's value back.
func TestJudgeDrift(t *testing.T) {
	obj := core.TFField("infra/kafka", "aws_autoscaling_group.consumer", "")
	git := fakeGit{
		obj.Child("min_size"):         gitClaim(obj.Child("min_size"), core.CanonicalJSONValue("4")),
		obj.Child("max_size"):         gitClaim(obj.Child("max_size"), core.CanonicalJSONValue("16")),
		obj.Child("desired_capacity"): gitClaim(obj.Child("desired_capacity"), core.CanonicalJSONValue("5")),
	}
	js := judge(t, extract(t, "drift", "infra/kafka"), git)
	j := find(t, js, "/desired_capacity")
	if j.Verdict.Decision != core.DecisionEnforceGit || j.Blocks != "" || len(j.Changes) != 2 {
		t.Fatalf("desired_capacity: blocks %q\n%s", j.Blocks, arbiter.Explain(j.Verdict))
	}
	if !strings.Contains(arbiter.Explain(j.Verdict), "vetoed terraform-drift:aws_autoscaling_group.consumer") {
		t.Errorf("the drift is not what was vetoed:\n%s", arbiter.Explain(j.Verdict))
	}
	if c := Conclusion(js); c != "success" {
		t.Errorf("conclusion %s", c)
	}
	// A veto that refuses only the drift does not block the plan whose value is the one that
	// stands; a veto of the plan's own value does.
	gitWins := core.Verdict{Decision: core.DecisionVeto, Winner: &core.Claim{Value: core.CanonicalJSONValue("5")}}
	if five, six := core.CanonicalJSONValue("5"), core.CanonicalJSONValue("6"); blocks(gitWins, &five) != "" || blocks(gitWins, &six) != core.DecisionVeto || blocks(gitWins, nil) != "" {
		t.Error("blocks misjudges a veto")
	}
	if Conclusion(nil) != "neutral" {
		t.Error("nothing to judge is not neutral")
	}
}
