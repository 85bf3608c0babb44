package demo_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/internal/demo"
	"github.com/parleyhq/parley/internal/gittest"
	"github.com/parleyhq/parley/policy"
)

func gitOut(t *testing.T, dir string, args ...string) string {
	t.Helper()
	return gittest.New(t, dir).Run(args...)
}

func TestBuildIsAValidDeterministicRepository(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is required: the tests compare with and build repositories through the git CLI")
	}
	a, err := demo.Build(filepath.Join(t.TempDir(), "a"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := demo.Build(filepath.Join(t.TempDir(), "b"))
	if err != nil {
		t.Fatal(err)
	}
	if a.Head != b.Head || a.Commits != b.Commits {
		t.Fatalf("two builds differ: %+v vs %+v", a, b)
	}
	gitOut(t, a.Dir, "fsck", "--strict")
	if st := gitOut(t, a.Dir, "status", "--porcelain"); st != "" {
		t.Errorf("work tree is not clean after Build:\n%s", st)
	}
	if got := gitOut(t, a.Dir, "rev-parse", "HEAD"); got != a.Head {
		t.Errorf("HEAD %s, want %s", got, a.Head)
	}
	if got := gitOut(t, a.Dir, "symbolic-ref", "HEAD"); got != "refs/heads/main" {
		t.Errorf("HEAD -> %s", got)
	}
	if n := gitOut(t, a.Dir, "rev-list", "--count", "--all"); n != "12" || a.Commits != 12 {
		t.Errorf("%s commits (Result says %d), want 12", n, a.Commits)
	}
	merges := gitOut(t, a.Dir, "log", "--merges", "--format=%s")
	if merges != "Merge pull request #12 from bob/web-requests" {
		t.Errorf("merges: %q", merges)
	}
	authors := gitOut(t, a.Dir, "log", "--format=%ae")
	for _, who := range []string{"dana@", "alice@", "bob@", "cost-optimizer@", "scanner@"} {
		if !strings.Contains(authors, who) {
			t.Errorf("no commit by %s", who)
		}
	}
	incident := gitOut(t, a.Dir, "log", "--format=%(trailers:key=Motivation,valueonly)", "--grep=^Hotfix", "-1")
	if incident != "incident INC-4211 severity=high" {
		t.Errorf("incident trailer: %q", incident)
	}
	policy, err := os.ReadFile(filepath.Join(a.Dir, ".parley", "policy.hcl"))
	if err != nil || string(policy) != demo.Policy() || !strings.Contains(string(policy), "intent") {
		t.Errorf(".parley/policy.hcl is not the embedded policy (err %v)", err)
	}
	for _, f := range []string{"k8s/prod/web.yaml", "infra/kafka/main.tf"} {
		b, err := os.ReadFile(filepath.Join(a.Dir, f))
		if err != nil || len(b) == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	tf, _ := os.ReadFile(filepath.Join(a.Dir, "infra/kafka/main.tf"))
	for _, want := range []string{"min_size            = 4", "max_size            = 16", "desired_capacity    = 5", "threshold           = 5000"} {
		if !strings.Contains(string(tf), want) {
			t.Errorf("main.tf lacks %q", want)
		}
	}
}

func TestBuildRefusesANonEmptyDirectory(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := demo.Build(dir); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("Build(non-empty) = %v", err)
	}
}

// TestVetoAskPolicyPutsTheSkeletonsVetoToPeople: the replacements VetoAskPolicy makes still find
// their places in the demo policy, and the result is a valid policy.
func TestVetoAskPolicyPutsTheSkeletonsVetoToPeople(t *testing.T) {
	p, err := policy.Parse([]byte(demo.VetoAskPolicy()), "policy.hcl")
	if err != nil {
		t.Fatal(err)
	}
	fr := p.FieldRuleFor(core.TFField("infra/kafka", "aws_iam_role_policy.consumer", "/policy"))
	if fr == nil || fr.VetoAsk == nil || strings.Join(fr.VetoAsk.Ask, ",") != "@acme/security-leads" {
		t.Fatalf("the IAM skeleton does not put its vetoes to people: %+v", fr)
	}
	if a := p.Actor("security-admin"); a == nil || !p.Motivations["cve"].MayAssert("security-admin") {
		t.Fatal("the security admin is missing or not trusted with cve")
	}
}
