package policy

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/internal/demo"
)

// TestStarterHasNoTrustNotes: the policy `parley init` writes is what a new install's doctor
// reads on the default branch; a trust note there (an actor matching commit emails with no key to
// prove them) makes doctor's first run warn about the policy the user was just given.
func TestStarterHasNoTrustNotes(t *testing.T) {
	p, err := Parse([]byte(Starter), "starter.hcl")
	if err != nil {
		t.Fatal(err)
	}
	if notes := p.TrustNotes(); len(notes) != 0 {
		t.Errorf("the starter policy's trust notes: %q", notes)
	}
}

func TestParseValidPolicies(t *testing.T) {
	for name, src := range map[string]string{
		"starter": Starter,
		"demo":    mustRead(t, "../internal/demo/policy.hcl"),
		"empty":   "",
	} {
		t.Run(name, func(t *testing.T) {
			p, err := Parse([]byte(src), name+".hcl")
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			if p.GitActor() == nil || p.GitActor().Intent != core.IntentBaseline {
				t.Errorf("git actor: %+v", p.GitActor())
			}
			if _, ok := p.Intents[core.IntentBaseline]; !ok {
				t.Errorf("baseline intent missing")
			}
		})
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestLedgerPaths: the ledger block narrows what the ledger reads; a list left out keeps its default,
// and a policy without the block reads everything but test data and vendored trees.
func TestLedgerPaths(t *testing.T) {
	p, err := Parse([]byte("intent \"a\" { rank = 1 }\n"), "p.hcl")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(p.Ledger.Include, core.DefaultLedgerInclude) || !slices.Equal(p.Ledger.Exclude, core.DefaultLedgerExclude) {
		t.Errorf("no ledger block: %+v, want the defaults", p.Ledger)
	}
	p, err = Parse([]byte("ledger {\n include = [\"clusters/**\", \"infra/**/*.tf\"]\n}\n"), "p.hcl")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(p.Ledger.Include, []string{"clusters/**", "infra/**/*.tf"}) || !slices.Equal(p.Ledger.Exclude, core.DefaultLedgerExclude) {
		t.Errorf("include only: %+v", p.Ledger)
	}
	if !p.Ledger.Match("clusters/prod/web.yaml") || p.Ledger.Match("apps/web.yaml") || p.Ledger.Match("clusters/testdata/x.yaml") {
		t.Errorf("include only: matches wrongly")
	}
	p, err = Parse([]byte("ledger {\n exclude = []\n}\n"), "p.hcl")
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Ledger.Exclude) != 0 || !p.Ledger.Match("a/testdata/x.yaml") {
		t.Errorf("exclude = []: %+v, want nothing excluded", p.Ledger)
	}
}

// LedgerSettings reads the ledger block and the actors' OpenPGP keys from one parse; a policy that
// does not parse gives the default files and no keys.
func TestLedgerSettings(t *testing.T) {
	paths, keys := LedgerSettings([]byte("ledger {\n include = [\"clusters/**\"]\n}\n"), "p.hcl")
	if !slices.Equal(paths.Include, []string{"clusters/**"}) || keys != "" {
		t.Errorf("ledger block: %+v, keys %q", paths, keys)
	}
	paths, keys = LedgerSettings([]byte("ledger {"), "p.hcl")
	if !slices.Equal(paths.Include, core.DefaultLedgerInclude) || !slices.Equal(paths.Exclude, core.DefaultLedgerExclude) || keys != "" {
		t.Errorf("broken policy: %+v, keys %q; want the defaults and no keys", paths, keys)
	}
}

func TestGitOpsBlock(t *testing.T) {
	p, err := Parse([]byte("gitops {\n  enable_helm_drift_detection = true\n}\n"), "p.hcl")
	if err != nil || !p.GitOps.EnableHelmDriftDetection {
		t.Fatalf("gitops block: %+v, %v", p.GitOps, err)
	}
	p, err = Parse([]byte("intent \"cost\" { rank = 1 }\n"), "p.hcl")
	if err != nil || p.GitOps.EnableHelmDriftDetection {
		t.Fatalf("default: %+v, %v", p.GitOps, err)
	}
}

func TestFieldAdmissionMode(t *testing.T) {
	p, err := Parse([]byte("field \"r\" {\n match = [\"k8s:apps/Deployment/*/*#/spec/replicas\"]\n admission = \"deny\"\n}\n"+
		"field \"i\" {\n match = [\"k8s:apps/Deployment/*/*#/spec/template/**\"]\n}\n"), "p.hcl")
	if err != nil {
		t.Fatal(err)
	}
	if p.Fields[0].Admission != AdmissionDeny || p.Fields[1].Admission != "" {
		t.Fatalf("admission modes %q, %q", p.Fields[0].Admission, p.Fields[1].Admission)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want string // one expected diagnostic, as file:line:col: message (prefix)
	}{
		{"syntax", "intent \"a\" {\n rank = \n}", "p.hcl:2:9: Invalid expression"},
		{"unknown block", "bogus {}", `p.hcl:1:1: Unsupported block type`},
		{"unknown attribute", "intent \"a\" {\n rank = 1\n colour = 2\n}", `p.hcl:3:2: Unsupported argument; An argument named "colour" is not expected here.`},
		{"missing rank", "intent \"a\" {}", `p.hcl:1:12: Missing required argument`},
		{"undefined intent", "actor \"x\" {\n intent = \"avilability\"\n}\nintent \"availability\" { rank = 1 }",
			`p.hcl:2:11: actor x intent refers to undefined intent "avilability" (did you mean "availability"?)`},
		{"undefined actor in asserted_by", "actor \"oncall\" {}\nmotivation \"incident\" {\n asserted_by = [\"on-call\"]\n}",
			`p.hcl:3:17: motivation incident asserted_by refers to undefined actor "on-call" (did you mean "oncall"?)`},
		{"undefined owner", "field \"f\" {\n match = [\"k8s:apps/Deployment/*/*#/spec/replicas\"]\n owner = \"hap\"\n}",
			`p.hcl:3:10: field f owner refers to undefined actor "hap"`},
		{"undefined actor motivation", "motivation \"traffic\" {}\nactor \"hpa\" {\n motivation = \"trafic\"\n}",
			`p.hcl:3:15: actor hpa motivation refers to undefined motivation "trafic" (did you mean "traffic"?)`},
		{"undefined motivation in rule", "motivation \"incident\" {}\nrule \"r\" {\n when = claim.motivation == \"incidnet\"\n decision = \"win\"\n}",
			`p.hcl:3:29: claim.motivation comparison refers to undefined motivation "incidnet" (did you mean "incident"?)`},
		{"bad attribute", "rule \"r\" {\n when = other.rnak > 1\n decision = \"win\"\n}", `p.hcl:2:9: other has no attribute "rnak" (did you mean "rank"?)`},
		{"bad variable", "rule \"r\" {\n when = clam.rank > 1\n decision = \"win\"\n}", `p.hcl:2:9: unknown variable "clam" in when (did you mean "claim"?)`},
		{"claim not visible in bounds", "field \"f\" {\n match = [\"tf:**//x.y#/a\"]\n max = claim.rank\n}", `p.hcl:3:8: unknown variable "claim" in max`},
		{"unknown function", "rule \"r\" {\n when = contain([], claim.actor)\n decision = \"win\"\n}", `p.hcl:2:9: unknown function "contain" (did you mean "contains"?)`},
		{"not a bool", "rule \"r\" {\n when = claim.rank + 1\n decision = \"win\"\n}", `p.hcl:2:9: when must be a bool, not number`},
		{"bad decision", "rule \"r\" {\n when = true\n decision = \"winn\"\n}", `p.hcl:3:13: rule r: unknown decision "winn" (want win, veto, hold or escalate) (did you mean "win"?)`},
		{"bad pattern", "field \"f\" {\n match = [\"k8s:apps/Deployment\"]\n}", `p.hcl:2:11: match: field address "k8s:apps/Deployment": want k8s:<group>/<Kind>/[<namespace>/]<name>, got 2 segments`},
		{"bad duration", "motivation \"m\" {\n default_lifetime = \"4 hours\"\n}", `p.hcl:2:21: default_lifetime: duration "4 hours"`},
		{"bad ledger pattern", "ledger {\n include = [\"clusters/**\", \"apps/[prod\"]\n}", `p.hcl:2:28: ledger include: path pattern "apps/[prod" is not a valid glob`},
		{"bad admission mode", "field \"f\" {\n match = [\"k8s:apps/Deployment/*/*#/spec/replicas\"]\n admission = \"block\"\n}", `p.hcl:3:14: field f: admission "block": want "warn" or "deny"`},
		{"two gitops blocks", "gitops {}\ngitops {}\n", `p.hcl:2:1: duplicate gitops block`},
		{"unknown gitops setting", "gitops {\n enable_argo = true\n}\n", `p.hcl:2:2: Unsupported argument; An argument named "enable_argo" is not expected here`},
		{"gitops setting of the wrong type", "gitops {\n enable_helm_drift_detection = \"yes\"\n}\n", `p.hcl:2`},
		{"ledger pattern with a slash", "ledger {\n exclude = [\"/tmp/**\"]\n}", `p.hcl:2:13: ledger exclude: path pattern "/tmp/**": repository paths have no leading slash`},
		{"default over max", "motivation \"m\" {\n default_lifetime = \"4h\"\n max_lifetime = \"1h\"\n}", `p.hcl:2:21: default_lifetime 4h0m0s is longer than max_lifetime 1h0m0s`},
		{"duplicate", "intent \"a\" { rank = 1 }\nintent \"a\" { rank = 2 }", `p.hcl:2:1: duplicate intent block "a" (first declared at line 1)`},
		{"bad freeze time", "freeze \"f\" {\n start = \"friday\"\n end = \"2026-12-01T00:00:00Z\"\n}", `p.hcl:2:10: freeze f: start "friday" is not an RFC 3339 time`},
		{"freeze end before start", "freeze \"f\" {\n start = \"2026-12-02T00:00:00Z\"\n end = \"2026-12-01T00:00:00Z\"\n}", `p.hcl:3:8: freeze f: end must be after start`},
		{"weekly too long", "freeze \"f\" {\n start = \"2026-12-01T00:00:00Z\"\n end = \"2026-12-09T00:00:00Z\"\n repeat = \"weekly\"\n}", `p.hcl:3:8: freeze f: a weekly window must be shorter than its period`},
		{"flips", "oscillation {\n flips = 1\n}", `p.hcl:2:10: oscillation flips must be a whole number from 2 to 1000`},
		{"fallback", "escalation {\n fallback = \"adopt\"\n}", `p.hcl:2:13: escalation fallback "adopt": want enforce-git or hold`},
		{"constant required", "intent \"a\" {\n rank = claim.rank\n}", `p.hcl:2:9: rank must be a constant`},
		{"immutable with owner", "actor \"a\" {}\nfield \"f\" {\n match = [\"tf:**//aws_vpc.*\"]\n immutable = true\n owner = \"a\"\n}", `p.hcl:2:1: field f: an immutable field has no owner or writers`},
		{"intents without default", "intent \"a\" { rank = 1 }\nintent \"b\" { rank = 1 }\nactor \"x\" {\n intent = \"a\"\n intents = [\"b\"]\n}", `p.hcl:5:12: actor x: intents must include its default intent "a"`},
		{"bad name", "intent \"a b\" { rank = 1 }", `p.hcl:1:8: intent name "a b": use letters, digits, -, _ and .`},
		{"veto_ask without veto_ask_when", "field \"iam\" {\n match = [\"tf:**//aws_iam_*\"]\n immutable = true\n veto_ask = [\"@acme/sec\"]\n}",
			`p.hcl:4:2: field iam: veto_ask needs veto_ask_when (when a veto is put to people)`},
		{"veto_ask_when on a rule that does not veto", "rule \"r\" {\n when = true\n decision = \"win\"\n veto_ask_when = claim.urgency >= 50\n}",
			`p.hcl:4:2: rule r: veto_ask_when needs decision = "veto" (this rule decides "win")`},
		{"veto_ask_when reads other on a field block", "field \"iam\" {\n match = [\"tf:**//aws_iam_*\"]\n immutable = true\n veto_ask_when = other.urgency > 1\n}",
			`p.hcl:4:18: unknown variable "other" in veto_ask_when (known: claim, field, now)`},
		{"veto_ask with an empty name", "field \"iam\" {\n match = [\"tf:**//aws_iam_*\"]\n immutable = true\n veto_ask_when = true\n veto_ask = [\"\"]\n}",
			`p.hcl:5:14: field iam: veto_ask: empty name`},
		{"owner_gives_way_when without owner", "field \"replicas\" {\n match = [\"k8s:apps/Deployment/*/*#/spec/replicas\"]\n owner_gives_way_when = claim.motivation != \"\"\n}",
			`p.hcl:3:2: field replicas: owner_gives_way_when needs an owner`},
		{"owner_gives_way_when with a misspelt attribute", "actor \"hpa\" {}\nfield \"f\" {\n match = [\"k8s:apps/Deployment/*/*#/spec/replicas\"]\n owner = \"hpa\"\n owner_gives_way_when = claim.motivaton == \"incident\"\n}",
			`p.hcl:5:25: claim has no attribute "motivaton" (did you mean "motivation"?)`},
		{"owner_gives_way_when with an undefined motivation", "actor \"hpa\" {}\nmotivation \"incident\" {}\nfield \"f\" {\n match = [\"k8s:apps/Deployment/*/*#/spec/replicas\"]\n owner = \"hpa\"\n owner_gives_way_when = claim.motivation == \"incidnet\"\n}",
			`p.hcl:6:45: claim.motivation comparison refers to undefined motivation "incidnet" (did you mean "incident"?)`},
		{"owner_gives_way_when not a bool", "actor \"hpa\" {}\nfield \"f\" {\n match = [\"k8s:apps/Deployment/*/*#/spec/replicas\"]\n owner = \"hpa\"\n owner_gives_way_when = claim.urgency\n}",
			`p.hcl:5:25: owner_gives_way_when must be a bool, not number`},
		{"owner_gives_way_when sees no unknown variable", "actor \"hpa\" {}\nfield \"f\" {\n match = [\"k8s:apps/Deployment/*/*#/spec/replicas\"]\n owner = \"hpa\"\n owner_gives_way_when = owner.actor == \"hpa\"\n}",
			`p.hcl:5:25: unknown variable "owner" in owner_gives_way_when`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.src), "p.hcl")
			var diags Diagnostics
			if !errors.As(err, &diags) {
				t.Fatalf("want Diagnostics, got %v", err)
			}
			for _, d := range diags {
				if strings.HasPrefix(d.String(), tt.want) {
					return
				}
			}
			t.Errorf("no diagnostic starts with %q; got:\n%s", tt.want, diags.Error())
		})
	}
}

