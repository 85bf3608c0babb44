package fielddiff

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// treeDepth is the deepest chain of blocks and expressions in a parsed file: what hclsyntax's
// parser recursed through to build it.
func treeDepth(body *hclsyntax.Body) int {
	w := &depthWalker{}
	hclsyntax.Walk(body, w)
	return w.deepest
}

type depthWalker struct{ depth, deepest int }

func counted(n hclsyntax.Node) bool {
	switch n.(type) {
	case *hclsyntax.Block:
		return true
	case hclsyntax.Expression:
		return true
	}
	return false
}

func (w *depthWalker) Enter(n hclsyntax.Node) hcl.Diagnostics {
	if counted(n) {
		w.depth++
		w.deepest = max(w.deepest, w.depth)
	}
	return nil
}

func (w *depthWalker) Exit(n hclsyntax.Node) hcl.Diagnostics {
	if counted(n) {
		w.depth--
	}
	return nil
}

// FuzzHCLNestingBoundsParserDepth: the pre-scan never counts less nesting than the parser builds
// (a leaf, and an object key's wrapper, are the slack), so refusing past its count refuses before
// the parser could recurse past it.
func FuzzHCLNestingBoundsParserDepth(f *testing.F) {
	for _, s := range []string{
		asg,
		"locals {\n  x = !!-a ? b : c ? d : e\n  y = a[b][c][*].d\n}\n",
		"x = \"%{if a}%{for x in y}${x}%{endfor}%{else}b%{endif}\"\n",
		"x = <<-EOT\n  ${a + b}\n  %{~ if c ~}\n  d\n  %{~ endif ~}\nEOT\n",
		"x = {for k, v in m : k => v +\n v - 1}\ny = { a = (1 +\n 2) }\n",
		"a { b { c { d = [[1], [2, [3]]] } } }\n",
		"x = f(a, g(b, h(c)))[0].y\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		if len(src) > 4096 {
			return // the parser's own recursion on long inputs is what the check is for
		}
		toks, _ := hclsyntax.LexConfig(src, "x.tf", hcl.InitialPos)
		scanned, _ := nesting(toks, true, math.MaxInt)
		file, _ := hclsyntax.ParseConfig(src, "x.tf", hcl.InitialPos)
		body, ok := file.Body.(*hclsyntax.Body)
		if !ok {
			return
		}
		if parsed := treeDepth(body); parsed > scanned+2 {
			t.Fatalf("pre-scan counts %d levels, the parser built %d:\n%s", scanned, parsed, src)
		}
	})
}

// deepHCL are inputs that hclsyntax's parser recursed on past Go's 1 GB stack limit before this
// check existed (a fatal error that kills the process, checked by running each: issue 34), all
// within the 8 MiB a file may have.
var deepHCL = []struct{ name, src string }{
	// Issue 34's file was 200,000 (1.2 MB), now refused by its size (TestHCLPastItsSizeIsRefusedUnread)
	// before its nesting is looked at; 170,000 are as deep and within MaxHCLBytes.
	{"170,000 nested blocks (1.0 MB)", strings.Repeat("a {\n", 170_000) + strings.Repeat("}\n", 170_000)},
	{"a locals expression nested 100,000 deep (200 kB)", "locals {\n  x = " + strings.Repeat("(", 100_000) + "1" + strings.Repeat(")", 100_000) + "\n}\n"},
}

// TestDeepHCLRefusedBeforeParsing runs each attack in a child process, since a stack overflow is
// not a panic: without the check the child dies with "fatal error: stack overflow" and this test
// says so; with it, Parse answers with the nesting problem.
func TestDeepHCLRefusedBeforeParsing(t *testing.T) {
	if name := os.Getenv("FIELDDIFF_DEEP_HCL"); name != "" {
		for _, c := range deepHCL {
			if c.name == name {
				_, err := Parse("infra/main.tf", []byte(c.src))
				fmt.Printf("answer: %v\n", err)
				return
			}
		}
		t.Fatalf("no attack %q", name)
	}
	for _, c := range deepHCL {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run", "^TestDeepHCLRefusedBeforeParsing$", "-test.count=1")
			cmd.Env = append(os.Environ(), "FIELDDIFF_DEEP_HCL="+c.name)
			out, err := cmd.CombinedOutput()
			if err != nil {
				first, _, _ := strings.Cut(string(out), "\n")
				t.Fatalf("the parse crashed the process (%v): %s", err, first)
			}
			if !strings.Contains(string(out), "answer: infra/main.tf:") || !strings.Contains(string(out), "nested deeper than 1000 levels") {
				t.Fatalf("want the nesting problem naming the file, got:\n%.500s", out)
			}
		})
	}
}

