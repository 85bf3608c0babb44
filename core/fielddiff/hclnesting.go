package fielddiff

import (
	"bytes"
	"fmt"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/parleyhq/parley/core"
)

// MaxHCLNesting is the deepest HCL CheckHCLNesting lets through to hclsyntax's parser. The parser
// recurses once (through a dozen Go frames) per nested block, bracket, template or operator before
// anything can look at the depth, and Go ends a program whose stack passes 1 GB with a fatal error
// no recover catches: 200,000 nested blocks or a `locals` expression nested 100,000 deep took
// `parley review` down. A thousand levels costs the parser a few megabytes of stack; real Terraform
// nests a few dozen at most, and fielddiff refuses more than maxDepth (100) blocks and objects anyway.
const MaxHCLNesting = 1000

// MaxHCLBytes is the largest HCL source (a .tf file, a policy, an expression) CheckHCLNesting
// lets through to hclsyntax. Its tokens and syntax tree hold 170 to 235 bytes of memory per byte
// of source and allocate about 900 on the way (a 1 MiB file of one-line attributes: 963 MB
// allocated, 235 MB live), so the 8 MiB any other file may be would take 2 GB, and four such pull
// requests judged at once a pod's memory many times over. Real Terraform files are tens of
// kilobytes; one past this is named as not judged, like any file past a budget.
const MaxHCLBytes = 1 << 20

// SizeError is CheckHCLNesting's refusal of a source past MaxHCLBytes.
type SizeError struct {
	Filename string
	Size     int
}

func (e *SizeError) Error() string { return fmt.Sprintf("%s: %s", e.Filename, e.Message()) }

// Message is the error without the file name.
func (e *SizeError) Message() string {
	return fmt.Sprintf("%s of HCL, above the %s Parley parses (hclsyntax holds about 200 bytes of memory per byte); not parsed",
		core.Size(int64(e.Size)), core.Size(MaxHCLBytes))
}

// CheckHCLNesting refuses HCL native syntax (a .tf file, a policy) that hclsyntax.ParseConfig (or
// hclwrite.ParseConfig, which uses it) would recurse on deeper than MaxHCLNesting, naming the file,
// line and column where the budget ran out, and a source past MaxHCLBytes (a *SizeError) unread. It reads hclsyntax's own tokens, so strings, heredocs
// and comments are what the parser takes them for, and the lexer does not recurse.
//
// It also refuses (an *UnclosedCommentError) a `/*` where hclsyntax would start a block comment
// that no `*/` closes: the lexer then reads to the end of the file for each such `/*` before it
// gives up on it, so a file of them costs the square of its length (84 kB of "/* {" lines took 23
// s of CPU, in every parse of it). Such a file is a syntax error to the parser anyway.
//
// The count never under-counts the parser's recursion (FuzzHCLNestingBoundsParserDepth checks it
// against the parsed tree): each open block, bracket, parenthesis, string or heredoc, template
// sequence is a level; so is each operator, each index bracket, and each template if or for,
// because hclsyntax nests a chain of them (a - - - b, a ? b : c ? d : e, x[a][b][c], a[*][*],
// %{if}%{if}) without brackets, and a bracketed term stays counted while operators follow it,
// since they nest it deeper in the tree that evaluation walks recursively. Both end where the
// parser's expression ends: at a comma, and at a newline inside a block body or an object (where
// newlines end an item); inside parentheses, brackets and for expressions, where the parser skips
// newlines, they do not.
//
// Its memory is hclsyntax's tokens, as the parse that follows takes anyway: about 100 bytes per
// token, up to 400 bytes allocated per byte of a file of one-character tokens. A file nested past
// the budget is refused from its first 64 KiB when that is where it goes too deep (see
// prefixNesting): issue 34's 1.2 MB of nested blocks cost 467 MB to refuse, now under 30 MB.
func CheckHCLNesting(filename string, src []byte) error {
	if len(src) > MaxHCLBytes {
		return &SizeError{Filename: filename, Size: len(src)}
	}
	if err, sure := prefixNesting(filename, src); sure {
		return err
	}
	toks, unclosed := lexDisarmed(src, filename, hclsyntax.LexConfig)
	if err := nestingError(toks, true); err != nil {
		return err
	}
	return unclosed
}

// nestingPrefix is how much of a larger file prefixNesting lexes first.
const nestingPrefix = 64 << 10

