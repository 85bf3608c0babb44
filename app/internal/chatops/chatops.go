package chatops

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	east "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/text"

	"github.com/parleyhq/parley/core"
)

// Verb is a command name.
type Verb string

// The commands Parley understands.
const (
	VerbHelp     Verb = "help"
	VerbWhy      Verb = "why"
	VerbClaim    Verb = "claim"
	VerbYield    Verb = "yield"
	VerbOverride Verb = "override"
	VerbHold     Verb = "hold"
	VerbUnhold   Verb = "unhold"
	VerbRecheck  Verb = "recheck"
)

// Permission is a GitHub repository permission level, ordered.
type Permission int

// Permission levels in GitHub's order.
const (
	PermissionNone Permission = iota
	PermissionRead
	PermissionTriage
	PermissionWrite
	PermissionMaintain
	PermissionAdmin
)

// ParsePermission reads GitHub's permission names ("read", "triage", "write", "maintain", "admin");
// the collaborator-permission API's legacy "none" maps to PermissionNone.
func ParsePermission(s string) (Permission, error) {
	switch strings.ToLower(s) {
	case "none", "":
		return PermissionNone, nil
	case "read", "pull":
		return PermissionRead, nil
	case "triage":
		return PermissionTriage, nil
	case "write", "push":
		return PermissionWrite, nil
	case "maintain":
		return PermissionMaintain, nil
	case "admin":
		return PermissionAdmin, nil
	}
	return PermissionNone, fmt.Errorf("unknown repository permission %q", s)
}

func (p Permission) String() string {
	return [...]string{"none", "read", "triage", "write", "maintain", "admin"}[p]
}

// spec describes one verb: its arguments and the permission it needs.
type spec struct {
	verb     Verb
	field    argNeed // whether a FIELD argument is taken
	value    bool    // FIELD=VALUE allowed
	keys     []string
	need     Permission
	usage    string
	describe string
}

type argNeed int

const (
	noField argNeed = iota
	needField
)

// specs lists the verbs in help order. It is a function, not a package variable, so nothing global
// can be mutated.
func specs() []spec {
	return []spec{
		{VerbHelp, noField, false, nil, PermissionRead, "/parley help", "show this help"},
		{VerbWhy, needField, false, nil, PermissionRead, "/parley why FIELD", "explain the verdict on FIELD"},
		{VerbClaim, needField, true, []string{"intent", "motivation", "ttl", "ref", "severity"}, PermissionWrite,
			"/parley claim FIELD[=VALUE] intent=INTENT [motivation=KIND] [ref=REF] [severity=S] [ttl=DURATION]",
			"claim FIELD for this pull request's change, with why"},
		{VerbYield, needField, false, []string{"ttl"}, PermissionWrite, "/parley yield FIELD [ttl=DURATION]", "give FIELD up to its live owner"},
		{VerbOverride, needField, false, []string{"reason"}, PermissionMaintain, `/parley override FIELD reason="..."`,
			"decide FIELD for this pull request's claim, overriding the policy (recorded with the reason)"},
		{VerbHold, noField, false, []string{"reason"}, PermissionMaintain, `/parley hold [reason="..."]`, "stop Parley from writing anything for this pull request"},
		{VerbUnhold, noField, false, nil, PermissionMaintain, "/parley unhold", "lift a hold"},
		{VerbRecheck, noField, false, nil, PermissionWrite, "/parley recheck", "evaluate the pull request again now"},
	}
}

func lookup(v string) (spec, bool) {
	for _, s := range specs() {
		if string(s.verb) == v {
			return s, true
		}
	}
	return spec{}, false
}

// RequiredPermission is the least repository permission a commenter needs for v. The people and
// teams a policy's escalation asks may also override and hold with write permission; that is the
// caller's check.
func RequiredPermission(v Verb) Permission {
	s, ok := lookup(string(v))
	if !ok {
		return PermissionAdmin
	}
	return s.need
}

// Help renders the command reference, in Markdown, for /parley help replies.
func Help() string {
	var b strings.Builder
	b.WriteString("Parley commands (one per line; not inside code blocks or quotes):\n\n")
	b.WriteString("| command | what it does | needs |\n|---|---|---|\n")
	for _, s := range specs() {
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", s.usage, s.describe, s.need)
	}
	b.WriteString("\nFIELD is a field address such as `k8s:apps/Deployment/prod/web#/spec/replicas` or " +
		"`tf:infra/kafka//aws_autoscaling_group.consumer#/desired_capacity`.\n")
	return b.String()
}

