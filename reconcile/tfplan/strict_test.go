package tfplan

import (
	"strings"
	"testing"
)

// TestParsePlanRefusesDuplicateKeys: a plan naming a key twice (two "after" values for one
// change) is refused with the key named, not read with the last one.
func TestParsePlanRefusesDuplicateKeys(t *testing.T) {
	plan := `{"format_version":"1.2","resource_changes":[{"address":"aws_instance.web","change":` +
		`{"actions":["update"],"before":{"count":1},"after":{"count":2},"after":{"count":9}}}]}`
	_, err := ParsePlan([]byte(plan))
	if err == nil || !strings.Contains(err.Error(), `duplicate key "after" in the object at $.resource_changes[0].change`) {
		t.Fatalf("ParsePlan: %v", err)
	}
}
