package trailers

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// seedCorpus adds every corpus message to a fuzz target's seeds.
func seedCorpus(f *testing.F) {
	paths, _ := filepath.Glob(filepath.Join("testdata", "corpus", "*.txt"))
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
}

// normalise makes a fuzzed input comparable with git 2.39: text up to the first NUL, ending in a
// newline (git 2.46+ adds the final newline that 2.39 does not).
func normalise(s string) string {
	s = cutNUL(s)
	if s != "" && !strings.HasSuffix(s, "\n") {
		s += "\n"
	}
	return s
}

// FuzzParseMatchesGit compares Parse with `git interpret-trailers --parse` on random messages.
func FuzzParseMatchesGit(f *testing.F) {
	seedCorpus(f)
	f.Fuzz(func(t *testing.T, msg string) {
		msg = normalise(msg)
		for _, o := range []Options{{}, {NoDivider: true}} {
			if hangs(msg, o) {
				continue
			}
			want, err := gitParse(t, msg, o)
			if err != nil {
				t.Fatal(err)
			}
			if got := FormatWith(Parse(msg, o), o); got != want {
				t.Fatalf("options %+v\ninput %q\n got %q\nwant %q", o, msg, got, want)
			}
		}
	})
}

// FuzzAddMatchesGit compares Add with `git interpret-trailers --trailer` on random messages and
// trailer arguments.
func FuzzAddMatchesGit(f *testing.F) {
	for i, s := range []string{"Subject\n", "S\n\nKey: v\n", "S\n\nbody\n---\npatch\n", "S\n\nA: 1\n# c\n\n"} {
		f.Add(s, "Key=v", uint8(i))
	}
	f.Fuzz(func(t *testing.T, msg, arg string, mode uint8) {
		msg = normalise(msg)
		if strings.ContainsAny(arg, "\x00\n\r") || strings.HasPrefix(arg, "-") || hangs(msg, Options{}) {
			return // not something a command line carries; git would read a leading - as an option
		}
		tr, err := ParseTrailerArg(arg, Options{})
		if err != nil {
			return
		}
		o := WriteOptions{IfExists: IfExists(mode % 5), IfMissing: IfMissing(mode / 5 % 2)}
		want, err := gitAdd(t, msg, []string{arg}, o)
		if err != nil {
			t.Fatal(err)
		}
		if got := Add(msg, []Trailer{tr}, o); got != want {
			t.Fatalf("%+v %q\ninput %q\n got %q\nwant %q", o, arg, msg, got, want)
		}
	})
}

// FuzzInterpret checks that no Parley trailer is silently dropped: each is understood or reported.
func FuzzInterpret(f *testing.F) {
	seedCorpus(f)
	f.Fuzz(func(t *testing.T, msg string) {
		ts := Parse(msg, Options{})
		d, problems := Interpret(ts, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		parley := 0
		for _, tr := range ts {
			for _, k := range []string{KeyIntent, KeyMotivation, KeyClaim, KeyYield, KeyExpires, KeyPR} {
				if asciiEqualFold(tr.Key, k) {
					parley++
				}
			}
		}
		accounted := len(problems) + len(d.Claims) + len(d.Yields)
		for _, set := range []bool{d.Intent != "", !d.Motivation.IsZero(), !d.Expires.IsZero(), d.PR != 0} {
			if set {
				accounted++
			}
		}
		// Repeated identical Intent/Motivation/Expires/PR trailers collapse into one value.
		if accounted == 0 && parley > 0 || accounted > parley {
			t.Fatalf("%d Parley trailers, %d accounted for (%+v, %v)", parley, accounted, d, problems)
		}
		if len(d.Foreign)+parley != len(ts) {
			t.Fatalf("foreign %d + parley %d != %d trailers", len(d.Foreign), parley, len(ts))
		}
	})
}