// TestOwnerGivesWayWhen: the attribute compiles to a condition over claim and other, kept with its
// source for explanations; a field block without it has none.
func TestOwnerGivesWayWhen(t *testing.T) {
	p, err := Parse([]byte(`actor "hpa" {}
motivation "incident" {}
field "replicas" {
  match                = ["k8s:apps/Deployment/*/*#/spec/replicas"]
  owner                = "hpa"
  owner_gives_way_when = claim.motivation == "incident" && (other == null || other.motivation != "incident")
}
field "plain" {
  match = ["k8s:apps/StatefulSet/*/*#/spec/replicas"]
  owner = "hpa"
}
`), "p.hcl")
	if err != nil {
		t.Fatal(err)
	}
	e := p.Fields[0].OwnerGivesWayWhen
	if e == nil || e.Source != `claim.motivation == "incident" && (other == null || other.motivation != "incident")` || e.Range.Start.Line != 6 {
		t.Fatalf("owner_gives_way_when: %+v", e)
	}
	if p.Fields[1].OwnerGivesWayWhen != nil {
		t.Errorf("a field block without the attribute has a condition")
	}
}

func TestLoadFileErrors(t *testing.T) {
	_, err := LoadFile("testdata/does-not-exist.hcl")
	var diags Diagnostics
	if err == nil || errors.As(err, &diags) || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a missing file is a load error, not diagnostics: %v", err)
	}
}

