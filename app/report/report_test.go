package report

import (
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/internal/schematest"
)

var now = time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)

func verdict(name string, d core.Decision) core.Verdict {
	f := core.K8sField("apps", "Deployment", "prod", name, "/spec/replicas")
	w := core.Claim{Field: f, Actor: core.Actor{Name: "hpa", Identity: core.Identity{Source: core.SourceKubeUser, ID: "system:serviceaccount:kube-system:horizontal-pod-autoscaler"}}, Value: core.StringValue("7"), Intent: core.IntentAvailability,
		Motivation: core.Motivation{Kind: "traffic"}, At: now}
	return core.Verdict{Field: f, Decision: d, Winner: &w, Rule: "standing-owner", Recheck: now.Add(time.Hour),
		Explanation: []core.Step{{Rule: "standing-owner", Outcome: "decided", Detail: "the HPA owns replicas --> <b>|"}}}
}

func TestCommentRoundTrip(t *testing.T) {
	vs := []core.Verdict{verdict("web", core.DecisionYield), verdict("api", core.DecisionVeto)}
	body := Comment(Input{Head: "abc123", Generated: now, Verdicts: vs})
	if !strings.HasPrefix(body, Marker+"\n") {
		t.Fatalf("body does not start with the marker:\n%s", body)
	}
	if strings.Count(body, "-->") != 2 { // the marker and the data comment, nothing from the detail text
		t.Fatalf("a --> from verdict text leaked into the body:\n%s", body)
	}
	if !strings.Contains(body, "### Parley: 2 fields, 1 veto, 1 yield") {
		t.Errorf("headline missing:\n%s", body)
	}
	if strings.Index(body, "prod/api") > strings.Index(body, "prod/web") {
		t.Errorf("vetoes must be listed first:\n%s", body)
	}
	raw, err := RawData(body)
	if err != nil {
		t.Fatal(err)
	}
	schematest.Validate(t, "verdicts-document.schema.json", raw)
	doc, err := Extract(body)
	if err != nil {
		t.Fatal(err)
	}
	want := sortedVerdicts(vs)
	if doc.Head != "abc123" || doc.Truncated || !reflect.DeepEqual(doc.Verdicts, want) {
		t.Fatalf("extracted %+v\nwant %+v", doc.Verdicts, want)
	}
}

func TestCommentFitsGitHubLimit(t *testing.T) {
	for _, n := range []int{10, 300, 3000, 30000} {
		var vs []core.Verdict
		for i := 0; i < n; i++ {
			v := verdict(fmt.Sprintf("svc-%05d", i), core.DecisionEnforceGit)
			v.Explanation = append(v.Explanation, core.Step{Rule: "rank", Outcome: "considered", Detail: strings.Repeat("why ", 20)})
			vs = append(vs, v)
		}
		body := Comment(Input{Generated: now, DetailsURL: "https://github.com/o/r/runs/1", Verdicts: vs})
		if len(body) > MaxCommentChars {
			t.Fatalf("%d verdicts: body has %d chars, over %d", n, len(body), MaxCommentChars)
		}
		raw, err := RawData(body)
		if err != nil {
			t.Fatal(err)
		}
		schematest.Validate(t, "verdicts-document.schema.json", raw)
		doc, err := Extract(body)
		if err != nil {
			t.Fatalf("%d verdicts: %v", n, err)
		}
		if n == 10 && doc.Truncated {
			t.Errorf("10 verdicts should not be truncated")
		}
		if n == 30000 && !strings.Contains(body, "of 30000 fields") {
			t.Errorf("a cut summary must say how many fields it shows")
		}
		if n >= 3000 && (!doc.Truncated || !strings.Contains(body, "https://github.com/o/r/runs/1")) {
			t.Errorf("%d verdicts: want a truncated document that links the details", n)
		}
	}
}

func TestExtractErrors(t *testing.T) {
	if _, err := Extract("just a comment"); err != ErrNoData {
		t.Errorf("plain comment: %v", err)
	}
	if _, err := Extract(dataPrefix + `{"schema":"other/v9"}` + dataSuffix); err == nil || !strings.Contains(err.Error(), "other/v9") {
		t.Errorf("foreign schema: %v", err)
	}
	if _, err := Extract(dataPrefix + `{"schema":`); err == nil {
		t.Error("unterminated data should fail")
	}
}

func FuzzExtract(f *testing.F) {
	f.Add(Comment(Input{Generated: now, Verdicts: []core.Verdict{verdict("web", core.DecisionYield)}}))
	f.Add(dataPrefix + `{"schema":"parley.dev/verdicts/v1","verdicts":[{"field":"k8s:x"}]}` + dataSuffix)
	f.Add(Comment(Input{Generated: now, Verdicts: v1Verdicts()}))
	if v1, err := os.ReadFile("testdata/comment-v1.md"); err == nil {
		f.Add(string(v1))
	}
	f.Fuzz(func(t *testing.T, body string) {
		doc, err := Extract(body)
		if err != nil {
			return
		}
		// Whatever was accepted renders again and reads back the same.
		again, err := Extract(Comment(Input{Head: doc.Head, Generated: doc.Generated, Verdicts: doc.Verdicts}))
		if err != nil {
			t.Fatalf("re-rendered comment does not extract: %v", err)
		}
		if len(again.Verdicts) != len(doc.Verdicts) {
			t.Fatalf("verdict count changed: %d -> %d", len(doc.Verdicts), len(again.Verdicts))
		}
	})
}

