package trailers

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/parleyhq/parley/core"
)

// Parley's trailer keys. Git compares keys case-insensitively, and so does Interpret.
const (
	KeyIntent     = "Intent"
	KeyMotivation = "Motivation"
	KeyClaim      = "Claim"
	KeyYield      = "Yield"
	KeyExpires    = "Expires"
	KeyPR         = "Parley-PR"
)

// Problem is a Parley trailer that could not be read. Problems are reported, never dropped.
type Problem struct {
	Line       int
	Key, Value string
	Reason     string
}

func (p Problem) Error() string {
	return fmt.Sprintf("line %d: %s: %s", p.Line, p.Key, p.Reason)
}

// Interpret reads Parley's keys from trailers parsed out of a change made at now (relative Expires
// values count from now). Trailers of other keys are kept in Declaration.Foreign as they are.
//
//	Intent: availability
//	Motivation: incident INC-4211 severity=high
//	Claim: k8s:apps/Deployment/prod/web#/spec/replicas = 12
//	Yield: k8s:apps/Deployment/prod/*#/spec/replicas
//	Expires: 4h                     (or 2d, or 2026-11-23T09:00:00Z)
//	Parley-PR: 42
func Interpret(ts []Trailer, now time.Time) (core.Declaration, []Problem) {
	var d core.Declaration
	var problems []Problem
	bad := func(t Trailer, format string, args ...any) {
		problems = append(problems, Problem{Line: t.Line, Key: t.Key, Value: t.Value, Reason: fmt.Sprintf(format, args...)})
	}
	intentLine, motivationLine, expiresLine, prLine := 0, 0, 0, 0
	for _, t := range ts {
		switch {
		case asciiEqualFold(t.Key, KeyIntent):
			i := core.Intent(strings.ToLower(t.Value))
			switch {
			case t.Value == "":
				bad(t, "empty intent (want one of %s)", intentList())
			case strings.ContainsAny(t.Value, " \t"):
				bad(t, "intent is one word (want one of %s)", intentList())
			case !i.IsKnown():
				bad(t, "unknown intent %q (want one of %s)", t.Value, intentList())
			case intentLine != 0 && d.Intent != i:
				bad(t, "second intent %q contradicts %q on line %d", t.Value, d.Intent, intentLine)
			default:
				d.Intent, intentLine = i, t.Line
			}
		case asciiEqualFold(t.Key, KeyMotivation):
			m, err := ParseMotivation(t.Value)
			switch {
			case err != nil:
				bad(t, "%v", err)
			case motivationLine != 0 && m != d.Motivation:
				bad(t, "second motivation %q contradicts %q on line %d", t.Value, d.Motivation, motivationLine)
			default:
				d.Motivation, motivationLine = m, t.Line
			}
		case asciiEqualFold(t.Key, KeyClaim):
			st, err := ParseClaim(t.Value)
			if err != nil {
				bad(t, "%v", err)
				continue
			}
			d.Claims = append(d.Claims, st)
		case asciiEqualFold(t.Key, KeyYield):
			p, err := core.ParseFieldPattern(t.Value)
			if err != nil {
				bad(t, "%v", err)
				continue
			}
			d.Yields = append(d.Yields, p)
		case asciiEqualFold(t.Key, KeyExpires):
			at, err := ParseExpires(t.Value, now)
			switch {
			case err != nil:
				bad(t, "%v", err)
			case expiresLine != 0 && !at.Equal(d.Expires):
				bad(t, "second expiry contradicts the one on line %d", expiresLine)
			default:
				d.Expires, expiresLine = at, t.Line
			}
		case asciiEqualFold(t.Key, KeyPR):
			n, err := strconv.Atoi(strings.TrimPrefix(t.Value, "#"))
			switch {
			case err != nil || n <= 0:
				bad(t, "want a pull request number such as 42")
			case prLine != 0 && n != d.PR:
				bad(t, "second pull request number contradicts #%d on line %d", d.PR, prLine)
			default:
				d.PR, prLine = n, t.Line
			}
		default:
			d.Foreign = append(d.Foreign, core.ForeignTrailer{Key: t.Key, Value: t.Value, Line: t.Line})
		}
	}
	return d, problems
}

func intentList() string {
	var names []string
	for _, i := range core.KnownIntents() {
		names = append(names, string(i))
	}
	return strings.Join(names, ", ")
}

