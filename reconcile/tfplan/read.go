package tfplan

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	tfjson "github.com/hashicorp/terraform-json"

	"github.com/parleyhq/parley/core"
)

// MaxPlanSize bounds the plan document ReadPlan accepts (64 MiB). A plan of a few thousand
// resources is a few MiB; anything larger is refused before it is decoded.
const MaxPlanSize = 64 << 20

// ErrTooLarge is returned for a plan document larger than MaxPlanSize.
var ErrTooLarge = fmt.Errorf("the plan is larger than %d MiB", MaxPlanSize>>20)

// MaxPlanResources bounds the resources a plan lists (resource_changes and resource_drift
// entries together, no-ops included) that ParsePlan reads. Past it the plan is refused once a byte
// scan has counted one too many, before any resource is decoded: a 66 MB plan of 850,000 resources
// took 13.4 s of CPU and one of 300,000 peaked at 1.2 GiB. Twenty thousand is more than the
// largest workspaces plan.
const MaxPlanResources = 20_000

// ErrTooManyResources is returned for a plan listing more than MaxPlanResources resources.
var ErrTooManyResources = fmt.Errorf("the plan lists more than %d resources (resource_changes and resource_drift), the most Parley judges in one plan; not judged", MaxPlanResources)

// SupportedMajor lists the plan format_version majors Extract understands: 0.x (Terraform 0.12 to
// 0.15) and 1.x (Terraform 1.0 and later).
var SupportedMajor = []int{0, 1}

// ReadPlanFile reads the plan document at path. Errors name the file.
func ReadPlanFile(path string) (*tfjson.Plan, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("plan %s: no such file (write it with: terraform show -json PLANFILE > %s)", path, path)
		}
		return nil, fmt.Errorf("plan %s: %w", path, err)
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.IsDir() {
		return nil, fmt.Errorf("plan %s: is a directory, not the JSON of terraform show -json PLANFILE", path)
	}
	p, err := ReadPlan(f)
	if err != nil {
		return nil, fmt.Errorf("plan %s: %w", path, err)
	}
	return p, nil
}

// ReadPlan reads a plan document from r, at most MaxPlanSize bytes of it.
func ReadPlan(r io.Reader) (*tfjson.Plan, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxPlanSize+1))
	if err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	return ParsePlan(data)
}

// ParsePlan decodes and checks a plan document. Numbers are kept exact (json.Number).
func ParsePlan(data []byte) (*tfjson.Plan, error) {
	return parsePlan(data, (*planDecoder).resources)
}

