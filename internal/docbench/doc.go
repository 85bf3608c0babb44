// Package docbench finds the benchmark commands the documents under docs/ tell readers to run
// (`go test PKG -bench PATTERN`, or a test binary built with `go test -c -o BIN PKG` and run with
// `-test.bench PATTERN`), so that a test can run each of them once. A benchmark renamed, a package
// moved or a pattern that no longer matches then fails CI, not a reader's shell.
package docbench

import (
	"bufio"
	"fmt"
	"io"
	"path"
	"path/filepath"
	"strings"
)

// Ref is one benchmark command of a document: the package whose benchmarks it runs (a
// slash path relative to the module root, "./x/y") and its -bench pattern.
type Ref struct {
	Doc     string // the document's name, for messages
	Line    int    // where the command starts
	Package string
	Pattern string
}

func (r Ref) String() string {
	return fmt.Sprintf("%s:%d: -bench %s in %s", r.Doc, r.Line, r.Pattern, r.Package)
}

// build is a `go test -c -o BIN PKG` of a document: which package a binary named later holds.
type build struct {
	bin, pkg string
}

// Find reads one document and returns its benchmark commands in order. A command that runs a
// binary no earlier `go test -c -o` of the same document built is an error: the reader could not
// run it either. A `go test` with -bench but no package runs the current directory's benchmarks,
// which the surrounding prose names; such a line (a table cell quoting a command given in full
// above it) is not a command and is skipped.
func Find(doc string, r io.Reader) ([]Ref, error) {
	var refs []Ref
	var builds []build
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	n, start, joined := 0, 0, ""
	inBlock, dir := false, "" // a fenced code block is one shell session: a cd in it holds below
	var subshells []string    // the directories to return to as each open subshell ends
	for sc.Scan() {
		n++
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inBlock, dir, joined, subshells = !inBlock, "", "", nil
			continue
		}
		if joined == "" {
			start = n
		}
		if strings.HasSuffix(line, `\`) { // a shell continuation: the command goes on below
			joined += strings.TrimSuffix(line, `\`) + " "
			continue
		}
		line, joined = joined+line, ""
		pieces := []string{line}
		if !inBlock {
			// Prose: only its inline code is a command, each span on its own.
			pieces = nil
			for i, p := range strings.Split(line, "`") {
				if i%2 == 1 {
					pieces = append(pieces, p)
				}
			}
		}
		for _, piece := range pieces {
			if !inBlock {
				dir, subshells = "", nil
			}
			for _, cmd := range commands(piece) {
				got, b, err := parse(cmd, builds, &dir, &subshells)
				if err != nil {
					return nil, fmt.Errorf("%s:%d: %w", doc, start, err)
				}
				if b != nil {
					builds = append(builds, *b)
				}
				for _, g := range got {
					g.Doc, g.Line = doc, start
					refs = append(refs, g)
				}
			}
		}
	}
	return refs, sc.Err()
}

// commands splits a line of shell into the commands it holds: separated by &&, ||, ; or |, cut at
// a comment; a subshell's parentheses come as commands of their own, "(" and ")".
func commands(line string) [][]string {
	var out [][]string
	var cur []string
	flush := func() {
		if len(cur) > 0 {
			out = append(out, cur)
		}
		cur = nil
	}
	for _, tok := range words(line) {
		switch {
		case tok.sep:
			flush()
		case tok.text == "#":
			flush()
			return out
		default:
			cur = append(cur, tok.text)
		}
	}
	flush()
	return out
}

type word struct {
	text string
	sep  bool // a command separator
}

// words splits a line as a POSIX shell would for the parts that matter here: single and double
// quotes group (and are removed), and the separators stand alone.
func words(line string) []word {
	var out []word
	var b strings.Builder
	inWord := false
	end := func() {
		if inWord {
			out = append(out, word{text: b.String()})
		}
		b.Reset()
		inWord = false
	}
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == '\'' || c == '"':
			j := strings.IndexByte(line[i+1:], c)
			if j < 0 {
				j = len(line) - i - 1
			}
			b.WriteString(line[i+1 : i+1+j])
			inWord = true
			i += j + 1
		case c == ' ' || c == '\t':
			end()
		case c == ';':
			end()
			out = append(out, word{sep: true})
		case c == '(' || c == ')': // a subshell: its own command, so that its cd can be undone
			end()
			out = append(out, word{sep: true}, word{text: string(c)}, word{sep: true})
		case c == '&' || c == '|':
			end()
			for i+1 < len(line) && line[i+1] == c {
				i++
			}
			out = append(out, word{sep: true})
		case c == '#' && !inWord:
			end()
			out = append(out, word{text: "#"})
		default:
			b.WriteByte(c)
			inWord = true
		}
	}
	end()
	return out
}