// demoKey is the id of the SSH key the demo signs email's commits with.
func demoKey(t *testing.T, email string) string {
	t.Helper()
	line, err := demo.PublicKey(email)
	if err != nil {
		t.Fatal(err)
	}
	k, _, _, _, err := ssh.ParseAuthorizedKey([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	return ssh.FingerprintSHA256(k)
}

func TestTrustUnsignedGitAuthorsBelievesEmails(t *testing.T) {
	src := "trust_unsigned_git_authors = true\n" + mustRead(t, "../internal/demo/policy.hcl")
	p, err := Parse([]byte(src), "demo.hcl")
	if err != nil {
		t.Fatal(err)
	}
	if a := p.ResolveActor(core.Identity{Source: core.SourceGitAuthor, ID: "alice@parley.example"}); a == nil || a.Name != "oncall" {
		t.Errorf("with trust_unsigned_git_authors, alice's unsigned commit resolves to %v, want oncall", a)
	}
}

func TestSigningKeysMustBeKeys(t *testing.T) {
	for _, tc := range []struct{ keys, want string }{
		{`["ssh-ed25519 AAAAnot-base64"]`, "signing_keys[0]: neither an SSH public key"},
		{`[""]`, "signing_keys[0]: empty key"},
		{`["-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nnope\n-----END PGP PUBLIC KEY BLOCK-----"]`, "not a readable OpenPGP public key block"},
	} {
		_, err := Parse([]byte(`actor "a" {
  git_authors  = ["a@example.com"]
  signing_keys = `+tc.keys+`
}`), "p.hcl")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("signing_keys = %s: error %v, want one containing %q", tc.keys, err, tc.want)
		}
	}
}

// TestSigningKeysNamePrincipals: signing_keys entries are allowed-signers lines, "PRINCIPALS
// [OPTIONS] KEY"; a bare key is taken only where it can prove one email (its actor's one literal
// git_authors), and refused, saying how to fix it, where it would prove several people.
func TestSigningKeysNamePrincipals(t *testing.T) {
	const alice = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOdVVxmP91uVq8c4dWtrR81GBkh+FNNlaf3WWqwBMHan"
	for _, tc := range []struct {
		name, authors, keys string
		want                []string // principals of the key, or
		err                 string
	}{
		{"principals first", `["alice@x.dev", "bob@x.dev"]`, `["alice@x.dev ` + alice + `"]`, []string{"alice@x.dev"}, ""},
		{"several principals", `["*@x.dev"]`, `["alice@x.dev,a@x.dev ` + alice + ` laptop"]`, []string{"alice@x.dev", "a@x.dev"}, ""},
		{"namespaces option", `["alice@x.dev"]`, `["alice@x.dev namespaces=\"git,file\" ` + alice + `"]`, []string{"alice@x.dev"}, ""},
		{"bare key, one literal author", `["alice@x.dev"]`, `["` + alice + ` alice"]`, []string{"alice@x.dev"}, ""},
		{"bare key, two authors", `["alice@x.dev", "bob@x.dev"]`, `["` + alice + `"]`,
			nil, "signing_keys[0] names no principals, and the actor matches 2 git_authors: write the emails this key signs as before it"},
		{"bare key, a glob", `["*@x.dev"]`, `["` + alice + `"]`, nil, `the actor matches the glob "*@x.dev"`},
		{"other option", `["alice@x.dev"]`, `["alice@x.dev valid-after=\"20260101\" ` + alice + `"]`, nil, `option "valid-after=\"20260101\"" is not supported`},
		{"namespace without git", `["alice@x.dev"]`, `["alice@x.dev namespaces=\"file\" ` + alice + `"]`, nil, "excludes namespace git"},
		{"principals only", `["alice@x.dev"]`, `["alice@x.dev"]`, nil, `principals "alice@x.dev" name no key after them`},
		{"empty principal", `["alice@x.dev"]`, `["alice@x.dev,, ` + alice + `"]`, nil, "an empty principal"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse([]byte("actor \"a\" {\n  git_authors = "+tc.authors+"\n  signing_keys = "+tc.keys+"\n}\n"), "p.hcl")
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := p.Actor("a").SigningKeys[0].Principals; !slices.Equal(got, tc.want) {
				t.Errorf("principals %q, want %q", got, tc.want)
			}
		})
	}
}