// TestHCLNestingChains: chains the parser nests without brackets count as levels, and what ends an
// expression ends them; a file of many shallow expressions passes.
func TestHCLNestingChains(t *testing.T) {
	deep := func(s string) string { return "locals {\n  x = " + s + "\n}\n" }
	for _, c := range []struct {
		name, src string
		refused   bool
	}{
		{"negations", deep(strings.Repeat("!", 1500) + "a"), true},
		{"conditionals", deep(strings.Repeat("a ? b : ", 1500) + "c"), true},
		{"indexes", deep("a" + strings.Repeat("[b]", 1500)), true},
		{"splats", deep("a" + strings.Repeat("[*]", 1500)), true},
		{"template ifs", deep(`"` + strings.Repeat("%{if a}", 800) + strings.Repeat("%{endif}", 800) + `"`), true},
		{"heredoc ifs", deep("<<EOT\n" + strings.Repeat("%{ if a ~}\n", 800) + strings.Repeat("%{ endif }\n", 800) + "EOT"), true},
		{"additions across lines in parentheses", deep("(" + strings.Repeat("a +\n", 1500) + "a)"), true},
		{"additions across lines in a for expression", deep("{for k in m : k => " + strings.Repeat("a +\n", 1500) + "a}"), true},
		{"objects nested in a list", deep(strings.Repeat("[{a = ", 600) + "1" + strings.Repeat("}]", 600)), true},
		{"many attributes with operators", "locals {\n" + strings.Repeat("  x = a + b - c * d ? e : !f\n", 2000) + "}\n", false},
		{"a long list of expressions", deep("[" + strings.Repeat("a + b[0] - c,\n", 2000) + "]"), false},
		{"an object of many items", deep("{\n" + strings.Repeat("  k = a - b\n", 2000) + "}"), false},
		{"a heredoc of many ifs in sequence", deep("<<EOT\n" + strings.Repeat("%{ if a }x%{ endif }\n", 2000) + "EOT"), false},
		{"brackets and minus signs in strings and comments", deep(`"`+strings.Repeat("((-[", 2000)+`"`) + strings.Repeat("# ((((----\n", 500), false},
	} {
		err := CheckHCLNesting("main.tf", []byte(c.src))
		var deep *NestingError
		if got := errors.As(err, &deep); got != c.refused {
			t.Errorf("%s: refused %v (%v), want %v", c.name, got, err, c.refused)
		}
	}
}

// FuzzDeepTF: any file up to the 8 MiB a review reads, built as prefix×n middle suffix×n so the
// fuzzer reaches nesting no small input has, parses to a result or a problem, never a crash.
func FuzzDeepTF(f *testing.F) {
	f.Add([]byte("a {\n"), []byte("x = 1\n"), []byte("}\n"), uint32(2_000))
	f.Add([]byte("locals {\n x = "), []byte(strings.Repeat("(", 3)), []byte(""), uint32(1))
	f.Add([]byte("("), []byte("1"), []byte(")"), uint32(1_500))
	f.Add([]byte("!"), []byte("a"), []byte(""), uint32(1_500))
	f.Add([]byte("a ? b : "), []byte("c"), []byte(""), uint32(1_500))
	f.Add([]byte("\"%{if a}"), []byte("x"), []byte("%{endif}\""), uint32(600))
	f.Fuzz(func(t *testing.T, prefix, middle, suffix []byte, n uint32) {
		const fileCap = 8 << 20
		unit := len(prefix) + len(suffix)
		if unit > 0 && int(n) > (fileCap-len(middle))/unit {
			n = uint32((fileCap - len(middle)) / unit)
		}
		src := append(append(bytes.Repeat(prefix, int(n)), middle...), bytes.Repeat(suffix, int(n))...)
		if len(src) > fileCap {
			return
		}
		Parse("infra/main.tf", src) // an error is an answer; a crash ends the fuzzer
	})
}

// fullNesting is CheckHCLNesting without its prefix: the whole file lexed.
func fullNesting(src []byte) error {
	toks, unclosed := lexDisarmed(src, "infra/main.tf", hclsyntax.LexConfig)
	if err := nestingError(toks, true); err != nil {
		return err
	}
	return unclosed
}

