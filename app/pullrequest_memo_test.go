package app

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/parleyhq/parley/core/fielddiff"
	"github.com/parleyhq/parley/internal/fakegithub"
	"github.com/parleyhq/parley/webhooks/store"
)

// deepRemote is remote's pull request #7 with a Terraform file nested n blocks deep added to its
// head (issue 34's deeptf attack: 170,000, past fielddiff's budget of 1,000).
func deepRemote(t testing.TB, n int) (dir, base, head string) {
	t.Helper()
	dir, git := remote(t)
	git("checkout", "-q", "rightsize")
	deep := strings.Repeat("b {\n", n) + strings.Repeat("}\n", n)
	if err := os.WriteFile(filepath.Join(dir, "infra/kafka/deep.tf"), []byte(deep), 0o644); err != nil {
		t.Fatal(err)
	}
	git("add", "infra/kafka/deep.tf")
	git("commit", "-q", "-m", "Nest the Kafka module\n\nIntent: cost\nMotivation: budget\n")
	head = git("rev-parse", "HEAD")
	git("update-ref", "refs/pull/7/head", head)
	git("checkout", "-q", "main")
	return dir, git("rev-parse", "main"), head
}

// Issue 34: the deeptf attack sends the same pull request again and again, validly signed, and
// each delivery is judged anew. The second judgement parses nothing: the refused Terraform, the
// changed Terraform beside it and the policy all come from what the first parsed, by blob, and
// what it publishes is byte for byte the first's (so it writes nothing) and a fresh server's.
func TestRepeatedDeliveryParsesNothingAgain(t *testing.T) {
	dir, base, head := deepRemote(t, fielddiff.MaxHCLNesting+500)
	botCommit := fakegithub.Commit{AuthorLogin: "cost-optimizer[bot]", CommitterLogin: "cost-optimizer[bot]", Verified: true}
	h, gh := handler(t)
	gh.SetCommit("acme/infra", head, botCommit)
	deliver := func(h *PullRequests, id string) {
		t.Helper()
		if err := h.Handle(context.Background(), store.Delivery{ID: id, Event: "pull_request", Body: prEvent(t, dir, base, head, "synchronize")}); err != nil {
			t.Fatal(err)
		}
	}

	deliver(h, "deeptf-1")
	first, writes := h.parsed.Stats(), len(gh.Writes())
	runs := gh.CheckRuns("acme/infra")
	if len(runs) != 1 || runs[0].Conclusion == "success" || !strings.Contains(runs[0].Summary, `infra/kafka/deep\.tf\: not judged`) {
		t.Fatalf("check runs %+v: want one naming the refused infra/kafka/deep.tf, not passing", runs)
	}
	if first.Entries < 2 {
		t.Fatalf("after the first judgement the memo holds %+v: want the refused file and main.tf's two sides", first)
	}
	comments := gh.Comments("acme/infra#7")

	deliver(h, "deeptf-2")
	second := h.parsed.Stats()
	if second.Misses != first.Misses || second.Entries != first.Entries || second.Hits <= first.Hits {
		t.Errorf("memo after the first judgement %+v, after the second %+v: want every blob found, none parsed", first, second)
	}
	if entries, hits := h.policies.stats(); entries != 1 || hits < 1 {
		t.Errorf("policy memo: %d entries, %d hits; want the policy parsed once and found again", entries, hits)
	}
	if hits := h.ledgers.Hits(); hits < 1 {
		t.Errorf("ledger settings memo: %d hits; want the default branch's ledger opened without parsing its policy again", hits)
	}
	if w := len(gh.Writes()); w != writes {
		t.Errorf("the remembered judgement wrote %d times: what it published differs from the first (%v)", w-writes, gh.Writes()[writes:])
	}
	if again := gh.CheckRuns("acme/infra"); !reflect.DeepEqual(again, runs) {
		t.Errorf("check runs after the second judgement %+v, want %+v", again, runs)
	}

	// A server that never saw the pull request publishes the same.
	fresh, freshGH := handler(t)
	freshGH.SetCommit("acme/infra", head, botCommit)
	deliver(fresh, "deeptf-fresh")
	got := freshGH.CheckRuns("acme/infra")
	if len(got) != 1 || got[0].Conclusion != runs[0].Conclusion || got[0].Title != runs[0].Title || got[0].Summary != runs[0].Summary {
		t.Errorf("a fresh server's check run %+v\nthe remembering one's %+v", got, runs)
	}
	if fc := freshGH.Comments("acme/infra#7"); len(fc) != len(comments) || len(fc) > 0 && fc[0].Body != comments[0].Body {
		t.Errorf("a fresh server's comments differ from the remembering one's")
	}
}

// Issue 34: a pull request delivered again opens the default branch's ledger again, with the
// paths and keys of the policy there; the second opening takes them from the memo, by the policy's
// blob. When the default branch moves to another policy blob, the ledger's settings are parsed
// from it afresh (the memo's own test, reconcile's TestLedgerSettingsMemoFollowsThePolicyBlob,
// shows what is indexed then), and the next delivery finds that blob again.
func TestRepeatedDeliveryOpensTheLedgerWithoutParsing(t *testing.T) {
	dir, git := remote(t)
	h, gh := handler(t)
	base, head := git("rev-parse", "main"), git("rev-parse", "refs/pull/7/head")
	gh.SetCommit("acme/infra", head, fakegithub.Commit{AuthorLogin: "cost-optimizer[bot]", CommitterLogin: "cost-optimizer[bot]", Verified: true})
	deliver := func(id string) {
		t.Helper()
		if err := h.Handle(context.Background(), store.Delivery{ID: id, Event: "pull_request", Body: prEvent(t, dir, base, head, "synchronize")}); err != nil {
			t.Fatal(err)
		}
	}
	deliver("d-1")
	if n := h.ledgers.Hits(); n != 0 {
		t.Fatalf("first delivery: %d ledger settings memo hits; want none", n)
	}
	deliver("d-2")
	if n := h.ledgers.Hits(); n != 1 {
		t.Errorf("second delivery, default branch unmoved: %d memo hits; want the settings found", n)
	}

	pol, err := os.ReadFile(filepath.Join(dir, ".parley/policy.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".parley/policy.hcl"), append(pol, "\n# Reviewed in November.\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	git("commit", "-q", "-am", "Note the review")
	deliver("d-3")
	if n := h.ledgers.Hits(); n != 1 {
		t.Errorf("after the default branch moved to another policy blob: %d memo hits; want it parsed afresh", n)
	}
	deliver("d-4")
	if n := h.ledgers.Hits(); n != 2 {
		t.Errorf("the moved branch delivered again: %d memo hits; want the new blob found", n)
	}
}