// v1Verdicts are the verdicts testdata/comment-v1.md was rendered from, by the v1 code (Parley at
// 8034d6a): every kind of claim, value and evidence the v1 shape carried.
func v1Verdicts() []core.Verdict {
	f := core.K8sField("apps", "Deployment", "prod", "web", "/spec/replicas")
	eight, _ := core.JSONValue(8)
	hpa := core.Claim{Field: f, Actor: core.Actor{Name: "hpa", Identity: core.Identity{Source: core.SourceKubeUser,
		ID: "system:serviceaccount:kube-system:horizontal-pod-autoscaler", Groups: []string{"system:serviceaccounts"}}},
		Value: eight, Intent: core.IntentAvailability, Motivation: core.Motivation{Kind: "traffic", Ref: "spike-1127", Severity: core.SeverityHigh},
		At: now, Expires: now.Add(4 * time.Hour), Evidence: core.Evidence{Source: "k8s-audit", EventIDs: []string{"4b1c"}}}
	three, _ := core.JSONValue(3)
	git := core.Claim{Field: f, Actor: core.Actor{Name: "git", Identity: core.Identity{Source: core.SourceGitAuthor, ID: "alice@example.com", Name: "Alice"}},
		Value: three, Intent: core.IntentBaseline, At: now.Add(-48 * time.Hour), Evidence: core.Evidence{Source: "git", Commit: "a1b2c3d4e5", PR: 12}}
	tf := core.TFField("infra/kafka", "aws_autoscaling_group.consumer", "/desired_capacity")
	agent := core.Claim{Field: tf, Actor: core.Actor{Name: "kafka-agent", Identity: core.Identity{Source: core.SourceAWSPrincipal, ID: "arn:aws:iam::123456789012:role/kafka-scaling-agent"}},
		Value: core.ExprValue("var.capacity * 2"), Intent: core.IntentPerformance, At: now, Evidence: core.Evidence{Source: "github-comment", PR: 7, Explicit: true}}
	yield := core.Claim{Field: tf, Actor: core.Actor{Name: "developers", Identity: core.Identity{Source: core.SourceGitHubUser, ID: "bob"}},
		Yield: true, Intent: core.IntentCost, At: now}
	return sortedVerdicts([]core.Verdict{
		{Field: f, Decision: core.DecisionYield, Winner: &hpa, Losers: []core.Claim{git}, Rule: "rule.live-traffic-over-budget", Until: now.Add(4 * time.Hour), Recheck: now.Add(4 * time.Hour),
			Explanation: []core.Step{{Rule: "rank", Outcome: "decided", Detail: "hpa (availability) beats git (baseline) --> <b>"}}},
		{Field: tf, Decision: core.DecisionEscalate, Winner: &agent, Losers: []core.Claim{yield}, Rule: "escalate", Ask: []string{"@parleyhq/data-platform"},
			Explanation: []core.Step{{Rule: "escalate", Outcome: "decided", Detail: "needs a person"}}},
	})
}

// A comment written by the v1 code reads into the same verdicts as one written now, and rewriting it
// gives the v2 shape.
func TestExtractReadsV1AndV2(t *testing.T) {
	body, err := os.ReadFile("testdata/comment-v1.md")
	if err != nil {
		t.Fatal(err)
	}
	old, err := Extract(string(body))
	if err != nil {
		t.Fatal(err)
	}
	want := v1Verdicts()
	if old.Schema != SchemaV1 || !reflect.DeepEqual(old.Verdicts, want) {
		t.Fatalf("v1 comment: schema %q, verdicts\n%+v\nwant\n%+v", old.Schema, old.Verdicts, want)
	}
	again := Comment(Input{Head: old.Head, Generated: old.Generated, Verdicts: old.Verdicts})
	if !strings.Contains(again, `"schema":"parley.dev/verdicts/v2"`) || strings.Contains(again, `"Actor"`) || strings.Contains(again, `{"json":`) {
		t.Fatalf("a comment rewritten now is not in the v2 shape:\n%s", again)
	}
	raw, err := RawData(again)
	if err != nil {
		t.Fatal(err)
	}
	schematest.Validate(t, "verdicts-document.schema.json", raw)
	cur, err := Extract(again)
	if err != nil {
		t.Fatal(err)
	}
	if cur.Schema != Schema || !reflect.DeepEqual(cur.Verdicts, want) || cur.Head != old.Head || !cur.Generated.Equal(old.Generated) {
		t.Fatalf("v2 comment: schema %q, verdicts\n%+v\nwant\n%+v", cur.Schema, cur.Verdicts, want)
	}
}

// TestHeadlineNeverCallsAnUnreadChangeEmpty: a pull request whose only file Parley could not read
// (issue 34's 200,000 nested Terraform blocks) was headed "no claimed fields change", as if
// nothing it changed were claimed; the headline now says what was not judged.
func TestHeadlineNeverCallsAnUnreadChangeEmpty(t *testing.T) {
	for _, c := range []struct {
		verdicts []core.Verdict
		unjudged int
		want     string
	}{
		{nil, 0, "### Parley: no claimed fields change in this pull request"},
		{nil, 1, "### Parley: nothing judged, 1 part not judged"},
		{[]core.Verdict{{Decision: core.DecisionAdopt}}, 2, "### Parley: 1 field, 1 adopt, 2 parts not judged"},
		{[]core.Verdict{{Decision: core.DecisionAdopt}}, 0, "### Parley: 1 field, 1 adopt"},
	} {
		if got := Headline(c.verdicts, c.unjudged); got != c.want {
			t.Errorf("Headline(%d verdicts, %d unjudged) = %q, want %q", len(c.verdicts), c.unjudged, got, c.want)
		}
	}
}