func TestResolveActor(t *testing.T) {
	p, err := Parse([]byte(mustRead(t, "../internal/demo/policy.hcl")), "demo.hcl")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		id   core.Identity
		want string
	}{
		{core.Identity{Source: core.SourceKubeUser, ID: "system:serviceaccount:kube-system:horizontal-pod-autoscaler"}, "hpa"},
		{core.Identity{Source: core.SourceFieldManager, ID: "kube-controller-manager"}, "hpa"},
		{core.Identity{Source: core.SourceAWSPrincipal, ID: "arn:aws:sts::123456789012:assumed-role/kafka-scaling-agent/i-0abc"}, "kafka-agent"},
		{core.Identity{Source: core.SourceAWSPrincipal, ID: "arn:aws:sts::123456789012:assumed-role/other/i-0abc"}, ""},
		{core.Identity{Source: core.SourceGitHubUser, ID: "zoe", Groups: []string{"parleyhq/sre"}}, "oncall"},
		{core.Identity{Source: core.SourceGitHubTeam, ID: "parleyhq/sre"}, "oncall"},
		{core.Identity{Source: core.SourceGitHubUser, ID: "zoe"}, ""},
		// A commit author email counts only when a key the actor lists signed the commit.
		{core.Identity{Source: core.SourceGitAuthor, ID: "alice@parley.example"}, ""},
		{core.Identity{Source: core.SourceGitAuthor, ID: "alice@parley.example", Proof: core.Proof{Problem: "it is unsigned"}}, ""},
		{core.Identity{Source: core.SourceGitAuthor, ID: "alice@parley.example", Proof: core.Proof{Key: demoKey(t, "alice@parley.example")}}, "oncall"},
		{core.Identity{Source: core.SourceGitAuthor, ID: "alice@parley.example", Proof: core.Proof{Key: demoKey(t, "scanner@parley.example")}}, ""},
		{core.Identity{Source: core.SourceGitAuthor, ID: "alice@parley.example", Proof: core.Proof{Vouched: "--author"}}, "oncall"},
		{core.Identity{Source: core.SourceGitAuthor, ID: "cost-optimizer@parley.example", Proof: core.Proof{Key: demoKey(t, "cost-optimizer@parley.example")}}, "cost-optimizer"},
		// A key proves the principals it is listed for: Bob's key, though oncall lists it, does not
		// prove a commit authored as Alice (git's allowed-signers binds a key to its principals).
		{core.Identity{Source: core.SourceGitAuthor, ID: "alice@parley.example", Proof: core.Proof{Key: demoKey(t, "bob@parley.example")}}, ""},
		{core.Identity{Source: core.SourceGitAuthor, ID: "bob@parley.example", Proof: core.Proof{Key: demoKey(t, "bob@parley.example")}}, "oncall"},
		// The key alone is not an identity: it proves the email the actor matches, not another.
		{core.Identity{Source: core.SourceGitAuthor, ID: "mallory@parley.example", Proof: core.Proof{Key: demoKey(t, "alice@parley.example")}}, ""},
		// The source matters: an email is not a Kubernetes user unless listed as one.
		{core.Identity{Source: core.SourceKubeUser, ID: "cost-optimizer@parley.example"}, ""},
	}
	if got := p.Actor("hpa").Motivation; got != "traffic" {
		t.Errorf("hpa's default motivation: got %q, want traffic", got)
	}
	for _, tt := range tests {
		got := ""
		if a := p.ResolveActor(tt.id); a != nil {
			got = a.Name
		}
		if got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.id, got, tt.want)
		}
	}
}

