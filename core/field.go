package core

import (
	"fmt"
	"path"
	"strings"
	"unicode/utf8"
)

// Scheme says what kind of infrastructure a Field lives in.
type Scheme string

// Schemes.
const (
	SchemeKubernetes Scheme = "k8s"
	SchemeTerraform  Scheme = "tf"
)

// CoreGroup is how the text form spells Kubernetes' legacy core API group (the empty group).
const CoreGroup = "core"

// Field is the address of one value in infrastructure code.
//
// Canonical text form (see docs/addresses.md):
//
//	k8s:<group>/<Kind>/<namespace>/<name>#<pointer>   namespaced object
//	k8s:<group>/<Kind>/<name>#<pointer>               cluster-scoped object
//	tf:<module dir>//<resource address>#<pointer>     Terraform resource attribute
//
// e.g. k8s:apps/Deployment/prod/web#/spec/replicas,
// k8s:core/ConfigMap/prod/settings#/data/LOG_LEVEL and
// tf:infra/kafka//aws_autoscaling_group.consumer#/desired_capacity.
//
// The API version is not part of a Kubernetes object's identity. Path is an RFC 6901 JSON pointer
// ("" addresses the whole object or resource). In the text form the bytes %, #, *, =, whitespace and
// control characters are percent-encoded everywhere, and / too inside identity segments, so that an
// address is one token in a trailer or command and * is free to mean "any" in a pattern.
type Field struct {
	Scheme Scheme

	// Kubernetes identity. Group is "" for the core group.
	Group, Kind, Namespace, Name string

	// Terraform identity. Module is the module directory relative to the repository root ("." for the
	// root); Resource is the resource address within it, such as aws_instance.web, aws_instance.web[0],
	// aws_instance.web["blue"] or data.aws_ami.base.
	Module, Resource string

	// Path is an RFC 6901 JSON pointer into the object or the resource's attributes.
	Path string
}

// K8sField returns the address of a Kubernetes object field.
func K8sField(group, kind, namespace, name, pointer string) Field {
	return Field{Scheme: SchemeKubernetes, Group: group, Kind: kind, Namespace: namespace, Name: name, Path: pointer}
}

// TFField returns the address of a Terraform resource attribute.
func TFField(module, resource, pointer string) Field {
	return Field{Scheme: SchemeTerraform, Module: cleanModule(module), Resource: resource, Path: pointer}
}

// Object returns the address of the object or resource holding f (f with an empty Path).
func (f Field) Object() Field { f.Path = ""; return f }

// IsZero reports whether f is the zero Field.
func (f Field) IsZero() bool { return f == Field{} }

// Child returns the field below f reached by the given unescaped pointer tokens.
func (f Field) Child(tokens ...string) Field {
	var b strings.Builder
	b.WriteString(f.Path)
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(EscapePointerToken(t))
	}
	f.Path = b.String()
	return f
}

// PointerTokens splits f.Path into unescaped RFC 6901 reference tokens.
func (f Field) PointerTokens() []string { return SplitPointer(f.Path) }

// String returns the canonical text form.
func (f Field) String() string {
	var b strings.Builder
	// Room for the text when nothing needs escaping (the usual case): growing the builder byte by
	// byte from empty made each call five allocations, and the drift state calls this for every
	// field it writes.
	b.Grow(len("k8s:") + len(f.Group) + len(CoreGroup) + len(f.Kind) + len(f.Namespace) + len(f.Name) +
		len(f.Module) + len(f.Resource) + len(f.Path) + 5)
	switch f.Scheme {
	case SchemeKubernetes:
		b.WriteString("k8s:")
		g := f.Group
		if g == "" {
			g = CoreGroup
		}
		writeEscaped(&b, g, true)
		b.WriteByte('/')
		writeEscaped(&b, f.Kind, true)
		b.WriteByte('/')
		if f.Namespace != "" {
			writeEscaped(&b, f.Namespace, true)
			b.WriteByte('/')
		}
		writeEscaped(&b, f.Name, true)
	case SchemeTerraform:
		b.WriteString("tf:")
		writeEscaped(&b, cleanModule(f.Module), false)
		b.WriteString("//")
		writeEscaped(&b, f.Resource, false)
	default:
		return fmt.Sprintf("invalid-field:%q", f.Path)
	}
	if f.Path != "" {
		b.WriteByte('#')
		writeEscaped(&b, f.Path, false)
	}
	return b.String()
}

// MarshalText encodes the canonical text form; the zero Field encodes as "".
func (f Field) MarshalText() ([]byte, error) {
	switch {
	case f.IsZero():
		return nil, nil
	case f.Scheme != SchemeKubernetes && f.Scheme != SchemeTerraform:
		return nil, fmt.Errorf("field %+v has no valid scheme", f)
	}
	return []byte(f.String()), nil
}

