package examples_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/internal/codeowners"
	"github.com/parleyhq/parley/internal/schematest"
	"github.com/parleyhq/parley/policy"
	"github.com/parleyhq/parley/policy/arbiter"
)

var update = flag.Bool("update", false, "rewrite expected.txt and expected.json from the current output")

// keyVerdict is a verdict a scenario must reach, as "time decision winner=value [rule]".
type keyVerdict struct {
	at, decision, winner, rule string
}

// The verdicts that define each scenario. expected.txt holds the full explanations; this table
// pins the outcome independently, so regenerating expected.txt cannot hide a changed decision.
var scenarios = map[string][]keyVerdict{
	"hpa-vs-cost": {
		{"2026-11-20T09:00:00Z", "enforce-git", "git=3", "no-contest"},
		{"2026-11-20T10:00:00Z", "yield", "hpa=8", "rank"},
		{"2026-11-20T10:05:00Z", "yield", "hpa=8", "rule.live-traffic-over-budget"},
		{"2026-11-20T10:20:00Z", "yield", "hpa=12", "rule.live-traffic-over-budget"},
	},
	"freeze-exploited-cve": {
		{"2026-11-20T12:00:00Z", "enforce-git", `git="registry.example/checkout:1.4.2"`, "no-contest"},
		{"2026-11-27T08:00:00Z", "enforce-git", `app-team="registry.example/checkout:1.4.2"`, "rank"},
		{"2026-11-28T03:00:00Z", "adopt", `scanner="registry.example/checkout:1.4.3"`, "rule.exploited-cve"},
	},
	"freeze-deferred-cve": {
		{"2026-11-20T12:00:00Z", "enforce-git", `git="registry.example/checkout:1.4.2"`, "no-contest"},
		{"2026-11-27T08:00:00Z", "enforce-git", `app-team="registry.example/checkout:1.4.2"`, "rank"},
		{"2026-11-28T03:00:00Z", "enforce-git", `app-team="registry.example/checkout:1.4.2"`, "freeze.peak-sales"},
		{"2026-12-01T00:00:00Z", "adopt", `scanner="registry.example/checkout:1.4.3"`, "rank"},
	},
	"oncall-hotfix": {
		{"2026-11-21T18:00:00Z", "enforce-git", `git="20"`, "no-contest"},
		{"2026-11-22T02:10:00Z", "yield", `oncall="60"`, "rule.incident-first"},
		{"2026-11-22T03:00:00Z", "yield", `oncall="60"`, "rule.incident-first"},
		{"2026-11-22T07:00:00Z", "yield", `oncall="60"`, "rule.incident-first"},
		{"2026-11-22T08:10:00Z", "enforce-git", `git="20"`, "no-contest"},
	},
	"console-iam-cve": {
		{"2026-11-24T09:00:00Z", "enforce-git", "git=", "no-contest"},
		{"2026-11-24T10:00:00Z", "veto", "git=", "immutable"},
		{"2026-11-24T10:30:00Z", "veto", "git=", "immutable"},
	},
	"downgraded-incident": {
		{"2026-11-23T08:00:00Z", "enforce-git", "git=4", "no-contest"},
		{"2026-11-23T09:00:00Z", "yield", "oncall=12", "rank"},
		{"2026-11-24T09:00:00Z", "enforce-git", "git=4", "no-contest"},
		{"2026-11-25T09:00:00Z", "yield", "developers=12", "rank"},
		{"2026-11-26T09:00:00Z", "enforce-git", "git=4", "no-contest"},
	},
	"hold-asks-codeowners": {
		{"2026-11-22T09:00:00Z", "enforce-git", "git=4", "no-contest"},
		{"2026-11-22T10:00:00Z", "adopt", "kafka-agent=8", "rank"},
		{"2026-11-22T10:05:00Z", "adopt", "kafka-agent=8", "rule.agent-tunes"},
		{"2026-11-22T10:10:00Z", "hold", "git=4", "oscillation"},
		{"2026-11-22T10:15:00Z", "hold", "git=4", "oscillation"},
		{"2026-11-22T12:15:00Z", "adopt", "kafka-agent=8", "rule.agent-tunes"},
	},
	"incident-vs-launch": {
		{"2026-11-20T09:00:00Z", "enforce-git", "git=10", "no-contest"},
		{"2026-11-22T08:00:00Z", "yield", "release-managers=20", "rank"},
		{"2026-11-22T09:30:00Z", "yield", "oncall=20", "urgency"},
		{"2026-11-22T13:30:00Z", "yield", "release-managers=20", "rank"},
	},
	"oscillation": {
		{"2026-11-22T09:00:00Z", "enforce-git", "git=4", "no-contest"},
		{"2026-11-22T10:00:00Z", "adopt", "kafka-agent=8", "rank"},
		{"2026-11-22T10:05:00Z", "adopt", "kafka-agent=8", "rule.agent-tunes"},
		{"2026-11-22T10:10:00Z", "hold", "git=4", "oscillation"},
		{"2026-11-22T10:15:00Z", "hold", "git=4", "oscillation"},
		{"2026-11-22T12:15:00Z", "adopt", "kafka-agent=8", "rule.agent-tunes"},
	},
	"bound-check": {
		{"2026-11-22T09:00:00Z", "enforce-git", "git=6", "no-contest"},
		{"2026-11-22T10:00:00Z", "veto", "git=6", "bounds"},
		{"2026-11-22T10:30:00Z", "yield", "kafka-agent=12", "rank"},
	},
	"musculature": {
		{"2026-11-22T09:00:00Z", "enforce-git", "git=", "no-contest"},
		{"2026-11-22T10:00:00Z", "veto", "git=", "confined"},
		{"2026-11-22T10:20:00Z", "veto", "git=", "confined"},
	},
	"stranger-declares": {
		{"2026-11-20T12:00:00Z", "enforce-git", `git="registry.example/checkout:1.4.2"`, "no-contest"},
		{"2026-11-28T03:00:00Z", "enforce-git", `git="registry.example/checkout:1.4.2"`, "freeze.peak-sales"},
		{"2026-12-01T00:00:00Z", "enforce-git", `git="registry.example/checkout:1.4.2"`, "git-tie"},
		{"2026-12-01T03:00:00Z", "enforce-git", `git="registry.example/checkout:1.4.2"`, "no-contest"},
	},
	"owner-gives-way": {
		{"2026-11-22T09:00:00Z", "yield", "", "owner.replicas"},
		{"2026-11-22T09:30:00Z", "yield", "hpa=6", "owner.replicas"},
		{"2026-11-22T10:00:00Z", "yield", "hpa=6", "owner.replicas"},
		{"2026-11-22T10:10:00Z", "yield", "oncall=12", "owner.replicas"},
		{"2026-11-22T11:00:00Z", "yield", "oncall=12", "owner.replicas"},
		{"2026-11-22T14:00:00Z", "yield", "oncall=12", "owner.replicas"},
		{"2026-11-22T14:10:00Z", "yield", "hpa=9", "owner.replicas"},
	},
}