// prefixNesting lexes only the first nestingPrefix bytes of a larger file (cut after a newline)
// and answers sure when that settles the file's refusal: the prefix nests past MaxHCLNesting,
// and nothing before the point where it does can span the cut. Lines are where hclsyntax's
// tokens cannot depend on what follows, except inside a block comment, a heredoc or a template
// sequence (${ and %{, whose expressions may run over lines): with none of those before the
// refusal point, the prefix's tokens up to it are the whole file's, so the whole file is refused
// at the same token. Otherwise, or within the budget, the whole file is lexed as before (not sure).
func prefixNesting(filename string, src []byte) (error, bool) {
	if len(src) <= nestingPrefix {
		return nil, false
	}
	cut := bytes.LastIndexByte(src[:nestingPrefix], '\n')
	if cut < 0 {
		return nil, false
	}
	toks, _ := lexDisarmed(src[:cut+1], filename, hclsyntax.LexConfig)
	deepest, at := nesting(toks, true, MaxHCLNesting)
	if deepest <= MaxHCLNesting {
		return nil, false
	}
	before := src[:min(at.Start.Byte, len(src))]
	for _, spans := range []string{"/*", "<<", "${", "%{"} {
		if bytes.Contains(before, []byte(spans)) {
			return nil, false
		}
	}
	return &NestingError{Range: at, Limit: MaxHCLNesting}, true
}

// CheckHCLExpressionNesting is CheckHCLNesting for a lone expression, as hclsyntax.ParseExpression
// reads it (newlines skipped throughout).
func CheckHCLExpressionNesting(filename string, src []byte) error {
	if len(src) > MaxHCLBytes {
		return &SizeError{Filename: filename, Size: len(src)}
	}
	toks, unclosed := lexDisarmed(src, filename, hclsyntax.LexExpression)
	if err := nestingError(toks, false); err != nil {
		return err
	}
	return unclosed
}

// commentSentinel stands in for the `*` of each `/*` that no later `*/` can close, in the copy of
// the source the checks lex (disarmUnclosedComments); lexDisarmed knows its own by their offsets,
// so a 0x01 already in the source stays what it is. In code the lexer makes it a token of its own
// (TokenInvalid), as hclsyntax's scanner does with any character it has no rule for; in a quoted
// string, a heredoc, a template or a line comment it is one more literal character, as the `*` was.
// It is the same length as `*`, so every token keeps its position.
const commentSentinel = 0x01

// disarmUnclosedComments returns src with the `*` of each `/*` after the last `*/` replaced by
// commentSentinel, and the offsets replaced, in order; src itself when there is none. The copy
// lexes in time linear in its length: the only pattern of hclsyntax's scanner that reads ahead
// without bound and then backs off is an unclosed block comment (scan_tokens.rl: "/*" any* :>>
// "*/"), and a `/*` after the last `*/` can never be closed; one before it is read once, to its
// `*/`, and becomes one token. (The two `/*` that share a character with the last `*/`, as in `/*/`
// and `*/*`, are left as they are: replacing the first's `*` would unmake that `*/`, and the
// second's `/` is usually that comment's end; each costs at most one scan to the end, which is
// linear.) Written by hand because hclsyntax offers no bound on the scan.
func disarmUnclosedComments(src []byte) ([]byte, []int) {
	from := 0
	if last := bytes.LastIndex(src, []byte("*/")); last >= 0 {
		from = last + 2
	}
	i := bytes.Index(src[from:], []byte("/*"))
	if i < 0 {
		return src, nil
	}
	out := bytes.Clone(src)
	var replaced []int
	for p := from + i; p+1 < len(out); p++ {
		if out[p] == '/' && out[p+1] == '*' {
			out[p+1] = commentSentinel
			replaced = append(replaced, p+1)
		}
	}
	return out, replaced
}