// UnmarshalText parses the canonical text form; "" decodes to the zero Field.
func (f *Field) UnmarshalText(b []byte) error {
	if len(b) == 0 {
		*f = Field{}
		return nil
	}
	p, err := ParseField(string(b))
	if err != nil {
		return err
	}
	*f = p
	return nil
}

// ParseField parses a field address in canonical text form. Wildcards are not allowed: use
// ParseFieldPattern for globs.
func ParseField(s string) (Field, error) {
	p, err := parseAddress(s, false)
	if err != nil {
		return Field{}, err
	}
	return p.Field, nil
}

// FieldPattern is a field address that may hold wildcards: * matches any run of characters within
// one segment (one identity part, one module directory, one pointer token; in a resource address any
// run of characters), and ** as a whole pointer token or module directory matches any number of them.
// Literal * is written %2A.
type FieldPattern struct {
	Field // the pattern's parts, still escaped where they carry wildcards
	text  string
}

// ParseFieldPattern parses a field pattern, such as k8s:apps/Deployment/*/*#/spec/replicas or
// tf:**//aws_autoscaling_group.*#/desired_capacity. A pattern without # matches every field of the
// objects it names.
func ParseFieldPattern(s string) (FieldPattern, error) {
	p, err := parseAddress(s, true)
	if err != nil {
		return FieldPattern{}, err
	}
	return p, nil
}

// MustFieldPattern is ParseFieldPattern for patterns written in code; it panics on a bad pattern.
func MustFieldPattern(s string) FieldPattern {
	p, err := ParseFieldPattern(s)
	if err != nil {
		panic(err)
	}
	return p
}

// String returns the pattern as written (canonicalised).
func (p FieldPattern) String() string { return p.text }

// MarshalText encodes the pattern.
func (p FieldPattern) MarshalText() ([]byte, error) { return []byte(p.text), nil }

// UnmarshalText parses a pattern.
func (p *FieldPattern) UnmarshalText(b []byte) error {
	q, err := ParseFieldPattern(string(b))
	if err != nil {
		return err
	}
	*p = q
	return nil
}

// Match reports whether f is matched by the pattern.
func (p FieldPattern) Match(f Field) bool { return p.MatchObject(f) && p.MatchPath(f.Path) }

// MatchObject reports whether the object holding f (its identity, ignoring the pointer) is matched by
// the pattern's object part. Callers that test many fields of one object cache this and then call
// MatchPath: Match(f) == MatchObject(f) && MatchPath(f.Path). Neither allocates.
func (p FieldPattern) MatchObject(f Field) bool {
	if p.Scheme != f.Scheme {
		return false
	}
	switch p.Scheme {
	case SchemeKubernetes:
		fg := f.Group
		if fg == "" {
			fg = CoreGroup
		}
		if !segMatch(p.Group, fg) || !segMatch(p.Kind, f.Kind) || !segMatch(p.Name, f.Name) {
			return false
		}
		return (p.Namespace == "") == (f.Namespace == "") && segMatch(p.Namespace, f.Namespace)
	case SchemeTerraform:
		fm := f.Module
		if fm == "" {
			fm = "."
		}
		pm, vm := p.Module, fm
		if pm == "." {
			pm = ""
		}
		if vm == "." {
			vm = ""
		}
		return seqMatch(pm, vm) && segMatch(p.Resource, f.Resource)
	}
	return false
}

// MatchPath reports whether a field's pointer is matched by the pattern's pointer part.
func (p FieldPattern) MatchPath(pointer string) bool {
	if p.Path == "" && !strings.Contains(p.text, "#") {
		return true
	}
	if hasEmptyToken(p.Path) || hasEmptyToken(pointer) {
		// Empty tokens ("/a//b", "/") cannot be told from no tokens without splitting.
		return tokensMatch(escapedTokens(p.Path), escapedTokens(pointer))
	}
	pp, vp := p.Path, pointer
	if pp != "" {
		pp = pp[1:]
	} else if vp != "" {
		return false
	}
	if vp != "" {
		vp = vp[1:]
	} else {
		return pp == "" || pp == "**"
	}
	return seqMatch(pp, vp)
}

func hasEmptyToken(ptr string) bool {
	return ptr == "/" || strings.Contains(ptr, "//") || (len(ptr) > 1 && ptr[len(ptr)-1] == '/')
}

