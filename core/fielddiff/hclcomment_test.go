package fielddiff

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// unclosedCommentFlood is the input that made hclsyntax's lexer quadratic: each `/*` is read to
// the end of the file before the lexer gives up on it (84 kB took 23 s of CPU, in every parse).
func unclosedCommentFlood(n int) []byte { return bytes.Repeat([]byte("/* x\n"), n) }

// TestUnclosedCommentsAreRefusedBeforeLexing: a file of unclosed `/*` is refused, naming the first,
// through every door that parses HCL (Terraform files, the policy, an expression), instead of being
// handed to the lexer that would spend minutes on it.
func TestUnclosedCommentsAreRefusedBeforeLexing(t *testing.T) {
	src := unclosedCommentFlood(17_000) // 85 kB
	var unclosed *UnclosedCommentError
	err := CheckHCLNesting("infra/main.tf", src)
	if !errors.As(err, &unclosed) || err.Error() != "infra/main.tf:1:1: a /* comment that no */ closes; not parsed" {
		t.Fatalf("CheckHCLNesting = %v, want the unclosed comment at 1:1", err)
	}
	if _, err := Diff("infra/main.tf", nil, src); !errors.As(err, &unclosed) {
		t.Fatalf("Diff = %v, want the unclosed comment", err)
	}
	// After a closed comment, the first unclosed one is named where it is.
	closed := append([]byte("/* a note */\nx = 1\n"), src...)
	if err := CheckHCLNesting("infra/main.tf", closed); err == nil || !strings.HasPrefix(err.Error(), "infra/main.tf:3:1: a /* comment") {
		t.Fatalf("after a closed comment: %v", err)
	}
	// Next to bytes that are not UTF-8 the copy's tokens may not be the source's: a few '/*' are
	// lexed as written, more are refused.
	latin1 := []byte("# caf\xe9\n")
	if err := CheckHCLNesting("infra/l.tf", append(bytes.Clone(latin1), "x = \"a/*\"\n"...)); err != nil {
		t.Fatalf("one /* in a string of a file that is not UTF-8: %v", err)
	}
	err = CheckHCLNesting("infra/l.tf", append(bytes.Clone(latin1), src...))
	if !errors.As(err, &unclosed) || !unclosed.NotUTF8 || !strings.HasPrefix(err.Error(), "infra/l.tf:2:1: more than 16 /* after the last */ in a file that is not valid UTF-8") {
		t.Fatalf("many /* in a file that is not UTF-8: %v", err)
	}
	// The fuzzer's find: with a brace on each line it is also nested too deep, named first.
	var deep *NestingError
	if err := CheckHCLNesting("infra/main.tf", bytes.Repeat([]byte("/* {\n"), 17_000)); !errors.As(err, &deep) {
		t.Fatalf("braces: %v, want the nesting refusal", err)
	}
	expr := append([]byte("["), bytes.Repeat([]byte("/* x, "), 20_000)...) // commas end each operator chain
	if err := CheckHCLExpressionNesting("expr", expr); !errors.As(err, &unclosed) {
		t.Fatalf("CheckHCLExpressionNesting = %v, want the unclosed comment", err)
	}
}

// TestCommentMarksInTextAreNotComments: `/*` where the lexer does not start a comment (in quoted
// strings, heredocs, line comments, and the `*/` of a closed comment) after the last `*/` is left
// to the parser, and the file is judged: an IAM policy's S3 ARNs are exactly this.
func TestCommentMarksInTextAreNotComments(t *testing.T) {
	for name, src := range map[string]string{
		"arn":          "/* bucket */\nresource \"aws_iam_policy\" \"p\" {\n  resource = \"arn:aws:s3:::bucket/*\"\n  other = [\"a/*\", \"b/*/c\"]\n}\n",
		"heredoc":      "x = <<EOT\nsee /* here\nEOT\n",
		"line comment": "# s3://bucket/* and // more /*\nx = 1 // a/*\n",
		"template":     "x = \"${var.a}/*\"\n",
		"shared star":  "x = 1 /*/ y */\n",
		"two closed":   "/* a */ x = 1 /* b */\n",
	} {
		if _, diags := hclsyntax.ParseConfig([]byte(src), "t.tf", hcl.InitialPos); diags.HasErrors() {
			t.Fatalf("%s: the case itself must be valid HCL: %v", name, diags)
		}
		if err := CheckHCLNesting("t.tf", []byte(src)); err != nil {
			t.Errorf("%s: CheckHCLNesting = %v, want nil", name, err)
		}
	}
}

// FuzzUnclosedCommentRefusalIsExact: the check refuses an unclosed comment only where hclsyntax's
// parse fails too, and when it lets a source through, its disarmed copy lexes to exactly the
// original's tokens (types and positions), the sentinels given back as the `*` they replaced: what
// the checks count is what the parser reads.
func FuzzUnclosedCommentRefusalIsExact(f *testing.F) {
	for _, s := range []string{
		"/* {\n/* {\n", "x = \"a/*\"\n", "/* a */ x = 1 /* b\n", "x = <<EOT\n/*\nEOT\n", "x = 1 /*/\n",
		"# /*\nx = \"${a /* b}\"\n", "*/*\n", "x = a[*] /* */ /*", "/*/*/", "x = \"\\/*\"\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		if len(src) > 4<<10 { // the oracle below lexes the original, quadratic on these inputs
			return
		}
		var unclosed *UnclosedCommentError
		err := CheckHCLNesting("f.tf", src)
		if errors.As(err, &unclosed) {
			if unclosed.NotUTF8 {
				return // refused without telling comments from text: failing closed, by design
			}
			if _, diags := hclsyntax.ParseConfig(src, "f.tf", hcl.InitialPos); !diags.HasErrors() {
				t.Fatalf("%q refused as %v, but hclsyntax parses it", src, err)
			}
			return
		}
		if err != nil {
			return
		}
		got, _ := lexDisarmed(src, "f.tf", hclsyntax.LexConfig)
		want, _ := hclsyntax.LexConfig(src, "f.tf", hcl.InitialPos)
		if len(got) != len(want) {
			t.Fatalf("%q: %d tokens disarmed, %d as written", src, len(got), len(want))
		}
		_, replaced := disarmUnclosedComments(src)
		covers := func(r hcl.Range) bool { // a token holding a replaced '*' has the sentinel in its bytes
			return slices.ContainsFunc(replaced, func(at int) bool { return at >= r.Start.Byte && at < r.End.Byte })
		}
		for i := range got {
			// Columns count grapheme clusters, and a combining mark joins '*' but not the sentinel:
			// a column after such a pair may differ; the bytes and lines the checks count do not.
			g, w := got[i].Range, want[i].Range
			if got[i].Type != want[i].Type || g.Start.Byte != w.Start.Byte || g.End.Byte != w.End.Byte || g.Start.Line != w.Start.Line || g.End.Line != w.End.Line ||
				!bytes.Equal(got[i].Bytes, want[i].Bytes) && !covers(got[i].Range) {
				t.Fatalf("%q: token %d is %s at %v disarmed, %s at %v as written", src, i, got[i].Type, got[i].Range, want[i].Type, want[i].Range)
			}
		}
	})
}

// BenchmarkUnclosedComments: refusing 85 kB of unclosed `/*` (hclsyntax alone: 23 s).
func BenchmarkUnclosedComments(b *testing.B) {
	src := unclosedCommentFlood(17_000)
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		if err := CheckHCLNesting("infra/main.tf", src); err == nil {
			b.Fatal("not refused")
		}
	}
}