// ParseMotivation reads "KIND [REF] [severity=S]", e.g. "incident INC-4211 severity=high" or
// "cve CVE-2026-1234".
func ParseMotivation(s string) (core.Motivation, error) {
	var m core.Motivation
	words := strings.Fields(s)
	if len(words) == 0 {
		return m, fmt.Errorf("empty motivation (want a kind such as %s)", strings.Join(core.KnownMotivations(), ", "))
	}
	kind := strings.ToLower(words[0])
	known := false
	for _, k := range core.KnownMotivations() {
		known = known || k == kind
	}
	if !known {
		return m, fmt.Errorf("unknown motivation %q (want one of %s)", words[0], strings.Join(core.KnownMotivations(), ", "))
	}
	m.Kind = kind
	for _, w := range words[1:] {
		if k, v, ok := strings.Cut(w, "="); ok {
			if !asciiEqualFold(k, "severity") {
				return core.Motivation{}, fmt.Errorf("unknown attribute %q (want severity=low|medium|high|critical)", k)
			}
			if m.Severity != "" {
				return core.Motivation{}, fmt.Errorf("severity given twice")
			}
			sev := core.Severity(strings.ToLower(v))
			if sev.Rank() <= 0 {
				return core.Motivation{}, fmt.Errorf("unknown severity %q (want low, medium, high or critical)", v)
			}
			m.Severity = sev
			continue
		}
		if m.Ref != "" {
			return core.Motivation{}, fmt.Errorf("more than one reference (%q and %q); write one, such as INC-4211", m.Ref, w)
		}
		m.Ref = w
	}
	return m, nil
}

// ParseClaim reads "ADDRESS" or "ADDRESS = VALUE". Addresses hold no unescaped space or '=', so the
// address ends at the first of either. The value is JSON if it parses as JSON, else a string.
func ParseClaim(s string) (core.ClaimStatement, error) {
	addr, rest := s, ""
	if i := strings.IndexAny(s, " \t="); i >= 0 {
		addr, rest = s[:i], strings.TrimLeft(s[i:], " \t")
	}
	f, err := core.ParseField(addr)
	if err != nil {
		return core.ClaimStatement{}, err
	}
	st := core.ClaimStatement{Field: f}
	if rest == "" {
		return st, nil
	}
	v, ok := strings.CutPrefix(rest, "=")
	if !ok {
		return core.ClaimStatement{}, fmt.Errorf("unexpected %q after the address (write ADDRESS = VALUE)", rest)
	}
	v = strings.TrimSpace(v)
	if v == "" {
		return core.ClaimStatement{}, fmt.Errorf("empty value after = (write ADDRESS = VALUE, or the address alone)")
	}
	st.Value, st.HasValue = core.ParseLooseValue(v), true
	return st, nil
}

// ParseExpires reads an RFC 3339 time, a Go duration ("90m", "4h") or whole days ("2d"), the
// latter two counted from now. A past time or a non-positive duration is an error: a claim that is
// born expired is almost always a typo.
func ParseExpires(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		if !t.After(now) {
			return time.Time{}, fmt.Errorf("%s is not after the change's time %s", s, now.UTC().Format(time.RFC3339))
		}
		return t, nil
	}
	var d time.Duration
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.Atoi(n)
		if err != nil || days <= 0 || days > 3660 {
			return time.Time{}, fmt.Errorf("want an RFC 3339 time, a duration such as 4h, or days such as 2d (at most 3660d)")
		}
		d = time.Duration(days) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return time.Time{}, fmt.Errorf("want an RFC 3339 time, a duration such as 4h, or days such as 2d")
		}
		if d <= 0 {
			return time.Time{}, fmt.Errorf("duration %s must be positive", s)
		}
	}
	return now.Add(d), nil
}

// PRNumber finds the pull request a commit came from: a Parley-PR trailer, else GitHub's squash
// title "... (#N)", else its merge title "Merge pull request #N from ...".
func PRNumber(msg string, ts []Trailer) (int, bool) {
	for _, t := range ts {
		if asciiEqualFold(t.Key, KeyPR) {
			if n, err := strconv.Atoi(strings.TrimPrefix(t.Value, "#")); err == nil && n > 0 {
				return n, true
			}
		}
	}
	title, _, _ := strings.Cut(msg, "\n")
	title = strings.TrimRight(title, " \t\r")
	if rest, ok := strings.CutPrefix(title, "Merge pull request #"); ok {
		if num, _, ok := strings.Cut(rest, " "); ok {
			if n, err := strconv.Atoi(num); err == nil && n > 0 {
				return n, true
			}
		}
	}
	if strings.HasSuffix(title, ")") {
		if i := strings.LastIndex(title, "(#"); i >= 0 {
			if n, err := strconv.Atoi(title[i+2 : len(title)-1]); err == nil && n > 0 {
				return n, true
			}
		}
	}
	return 0, false
}