func TestGlobMatch(t *testing.T) {
	tests := []struct {
		pat, s string
		want   bool
	}{
		{"a", "a", true}, {"a", "b", false}, {"*", "", true}, {"*", "anything/at:all", true},
		{"arn:aws:sts::*:assumed-role/x/*", "arn:aws:sts::1:assumed-role/x/s", true},
		{"arn:aws:sts::*:assumed-role/x/*", "arn:aws:sts::1:assumed-role/y/s", false},
		{"*@example.com", "a@example.com", true}, {"*@example.com", "a@example.org", false},
		{"a*b*c", "abbbc", true}, {"a*b*c", "acb", false},
	}
	for _, tt := range tests {
		if got := globMatch(tt.pat, tt.s); got != tt.want {
			t.Errorf("globMatch(%q, %q) = %v", tt.pat, tt.s, got)
		}
	}
}

func TestExprMemo(t *testing.T) {
	src := `
intent "a" { rank = 1 }
rule "profile" {
  when     = claim.intent == "a" && other.rank < 5 && contains(["x"], claim.actor)
  decision = "win"
}
rule "value" {
  when     = claim.value == 3
  decision = "win"
}
rule "time" {
  when     = hour(now) > 9
  decision = "win"
}
rule "field" {
  when     = field.kind == "Deployment"
  decision = "win"
}
`
	p, err := Parse([]byte(src), "m.hcl")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"profile": true, "value": false, "time": false, "field": false}
	for _, r := range p.Rules {
		if r.When.Memo != want[r.Name] {
			t.Errorf("rule %s: Memo %v, want %v", r.Name, r.When.Memo, want[r.Name])
		}
	}
}

