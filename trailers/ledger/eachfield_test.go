package ledger_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/trailers/ledger"
)

// TestEachFieldAgreesWithEntries: EachField reads a branch's commits once and its claims without
// joining them to their commits; every history it hands out is the one Entries reads for the field
// with the join, down to each entry's kind, value, credit, expiry and merge.
func TestEachFieldAgreesWithEntries(t *testing.T) {
	r := newGitRepo(t)
	r.write("infra/kafka/main.tf", asg(6)+"resource \"aws_instance\" \"web\" {\n  ami  = var.ami\n  tags = { Name = \"a<b&c\" }\n}\n")
	r.write("k8s/prod/web.yaml", deployment("prod", "web", 3, "1.0")+"  ratio: 1.50\n  big: 12345678901234567890\n")
	r.commit("Dana Okafor", "dana@parley.example", "Initial\n")
	r.git("checkout", "--quiet", "-b", "bob/scale")
	r.write("k8s/prod/web.yaml", deployment("prod", "web", 5, "1.0")+"  ratio: 2.5e0\n")
	r.commit("Bob Chen", "bob@parley.example", "Scale web\n\nIntent: performance\nMotivation: traffic\n")
	r.git("checkout", "--quiet", "main")
	r.git("merge", "--quiet", "--no-ff", "bob/scale", "-m", "Merge pull request #12 from bob/scale\n\nIntent: performance\n")
	r.write("infra/kafka/main.tf", asg(4)+"resource \"aws_instance\" \"web\" {\n  ami  = var.other\n  tags = { Name = \"a<b&c\" }\n}\n")
	credited := r.commit("Cost Optimizer", "cost-optimizer@parley.example", "Right-size (#15)\n\nIntent: cost\nMotivation: budget\nExpires: 4h\n")
	r.commit("Alice Martin", "alice@parley.example", "Keep web\n\nIntent: availability\nClaim: "+replicasAddr+"\nClaim: "+replicasAddr+" = 9\n")
	r.commit("Alice Martin", "alice@parley.example", "Let go\n\nIntent: availability\nYield: tf:infra/**//aws_autoscaling_group.*#/*\nYield: "+desiredAddr+"\n")

	l := openLedger(t, r.dir)
	update(t, l, "main")
	ctx := context.Background()
	if err := l.Credit(ctx, credited, core.Identity{Source: core.SourceGitHubUser, ID: "costbot"}, "merged pull request #15"); err != nil {
		t.Fatal(err)
	}
	b, err := l.Branch("main")
	if err != nil {
		t.Fatal(err)
	}
	for _, pattern := range []string{"", "tf:**//aws_autoscaling_group.*#/*"} {
		var p core.FieldPattern
		if pattern != "" {
			p = core.MustFieldPattern(pattern)
		}
		var seen, credits, yields int
		err := b.EachField(ctx, p, func(h ledger.FieldHistory) error {
			seen++
			want, err := b.Entries(h.Field)
			if err != nil {
				return err
			}
			if !reflect.DeepEqual(h.Entries, want) {
				t.Errorf("%s: EachField's history differs from Entries'\n got %+v\nwant %+v", h.Field, h.Entries, want)
			}
			for _, e := range h.Entries {
				if e.Actor.Identity.ID == "costbot" {
					credits++
				}
				if e.Yield {
					yields++
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		fields, err := b.Fields(p)
		if err != nil {
			t.Fatal(err)
		}
		if seen != len(fields) || seen == 0 || credits == 0 || yields == 0 {
			t.Errorf("pattern %q: %d fields handed out of %d, %d credited claims, %d yields", pattern, seen, len(fields), credits, yields)
		}
	}
}
