package trailers

import (
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/core"
)

var commitTime = time.Date(2026, 11, 22, 3, 0, 0, 0, time.UTC)

func TestInterpret(t *testing.T) {
	msg := "Scale web for INC-4211\n\nOn-call hotfix.\n\n" +
		"intent: Availability\n" +
		"Motivation: incident INC-4211 severity=high\n" +
		"Claim: k8s:apps/Deployment/prod/web#/spec/replicas = 12\n" +
		"Claim: tf:infra/kafka//aws_autoscaling_group.consumer#/desired_capacity\n" +
		"Yield: k8s:apps/Deployment/prod/*#/spec/template/spec/containers/0/image\n" +
		"Expires: 4h\n" +
		"Parley-PR: 42\n" +
		"Signed-off-by: On Call <oncall@example.com>\n" +
		"Co-authored-by: Pair <pair@example.com>\n"
	d, problems := Interpret(Parse(msg, Options{}), commitTime)
	if len(problems) != 0 {
		t.Fatalf("problems: %v", problems)
	}
	if d.Intent != core.IntentAvailability || d.Motivation != (core.Motivation{Kind: "incident", Ref: "INC-4211", Severity: core.SeverityHigh}) {
		t.Errorf("intent %q motivation %+v", d.Intent, d.Motivation)
	}
	if len(d.Claims) != 2 || d.Claims[0].Value.JSON() != "12" || !d.Claims[0].HasValue || d.Claims[1].HasValue ||
		d.Claims[1].Field.Resource != "aws_autoscaling_group.consumer" {
		t.Errorf("claims %+v", d.Claims)
	}
	if len(d.Yields) != 1 || !d.Yields[0].Match(core.K8sField("apps", "Deployment", "prod", "api", "/spec/template/spec/containers/0/image")) {
		t.Errorf("yields %+v", d.Yields)
	}
	if !d.Expires.Equal(commitTime.Add(4*time.Hour)) || d.PR != 42 {
		t.Errorf("expires %v pr %d", d.Expires, d.PR)
	}
	if len(d.Foreign) != 2 || d.Foreign[0] != (core.ForeignTrailer{Key: "Signed-off-by", Value: "On Call <oncall@example.com>", Line: 12}) {
		t.Errorf("foreign trailers must be kept untouched: %+v", d.Foreign)
	}
}

func TestInterpretProblems(t *testing.T) {
	cases := []struct{ trailer, want string }{
		{"Intent: speed", `unknown intent "speed"`},
		{"Intent: high availability", "one word"},
		{"Intent:", "empty intent"},
		{"Motivation: vibes", `unknown motivation "vibes"`},
		{"Motivation: incident INC-1 severity=huge", `unknown severity "huge"`},
		{"Motivation: incident INC-1 INC-2", "more than one reference"},
		{"Motivation: incident urgency=high", `unknown attribute "urgency"`},
		{"Claim: replicas", "missing scheme"},
		{"Claim: k8s:apps/Deployment/prod/web#/spec/replicas 12", "write ADDRESS = VALUE"},
		{"Claim: k8s:apps/Deployment/prod/web#/spec/replicas =", "empty value"},
		{"Claim: k8s:apps/Deployment/*/web#/spec/replicas = 1", "only allowed in patterns"},
		{"Yield: k8s:apps/Deployment", "segments"},
		{"Expires: tomorrow", "RFC 3339"},
		{"Expires: -4h", "must be positive"},
		{"Expires: 2020-01-01T00:00:00Z", "is not after"},
		{"Expires: 99999d", "at most 3660d"},
		{"Parley-PR: abc", "pull request number"},
	}
	for _, c := range cases {
		msg := "Subject\n\nSigned-off-by: A <a@b>\n" + c.trailer + "\n"
		ts := Parse(msg, Options{})
		d, problems := Interpret(ts, commitTime)
		if len(problems) != 1 {
			t.Errorf("%q: got %d problems %v, want one (declaration %+v)", c.trailer, len(problems), problems, d)
			continue
		}
		p := problems[0]
		if p.Line != 4 || !strings.Contains(p.Error(), c.want) || p.Value == "" && !strings.HasSuffix(c.trailer, ":") {
			t.Errorf("%q: problem %q (line %d), want line 4 mentioning %q", c.trailer, p.Error(), p.Line, c.want)
		}
	}
	_, problems := Interpret(Parse("S\n\nIntent: cost\nIntent: security\nIntent: cost\n", Options{}), commitTime)
	if len(problems) != 1 || !strings.Contains(problems[0].Error(), "contradicts") || problems[0].Line != 4 {
		t.Errorf("contradicting intents: %v", problems)
	}
}

func TestPRNumber(t *testing.T) {
	cases := []struct {
		msg  string
		want int
	}{
		{"Merge pull request #12 from acme/scale-web\n\nScale web\n", 12},
		{"Scale web (#34)\n\n* commit one\n", 34},
		{"Scale web\n\nParley-PR: 56\n", 56},
		{"Scale web (#34)\n\nParley-PR: #56\n", 56},
		{"Scale web\n", 0},
		{"Fix (#abc)\n", 0},
	}
	for _, c := range cases {
		n, ok := PRNumber(c.msg, Parse(c.msg, Options{}))
		if n != c.want || ok != (c.want != 0) {
			t.Errorf("PRNumber(%q) = %d, %v; want %d", c.msg, n, ok, c.want)
		}
	}
}

func TestParseLines(t *testing.T) {
	ts := Parse("S\n\nbody\n\nA: 1\n  more\n# c\nB: 2\n", Options{})
	if len(ts) != 2 || ts[0].Line != 5 || ts[1].Line != 8 || ts[0].Value != "1 more" {
		t.Fatalf("got %+v", ts)
	}
}

func TestParseTrailerArgAndModes(t *testing.T) {
	for in, want := range map[string]Trailer{"Key=v": {Key: "Key", Value: "v"}, "Key : v ": {Key: "Key", Value: "v"}, " Key : v": {Key: "Key : v"}, "Bare": {Key: "Bare"},
		"ack=x": {Key: "ack", Value: "x"}} {
		got, err := ParseTrailerArg(in, Options{})
		if err != nil || got != want {
			t.Errorf("ParseTrailerArg(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	if got, _ := ParseTrailerArg("ack=x", Options{Keys: []string{"Acked-by"}}); got.Key != "Acked-by" {
		t.Errorf("configured key spelling not applied: %+v", got)
	}
	if _, err := ParseTrailerArg("=v", Options{}); err == nil || !strings.Contains(err.Error(), "empty trailer token") {
		t.Errorf("empty token: %v", err)
	}
	for i, name := range []string{"addIfDifferentNeighbor", "ADDIFDIFFERENT", "add", "replace", "doNothing"} {
		if m, err := ParseIfExists(name); err != nil || m != IfExists(i) {
			t.Errorf("ParseIfExists(%q) = %v, %v", name, m, err)
		}
	}
	if _, err := ParseIfExists("merge"); err == nil {
		t.Error("ParseIfExists(merge) should fail")
	}
	if m, err := ParseIfMissing("doNothing"); err != nil || m != IfMissingDoNothing {
		t.Errorf("ParseIfMissing: %v %v", m, err)
	}
}

func TestAddWithoutFinalNewline(t *testing.T) {
	// Git 2.46 and later add the final newline first; 2.39 would glue the trailer to the last line.
	if got := Add("Subject", []Trailer{{Key: "Intent", Value: "cost"}}, WriteOptions{}); got != "Subject\n\nIntent: cost\n" {
		t.Errorf("got %q", got)
	}
}
