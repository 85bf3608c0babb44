package chatops

import (
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/core"
)

const replicas = "k8s:apps/Deployment/prod/web#/spec/replicas"

func TestParseCommands(t *testing.T) {
	body := strings.Join([]string{
		"Thanks! Scaling for the launch.",
		"/parley claim " + replicas + "=12 intent=availability motivation=launch ref=LAUNCH-7 ttl=2d",
		"  /parley why " + replicas,
		"/parley override " + replicas + ` reason="rolled back by hand, see \"INC-1\""`,
		"/parley hold",
		"/PARLEY recheck", // not a command: the word is case-sensitive, like Prow's
		"/parleyx hold",   // not our command
		"/parley unhold",
		"/parley yield tf:infra/kafka//aws_autoscaling_group.consumer#/desired_capacity ttl=4h",
		"/parley help",
		"/parley recheck",
	}, "\r\n")
	cmds, errs := Parse(body)
	if len(errs) != 0 {
		t.Fatalf("unexpected errors: %v", errs)
	}
	var verbs []string
	for _, c := range cmds {
		verbs = append(verbs, string(c.Verb))
	}
	if got, want := strings.Join(verbs, ","), "claim,why,override,hold,unhold,yield,help,recheck"; got != want {
		t.Fatalf("verbs = %s, want %s", got, want)
	}
	claim := cmds[0]
	wantField, _ := core.ParseField(replicas)
	if claim.Line != 2 || claim.Field != wantField || !claim.HasValue || claim.Value.JSON() != "12" ||
		claim.Intent != core.IntentAvailability || claim.Motivation != (core.Motivation{Kind: "launch", Ref: "LAUNCH-7"}) ||
		claim.TTL != 48*time.Hour {
		t.Errorf("claim parsed as %+v", claim)
	}
	if cmds[2].Reason != `rolled back by hand, see "INC-1"` {
		t.Errorf("override reason = %q", cmds[2].Reason)
	}
	if cmds[5].Field.Scheme != core.SchemeTerraform || cmds[5].TTL != 4*time.Hour {
		t.Errorf("yield parsed as %+v", cmds[5])
	}
}

func TestIgnoredContexts(t *testing.T) {
	body := strings.Join([]string{
		"```",
		"/parley hold",
		"```",
		"~~~~sh",
		"/parley hold",
		"~~~",
		"/parley hold",
		"~~~~",
		"> /parley hold",
		">/parley hold",
		"    /parley hold",
		"\t/parley hold",
		"<!-- a hidden note",
		"/parley hold",
		"-->",
		"<!-- inline --> ",
		"`/parley hold`",
		"see /parley hold",
		"/parley recheck",
	}, "\n")
	cmds, errs := Parse(body)
	if len(errs) != 0 || len(cmds) != 1 || cmds[0].Verb != VerbRecheck || cmds[0].Line != 19 {
		t.Fatalf("got cmds %+v errs %v, want only the recheck on line 19", cmds, errs)
	}
}

// TestHiddenCommandsDoNotRun: text GitHub does not show as a line of a paragraph is never a
// command. Each of these ran on the line-by-line reader this package had before it read Markdown.
func TestHiddenCommandsDoNotRun(t *testing.T) {
	for name, body := range map[string]string{
		"an HTML comment opened mid-line":       "Looks good <!-- hidden\n/parley override " + replicas + ` reason="x"` + "\n-->",
		"an HTML comment opened after a tag":    "<b>ok</b><!--\n/parley hold\n-->",
		"a lazy continuation line of a quote":   "> dana said:\n/parley hold",
		"a quote's lazy line after a blank one": "> a\n>\n> b\n/parley hold",
		"an HTML block":                         "<details>\n/parley hold\n</details>",
		"a list item":                           "- /parley hold",
		"a heading":                             "# /parley hold",
		"struck out":                            "~~/parley hold~~",
		"a code span over lines":                "`x\n/parley hold`",
		"a link's text":                         "[/parley hold](https://example.com)",
		"a setext heading":                      "/parley hold\n===",
	} {
		if cmds, errs := Parse(body); len(cmds) != 0 || len(errs) != 0 {
			t.Errorf("%s: %q gave commands %+v, errors %v; want none", name, body, cmds, errs)
		}
	}
	// What GitHub does show still runs, on the line it is written on.
	cmds, errs := Parse("<!-- a note -->\n/parley hold\n\n> quoted\n\nafter <!-- x --> the quote\n/parley recheck")
	if len(errs) != 0 || len(cmds) != 2 || cmds[0].Line != 2 || cmds[1].Verb != VerbRecheck || cmds[1].Line != 7 {
		t.Errorf("visible commands: %+v %v", cmds, errs)
	}
}

