package policy

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// FuzzParse checks that no input makes the loader panic, that every failure is Diagnostics with
// positions in the file, and that a policy that parses has Git's actor and the baseline intent.
func FuzzParse(f *testing.F) {
	f.Add(Starter)
	if b, err := os.ReadFile("../internal/demo/policy.hcl"); err == nil {
		f.Add(string(b))
	}
	f.Add(`field "iam" {
  match = ["tf:**//aws_iam_*"]
  immutable = true
  veto_ask_when = claim.motivation == "cve" || claim.urgency >= 80
  veto_ask = ["@acme/security-leads"]
}
rule "r" {
  when = claim.intent == "cost"
  decision = "veto"
  veto_ask_when = other.actor == "git"
}`)
	f.Add(`rule "r" { when = claim.rank > other.rank
decision = "win" }`)
	f.Add(`field "f" {
  match = ["tf:**//aws_autoscaling_group.*#/desired_capacity"]
  max   = git("${field.object}#/max_size")
}`)
	f.Add(`freeze "f" {
  start = "2026-11-27T00:00:00Z"
  end   = "2026-11-28T00:00:00Z"
  repeat = "weekly"
  allow_when = claim.severity == "critical"
}`)
	f.Add(`actor "hpa" {}
actor "oncall" {}
motivation "incident" { asserted_by = ["oncall"] }
field "replicas" {
  match                = ["k8s:apps/Deployment/*/*#/spec/replicas"]
  owner                = "hpa"
  owner_when           = hour(now) < 22
  owner_gives_way_when = claim.motivation == "incident" && claim.expires != "" && (other == null || other.urgency < claim.urgency)
}`)
	f.Add(`field "f" {
  match = ["tf:**//x.y#/a"]
  owner_gives_way_when = claim.actor == "oncall"
}`)
	f.Add("intent \"a\" { rank = 1e400 }")
	f.Add("actor \"x\" { k8s_users = [null] }")
	f.Fuzz(func(t *testing.T, src string) {
		p, err := Parse([]byte(src), "fuzz.hcl")
		if err != nil {
			var diags Diagnostics
			if !errors.As(err, &diags) || len(diags) == 0 {
				t.Fatalf("error is not Diagnostics: %v", err)
			}
			for _, d := range diags {
				if d.File != "fuzz.hcl" || d.Line < 1 || d.Column < 1 || d.Message == "" {
					t.Fatalf("bad diagnostic %+v", d)
				}
				if !strings.HasPrefix(d.String(), "fuzz.hcl:") {
					t.Fatalf("diagnostic %q does not start with the file", d)
				}
			}
			return
		}
		if p.GitActor() == nil {
			t.Fatal("no git actor")
		}
		if _, ok := p.Intents["baseline"]; !ok {
			t.Fatal("no baseline intent")
		}
	})
}

// TestDeepPolicyRefusedBeforeParsing: the policy is HCL from the repository; one nested past Go's
// stack under hclsyntax's recursion (issue 34) is a diagnostic at the line where the budget ran
// out, not a crash of whatever loads it.
func TestDeepPolicyRefusedBeforeParsing(t *testing.T) {
	for _, src := range []string{
		strings.Repeat("rule {\n", 100_000) + strings.Repeat("}\n", 100_000),
		"rule \"r\" {\n  when = " + strings.Repeat("(", 100_000) + "true" + strings.Repeat(")", 100_000) + "\n}\n",
	} {
		_, err := Parse([]byte(src), ".parley/policy.hcl")
		var diags Diagnostics
		if !errors.As(err, &diags) || len(diags) != 1 || !strings.Contains(diags[0].String(), ".parley/policy.hcl:") ||
			!strings.Contains(diags[0].Message, "nested deeper than 1000 levels") {
			t.Fatalf("want one nesting diagnostic, got %v", err)
		}
	}
}

// TestUnclosedCommentsInPolicyRefusedUnlexed: a policy of block comments left open made hclsyntax's
// lexer read to the end of the file once per comment (85 kB: about 20 s of CPU in every process
// that loads the policy); it is one diagnostic at the first, before the lexer sees it.
func TestUnclosedCommentsInPolicyRefusedUnlexed(t *testing.T) {
	src := "version = 1\n" + strings.Repeat("/* x\n", 17_000)
	_, err := Parse([]byte(src), ".parley/policy.hcl")
	var diags Diagnostics
	if !errors.As(err, &diags) || len(diags) != 1 || !strings.Contains(diags[0].String(), ".parley/policy.hcl:2:1:") ||
		!strings.Contains(diags[0].Message, "a /* comment that no */ closes") {
		t.Fatalf("want one unclosed-comment diagnostic at line 2, got %v", err)
	}
}

// TestLargePolicyRefusedUnparsed: a policy past fielddiff.MaxHCLBytes is one diagnostic naming the
// file, not gigabytes of hclsyntax tokens.
func TestLargePolicyRefusedUnparsed(t *testing.T) {
	src := strings.Repeat("# padding\n", 120_000)
	_, err := Parse([]byte(src), ".parley/policy.hcl")
	var diags Diagnostics
	if !errors.As(err, &diags) || len(diags) != 1 || !strings.HasPrefix(diags[0].String(), ".parley/policy.hcl:1:1:") ||
		!strings.Contains(diags[0].Message, "above the 1 MiB Parley parses") {
		t.Fatalf("want one size diagnostic, got %v", err)
	}
}

// FuzzDeepPolicy: any policy up to the 8 MiB a repository file may be, built as prefix×n middle
// suffix×n to reach nesting small inputs never have, parses to a policy or diagnostics, never a
// crash.
func FuzzDeepPolicy(f *testing.F) {
	f.Add("rule \"r\" {\n", "when = true\n", "}\n", uint32(5_000))
	f.Add("(", "true", ")", uint32(3_000))
	f.Add("!", "true", "", uint32(3_000))
	f.Fuzz(func(t *testing.T, prefix, middle, suffix string, n uint32) {
		const limit = 8 << 20
		if unit := len(prefix) + len(suffix); unit > 0 && int(n) > (limit-len(middle))/unit {
			n = uint32(max(limit-len(middle), 0) / unit)
		}
		src := "rule \"x\" {\n  when = " + strings.Repeat(prefix, int(n)) + middle + strings.Repeat(suffix, int(n)) + "\n}\n"
		Parse([]byte(src), ".parley/policy.hcl") // diagnostics are an answer; a crash ends the fuzzer
	})
}

// FuzzSigningKey checks that no signing_keys entry makes the reader panic, and that a key it
// accepts has an id and proves only the principals it names (none for a bare key, which the
// loader binds or refuses).
func FuzzSigningKey(f *testing.F) {
	const key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOdVVxmP91uVq8c4dWtrR81GBkh+FNNlaf3WWqwBMHan"
	for _, s := range []string{key, key + " alice", "alice@x.dev " + key, "alice@x.dev,*@y.dev " + key, `alice@x.dev namespaces="git" ` + key,
		`alice@x.dev cert-authority ` + key, "alice@x.dev -----BEGIN PGP PUBLIC KEY BLOCK-----\n\nx\n-----END PGP PUBLIC KEY BLOCK-----", ",", `a "b" c`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, err := parseSigningKey(s)
		if err != nil {
			return
		}
		if k.ID == "" {
			t.Fatalf("%q: accepted with no key id", s)
		}
		for _, p := range k.Principals {
			if p == "" {
				t.Fatalf("%q: an empty principal", s)
			}
		}
		if len(k.Principals) == 0 && k.SignsAs("alice@x.dev") {
			t.Fatalf("%q: a key naming nobody signs as alice", s)
		}
	})
}