// FuzzHCLNestingPrefixAgrees: refusing from a file's first 64 KiB is only a shortcut: for any
// file, CheckHCLNesting refuses exactly when lexing the whole file does, at the same place. The
// files are built as prefix×n middle suffix×n, past the 64 KiB the shortcut looks at.
func FuzzHCLNestingPrefixAgrees(f *testing.F) {
	f.Add([]byte("b {\n"), []byte("x = 1\n"), []byte("}\n"), uint32(12_000))
	f.Add([]byte("/* {\n"), []byte("*/"), []byte("}\n"), uint32(12_000))
	f.Add([]byte("x = <<EOT\n{\n"), []byte("EOT\n"), []byte(""), uint32(12_000))
	f.Add([]byte("x = \"${(\n"), []byte("1"), []byte(")}\"\n"), uint32(12_000))
	f.Add([]byte("a = [\n"), []byte("1"), []byte("]\n"), uint32(12_000))
	f.Fuzz(func(t *testing.T, prefix, middle, suffix []byte, n uint32) {
		const fileCap = 160 << 10 // past the 64 KiB the shortcut looks at; lexing costs ~400 bytes a byte
		unit := len(prefix) + len(suffix)
		if unit > 0 && int(n) > (fileCap-len(middle))/unit {
			n = uint32((fileCap - len(middle)) / unit)
		}
		src := append(append(bytes.Repeat(prefix, int(n)), middle...), bytes.Repeat(suffix, int(n))...)
		got, want := CheckHCLNesting("infra/main.tf", src), fullNesting(src)
		if (got == nil) != (want == nil) || (got != nil && got.Error() != want.Error()) {
			t.Fatalf("with the prefix: %v; the whole file: %v", got, want)
		}
	})
}

// TestDeepHCLRefusedFromItsPrefix: 150,000 nested blocks (900 kB, within MaxHCLBytes; issue 34's
// 1.2 MB of 200,000 cost 467 MB of hclsyntax tokens to refuse, and bench/attack's deeptf pull
// request held serve past 500 MiB) are refused from the file's first 64 KiB.
func TestDeepHCLRefusedFromItsPrefix(t *testing.T) {
	src := []byte(strings.Repeat("b {\n", 150_000) + strings.Repeat("}\n", 150_000))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	err := CheckHCLNesting("infra/deep.tf", src)
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "infra/deep.tf:1001:") {
		t.Fatalf("CheckHCLNesting = %v, want the refusal at line 1001", err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 32<<20 {
		t.Errorf("refusing 900 kB of nested blocks allocated %d MB, want under 32 MB", got>>20)
	}
	// A block comment before the point leaves the decision to the whole file.
	commented := append([]byte("/* a comment */\n"), src...)
	if err := CheckHCLNesting("infra/deep.tf", commented); err == nil || !strings.Contains(err.Error(), "infra/deep.tf:1002:") {
		t.Fatalf("with a comment first: %v", err)
	}
}

// TestHCLPastItsSizeIsRefusedUnread: a 1 MiB Terraform file of one-line attributes cost hclsyntax
// 963 MB of allocations and 235 MB live; the 8 MiB any file may be would take a pod down. HCL past
// MaxHCLBytes is refused before a token is made, as the file it is, through every door's parse.
func TestHCLPastItsSizeIsRefusedUnread(t *testing.T) {
	src := []byte(strings.Repeat("a = 1\n", MaxHCLBytes/6+1))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := Diff("infra/flat.tf", nil, src)
	runtime.ReadMemStats(&after)
	var big *SizeError
	if !errors.As(err, &big) || !strings.Contains(err.Error(), "infra/flat.tf: 1.0 MB of HCL, above the 1 MiB Parley parses") {
		t.Fatalf("Diff of %d bytes of HCL = %v, want the size refusal", len(src), err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 1<<20 {
		t.Errorf("refusing it allocated %d kB, want under 1 MiB", got>>10)
	}
	if err := CheckHCLExpressionNesting("x.tf", src); !errors.As(err, &big) {
		t.Errorf("an expression past the size: %v", err)
	}
	if err := CheckHCLNesting("ok.tf", src[:MaxHCLBytes-1]); err != nil {
		t.Errorf("HCL within the size: %v", err)
	}
}
