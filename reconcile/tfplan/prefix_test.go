package tfplan

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// TestPrefixOver: a prefix proves a plan over the budget once it holds the first byte of the
// resource one past MaxPlanResources, and not a byte before; a plan at the budget is never over,
// whatever prefix is asked; resource_changes and resource_drift share the budget; and a prefix is
// never over where ParsePlan refuses the whole for something before the resources that pass
// the budget (an ill-typed format_version, an ill-typed resource in an earlier array, a key
// that is not JSON), nor for a document that is not an object.
func TestPrefixOver(t *testing.T) {
	over := attackPlan(MaxPlanResources + 1)
	last := bytes.LastIndex(over, []byte(`{"address":"a.b20000"`))
	for _, tt := range []struct {
		name string
		doc  []byte
		cut  int
		want bool
	}{
		{"the whole plan over the budget", over, len(over), true},
		{"up to the first byte of the resource past the budget", over, last + 1, true},
		{"up to the comma before it", over, last, false},
		{"the first megabyte", over, 1 << 20, false},
		{"the whole plan at the budget", attackPlan(MaxPlanResources), -1, false},
		{"a plan at the budget with its resources' objects left open", []byte(strings.TrimSuffix(string(attackPlan(MaxPlanResources)), "]}") + `,`), -1, false},
		{"over across both arrays", []byte(`{"resource_changes":[` + elems(15_000, `{}`) + `],"resource_drift":[` + elems(5_001, `{}`) + `]}`), -1, true},
		{"within across both arrays", []byte(`{"resource_changes":[` + elems(15_000, `{}`) + `],"resource_drift":[` + elems(5_000, `{}`) + `]}`), -1, false},
		{"over, after leading Unicode white space", []byte("\u00a0\v " + string(over)), -1, true},
		{"over, after a format_version that is a number", []byte(`{"format_version":1,` + string(over[1:])), -1, false},
		{"over, after an ill-typed resource in an earlier array", []byte(`{"resource_drift":[{"address":1}],` + string(over[1:])), -1, false},
		{"over, after a key that is not JSON", []byte(`{"a\x": 1,` + string(over[1:])), -1, false},
		{"over, after the object's end", []byte(`{"format_version":"1.2"}` + string(over[1:])), -1, false},
		{"an array, not an object", []byte(`[` + string(over[1:])), -1, false},
	} {
		cut := tt.cut
		if cut < 0 {
			cut = len(tt.doc)
		}
		if got := PrefixOver(tt.doc[:cut]); got != tt.want {
			t.Errorf("%s: over %v, want %v", tt.name, got, tt.want)
		}
		// What PrefixOver says of a prefix is what ParsePlan says of the whole.
		_, err := ParsePlan(tt.doc)
		if tt.want && !errors.Is(err, ErrTooManyResources) {
			t.Errorf("%s: over, but ParsePlan says %v", tt.name, err)
		}
	}
}

// TestPrefixScanAsTheBodyArrives: a PrefixScan asked at each doubling of a growing prefix
// answers as PrefixOver does of each, and keeps its answer; on bench/attack's bigplan body (300,000
// resources) it is over by the first doubling past its 20,001st resource, the rest unread.
func TestPrefixScanAsTheBodyArrives(t *testing.T) {
	doc := attackPlan(300_000)
	proof := bytes.Index(doc, []byte(`{"address":"a.b20000"`)) + 1
	var s PrefixScan
	at := 0
	for k := 1 << 10; ; k *= 2 {
		k = min(k, len(doc))
		got := s.Over(doc[:k])
		if got != PrefixOver(doc[:k]) {
			t.Fatalf("at %d bytes the scan says %v, PrefixOver %v", k, got, !got)
		}
		if got {
			at = k
			break
		}
		if k == len(doc) {
			t.Fatal("never over")
		}
	}
	if at < proof || at >= 2*proof {
		t.Fatalf("over only at %d bytes of %d", at, len(doc))
	}
	if !s.Over(doc[:at+1]) {
		t.Fatal("the answer did not hold")
	}
}

// elems is n copies of elem, comma-separated.
func elems(n int, elem string) string {
	return strings.TrimSuffix(strings.Repeat(elem+",", n), ",")
}

// FuzzPlanPrefix: for any document (head, prefix×n, middle, suffix×n, tail, so the fuzzer reaches
// the budget) and any cut points, a prefix said to be over the budget, by PrefixOver or by a
// PrefixScan asked at growing cuts, is one of a document ParsePlan refuses with
// ErrTooManyResources: a plan ParsePlan would read, or refuse for something else, is never
// refused for its resources as it arrives. A PrefixScan's answer, once over, holds, and on JSON it
// is a new scan's of the same prefix. And the whole of a
// JSON document ParsePlan refuses past the budget is over: the scan misses no plan the budget
// refuses.
func FuzzPlanPrefix(f *testing.F) {
	const head, tail = `{"format_version":"1.2","resource_changes":[`, `]}`
	f.Add([]byte(head), []byte(`{"address":"a.b"},`), []byte(`{}`), []byte(``), []byte(tail), uint32(20_000), uint32(7))
	f.Add([]byte(head), []byte(`{},`), []byte(`{}],"resource_drift":[{}`), []byte(`,{"address":1}`), []byte(tail), uint32(10_000), uint32(1<<20))
	f.Add([]byte(`{"resource_drift":[{"address":1}],"resource_changes":[`), []byte(`{"s":"],[\""},`), []byte(`{}`), []byte(``), []byte(tail), uint32(MaxPlanResources), uint32(3))
	f.Add([]byte(`{"format_version":1,"resource_changes":[`), []byte(`1,`), []byte(`2`), []byte(``), []byte(tail), uint32(MaxPlanResources+5), uint32(99))
	f.Fuzz(func(t *testing.T, head, prefix, middle, suffix, tail []byte, n, cut uint32) {
		// 512 KiB reach the budget with elements up to 25 bytes, and keep the fuzzer quick.
		limit := 512<<10 - len(head) - len(middle) - len(tail)
		if unit := len(prefix) + len(suffix); unit > 0 && int(n) > limit/unit {
			n = uint32(max(limit, 0) / unit)
		}
		doc := []byte(string(head) + strings.Repeat(string(prefix), int(n)) + string(middle) + strings.Repeat(string(suffix), int(n)) + string(tail))
		if len(doc) > 512<<10 {
			return
		}
		_, err := ParsePlan(doc)
		refused, valid := errors.Is(err, ErrTooManyResources), json.Valid(doc)
		var s PrefixScan
		said := false
		k := int(cut) % (len(doc) + 1)
		for {
			got := s.Over(doc[:k])
			if said && !got {
				t.Fatalf("over, then not over at %d bytes", k)
			}
			said = got
			if valid && got != PrefixOver(doc[:k]) {
				t.Fatalf("at %d bytes a scan kept from before says over %v, a new one %v", k, got, !got)
			}
			if (got || PrefixOver(doc[:k])) && !refused {
				t.Fatalf("the first %d of %d bytes over the budget, but ParsePlan says %v", k, len(doc), err)
			}
			if k == len(doc) {
				break
			}
			k = min(max(2*k, 1), len(doc))
		}
		if refused && valid && !said {
			t.Fatalf("ParsePlan refuses this JSON past the budget, the scan of it whole does not")
		}
	})
}