// Command is one parsed command.
type Command struct {
	Verb       Verb
	Line       int // 1-based line in the comment
	Field      core.Field
	Value      core.Value
	HasValue   bool
	Intent     core.Intent
	Motivation core.Motivation
	TTL        time.Duration
	Reason     string
	Text       string // the command line as written, trimmed
}

// Error is a line that starts with /parley but is not a valid command.
type Error struct {
	Line   int
	Text   string
	Reason string
}

func (e *Error) Error() string { return fmt.Sprintf("line %d: %s: %s", e.Line, e.Text, e.Reason) }

// Parse reads every command in a comment body. Lines that are not commands are ignored; lines that
// start with /parley but are malformed are returned as errors, each naming the line and the reason,
// so the bot can answer them.
//
// The body is read as GitHub renders it: goldmark (CommonMark with GitHub's extensions) parses it,
// and only the lines of top-level paragraphs are commands. What a reader does not see as a line of
// plain text - HTML (an HTML comment opened mid-line included), block quotes with their lazy
// continuation lines, code, list items, headings, tables and struck-out text - never is, so
// nothing hidden or quoted in a comment can run.
func Parse(body string) ([]Command, []*Error) {
	src := []byte(strings.ReplaceAll(body, "\r\n", "\n"))
	doc := goldmark.New(goldmark.WithExtensions(extension.GFM)).Parser().Parse(text.NewReader(src))
	var cmds []Command
	var errs []*Error
	for n := doc.FirstChild(); n != nil; n = n.NextSibling() {
		if n.Kind() != ast.KindParagraph {
			continue
		}
		for _, l := range paragraphLines(n, src) {
			if !isCommandLine(l.text) {
				continue
			}
			cmd, err := parseLine(strings.TrimRight(l.text, " \t"), l.line)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			cmds = append(cmds, cmd)
		}
	}
	return cmds, errs
}

// renderedLine is one line of a paragraph as a reader sees it.
type renderedLine struct {
	line  int    // 1-based line of the body where it starts
	text  string // its text, markup and HTML left out, backslash escapes kept for the tokenizer
	plain bool   // it starts with plain text, not HTML, emphasis, a link or code
}

// paragraphLines splits a paragraph into its rendered lines: a line ends at a soft or hard line
// break. Raw HTML and code spans add no text (a line break inside them is none a reader sees), nor
// does struck-out text; only lines that start with plain text are returned.
func paragraphLines(p ast.Node, src []byte) []renderedLine {
	var out []renderedLine
	var cur *renderedLine
	lastLine := 1
	flush := func() {
		if cur != nil && cur.plain {
			out = append(out, *cur)
		}
		cur = nil
	}
	// begin starts a line at n unless one is open; offset is n's place in src, -1 when n has none
	// of its own (the line is then counted from the last text seen).
	begin := func(n ast.Node, offset int) {
		if offset >= 0 {
			lastLine = 1 + bytes.Count(src[:offset], []byte("\n"))
		}
		if cur == nil {
			cur = &renderedLine{line: lastLine, plain: n.Kind() == ast.KindText && n.Parent() == p}
		}
	}
	var walk func(n ast.Node)
	walk = func(n ast.Node) {
		for c := n.FirstChild(); c != nil; c = c.NextSibling() {
			switch c := c.(type) {
			case *ast.Text:
				begin(c, c.Segment.Start)
				cur.text += string(c.Segment.Value(src))
				if c.SoftLineBreak() || c.HardLineBreak() {
					flush()
				}
			case *ast.String:
				begin(c, -1)
				cur.text += string(c.Value)
			case *ast.AutoLink:
				begin(c, -1)
				cur.text += string(c.Label(src))
			case *ast.RawHTML, *ast.CodeSpan, *east.Strikethrough:
				begin(c, -1)
			default:
				walk(c)
			}
		}
	}
	walk(p)
	flush()
	return out
}

// isCommandLine reports whether a line starts with the /parley word.
func isCommandLine(s string) bool {
	if !strings.HasPrefix(s, "/parley") {
		return false
	}
	return len(s) == len("/parley") || s[len("/parley")] == ' ' || s[len("/parley")] == '\t'
}