// lexDisarmed lexes src's disarmed copy (disarmUnclosedComments) with lex and gives back the
// tokens src has: a replaced `*` the lexer made a token of its own (TokenInvalid) is given back as
// the TokenStar the lexer makes of a `*` it does not read as a comment's. It also returns the
// first unclosed comment, if any: a `/` the lexer read as code, right before such a token.
func lexDisarmed(src []byte, filename string, lex func([]byte, string, hcl.Pos) (hclsyntax.Tokens, hcl.Diagnostics)) (hclsyntax.Tokens, error) {
	lexed, replaced := disarmUnclosedComments(src)
	if len(replaced) > 0 && !utf8.Valid(src) {
		// Next to bytes that are not UTF-8 the scanner can end a token at a '*' it would not end
		// at otherwise ("#/*" then a broken byte ends the comment there), so the copy's tokens are
		// not the source's. A few such '/*' are lexed as written, at one scan to the end each;
		// more are refused.
		if len(replaced) > maxUnclosedNotUTF8 {
			return nil, &UnclosedCommentError{Range: rangeAt(filename, src, replaced[0]-1), NotUTF8: true}
		}
		lexed, replaced = src, nil
	}
	toks, _ := lex(lexed, filename, hcl.InitialPos)
	var unclosed error
	for i := 0; i < len(toks) && len(replaced) > 0; i++ {
		tok := &toks[i]
		for len(replaced) > 0 && replaced[0] < tok.Range.Start.Byte {
			replaced = replaced[1:] // inside a longer token: a string, a heredoc, a comment
		}
		if len(replaced) == 0 || replaced[0] != tok.Range.Start.Byte || tok.Type != hclsyntax.TokenInvalid || len(tok.Bytes) != 1 {
			continue
		}
		if i > 0 && unclosed == nil && toks[i-1].Type == hclsyntax.TokenSlash && toks[i-1].Range.End.Byte == tok.Range.Start.Byte {
			unclosed = &UnclosedCommentError{Range: toks[i-1].Range}
		}
		tok.Type, tok.Bytes = hclsyntax.TokenStar, star
	}
	return toks, unclosed
}

var star = []byte("*")

// UnclosedCommentError is CheckHCLNesting's refusal of a `/*` that no `*/` closes.
type UnclosedCommentError struct {
	Range hcl.Range // the comment's `/`
	// NotUTF8: the file is not valid UTF-8 and has more than maxUnclosedNotUTF8 '/*' after its
	// last '*/', which CheckHCLNesting refuses without telling comments from text.
	NotUTF8 bool
}

// maxUnclosedNotUTF8 is how many '/*' after the last '*/' a file that is not valid UTF-8 may have
// and still be lexed as written (each costs the lexer a scan to the end of the file).
const maxUnclosedNotUTF8 = 16

// rangeAt is the position of byte offset at in src, as hcl counts lines and columns (columns in
// characters, here bytes: the file is not valid UTF-8 anyway).
func rangeAt(filename string, src []byte, at int) hcl.Range {
	line := 1 + bytes.Count(src[:at], []byte("\n"))
	col := at - bytes.LastIndexByte(src[:at], '\n')
	p := hcl.Pos{Line: line, Column: col, Byte: at}
	return hcl.Range{Filename: filename, Start: p, End: p}
}

func (e *UnclosedCommentError) Error() string {
	return fmt.Sprintf("%s: %s", pos(e.Range), e.Message())
}

// Message is the error without its position.
func (e *UnclosedCommentError) Message() string {
	if e.NotUTF8 {
		return fmt.Sprintf("more than %d /* after the last */ in a file that is not valid UTF-8; not parsed", maxUnclosedNotUTF8)
	}
	return "a /* comment that no */ closes; not parsed"
}

// NestingError is CheckHCLNesting's refusal: where the budget ran out.
type NestingError struct {
	Range hcl.Range // the token past the budget
	Limit int
}

func (e *NestingError) Error() string {
	return fmt.Sprintf("%s: %s", pos(e.Range), e.Message())
}

// Message is the error without its position, for callers that report positions their own way.
func (e *NestingError) Message() string {
	return fmt.Sprintf("nested deeper than %d levels (blocks, brackets, templates and operators); not parsed", e.Limit)
}

func nestingError(toks hclsyntax.Tokens, body bool) error {
	if deepest, at := nesting(toks, body, MaxHCLNesting); deepest > MaxHCLNesting {
		return &NestingError{Range: at, Limit: MaxHCLNesting}
	}
	return nil
}

// nestFrame is one open level: what opened it, and the operators, indexes and bracketed terms of
// the expression it is in since that expression began.
type nestFrame struct {
	open hclsyntax.TokenType
	// chain counts the operators and indexes so far: hclsyntax nests each over the ones before.
	chain int
	// term is the deepest level a term closed in this expression reached (a parenthesis, a call, a
	// block): operators after it nest it deeper still (f(g(x)) + 1 + 1), so it stays counted until
	// the expression ends.
	term     int
	items    bool // newlines end an item here (a block body or an object)
	first    bool // no token seen yet inside this brace: `{ for` is a for expression
	template bool // a string or heredoc: template if and for directives nest here
	control  bool // a %{ directive whose keyword is still to come
}

