package review

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/internal/gittest"
)

// configMap is a ConfigMap whose data has n keys of size bytes each.
func configMap(name string, n, size int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s, namespace: prod}\ndata:\n", name)
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "  k%d: %q\n", i, strings.Repeat("x", size))
	}
	return b.String()
}

// reads is a GitSource that records which files were read whole.
type reads struct {
	*GitSource
	read []string
}

func (r *reads) Content(ctx context.Context, sha, path string) ([]byte, bool, error) {
	r.read = append(r.read, path)
	return r.GitSource.Content(ctx, sha, path)
}

// hostileBranch adds to repo's pull request a file above the test's size budget, one that changes
// more fields than it allows, and a Terraform string above its value budget.
func hostileBranch(t *testing.T) string {
	t.Helper()
	dir := repo(t)
	write := func(p, s string) {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755)
		if err := os.WriteFile(filepath.Join(dir, p), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("k8s/prod/big.yaml", configMap("big", 200, 40))
	write("k8s/prod/many.yaml", configMap("many", 50, 1))
	write("infra/app/main.tf", "resource \"aws_instance\" \"web\" {\n  user_data = \""+strings.Repeat("A", 1000)+"\"\n  instance_type = \"t3.small\"\n}\n")
	r := gittest.New(t, dir)
	r.Run("add", ".")
	r.Run("commit", "-q", "-m", "Large things\n\nIntent: cost\n")
	return dir
}

func TestBudgetsTurnLargeInputIntoProblems(t *testing.T) {
	dir := hostileBranch(t)
	gs, err := OpenGitSource(dir, "main", "pr")
	if err != nil {
		t.Fatal(err)
	}
	src := &reads{GitSource: gs}
	led, pol := mainLedgerAndPolicy(t, dir, gs)
	now := time.Date(2026, 11, 20, 10, 5, 0, 0, time.UTC)
	pr := PullRequest{Number: 7, BaseSHA: gs.BaseSHA(), HeadSHA: gs.HeadSHA(), Updated: now,
		Budget: core.Budget{FileBytes: 4 << 10, FieldsPerFile: 20, ValueBytes: 200}}
	res, err := Evaluate(context.Background(), pr, src, pol, led, nil, now)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"k8s/prod/big.yaml: 10.2 kB, above the 4 KiB Parley reads; not judged",
		"k8s/prod/many.yaml: 50 changed fields, above the 20 Parley judges in one file; not judged",
		"tf:infra/app//aws_instance.web#/user_data: a value of 1.0 kB, above the 200 bytes Parley judges; not judged",
	}
	for _, w := range want {
		if !contains(res.Problems, w) {
			t.Errorf("problems %q\nlack %q", res.Problems, w)
		}
	}
	for _, p := range src.read {
		if p == "k8s/prod/big.yaml" {
			t.Error("the file above the budget was read whole")
		}
	}
	judged := map[string]bool{}
	for _, v := range res.Verdicts {
		judged[v.Field.String()] = true
		if strings.Contains(v.Field.String(), "big") || strings.Contains(v.Field.String(), "many") || strings.HasSuffix(v.Field.String(), "user_data") {
			t.Errorf("%s was judged despite the budget", v.Field)
		}
	}
	// Within the budget, the rest of the pull request is judged as before.
	for _, f := range []string{"tf:infra/kafka//aws_autoscaling_group.consumer#/desired_capacity", "tf:infra/app//aws_instance.web#/instance_type"} {
		if !judged[f] {
			t.Errorf("%s was not judged; verdicts %v", f, res.Verdicts)
		}
	}

	// The pull request's own budget: once it is spent, the remaining files are named, not judged.
	pr.Budget = core.Budget{FieldsPerChange: 3}
	res, err = Evaluate(context.Background(), pr, src, pol, led, nil, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Verdicts) > 3 {
		t.Errorf("%d verdicts, above the 3 fields the budget allows", len(res.Verdicts))
	}
	var named bool
	for _, p := range res.Problems {
		named = named || strings.Contains(p, "more than the 3 fields Parley judges in one pull request; not judged: ") && strings.Contains(p, "k8s/prod/big.yaml")
	}
	if !named {
		t.Errorf("problems %q: want the files left out named", res.Problems)
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// Padding a file past the budget is no way around a veto: what is not judged cannot pass.
func TestUnjudgedChangesDoNotPass(t *testing.T) {
	dir := hostileBranch(t)
	gs, err := OpenGitSource(dir, "main", "pr")
	if err != nil {
		t.Fatal(err)
	}
	led, pol := mainLedgerAndPolicy(t, dir, gs)
	now := time.Date(2026, 11, 20, 10, 5, 0, 0, time.UTC)
	pr := PullRequest{Number: 7, BaseSHA: gs.BaseSHA(), HeadSHA: gs.HeadSHA(), Updated: now, Budget: core.Budget{FileBytes: 10}}
	res, err := Evaluate(context.Background(), pr, gs, pol, led, nil, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Verdicts) != 0 || !res.Unjudged {
		t.Fatalf("every file is above 10 bytes: verdicts %v, unjudged %v", res.Verdicts, res.Unjudged)
	}
	if c := res.Conclusion(); c != "action_required" {
		t.Errorf("conclusion %s with the whole change unjudged, want action_required", c)
	}
}