// parsePlan is ParsePlan reading the resource arrays with readResources: ParsePlan counts each
// array before decoding it (planDecoder.resources); the tests compare it with the decoding alone
// (planDecoder.decodeResources), which is how plans were read before the count.
func parsePlan(data []byte, readResources func(pd *planDecoder, key string, rest []byte) (int, error)) (*tfjson.Plan, error) {
	if len(data) > MaxPlanSize {
		return nil, ErrTooLarge
	}
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return nil, errors.New("empty: want the JSON of terraform show -json PLANFILE")
	}
	if trimmed[0] != '{' {
		if !json.Valid(trimmed) {
			return nil, notJSON(data, json.Unmarshal(trimmed, new(any)))
		}
		return nil, errors.New("not a Terraform plan: want a JSON object, as terraform show -json PLANFILE prints")
	}
	// Decoding first: it refuses a plan past MaxPlanResources as soon as a byte scan counts one
	// too many, before any resource is decoded and before the rest of the document is read at
	// all. A 33 MB plan of 300,000 resources sent back to back with a valid agent token had its
	// syntax checked whole before it was refused at its 20,001st resource, more than half of what
	// refusing it cost parley serve; then its first 20,000 resources decoded, 72 ms a plan. So a
	// plan past the budget is refused for its size whatever its resources hold, ill-typed or not
	// JSON inside (planDecoder.resources says why that answer is the right one). The byte scans stop at the end of the document whatever it holds, and what decodePlan keeps is
	// read by encoding/json, so on a document that is not JSON it returns an error (or a plan that
	// is thrown away below), never reads past it.
	p, seen, err := decodePlan(trimmed, readResources)
	if errors.Is(err, ErrTooManyResources) {
		return nil, err
	}
	// Checking the syntax allocates nothing; the plan decodePlan read is trusted only once the
	// whole document is JSON, and a document that is not is named as such first.
	if !json.Valid(trimmed) {
		return nil, notJSON(data, json.Unmarshal(trimmed, &struct{}{}))
	}
	if err != nil {
		return nil, err
	}
	if err := core.UniqueKeys(trimmed); errors.Is(err, core.ErrDuplicateKey) {
		return nil, fmt.Errorf("not a plan Parley reads: %w", err)
	}
	if !seen["format_version"] {
		if seen["values"] && !seen["planned_values"] && !seen["resource_changes"] {
			return nil, errors.New("this is a Terraform state, not a plan: run terraform show -json on a plan file (terraform plan -out=PLANFILE)")
		}
		return nil, errors.New("not a Terraform plan: no format_version (want the JSON of terraform show -json PLANFILE)")
	}
	major, err := formatMajor(p.FormatVersion)
	if err != nil {
		return nil, err
	}
	supported := false
	for _, m := range SupportedMajor {
		supported = supported || m == major
	}
	if !supported {
		return nil, fmt.Errorf("unsupported plan format_version %q (from terraform %s): parley reads format 0.x and 1.x",
			p.FormatVersion, orUnknown(p.TerraformVersion))
	}
	if seen["values"] && !seen["planned_values"] && !seen["resource_changes"] {
		return nil, errors.New("this is a Terraform state, not a plan: run terraform show -json on a plan file (terraform plan -out=PLANFILE)")
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("not a Terraform plan: %w", err)
	}
	return p, nil
}

// decodePlan reads what Extract uses of a plan (its versions and time, configuration,
// resource_changes and resource_drift), one resource at a time, counting them against
// MaxPlanResources and keeping only those that change something (no-ops and reads are left out),
// and steps over the rest (planned_values, prior_state: most of a plan's bytes)
// without building it: memory grows with the resources read, not with the document. What it
// returns is trusted only once doc is known to be JSON (ParsePlan checks after it, unless it
// refused the plan for its resources); on bytes that are not JSON it returns an error or a plan
// ParsePlan throws away, never reads past doc's end. seen says which top-level keys doc has.
// readResources reads resource_changes and resource_drift (parsePlan says why it is a parameter).
func decodePlan(doc []byte, readResources func(pd *planDecoder, key string, rest []byte) (int, error)) (*tfjson.Plan, map[string]bool, error) {
	pd := &planDecoder{p: &tfjson.Plan{}}
	seen := map[string]bool{}
	err := eachMember(doc, func(key string, rest []byte) (int, error) {
		seen[key] = true
		if key == "resource_changes" || key == "resource_drift" {
			return readResources(pd, key, rest)
		}
		end := valueEnd(rest, 0)
		return end, pd.member(key, rest[:end])
	})
	if err != nil {
		return nil, nil, err
	}
	return pd.p, seen, nil
}

// planDecoder is the plan decodePlan builds and the resources it has counted, in
// resource_changes and resource_drift together (the budget is one for both).
type planDecoder struct {
	p     *tfjson.Plan
	count int
}

// member decodes the top-level member key, whose value is raw, into the plan.
func (pd *planDecoder) member(key string, raw []byte) error {
	switch key {
	case "format_version":
		return decodeInto(key, raw, &pd.p.FormatVersion)
	case "terraform_version":
		return decodeInto(key, raw, &pd.p.TerraformVersion)
	case "timestamp":
		return decodeInto(key, raw, &pd.p.Timestamp)
	case "configuration":
		var c tfjson.Config
		if err := decodeInto(key, raw, &c); err != nil {
			return err
		}
		pd.p.Config = &c
	}
	return nil
}