func TestParseErrors(t *testing.T) {
	cases := map[string]string{
		"/parley":                                           "missing command",
		"/parley frobnicate":                                `unknown command "frobnicate"`,
		"/parley why":                                       "missing FIELD",
		"/parley why not-a-field":                           "missing scheme",
		"/parley claim " + replicas:                         "claim needs intent",
		"/parley claim intent=cost":                         "missing FIELD",
		"/parley claim " + replicas + "= intent=cost":       "empty value",
		"/parley claim " + replicas + " intent=cost ttl=0s": "ttl=0s",
		"/parley claim " + replicas + " intent=cost ttl=99999999999d": "at most 366d",
		"/parley claim " + replicas + " intent=cost severity=huge":    "unknown severity",
		"/parley claim " + replicas + " intent=cost ref=INC-1":        "need motivation",
		"/parley claim " + replicas + " intent=cost intent=security":  "given twice",
		"/parley why " + replicas + "=3":                              "takes no value",
		"/parley override " + replicas:                                "needs reason",
		`/parley override ` + replicas + ` reason="open`:              "unterminated quote",
		"/parley hold now":                           `unexpected argument "now"`,
		"/parley yield " + replicas + " intent=cost": "does not take intent=",
	}
	for line, want := range cases {
		cmds, errs := Parse("text\n" + line)
		if len(cmds) != 0 || len(errs) != 1 {
			t.Errorf("%q: got cmds %+v errs %v, want one error", line, cmds, errs)
			continue
		}
		if errs[0].Line != 2 || !strings.Contains(errs[0].Error(), want) {
			t.Errorf("%q: error %q, want line 2 mentioning %q", line, errs[0].Error(), want)
		}
	}
}

func TestPermissions(t *testing.T) {
	for v, want := range map[Verb]Permission{VerbHelp: PermissionRead, VerbWhy: PermissionRead, VerbClaim: PermissionWrite,
		VerbYield: PermissionWrite, VerbRecheck: PermissionWrite, VerbOverride: PermissionMaintain, VerbHold: PermissionMaintain,
		VerbUnhold: PermissionMaintain, Verb("nope"): PermissionAdmin} {
		if got := RequiredPermission(v); got != want {
			t.Errorf("RequiredPermission(%s) = %s, want %s", v, got, want)
		}
	}
	for s, want := range map[string]Permission{"admin": PermissionAdmin, "maintain": PermissionMaintain, "write": PermissionWrite,
		"triage": PermissionTriage, "read": PermissionRead, "none": PermissionNone} {
		if got, err := ParsePermission(s); err != nil || got != want {
			t.Errorf("ParsePermission(%q) = %v, %v", s, got, err)
		}
	}
	if _, err := ParsePermission("owner"); err == nil {
		t.Error("ParsePermission(owner) should fail")
	}
	h := Help()
	for _, s := range specs() {
		if !strings.Contains(h, s.usage) {
			t.Errorf("help lacks %q", s.usage)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add("/parley claim " + replicas + "=12 intent=availability motivation=launch ttl=2d")
	f.Add("```\n/parley hold\n```\n/parley recheck")
	f.Add("/parley override " + replicas + ` reason="a \"b\""`)
	f.Add("<!--\n/parley hold\n-->\n> /parley x\n/parley why tf:.//a.b#/c")
	f.Add("ok <!-- hidden\n/parley hold\n-->\n> quote\n/parley hold")
	f.Add("<b>x</b> `a\n/parley hold` [/parley hold](u)\n/parley recheck  \n/parley help\\\n/parley why " + replicas)
	f.Fuzz(func(t *testing.T, body string) {
		cmds, errs := Parse(body)
		lines := strings.Count(strings.ReplaceAll(body, "\r\n", "\n"), "\n") + 1
		for _, c := range cmds {
			if c.Line < 1 || c.Line > lines || !strings.HasPrefix(c.Text, "/parley") {
				t.Fatalf("bad command %+v", c)
			}
			if c.Verb == VerbClaim && c.Intent == "" {
				t.Fatalf("claim without intent accepted: %+v", c)
			}
		}
		for _, e := range errs {
			if e.Line < 1 || e.Line > lines || e.Reason == "" {
				t.Fatalf("bad error %+v", e)
			}
		}
	})
}