// parse reads one command: a `go test` (a build with -c -o, or a run with -bench), a test binary
// run with -test.bench, or a cd, which makes "." mean the directory it enters (dir, relative to
// the module root; a cd elsewhere, as into another checkout, leaves package paths as written)
// until the subshell it is in ends (stack holds the directories to return to).
// Environment assignments, nice and a loop's do in front are skipped.
func parse(cmd []string, builds []build, dir *string, stack *[]string) ([]Ref, *build, error) {
	for len(cmd) > 0 && (cmd[0] == "nice" || cmd[0] == "do" || strings.Contains(cmd[0], "=") && !strings.HasPrefix(cmd[0], "-")) {
		cmd = cmd[1:]
	}
	switch {
	case len(cmd) == 0:
		return nil, nil, nil
	case len(cmd) == 1 && cmd[0] == "(":
		*stack = append(*stack, *dir)
		return nil, nil, nil
	case len(cmd) == 1 && cmd[0] == ")":
		if n := len(*stack); n > 0 {
			*dir, *stack = (*stack)[n-1], (*stack)[:n-1]
		}
		return nil, nil, nil
	case cmd[0] == "cd" && len(cmd) == 2:
		if path.IsAbs(cmd[1]) || strings.Contains(cmd[1], "$") {
			*dir = "" // another checkout or repository: package paths stay as written
		} else {
			*dir = path.Join(*dir, cmd[1])
		}
		return nil, nil, nil
	case len(cmd) >= 2 && cmd[0] == "go" && cmd[1] == "test":
		return goTest(cmd[2:], *dir)
	case strings.HasSuffix(cmd[0], ".test"):
		pattern, ok := flagValue(cmd[1:], "-test.bench")
		if !ok {
			return nil, nil, nil
		}
		for i := len(builds) - 1; i >= 0; i-- {
			if ok, _ := path.Match(strings.ReplaceAll(cmd[0], "$v", "*"), builds[i].bin); ok {
				return []Ref{{Package: builds[i].pkg, Pattern: pattern}}, nil, nil
			}
		}
		return nil, nil, fmt.Errorf("%s runs benchmarks, but no go test -c -o above it in this document builds it", cmd[0])
	}
	return nil, nil, nil
}

func goTest(args []string, dir string) ([]Ref, *build, error) {
	var pkgs []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "." || strings.HasPrefix(a, "./"):
			pkgs = append(pkgs, pkgPath(dir, a))
		case strings.HasPrefix(a, "-") && !strings.Contains(a, "=") && takesValue(a):
			i++ // the flag's value, not a package
		}
	}
	if bin, ok := flagValue(args, "-o"); ok && hasFlag(args, "-c") {
		if len(pkgs) != 1 {
			return nil, nil, fmt.Errorf("go test -c -o %s names %d packages, want one", bin, len(pkgs))
		}
		return nil, &build{bin: bin, pkg: pkgs[0]}, nil
	}
	pattern, ok := flagValue(args, "-bench")
	if !ok || len(pkgs) == 0 {
		return nil, nil, nil
	}
	refs := make([]Ref, len(pkgs))
	for i, p := range pkgs {
		refs[i] = Ref{Package: p, Pattern: pattern}
	}
	return refs, nil, nil
}

// pkgPath is a package argument a, given in directory dir of the module, as "./x/y" from the
// module root ("." for the root itself).
func pkgPath(dir, a string) string {
	if p := path.Join(dir, a); p != "." {
		return "./" + p
	}
	return "."
}

// takesValue reports whether a go test or test binary flag written without = consumes the next
// word. The boolean ones (-c, -v, -benchmem, -short, -race, -json) do not.
func takesValue(flag string) bool {
	switch strings.TrimPrefix(strings.TrimPrefix(flag, "-"), "test.") {
	case "c", "v", "benchmem", "short", "race", "json", "failfast", "cover", "x", "n", "a", "i":
		return false
	}
	return true
}

// flagValue is the value of name (as "-name value" or "-name=value") in args.
func flagValue(args []string, name string) (string, bool) {
	for i, a := range args {
		if a == name && i+1 < len(args) {
			return args[i+1], true
		}
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v, true
		}
	}
	return "", false
}

func hasFlag(args []string, name string) bool {
	for _, a := range args {
		if a == name {
			return true
		}
	}
	return false
}

// Dir is the package's directory under root.
func (r Ref) Dir(root string) string { return filepath.Join(root, filepath.FromSlash(r.Package)) }