// seqMatch is tokensMatch over /-separated token sequences held as strings ("" is no tokens), without
// splitting them.
func seqMatch(pat, val string) bool {
	if pat == "" {
		return val == ""
	}
	ptok, prest, pmore := strings.Cut(pat, "/")
	if ptok == "**" {
		if !pmore {
			return true
		}
		v := val
		for {
			if seqMatch(prest, v) {
				return true
			}
			_, next, ok := strings.Cut(v, "/")
			if !ok {
				return v != "" && seqMatch(prest, "")
			}
			v = next
		}
	}
	if val == "" {
		return false // ptok needs a token
	}
	vtok, vrest, vmore := strings.Cut(val, "/")
	if !segMatch(ptok, vtok) {
		return false
	}
	if !pmore {
		return !vmore
	}
	if !vmore {
		return seqMatch(prest, "")
	}
	return seqMatch(prest, vrest)
}

// parseAddress parses the text form into a FieldPattern. With globs=false it rejects wildcards and
// returns unescaped parts; with globs=true, parts keep their escapes (so %2A stays literal) and the
// matcher unescapes the field side.
func parseAddress(s string, globs bool) (FieldPattern, error) {
	bad := func(format string, args ...any) (FieldPattern, error) {
		return FieldPattern{}, fmt.Errorf("field address %q: %s", truncate(s, 120), fmt.Sprintf(format, args...))
	}
	scheme, rest, ok := strings.Cut(s, ":")
	if !ok {
		return bad("missing scheme (want k8s: or tf:)")
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c == 0x7f || c == '=' {
			return bad("byte %q at offset %d must be percent-encoded", c, i)
		}
		if c == '*' && !globs {
			return bad("wildcard * at offset %d is only allowed in patterns", i)
		}
	}
	id, ptr, hasPtr := strings.Cut(rest, "#")
	if hasPtr && ptr != "" && ptr[0] != '/' {
		return bad("pointer %q must start with /", ptr)
	}
	var f Field
	var err error
	dec := func(part string, what string) string {
		if err != nil {
			return ""
		}
		if globs {
			err = checkEscapes(part)
			if err == nil && strings.Contains(part, "**") && what != "pointer" && what != "module" {
				err = fmt.Errorf("** is only allowed in the pointer and the module directory")
			}
			return part
		}
		var out string
		out, err = unescape(part)
		return out
	}
	switch Scheme(scheme) {
	case SchemeKubernetes:
		segs := strings.Split(id, "/")
		if len(segs) != 3 && len(segs) != 4 {
			return bad("want k8s:<group>/<Kind>/[<namespace>/]<name>, got %d segments", len(segs))
		}
		for i, seg := range segs {
			if seg == "" {
				return bad("empty segment %d (write the core group as %q)", i+1, CoreGroup)
			}
		}
		f.Scheme = SchemeKubernetes
		f.Group = dec(segs[0], "group")
		if f.Group == CoreGroup && !globs {
			f.Group = ""
		}
		f.Kind = dec(segs[1], "kind")
		if len(segs) == 4 {
			f.Namespace = dec(segs[2], "namespace")
		}
		f.Name = dec(segs[len(segs)-1], "name")
	case SchemeTerraform:
		mod, res, ok := strings.Cut(id, "//")
		if !ok {
			return bad("want tf:<module dir>//<resource address>")
		}
		if res == "" {
			return bad("empty resource address")
		}
		if mod == "" {
			return bad("empty module directory (write the root module as .)")
		}
		f.Scheme = SchemeTerraform
		f.Module = dec(mod, "module")
		if err == nil && cleanModule(f.Module) != f.Module {
			return bad("module directory %q is not clean (want %q)", mod, cleanModule(f.Module))
		}
		if err == nil && (strings.HasPrefix(f.Module, "/") || f.Module == ".." || strings.HasPrefix(f.Module, "../")) {
			return bad("module directory %q is not inside the repository (want a path relative to its root)", mod)
		}
		f.Resource = dec(res, "resource")
	default:
		return bad("unknown scheme %q (want k8s or tf)", scheme)
	}
	f.Path = dec(ptr, "pointer")
	if err != nil {
		return bad("%v", err)
	}
	if !globs {
		if err := checkPointer(f.Path); err != nil {
			return bad("%v", err)
		}
		return FieldPattern{Field: f, text: f.String()}, nil
	}
	text := scheme + ":" + id
	if hasPtr {
		text += "#" + ptr
	}
	return FieldPattern{Field: f, text: text}, nil
}

// needsEscape reports whether b must be percent-encoded in the text form.
func needsEscape(b byte, identity bool) bool {
	return b <= ' ' || b == 0x7f || b == '%' || b == '#' || b == '*' || b == '=' || (identity && b == '/')
}

// writeEscaped writes s percent-encoded. Bytes that are not valid UTF-8 are encoded too, so the text
// form is always valid UTF-8 and survives JSON, which would replace them with U+FFFD.
func writeEscaped(b *strings.Builder, s string, identity bool) {
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		c := s[i]
		invalid := false
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r != utf8.RuneError || size != 1 {
				b.WriteString(s[i : i+size])
				i += size - 1
				continue
			}
			invalid = true
		}
		if invalid || needsEscape(c, identity) {
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
			continue
		}
		b.WriteByte(c)
	}
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