func TestExprEval(t *testing.T) {
	src := `
intent "availability" { rank = 90 }
field "f" {
  match = ["tf:**//aws_autoscaling_group.*#/desired_capacity"]
  min   = git("${field.object}#/min_size")
  max   = max(git("${field.object}#/max_size"), 2)
}
rule "r" {
  when     = claim.value > 5 && claim.rank == 90 && weekday(now) == "sunday" && startswith(claim.identity, "k8s-user:")
  decision = "win"
}
`
	p, err := Parse([]byte(src), "e.hcl")
	if err != nil {
		t.Fatal(err)
	}
	f := core.TFField("infra/kafka", "aws_autoscaling_group.consumer", "/desired_capacity")
	look := mapLookup{f.Object().Child("max_size"): mustJSON(t, 16)}
	env := Env{Field: f, Now: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC), Git: look}
	if n, ok, err := p.Fields[0].Max.Number(p, env); err != nil || !ok || n != 16 {
		t.Errorf("max: %v %v %v", n, ok, err)
	}
	if _, ok, err := p.Fields[0].Min.Number(p, env); err != nil || ok {
		t.Errorf("min of a field Git does not hold: ok %v err %v (want null)", ok, err)
	}
	claim := &ClaimView{Claim: core.Claim{Value: mustJSON(t, 8), Intent: "availability",
		Actor: core.Actor{Identity: core.Identity{Source: core.SourceKubeUser, ID: "u"}}}, Rank: 90}
	env.Claim, env.Other = claim, claim
	if ok, err := p.Rules[0].When.Bool(p, env); err != nil || !ok {
		t.Errorf("rule: %v %v", ok, err)
	}
	word := *claim
	word.Claim.Value = core.StringValue("eight")
	env.Claim = &ClaimView{Claim: word.Claim, Rank: 90}
	if _, err := p.Rules[0].When.Bool(p, env); err == nil {
		t.Errorf("comparing a string with a number should fail at evaluation")
	}
}

type mapLookup map[core.Field]core.Value

func (m mapLookup) GitValue(f core.Field) (core.Value, bool, error) {
	v, ok := m[f]
	return v, ok, nil
}

func (m mapLookup) GitFields(p core.FieldPattern) ([]core.Field, error) {
	var out []core.Field
	for f := range m {
		if p.Match(f) {
			out = append(out, f)
		}
	}
	return out, nil
}