// nesting is the deepest level toks reach, stopping at the first token past limit (and its range).
// A level is a frame, plus each frame's chain and term: the parse tree's depth under that point.
func nesting(toks hclsyntax.Tokens, body bool, limit int) (deepest int, at hcl.Range) {
	stack := make([]nestFrame, 1, 16)
	stack[0] = nestFrame{items: body}
	depth := 0 // the sum over open frames (the file's not counted) of 1 + chain + term
	endExpr := func(f *nestFrame) {
		depth -= f.chain + f.term
		f.chain, f.term = 0, 0
	}
	for i := range toks {
		tok := &toks[i]
		top := &stack[len(stack)-1]
		if top.first && tok.Type != hclsyntax.TokenNewline && tok.Type != hclsyntax.TokenComment {
			top.first = false
			if tok.Type == hclsyntax.TokenIdent && string(tok.Bytes) == "for" {
				top.items = false // a for expression: the parser reads across newlines
			}
		}
		if top.control && tok.Type != hclsyntax.TokenBitwiseNot {
			top.control = false
			if tok.Type == hclsyntax.TokenIdent && len(stack) > 1 {
				// templateParser nests a conditional and a template per if or for, and every end
				// directive returns from one of them.
				tmpl := &stack[len(stack)-2]
				switch string(tok.Bytes) {
				case "if", "for":
					tmpl.chain += 2
					depth += 2
				case "endif", "endfor":
					d := min(tmpl.chain, 2)
					tmpl.chain -= d
					depth -= d
				}
			}
		}
		switch tok.Type {
		case hclsyntax.TokenOBrace, hclsyntax.TokenOBrack, hclsyntax.TokenOParen,
			hclsyntax.TokenOQuote, hclsyntax.TokenOHeredoc,
			hclsyntax.TokenTemplateInterp, hclsyntax.TokenTemplateControl:
			if tok.Type == hclsyntax.TokenOBrack {
				// An index (x[a][b]) or splat (x[*][*]) nests the expression before it.
				top.chain++
				depth++
			}
			f := nestFrame{open: tok.Type}
			switch tok.Type {
			case hclsyntax.TokenOBrace:
				f.items, f.first = true, true
			case hclsyntax.TokenOQuote, hclsyntax.TokenOHeredoc:
				f.template = true
			case hclsyntax.TokenTemplateControl:
				f.control = true
			}
			stack = append(stack, f)
			depth++
		case hclsyntax.TokenCBrace, hclsyntax.TokenCBrack, hclsyntax.TokenCParen,
			hclsyntax.TokenCQuote, hclsyntax.TokenCHeredoc, hclsyntax.TokenTemplateSeqEnd:
			// A closer that does not match leaves its level open: counting too deep is safe, and
			// such a file does not parse anyway.
			if len(stack) > 1 && closes(top.open, tok.Type) {
				closed := 1 + top.chain + top.term
				stack = stack[:len(stack)-1]
				depth -= closed
				if parent := &stack[len(stack)-1]; closed > parent.term {
					depth += closed - parent.term
					parent.term = closed
				}
			}
		case hclsyntax.TokenComma:
			endExpr(top)
		case hclsyntax.TokenNewline:
			if top.items {
				endExpr(top)
			}
		case hclsyntax.TokenPlus, hclsyntax.TokenMinus, hclsyntax.TokenStar, hclsyntax.TokenSlash,
			hclsyntax.TokenPercent, hclsyntax.TokenEqualOp, hclsyntax.TokenNotEqual,
			hclsyntax.TokenLessThan, hclsyntax.TokenLessThanEq, hclsyntax.TokenGreaterThan,
			hclsyntax.TokenGreaterThanEq, hclsyntax.TokenAnd, hclsyntax.TokenOr, hclsyntax.TokenBang,
			hclsyntax.TokenQuestion:
			top.chain++
			depth++
		}
		if depth > deepest {
			deepest, at = depth, tok.Range
			if depth > limit {
				return deepest, at
			}
		}
	}
	return deepest, at
}

// closes reports whether closer ends a level opened by open, as hclsyntax's lexer pairs them.
func closes(open, closer hclsyntax.TokenType) bool {
	switch open {
	case hclsyntax.TokenOBrace:
		return closer == hclsyntax.TokenCBrace
	case hclsyntax.TokenOBrack:
		return closer == hclsyntax.TokenCBrack
	case hclsyntax.TokenOParen:
		return closer == hclsyntax.TokenCParen
	case hclsyntax.TokenOQuote:
		return closer == hclsyntax.TokenCQuote
	case hclsyntax.TokenOHeredoc:
		return closer == hclsyntax.TokenCHeredoc
	case hclsyntax.TokenTemplateInterp, hclsyntax.TokenTemplateControl:
		return closer == hclsyntax.TokenTemplateSeqEnd
	}
	return false
}
