package report

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/core"
)

var now = time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)

func verdict(name string, d core.Decision) core.Verdict {
	f := core.K8sField("apps", "Deployment", "prod", name, "/spec/replicas")
	w := core.Claim{Field: f, Actor: core.Actor{Name: "hpa"}, Value: core.StringValue("7"), Intent: core.IntentAvailability,
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

func TestConclusion(t *testing.T) {
	cases := []struct {
		ds   []core.Decision
		want string
	}{
		{nil, "neutral"},
		{[]core.Decision{core.DecisionEnforceGit, core.DecisionYield, core.DecisionAdopt}, "success"},
		{[]core.Decision{core.DecisionYield, core.DecisionEscalate}, "action_required"},
		{[]core.Decision{core.DecisionHold}, "action_required"},
		{[]core.Decision{core.DecisionEscalate, core.DecisionVeto}, "failure"},
	}
	for _, c := range cases {
		var vs []core.Verdict
		for i, d := range c.ds {
			vs = append(vs, verdict(fmt.Sprint(i), d))
		}
		if got := Conclusion(vs); got != c.want {
			t.Errorf("Conclusion(%v) = %s, want %s", c.ds, got, c.want)
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