func checkEscapes(s string) error {
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			continue
		}
		if i+2 >= len(s) {
			return fmt.Errorf("truncated percent escape at %q", s[i:])
		}
		if _, ok := unhex(s[i+1]); !ok {
			return fmt.Errorf("bad percent escape %q", s[i:i+3])
		}
		if _, ok := unhex(s[i+2]); !ok {
			return fmt.Errorf("bad percent escape %q", s[i:i+3])
		}
		i += 2
	}
	return nil
}

func unescape(s string) (string, error) {
	if !strings.Contains(s, "%") {
		return s, nil
	}
	if err := checkEscapes(s); err != nil {
		return "", err
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' {
			h, _ := unhex(s[i+1])
			l, _ := unhex(s[i+2])
			b.WriteByte(h<<4 | l)
			i += 2
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String(), nil
}

// checkPointer validates RFC 6901 syntax: "" or "/"-led, with ~ only in ~0 and ~1.
func checkPointer(p string) error {
	if p == "" {
		return nil
	}
	if p[0] != '/' {
		return fmt.Errorf("pointer %q must start with /", p)
	}
	for i := 0; i < len(p); i++ {
		if p[i] == '~' && (i+1 == len(p) || (p[i+1] != '0' && p[i+1] != '1')) {
			return fmt.Errorf("pointer %q has ~ not followed by 0 or 1", p)
		}
	}
	return nil
}

// The RFC 6901 escapes, built once: a strings.Replacer builds its tables on first use, which cost
// far more than the replacing (a review whose 90,000 label keys each hold a "/" spent most of a
// second rebuilding them, one per key).
var (
	pointerEscaper   = strings.NewReplacer("~", "~0", "/", "~1")
	pointerUnescaper = strings.NewReplacer("~1", "/", "~0", "~")
)

// EscapePointerToken escapes one RFC 6901 reference token (~ as ~0, / as ~1).
func EscapePointerToken(t string) string {
	if !strings.ContainsAny(t, "~/") {
		return t
	}
	return pointerEscaper.Replace(t)
}

// SplitPointer splits an RFC 6901 pointer into unescaped reference tokens.
func SplitPointer(p string) []string {
	if p == "" {
		return nil
	}
	toks := strings.Split(p[1:], "/")
	for i, t := range toks {
		if strings.Contains(t, "~") {
			toks[i] = pointerUnescaper.Replace(t)
		}
	}
	return toks
}

// escapedTokens splits a pointer into tokens without unescaping them, so that patterns and fields
// compare in the same (escaped) alphabet.
func escapedTokens(p string) []string {
	if p == "" {
		return nil
	}
	return strings.Split(p[1:], "/")
}

func cleanModule(m string) string {
	if m == "" {
		return "."
	}
	return path.Clean(m)
}

// segMatch matches one escaped pattern segment against an unescaped value: * matches any run of
// characters; %XX in the pattern stands for that byte literally.
func segMatch(pat, val string) bool {
	if !strings.ContainsAny(pat, "*%") {
		return pat == val
	}
	// Iterative wildcard matching with backtracking to the last star (linear in practice).
	pi, vi := 0, 0
	star, mark := -1, 0
	for vi < len(val) {
		if pi < len(pat) {
			c, w := patByte(pat, pi)
			if w == 1 && pat[pi] == '*' {
				star, mark = pi, vi
				pi++
				continue
			}
			if c == val[vi] {
				pi += w
				vi++
				continue
			}
		}
		if star < 0 {
			return false
		}
		pi = star + 1
		mark++
		vi = mark
	}
	for pi < len(pat) && pat[pi] == '*' {
		pi++
	}
	return pi == len(pat)
}

// patByte returns the literal byte at pat[i] (decoding a %XX escape) and its width in pat.
func patByte(pat string, i int) (byte, int) {
	if pat[i] == '%' && i+2 < len(pat) {
		h, ok1 := unhex(pat[i+1])
		l, ok2 := unhex(pat[i+2])
		if ok1 && ok2 {
			return h<<4 | l, 3
		}
	}
	return pat[i], 1
}

// tokensMatch matches pattern tokens (which may include "**") against value tokens.
func tokensMatch(pat, val []string) bool {
	if len(pat) == 0 {
		return len(val) == 0
	}
	if pat[0] == "**" {
		for i := 0; i <= len(val); i++ {
			if tokensMatch(pat[1:], val[i:]) {
				return true
			}
		}
		return false
	}
	if len(val) == 0 || !segMatch(pat[0], val[0]) {
		return false
	}
	return tokensMatch(pat[1:], val[1:])
}
