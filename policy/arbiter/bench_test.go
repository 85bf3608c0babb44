package arbiter

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/policy"
)

// benchInputs builds n fields, each with Git's claim and three live claims from a realistic mix of
// actors: Deployments' replicas, ConfigMap keys, autoscaling groups' capacity (bounded by Git's
// min_size and max_size) and alarm thresholds.
func benchInputs(tb testing.TB, n int) []Input {
	tb.Helper()
	r := rand.New(rand.NewPCG(42, 42))
	values := GitValues{}
	ids := []core.Identity{
		{Source: core.SourceKubeUser, ID: "system:serviceaccount:kube-system:horizontal-pod-autoscaler"},
		{Source: core.SourceKubeUser, ID: "system:serviceaccount:finops:cost-optimizer"},
		{Source: core.SourceGitHubUser, ID: "security-scanner[bot]"},
		{Source: core.SourceAWSPrincipal, ID: "arn:aws:sts::123456789012:assumed-role/kafka-scaling-agent/s-1"},
		{Source: core.SourceGitHubUser, ID: "bob", Groups: []string{"acme/sre"}},
		{Source: core.SourceGitHubUser, ID: "grace", Groups: []string{"acme/releases"}},
		{Source: core.SourceKubeUser, ID: "alice@acme.example"},
		{Source: core.SourceFieldManager, ID: "kubectl-edit"},
	}
	motivations := []core.Motivation{{}, {Kind: "incident", Ref: "INC-1"}, {Kind: "traffic"}, {Kind: "budget"},
		{Kind: "cve", Severity: core.SeverityCritical}, {Kind: "launch"}, {Kind: "rightsizing"}}
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	ins := make([]Input, n)
	for i := range ins {
		var f core.Field
		switch i % 10 {
		case 0, 1, 2, 3:
			f = core.K8sField("apps", "Deployment", fmt.Sprintf("ns-%d", i%97), fmt.Sprintf("app-%d", i), "/spec/replicas")
		case 4, 5, 6:
			f = core.K8sField("", "ConfigMap", fmt.Sprintf("ns-%d", i%97), fmt.Sprintf("cfg-%d", i/10), fmt.Sprintf("/data/KEY_%d", i%10))
		case 7, 8:
			f = core.TFField(fmt.Sprintf("infra/svc-%d", i%50), fmt.Sprintf("aws_autoscaling_group.g%d", i), "/desired_capacity")
			values[f.Object().Child("min_size")] = mustValue(tb, 2)
			values[f.Object().Child("max_size")] = mustValue(tb, 40)
		default:
			f = core.TFField(fmt.Sprintf("infra/svc-%d", i%50), fmt.Sprintf("aws_cloudwatch_metric_alarm.a%d", i), "/threshold")
		}
		g := core.Claim{Field: f, Actor: core.Actor{Identity: core.Identity{Source: core.SourceGitAuthor, ID: "carol@acme.example"}},
			Value: mustValue(tb, 4), At: now.Add(-48 * time.Hour), Evidence: core.Evidence{Source: "git", Commit: "abc"}}
		in := Input{Field: f, Git: &g, Now: now, Lookup: values}
		for k := 0; k < 3; k++ {
			c := core.Claim{Field: f, Actor: core.Actor{Identity: ids[r.IntN(len(ids))]}, Value: mustValue(tb, 1+r.IntN(30)),
				Motivation: motivations[r.IntN(len(motivations))], At: now.Add(-time.Duration(1+r.IntN(600)) * time.Minute)}
			if r.IntN(4) == 0 {
				c.Evidence.Explicit = true
			}
			in.Live = append(in.Live, c)
		}
		ins[i] = in
	}
	return ins
}

func mustValue(tb testing.TB, n int) core.Value {
	v, err := core.JSONValue(n)
	if err != nil {
		tb.Fatal(err)
	}
	return v
}

// BenchmarkDecide100k arbitrates 100,000 fields with three live claims each under a 10-rule policy.
// One benchmark iteration is the whole 100,000 fields; ns/field and allocs/field are reported too.
func BenchmarkDecide100k(b *testing.B) {
	p, err := policy.LoadFile("testdata/bench-policy.hcl")
	if err != nil {
		b.Fatal(err)
	}
	const n = 100_000
	ins := benchInputs(b, n)
	arb := New(p)
	decisions := map[core.Decision]int{}
	for _, in := range ins {
		decisions[arb.Decide(in).Decision]++
	}
	b.Logf("decisions over %d fields: %v", n, decisions)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		for i := range ins {
			arb.Decide(ins[i])
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/field")
}

// TestBenchPolicyLoads keeps the benchmark's policy valid and its rules cacheable.
func TestBenchPolicyLoads(t *testing.T) {
	p, err := policy.LoadFile("testdata/bench-policy.hcl")
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Rules) != 10 {
		t.Errorf("%d rules, want 10", len(p.Rules))
	}
	if !New(p).allMemo {
		t.Errorf("the benchmark's rules should all be cacheable")
	}
	ins := benchInputs(t, 200)
	for _, in := range ins {
		if v := Decide(p, in); len(v.Explanation) == 0 {
			t.Fatalf("%s: empty explanation", in.Field)
		}
	}
}