func TestScenarios(t *testing.T) {
	dirs, err := filepath.Glob("*/events.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) != len(scenarios) {
		t.Errorf("found %d scenario directories, the table lists %d", len(dirs), len(scenarios))
	}
	for name, want := range scenarios {
		t.Run(name, func(t *testing.T) {
			changes := run(t, name)
			got := arbiter.RenderChanges(changes)
			golden := filepath.Join(name, "expected.txt")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			exp, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("read %s (run go test -update to create it): %v", golden, err)
			}
			if string(exp) != got {
				t.Errorf("%s differs from the simulation:\n--- got\n%s", golden, got)
			}
			checkJSONGolden(t, name, changes)
			// Verdicts at the keyed times (including rechecks between events).
			if len(changes) != len(want) {
				t.Errorf("got %d verdict changes, want %d:\n%s", len(changes), len(want), arbiter.RenderBrief(changes))
			}
			for i, w := range want {
				if i >= len(changes) {
					break
				}
				v := changes[i].Verdict
				winner := ""
				if v.Winner != nil {
					winner = v.Winner.Actor.Name + "=" + v.Winner.Value.JSON()
					if strings.HasPrefix(v.Winner.Value.JSON(), "{") {
						winner = v.Winner.Actor.Name + "="
					}
				}
				got := keyVerdict{changes[i].At.UTC().Format("2006-01-02T15:04:05Z"), string(v.Decision), winner, v.Rule}
				if got != w {
					t.Errorf("change %d: got %+v, want %+v", i+1, got, w)
				}
			}
		})
	}
}