func parseLine(text string, line int) (Command, *Error) {
	fail := func(format string, args ...any) (Command, *Error) {
		return Command{}, &Error{Line: line, Text: text, Reason: fmt.Sprintf(format, args...)}
	}
	toks, err := tokenize(text)
	if err != nil {
		return fail("%v", err)
	}
	if len(toks) < 2 {
		return fail("missing command (try /parley help)")
	}
	verb := strings.ToLower(toks[1])
	sp, ok := lookup(verb)
	if !ok {
		return fail("unknown command %q (try /parley help)", toks[1])
	}
	cmd := Command{Verb: sp.verb, Line: line, Text: text}
	args := toks[2:]
	if sp.field == needField {
		if len(args) == 0 || strings.HasPrefix(args[0], "intent=") || isKeyValue(args[0], sp.keys) {
			return fail("missing FIELD (usage: %s)", sp.usage)
		}
		addr, val, hasVal := strings.Cut(args[0], "=")
		if hasVal && !sp.value {
			return fail("%s takes no value (usage: %s)", verb, sp.usage)
		}
		f, err := core.ParseField(addr)
		if err != nil {
			return fail("%v", err)
		}
		cmd.Field = f
		if hasVal {
			if val == "" {
				return fail("empty value after = (usage: %s)", sp.usage)
			}
			cmd.Value, cmd.HasValue = core.ParseLooseValue(val), true
		}
		args = args[1:]
	}
	seen := map[string]bool{}
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		if !ok {
			return fail("unexpected argument %q (usage: %s)", a, sp.usage)
		}
		k = strings.ToLower(k)
		if !contains(sp.keys, k) {
			return fail("%s does not take %s= (usage: %s)", verb, k, sp.usage)
		}
		if seen[k] {
			return fail("%s= given twice", k)
		}
		seen[k] = true
		if v == "" {
			return fail("empty value for %s=", k)
		}
		switch k {
		case "intent":
			cmd.Intent = core.Intent(strings.ToLower(v))
		case "motivation":
			cmd.Motivation.Kind = strings.ToLower(v)
		case "ref":
			cmd.Motivation.Ref = v
		case "severity":
			s := core.Severity(strings.ToLower(v))
			if s.Rank() <= 0 {
				return fail("unknown severity %q (want low, medium, high or critical)", v)
			}
			cmd.Motivation.Severity = s
		case "ttl":
			d, err := ParseTTL(v)
			if err != nil {
				return fail("ttl=%s: %v", v, err)
			}
			cmd.TTL = d
		case "reason":
			cmd.Reason = v
		}
	}
	switch cmd.Verb {
	case VerbClaim:
		if cmd.Intent == "" {
			return fail("claim needs intent=... (usage: %s)", sp.usage)
		}
		if (cmd.Motivation.Ref != "" || cmd.Motivation.Severity != "") && cmd.Motivation.Kind == "" {
			return fail("ref= and severity= need motivation=...")
		}
	case VerbOverride:
		if strings.TrimSpace(cmd.Reason) == "" {
			return fail(`override needs reason="..." (it is recorded with the decision)`)
		}
	}
	return cmd, nil
}

func isKeyValue(tok string, keys []string) bool {
	k, _, ok := strings.Cut(tok, "=")
	return ok && contains(keys, strings.ToLower(k))
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// tokenize splits a command line on spaces and tabs; a double-quoted run (with \" and \\ escapes)
// is part of one token, so reason="rolled back by hand" is one argument.
func tokenize(s string) ([]string, error) {
	var toks []string
	var cur strings.Builder
	inTok, inQuote := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case inQuote && c == '\\' && i+1 < len(s) && (s[i+1] == '"' || s[i+1] == '\\'):
			cur.WriteByte(s[i+1])
			i++
		case c == '"':
			inQuote = !inQuote
			inTok = true
		case !inQuote && (c == ' ' || c == '\t'):
			if inTok {
				toks = append(toks, cur.String())
				cur.Reset()
				inTok = false
			}
		default:
			cur.WriteByte(c)
			inTok = true
		}
	}
	if inQuote {
		return nil, fmt.Errorf("unterminated quote")
	}
	if inTok {
		toks = append(toks, cur.String())
	}
	return toks, nil
}

// ParseTTL reads a lifetime: a Go duration ("90m", "4h") or whole days ("2d"). It must be positive
// and at most a year, so a typo cannot claim a field for good.
func ParseTTL(s string) (time.Duration, error) {
	var d time.Duration
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.Atoi(n)
		if err != nil || days <= 0 || days > 366 {
			return 0, fmt.Errorf("want a duration such as 90m, 4h or 2d, at most 366d")
		}
		d = time.Duration(days) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, fmt.Errorf("want a duration such as 90m, 4h or 2d")
		}
	}
	if d <= 0 || d > 366*24*time.Hour {
		return 0, fmt.Errorf("must be between 1s and 366d")
	}
	return d, nil
}