func mustJSON(t *testing.T, v any) core.Value {
	t.Helper()
	out, err := core.JSONValue(v)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestFreezeWindow(t *testing.T) {
	day := func(d, h int) time.Time { return time.Date(2026, 11, d, h, 0, 0, 0, time.UTC) }
	once := &Freeze{Start: day(27, 0), End: day(30, 0)}
	weekly := &Freeze{Start: day(21, 0), End: day(22, 0), Every: 7 * 24 * time.Hour} // Saturdays
	tests := []struct {
		name       string
		fz         *Freeze
		at         time.Time
		start, end time.Time
		active     bool
	}{
		{"before", once, day(26, 0), day(27, 0), day(30, 0), false},
		{"inside", once, day(28, 0), day(27, 0), day(30, 0), true},
		{"at the end", once, day(30, 0), time.Time{}, time.Time{}, false},
		{"weekly first", weekly, day(21, 5), day(21, 0), day(22, 0), true},
		{"weekly between", weekly, day(23, 0), day(28, 0), day(29, 0), false},
		{"weekly later", weekly, day(28, 23), day(28, 0), day(29, 0), true},
	}
	for _, tt := range tests {
		s, e, a := tt.fz.Window(tt.at)
		if !s.Equal(tt.start) || !e.Equal(tt.end) || a != tt.active {
			t.Errorf("%s: got %s %s %v, want %s %s %v", tt.name, s, e, a, tt.start, tt.end, tt.active)
		}
	}
}

func TestParseDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{"90m": 90 * time.Minute, "7d": 7 * 24 * time.Hour, "1h30m": 90 * time.Minute} {
		if got, err := ParseDuration(in); err != nil || got != want {
			t.Errorf("%s: %v %v", in, got, err)
		}
	}
	for _, in := range []string{"", "d", "-1h", "3 days", "99999999d"} {
		if _, err := ParseDuration(in); err == nil {
			t.Errorf("%q: want an error", in)
		}
	}
}

// TestDocExample keeps the complete example in docs/policy.md valid.
func TestDocExample(t *testing.T) {
	doc := mustRead(t, "../docs/policy.md")
	_, rest, ok := strings.Cut(doc, "## A complete example")
	if !ok {
		t.Fatal("docs/policy.md has no complete example")
	}
	_, rest, _ = strings.Cut(rest, "```hcl\n")
	src, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatal("unterminated example")
	}
	p, err := Parse([]byte(src), "docs/policy.md")
	if err != nil {
		t.Fatal(err)
	}
	demo, err := Parse([]byte(mustRead(t, "../internal/demo/policy.hcl")), "demo.hcl")
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Actors) != len(demo.Actors) || len(p.Fields) != len(demo.Fields) || len(p.Rules) != len(demo.Rules) ||
		len(p.Motivations) != len(demo.Motivations) || len(p.Intents) != len(demo.Intents) {
		t.Errorf("the documented example and internal/demo/policy.hcl differ")
	}
}

// TestDocOwnerGivesWayExample keeps the owner_gives_way_when example in docs/policy.md valid.
func TestDocOwnerGivesWayExample(t *testing.T) {
	doc := mustRead(t, "../docs/policy.md")
	_, rest, ok := strings.Cut(doc, "**When the owner gives way.**")
	if !ok {
		t.Fatal("docs/policy.md does not document owner_gives_way_when")
	}
	_, rest, _ = strings.Cut(rest, "```hcl\n")
	src, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatal("unterminated example")
	}
	p, err := Parse([]byte("actor \"hpa\" {}\nactor \"oncall\" {}\n"+src), "docs/policy.md")
	if err != nil {
		t.Fatal(err)
	}
	if fr := p.FieldRuleFor(core.K8sField("apps", "Deployment", "prod", "web", "/spec/replicas")); fr == nil || fr.OwnerGivesWayWhen == nil {
		t.Errorf("the example has no owner_gives_way_when")
	}
}