// checkJSONGolden compares what parley simulate --json prints with expected.json, validates both
// the events and the output against the published schemas, and reads the output back: the
// verdicts, and every claim in them as a claim in a claims file.
func checkJSONGolden(t *testing.T, name string, changes []arbiter.Change) {
	t.Helper()
	events, err := os.ReadFile(filepath.Join(name, "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	schematest.ValidateLines(t, "events.schema.json", events)
	got, err := json.MarshalIndent(changes, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	golden := filepath.Join(name, "expected.json")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	exp, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("read %s (run go test -update to create it): %v", golden, err)
	}
	if string(exp) != string(got) {
		t.Errorf("%s differs from the simulation:\n--- got\n%s", golden, got)
	}
	schematest.Validate(t, "simulate.schema.json", exp)

	var back []arbiter.Change
	if err := json.Unmarshal(exp, &back); err != nil {
		t.Fatalf("%s does not read back: %v", golden, err)
	}
	if !reflect.DeepEqual(back, changes) {
		t.Errorf("%s reads back as other verdicts", golden)
	}
	// Each verdict's claims, as the JSON holds them, are claims a claims file accepts unchanged.
	var raw []struct {
		Verdict struct {
			Winner json.RawMessage   `json:"winner"`
			Losers []json.RawMessage `json:"losers"`
		} `json:"verdict"`
	}
	if err := json.Unmarshal(exp, &raw); err != nil {
		t.Fatal(err)
	}
	for i, r := range raw {
		live := r.Verdict.Losers
		if r.Verdict.Winner != nil {
			live = append(live, r.Verdict.Winner)
		}
		file, _ := json.Marshal(map[string]any{"live": live})
		cs, err := arbiter.ReadClaims(bytes.NewReader(file))
		if err != nil {
			t.Fatalf("change %d: its claims are not accepted as claims: %v\n%s", i+1, err, file)
		}
		want := changes[i].Verdict.Losers
		if w := changes[i].Verdict.Winner; w != nil {
			want = append(append([]core.Claim(nil), want...), *w)
		}
		if !reflect.DeepEqual(cs.Live, want) {
			t.Errorf("change %d: claims read back as\n%+v\nwant\n%+v", i+1, cs.Live, want)
		}
	}
}

// TestScenarioPutsVetoesToPeople: a veto the policy puts to people (veto_ask_when) proposes the
// vetoed claim and names who is asked; one it does not only refuses.
func TestScenarioPutsVetoesToPeople(t *testing.T) {
	tests := []struct {
		scenario string
		change   int    // index into the changes
		proposed string // actor=value of the claim put to people; "" for none
		ask      string
	}{
		{"console-iam-cve", 1, "", ""}, // the developer may not assert cve: the veto only refuses
		{"console-iam-cve", 2, `security-admin={"Statement":[{"Action":["kafka:ReadData"],"Effect":"Allow","Resource":"*"}],"Version":"2012-10-17"}`, "@acme/security-leads"},
		{"musculature", 2, "", ""}, // no veto_ask_when: nothing changes
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%d", tt.scenario, tt.change), func(t *testing.T) {
			changes := run(t, tt.scenario)
			if tt.change >= len(changes) {
				t.Fatalf("only %d changes", len(changes))
			}
			v := changes[tt.change].Verdict
			got := ""
			if v.Proposed != nil {
				got = v.Proposed.Actor.Name + "=" + v.Proposed.Value.JSON()
			}
			if got != tt.proposed || strings.Join(v.Ask, ",") != tt.ask {
				t.Fatalf("proposed %q asking %v, want %q asking %q", got, v.Ask, tt.proposed, tt.ask)
			}
			if v.Decision != core.DecisionVeto || v.Winner == nil || v.Winner.Actor.Name != "git" {
				t.Fatalf("Git's value must stand: %s won by %+v", v.Decision, v.Winner)
			}
			if tt.proposed != "" && !strings.Contains(arbiter.Explain(v), "asking "+tt.ask) {
				t.Errorf("the explanation does not say who is asked:\n%s", arbiter.Explain(v))
			}
		})
	}
}

