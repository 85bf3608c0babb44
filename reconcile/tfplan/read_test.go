package tfplan

import (
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadPlanFixtures(t *testing.T) {
	for _, name := range []string{"create", "update", "delete", "replace", "sensitive", "drift", "modules", "kafka-scale-12", "kafka-scale-24", "empty"} {
		p, err := ReadPlanFile(filepath.Join("testdata", name+".json"))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if p.FormatVersion != "1.2" || p.TerraformVersion != "1.9.0" {
			t.Errorf("%s: format %q terraform %q", name, p.FormatVersion, p.TerraformVersion)
		}
	}
}

func TestReadPlanRefusesWhatIsNotAPlan(t *testing.T) {
	for _, tt := range []struct{ name, doc, want string }{
		{"empty", "  \n", "empty"},
		{"truncated", `{"format_version": "1.2", "resource_changes": [`, "not JSON"},
		{"garbage", "plan: yes", "not JSON"},
		{"array", `[1, 2]`, "want a JSON object"},
		{"no format", `{"resource_changes": []}`, "no format_version"},
		{"state", `{"format_version": "1.0", "values": {"root_module": {}}}`, "Terraform state, not a plan"},
		{"state without format", `{"values": {"root_module": {}}}`, "Terraform state, not a plan"},
		{"major 2", `{"format_version": "2.0", "terraform_version": "2.0.0"}`, `unsupported plan format_version "2.0" (from terraform 2.0.0)`},
		{"not a version", `{"format_version": "latest"}`, `format_version "latest" is not a version`},
		{"format type", `{"format_version": 1.2}`, "format_version is JSON number, want string"},
		{"changes type", `{"format_version": "1.2", "resource_changes": {"a": 1}}`, "resource_changes"},
		{"actions type", `{"format_version": "1.2", "resource_changes": [{"address": "a.b", "change": {"actions": "update"}}]}`, "not a Terraform plan"},
	} {
		_, err := ParsePlan([]byte(tt.doc))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want it to say %q", tt.name, err, tt.want)
		}
	}
	if _, err := ReadPlanFile(filepath.Join("testdata", "no-such-plan.json")); err == nil || !strings.Contains(err.Error(), "no-such-plan.json: no such file") {
		t.Errorf("missing file: %v", err)
	}
	if _, err := ReadPlanFile("testdata"); err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("directory: %v", err)
	}
	if _, err := ReadPlanFile(filepath.Join("testdata", "malformed.json")); err == nil || !strings.Contains(err.Error(), "malformed.json: not JSON") {
		t.Errorf("malformed.json: %v", err)
	}
}

// TestReadPlanIsBounded: a document over MaxPlanSize is refused without being decoded, whatever
// it holds.
func TestReadPlanIsBounded(t *testing.T) {
	r := io.MultiReader(strings.NewReader(`{"format_version": "1.2", "x": "`), endless{})
	if _, err := ReadPlan(r); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "larger than 64 MiB") {
		t.Fatalf("err = %v, want ErrTooLarge", err)
	}
	if _, err := ParsePlan(make([]byte, MaxPlanSize+1)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("ParsePlan: err = %v", err)
	}
}

// endless is an io.Reader of spaces that never ends.
type endless struct{}

func (endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = ' '
	}
	return len(p), nil
}