// TestGitBoundFastPath checks the git("...") shortcut of Number agrees with evaluating the HCL.
func TestGitBoundFastPath(t *testing.T) {
	p, err := Parse([]byte(`field "f" {
  match = ["tf:**//aws_autoscaling_group.*#/desired_capacity"]
  max   = git("${field.object}#/max_size")
  min   = git("tf:${field.module}//${field.resource}#/min_size")
}`), "fast.hcl")
	if err != nil {
		t.Fatal(err)
	}
	f := core.TFField("infra/kafka", "aws_autoscaling_group.consumer", "/desired_capacity")
	for _, e := range []*Expr{p.Fields[0].Max, p.Fields[0].Min} {
		if e.gitAddr == nil {
			t.Fatalf("%s: no fast path", e.Source)
		}
	}
	for name, v := range map[string]*core.Value{
		"number": ptr(mustJSON(t, 16)), "float": ptr(mustJSON(t, 2.5)), "numeric string": ptr(core.StringValue("16")),
		"word": ptr(core.StringValue("sixteen")), "null": ptr(mustJSON(t, nil)), "list": ptr(mustJSON(t, []int{1})), "absent": nil,
	} {
		look := mapLookup{}
		if v != nil {
			look[f.Object().Child("max_size")] = *v
			look[core.TFField("infra/kafka", "aws_autoscaling_group.consumer", "/min_size")] = *v
		}
		env := Env{Field: f, Git: look}
		for _, e := range []*Expr{p.Fields[0].Max, p.Fields[0].Min} {
			fastN, fastOK, fastErr := e.Number(p, env)
			slow := *e
			slow.gitAddr = nil
			slowN, slowOK, slowErr := slow.Number(p, env)
			if fastN != slowN || fastOK != slowOK || (fastErr == nil) != (slowErr == nil) {
				t.Errorf("%s, %s: fast %v %v %v, slow %v %v %v", name, e.Source, fastN, fastOK, fastErr, slowN, slowOK, slowErr)
			}
		}
	}
}

func ptr[T any](v T) *T { return &v }

// TestUnknownActors: the policies Parley ships (parley init's starter, the demo's) and a policy
// without an unknown_actors block let an identity no actor vouches for declare nothing; the block
// as docs/policy.md shows it opts in, and policy check notes it; a motivation that names who may
// assert it cannot be opened to everyone too.
func TestUnknownActors(t *testing.T) {
	for name, src := range map[string]string{"starter": Starter, "demo": mustRead(t, "../internal/demo/policy.hcl"), "empty": ""} {
		p, err := Parse([]byte(src), name+".hcl")
		if err != nil {
			t.Fatal(err)
		}
		u := &p.Unknown
		if u.DefaultIntent() != core.IntentBaseline || u.Expiry || len(u.Intents) > 0 || len(u.Motivations) > 0 {
			t.Errorf("%s: unknown actors may declare %+v", name, u)
		}
		for _, i := range []core.Intent{core.IntentAvailability, core.IntentSecurity, core.IntentCost} {
			if u.MayAssertIntent(i) {
				t.Errorf("%s: unknown actors may declare intent %s", name, i)
			}
		}
		for _, m := range p.Motivations {
			if u.MayAssertMotivation(m) {
				t.Errorf("%s: unknown actors may declare motivation %s", name, m.Name)
			}
		}
		for _, n := range p.TrustNotes() {
			if strings.Contains(n, "unknown_actors") {
				t.Errorf("%s: note %q", name, n)
			}
		}
	}

	doc := mustRead(t, "../docs/policy.md")
	_, rest, ok := strings.Cut(doc, "### `unknown_actors`")
	if !ok {
		t.Fatal("docs/policy.md does not document unknown_actors")
	}
	_, rest, _ = strings.Cut(rest, "```hcl\n")
	block, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatal("unterminated example")
	}
	p, err := Parse([]byte("intent \"experiment\" { rank = 5 }\nmotivation \"launch\" {}\n"+block), "docs/policy.md")
	if err != nil {
		t.Fatal(err)
	}
	u := &p.Unknown
	if !u.MayAssertIntent("experiment") || !u.MayAssertIntent(core.IntentBaseline) || u.MayAssertIntent(core.IntentAvailability) ||
		!u.MayAssertMotivation(p.Motivations["launch"]) || !u.Expiry {
		t.Errorf("the documented block: %+v", u)
	}
	if notes := strings.Join(p.TrustNotes(), "\n"); !strings.Contains(notes, "unknown_actors lets any identity no actor vouches for") ||
		!strings.Contains(notes, "declare intents experiment; motivations launch; an expiry that conditions see") {
		t.Errorf("notes: %s", notes)
	}

	for _, tc := range []struct{ src, want string }{
		{`motivation "incident" { asserted_by = ["oncall"] }
actor "oncall" {}
unknown_actors { motivations = ["incident"] }`, `p.hcl:3:33: unknown_actors motivations: motivation "incident" lists asserted_by (oncall), so only those actors may assert it`},
		{`unknown_actors { motivations = ["incidnet"] }`, `p.hcl:1:33: unknown_actors motivations refers to undefined motivation "incidnet"`},
		{`intent "cost" { rank = 1 }
unknown_actors { intents = ["costs"] }`, `p.hcl:2:29: unknown_actors intents refers to undefined intent "costs" (did you mean "cost"?)`},
		{`unknown_actors {}
unknown_actors {}`, `duplicate unknown_actors block`},
		{`unknown_actors { expiry = "yes" }`, `expiry must be a bool`},
	} {
		_, err := Parse([]byte(tc.src), "p.hcl")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s\n  error %v, want %q", tc.src, err, tc.want)
		}
	}
}