// resources reads the array of resource changes at the start of rest and returns how many bytes
// of rest it took. It counts the array's elements first, with a byte scan that neither decodes nor
// allocates (countElements), up to the one past the budget left: a plan past MaxPlanResources is
// refused before any of its resources is decoded, and the rest of the array is not so much as
// stepped over. bench/attack's bigplan (300,000 resources, 33 MB, posted back to back with a valid
// agent token) had its first 20,000 resources decoded into tfjson.ResourceChange before it was
// refused, 72 ms a plan; before that, the whole array was scanned for its end first.
//
// So a plan over the budget is refused for its size whatever its first resources hold: one whose
// resources are ill-typed, or not JSON inside, is answered ErrTooManyResources, not the type or
// syntax error that decoding it would find. Either answer refuses it; this one is the one that
// costs no decoding, and it is true of the bytes (they hold that many elements). Within the
// budget nothing changes: the array is decoded and any error in it named as before.
func (pd *planDecoder) resources(key string, rest []byte) (int, error) {
	if _, over := countElements(rest, MaxPlanResources-pd.count); over {
		return 0, ErrTooManyResources
	}
	return pd.decodeResources(key, rest)
}

// decodeResources decodes the array of resource changes at the start of rest one element at a
// time, and returns how many bytes of rest it took. It counts the elements again as it decodes
// them: in bytes that are not JSON, countElements may stop short (at the first byte that cannot
// start or follow an element) where the decoder goes on, and the budget still bounds what is built.
func (pd *planDecoder) decodeResources(key string, rest []byte) (int, error) {
	if len(rest) == 0 || rest[0] != '[' {
		end := valueEnd(rest, 0)
		switch {
		case string(rest[:end]) == "null":
			return end, nil
		case end == 0:
			return 0, fmt.Errorf("not a Terraform plan: %s has no value", key)
		}
		return 0, fmt.Errorf("not a Terraform plan: %s is JSON %s, want an array", key, jsonKind(rest[0]))
	}
	// One decoder for the array, reading an element at a time: its buffer holds one resource,
	// not the array.
	var list []*tfjson.ResourceChange
	d := json.NewDecoder(bytes.NewReader(rest))
	d.UseNumber() // numbers exact, as tfjson's UseJSONNumber
	if _, err := d.Token(); err != nil {
		return 0, typeErr(key, err)
	}
	for d.More() {
		if pd.count++; pd.count > MaxPlanResources {
			return 0, ErrTooManyResources
		}
		var rc tfjson.ResourceChange
		if err := d.Decode(&rc); err != nil {
			return 0, typeErr(key, err)
		}
		if c := rc.Change; c != nil && (c.Actions.NoOp() || c.Actions.Read()) {
			// Extract judges neither; a no-op still carries the whole object twice
			// (before and after), and most of a large plan's resources are no-ops.
			continue
		}
		list = append(list, &rc)
	}
	if _, err := d.Token(); err != nil { // the closing ]
		return 0, typeErr(key, err)
	}
	if key == "resource_changes" {
		pd.p.ResourceChanges = list
	} else {
		pd.p.ResourceDrift = list
	}
	return int(d.InputOffset()), nil
}

// decodeInto decodes raw, the value of the top-level member key, into v.
func decodeInto(key string, raw []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber() // numbers exact, as tfjson's UseJSONNumber
	return typeErr(key, d.Decode(v))
}

// typeErr names the member key in a decoding error.
func typeErr(key string, err error) error {
	if err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			field := key
			if te.Field != "" {
				field += "." + te.Field
			}
			return fmt.Errorf("not a Terraform plan: %s is JSON %s, want %s", field, te.Value, te.Type)
		}
		return fmt.Errorf("not a Terraform plan: %s: %w", key, err)
	}
	return nil
}