// TestScenarioHoldAsksTheCodeOwners: a hold whose policy names nobody asks the CODEOWNERS of the
// file that defines the field, and says so; without a CODEOWNERS line it says plainly that nobody
// is asked.
func TestScenarioHoldAsksTheCodeOwners(t *testing.T) {
	v := run(t, "hold-asks-codeowners")[3].Verdict
	if v.Decision != core.DecisionHold || strings.Join(v.Ask, ",") != "@acme/data-platform" {
		t.Fatalf("%s asking %v, want a hold asking @acme/data-platform", v.Decision, v.Ask)
	}
	if why := arbiter.Explain(v); !strings.Contains(why, "[ask: code owners] the policy names nobody to ask for this hold; asking the code owners") ||
		!strings.Contains(why, "line 3 of .github/CODEOWNERS (/infra/kafka/) covers infra/kafka/main.tf") {
		t.Errorf("the explanation does not say whom it asks and why:\n%s", why)
	}
	// The same timeline with nobody to ask: the verdict says so.
	p, err := policy.LoadFile(filepath.Join("hold-asks-codeowners", "policy.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join("hold-asks-codeowners", "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	events, err := arbiter.ReadEvents(f)
	if err != nil {
		t.Fatal(err)
	}
	changes, err := arbiter.SimulateWith(p, events, func(core.Field, string) arbiter.Owners {
		return arbiter.Owners{From: "the repository has no CODEOWNERS file"}
	})
	if err != nil {
		t.Fatal(err)
	}
	v = changes[3].Verdict
	if v.Ask != nil || !strings.Contains(arbiter.Explain(v), "[ask: nobody] the policy names nobody to ask for this hold (no escalation ask), and no code owner either: the repository has no CODEOWNERS file. Nobody is asked") {
		t.Errorf("nobody to ask, and the verdict does not say so:\n%s", arbiter.Explain(v))
	}
}

func run(t *testing.T, name string) []arbiter.Change {
	t.Helper()
	p, err := policy.LoadFile(filepath.Join(name, "policy.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(name, "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	events, err := arbiter.ReadEvents(f)
	if err != nil {
		t.Fatal(err)
	}
	// As parley simulate does: the scenario's directory is its repository, CODEOWNERS included.
	file, ferr := codeowners.FindInDir(name)
	changes, err := arbiter.SimulateWith(p, events, func(_ core.Field, path string) arbiter.Owners {
		ask, from := codeowners.Ask(file, ferr, path)
		return arbiter.Owners{Ask: ask, From: from}
	})
	if err != nil {
		t.Fatal(err)
	}
	return changes
}

// TestScenarioLosers checks who loses, and why, where the scenario is about the loser.
func TestScenarioLosers(t *testing.T) {
	tests := []struct {
		scenario string
		change   int // index into the changes
		loser    string
		decision core.Decision
		inWhy    string
	}{
		{"hpa-vs-cost", 2, "cost-optimizer", core.DecisionYield, "hpa beats cost-optimizer"},
		{"freeze-deferred-cve", 2, "scanner", core.DecisionEnforceGit, "deferred until it ends: scanner"},
		{"freeze-exploited-cve", 2, "app-team", core.DecisionAdopt, "admitted: scanner (allow_when"},
		{"oncall-hotfix", 2, "developers", core.DecisionYield, "developers may not assert it"},
		{"incident-vs-launch", 2, "release-managers", core.DecisionYield, "release-managers wants the same value 20"},
		{"oscillation", 3, "kafka-agent", core.DecisionHold, "flipped the value 3 times"},
		{"bound-check", 1, "kafka-agent", core.DecisionVeto, "above the maximum 16"},
		{"musculature", 2, "oncall", core.DecisionVeto, "immutable skeleton"},
		{"owner-gives-way", 2, "developers", core.DecisionYield, "developers lose to the owner (owner_gives_way_when"},
		{"owner-gives-way", 3, "hpa", core.DecisionYield, "but it gives way to oncall because owner_gives_way_when"},
	}
	for _, tt := range tests {
		t.Run(tt.scenario, func(t *testing.T) {
			changes := run(t, tt.scenario)
			if tt.change >= len(changes) {
				t.Fatalf("only %d changes", len(changes))
			}
			v := changes[tt.change].Verdict
			if v.Decision != tt.decision {
				t.Errorf("decision %s, want %s", v.Decision, tt.decision)
			}
			found := false
			for _, l := range v.Losers {
				found = found || l.Actor.Name == tt.loser
			}
			if !found {
				t.Errorf("%s is not among the losers %v", tt.loser, v.Losers)
			}
			if text := arbiter.Explain(v); !strings.Contains(text, tt.inWhy) {
				t.Errorf("explanation lacks %q:\n%s", tt.inWhy, text)
			}
		})
	}
}
