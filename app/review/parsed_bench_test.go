package review

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/internal/gittest"
	"github.com/parleyhq/parley/policy"
)

// BenchmarkEvaluateDeepTF is Evaluate of bench/attack's deeptf pull request: it adds a Terraform
// file of 170,000 nested blocks (1.0 MB), refused for its nesting, and changes main.tf beside it.
// Each judgement opens its GitSource, as the App does for every delivery. "none" keeps no memo
// (as parley review, and every judgement before issue 34's memo), "first" judges with a memo that
// has seen nothing, "repeated" with the memo of the judgements before.
//
//	go test ./app/review -run '^$' -bench BenchmarkEvaluateDeepTF -benchtime 20x
func BenchmarkEvaluateDeepTF(b *testing.B) {
	r := gittest.Init(b, time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC), time.Hour).As("Dana", "dana@parley.example")
	r.Write("infra/app/main.tf", "resource \"aws_instance\" \"web\" {\n  instance_type = \"t3.small\"\n}\n")
	r.Write(".parley/policy.hcl", immutablePolicy)
	r.Commit("Baseline\n")
	r.Run("checkout", "-q", "-b", "pr")
	r.Write("infra/app/deep.tf", deepTF(170_000))
	r.Write("infra/app/main.tf", "resource \"aws_instance\" \"web\" {\n  instance_type = \"t3.large\"\n}\n")
	r.Commit("Nest\n")
	pol, err := policy.Parse([]byte(immutablePolicy), ".parley/policy.hcl")
	if err != nil {
		b.Fatal(err)
	}
	now := time.Date(2026, 11, 20, 10, 5, 0, 0, time.UTC)
	judge := func(b *testing.B, memo *Parsed) {
		src, err := OpenGitSource(r.Dir, "main", "pr")
		if err != nil {
			b.Fatal(err)
		}
		pr := PullRequest{Number: 9, BaseSHA: src.BaseSHA(), MergeBaseSHA: src.MergeBaseSHA(), HeadSHA: src.HeadSHA(), Updated: now,
			Author: core.Identity{Source: core.SourceGitHubUser, ID: "mallory"}, Parsed: memo}
		res, err := Evaluate(context.Background(), pr, src, pol, nil, nil, now)
		if err != nil {
			b.Fatal(err)
		}
		if !res.Unjudged || len(res.Problems) != 1 || !strings.Contains(res.Problems[0], "nested deeper") {
			b.Fatalf("problems %q: want deep.tf refused for its nesting", res.Problems)
		}
	}
	b.Run("none", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			judge(b, nil)
		}
	})
	b.Run("first", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			judge(b, &Parsed{})
		}
	})
	b.Run("repeated", func(b *testing.B) {
		memo := &Parsed{}
		judge(b, memo)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			judge(b, memo)
		}
	})
}