// eachMember calls fn with each member of the JSON object doc: its key and the bytes from its
// value's start to doc's end; fn returns the length of the value. On a document that is not JSON
// it stops at its end with an error (or calls fn with bytes that are not a value, which
// encoding/json refuses); it never reads past the end, and every member moves it on, so it ends.
func eachMember(doc []byte, fn func(key string, rest []byte) (int, error)) error {
	truncated := errors.New("not JSON: the object does not end")
	i := skipSpace(doc, 0) + 1 // past '{'
	for {
		if i = skipSpace(doc, i); i >= len(doc) {
			return truncated
		}
		if doc[i] == '}' {
			return nil
		}
		if doc[i] == ',' {
			i = skipSpace(doc, i+1)
		}
		end := valueEnd(doc, i)
		var key string
		if err := json.Unmarshal(doc[i:end], &key); err != nil {
			return fmt.Errorf("not a Terraform plan: key at byte %d: %w", i, err)
		}
		if i = skipSpace(doc, end) + 1; i > len(doc) { // past ':'
			return truncated
		}
		i = skipSpace(doc, i)
		n, err := fn(key, doc[i:])
		if err != nil {
			return err
		}
		i += n
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// countElements counts the elements of the JSON array at the start of b, stepping over each with
// valueEnd, and stops as soon as it has counted more than limit: over says it did. It decodes
// nothing and allocates nothing. In valid JSON the count is exact: valueEnd steps over exactly one
// value, and only a comma and JSON's whitespace lie between two. In bytes that are not JSON it
// ends without a verdict (over false) at the end of b, at a byte no JSON value starts with where an
// element must be (a second comma, a stray brace), or at anything but a comma after an element:
// it never reads past b's end, each element it counts moves it on by at least one byte plus its
// comma, and what is not JSON is left to the decoder to name. It counts, as the decoder's More
// does, an element that only starts, so it agrees with the decoder on where the budget is passed.
func countElements(b []byte, limit int) (n int, over bool) {
	if len(b) == 0 || b[0] != '[' {
		return 0, false
	}
	for i := skipSpace(b, 1); i < len(b) && startsValue(b[i]); {
		if n++; n > limit {
			return n, true
		}
		// valueEnd moves past b[i]: a string, object or array takes at least its first byte, a
		// number or literal runs to the next delimiter, and b[i] is none.
		if i = skipSpace(b, valueEnd(b, i)); i >= len(b) || b[i] != ',' {
			return n, false // the array's end, or bytes that are not JSON
		}
		i = skipSpace(b, i+1)
	}
	return n, false
}

// startsValue says whether a JSON value can start with c.
func startsValue(c byte) bool {
	return strings.IndexByte(`{["-0123456789tfn`, c) >= 0
}

// valueEnd is the index just past the JSON value that starts at b[i], in valid JSON: a byte scan
// that only tracks strings and nesting, so stepping over a value costs no allocation. In bytes
// that are not JSON it returns an index no further than len(b).
func valueEnd(b []byte, i int) int {
	depth := 0
	for ; i < len(b); i++ {
		switch b[i] {
		case '"':
			for i++; i < len(b) && b[i] != '"'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
			if i >= len(b) {
				return len(b) // a string that does not end
			}
			if depth == 0 {
				return i + 1
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth--; depth == 0 {
				return i + 1
			}
		default:
			if depth == 0 { // a number, true, false or null: up to the next delimiter
				for i < len(b) && !strings.ContainsRune(",}] \t\n\r", rune(b[i])) {
					i++
				}
				return i
			}
		}
	}
	return i
}

// jsonKind names the JSON type of a value by its first byte, for errors.
func jsonKind(c byte) string {
	switch c {
	case '{':
		return "object"
	case '"':
		return "string"
	case 't', 'f':
		return "bool"
	case 'n':
		return "null"
	}
	return "number"
}

// formatMajor reads the major number of a format_version such as "1.2".
func formatMajor(v string) (int, error) {
	head, _, _ := strings.Cut(v, ".")
	n, err := strconv.Atoi(head)
	if err != nil || n < 0 || head == "" || (len(head) > 1 && head[0] == '0') {
		return 0, fmt.Errorf("format_version %q is not a version such as 1.2", clip(v, 40))
	}
	return n, nil
}

// notJSON names where a document stops being JSON.
func notJSON(data []byte, err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		line := 1 + bytes.Count(data[:min(int(se.Offset), len(data))], []byte("\n"))
		return fmt.Errorf("not JSON: %v (line %d, byte %d)", se, line, se.Offset)
	}
	return fmt.Errorf("not JSON: %w", err)
}

func orTop(field string) string {
	if field == "" {
		return "the document"
	}
	return field
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return clip(s, 40)
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
