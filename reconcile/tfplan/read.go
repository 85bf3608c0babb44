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

// probe is what ParsePlan looks at before decoding the whole plan.
type probe struct {
	FormatVersion    *string         `json:"format_version"`
	TerraformVersion string          `json:"terraform_version"`
	Values           json.RawMessage `json:"values"`
	PlannedValues    json.RawMessage `json:"planned_values"`
	ResourceChanges  json.RawMessage `json:"resource_changes"`
}

// ParsePlan decodes and checks a plan document. Numbers are kept exact (json.Number).
func ParsePlan(data []byte) (*tfjson.Plan, error) {
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
	// A syntax error is left to the decoding below, which says where it is.
	if err := core.UniqueKeys(trimmed); errors.Is(err, core.ErrDuplicateKey) {
		return nil, fmt.Errorf("not a plan Parley reads: %w", err)
	}
	var pr probe
	if err := json.Unmarshal(trimmed, &pr); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, fmt.Errorf("not a Terraform plan: %s is JSON %s, want %s", orTop(te.Field), te.Value, te.Type)
		}
		return nil, notJSON(data, err)
	}
	if pr.FormatVersion == nil {
		if len(pr.Values) > 0 && len(pr.PlannedValues) == 0 && len(pr.ResourceChanges) == 0 {
			return nil, errors.New("this is a Terraform state, not a plan: run terraform show -json on a plan file (terraform plan -out=PLANFILE)")
		}
		return nil, errors.New("not a Terraform plan: no format_version (want the JSON of terraform show -json PLANFILE)")
	}
	major, err := formatMajor(*pr.FormatVersion)
	if err != nil {
		return nil, err
	}
	supported := false
	for _, m := range SupportedMajor {
		supported = supported || m == major
	}
	if !supported {
		return nil, fmt.Errorf("unsupported plan format_version %q (from terraform %s): parley reads format 0.x and 1.x",
			*pr.FormatVersion, orUnknown(pr.TerraformVersion))
	}
	if len(pr.Values) > 0 && len(pr.PlannedValues) == 0 && len(pr.ResourceChanges) == 0 {
		return nil, errors.New("this is a Terraform state, not a plan: run terraform show -json on a plan file (terraform plan -out=PLANFILE)")
	}
	p := &tfjson.Plan{}
	p.UseJSONNumber(true)
	if err := json.Unmarshal(trimmed, p); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, fmt.Errorf("not a Terraform plan: %s is JSON %s, want %s", orTop(te.Field), te.Value, te.Type)
		}
		return nil, fmt.Errorf("not a Terraform plan: %w", err)
	}
	return p, nil
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
