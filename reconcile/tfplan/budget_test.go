package tfplan

import (
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// bigPlan is a plan of n resources as terraform show -json writes one: each in planned_values,
// resource_changes (every tenth updated, the rest no-ops) and prior_state.
func bigPlan(n int) []byte {
	var pv, rc, ps strings.Builder
	for i := range n {
		if i > 0 {
			pv.WriteByte(',')
			rc.WriteByte(',')
			ps.WriteByte(',')
		}
		addr := fmt.Sprintf("aws_s3_bucket.b%d", i)
		vals := fmt.Sprintf(`{"bucket":"b%d","tags":{"team":"data","env":"prod"},"versioning":[{"enabled":true}]}`, i)
		res := fmt.Sprintf(`{"address":%q,"mode":"managed","type":"aws_s3_bucket","name":"b%d","provider_name":"registry.terraform.io/hashicorp/aws","schema_version":0,"values":%s}`, addr, i, vals)
		pv.WriteString(res)
		ps.WriteString(res)
		action, after := "no-op", vals
		if i%10 == 0 {
			action, after = "update", strings.Replace(vals, `"prod"`, `"staging"`, 1)
		}
		fmt.Fprintf(&rc, `{"address":%q,"mode":"managed","type":"aws_s3_bucket","name":"b%d","provider_name":"registry.terraform.io/hashicorp/aws","change":{"actions":[%q],"before":%s,"after":%s,"after_unknown":{}}}`,
			addr, i, action, vals, after)
	}
	return []byte(`{"format_version":"1.2","terraform_version":"1.9.0","planned_values":{"root_module":{"resources":[` + pv.String() +
		`]}},"resource_changes":[` + rc.String() + `],"prior_state":{"format_version":"1.0","values":{"root_module":{"resources":[` + ps.String() +
		`]}}},"configuration":{"root_module":{}},"timestamp":"2026-11-20T10:00:00Z"}`)
}

// leanPlan is a plan of n resources and nothing else, as small as a resource can be written:
// the attack's shape (850,000 resources in 66 MB).
func leanPlan(n int) []byte {
	var rc strings.Builder
	for i := range n {
		if i > 0 {
			rc.WriteByte(',')
		}
		if i%10 == 0 {
			fmt.Fprintf(&rc, `{"address":"a.b%d","change":{"actions":["update"],"before":{"x":1},"after":{"x":2}}}`, i)
			continue
		}
		fmt.Fprintf(&rc, `{"address":"a.b%d","change":{"actions":["no-op"]}}`, i)
	}
	return []byte(`{"format_version":"1.2","terraform_version":"1.9.0","resource_changes":[` + rc.String() + `]}`)
}

// attackPlan is bench/attack's bigplan body (bench/attack/admission.go): n resources, every one
// an update, nothing else in the plan; 300,000 of them are 33 MB.
func attackPlan(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"format_version":"1.2","resource_changes":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"address":"a.b%d","mode":"managed","type":"a","name":"b%d","change":{"actions":["update"],"before":{"x":1},"after":{"x":2}}}`, i, i)
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

// TestPlanResourceBudget: a plan of more resources than MaxPlanResources is refused with the
// budget named (issue 34: 850,000 resources were accepted, 13.4 s of CPU); one at the budget is
// read and its changes extracted.
func TestPlanResourceBudget(t *testing.T) {
	if _, err := ParsePlan(leanPlan(MaxPlanResources + 1)); !errors.Is(err, ErrTooManyResources) ||
		!strings.Contains(err.Error(), "more than 20000 resources") {
		t.Fatalf("over the budget: %v", err)
	}
	p, err := ParsePlan(leanPlan(MaxPlanResources))
	if err != nil {
		t.Fatal(err)
	}
	res, err := Extract(p, Options{})
	if err != nil || len(res.Changes) != MaxPlanResources/10 {
		t.Fatalf("at the budget: %d changes, %v", len(res.Changes), err)
	}
}

// TestPlanOverTheBudgetRefusedBeforeTheRestIsRead: a plan past MaxPlanResources is refused at
// its 20,001st resource, before the rest of the document is read, its syntax included: a 33 MB
// plan sent back to back with a valid agent token had its syntax checked whole first (bench/attack's
// bigplan, more than half of what refusing it cost). Shown by a plan whose bytes after that
// resource are not JSON: before, it was refused as "not JSON"; the same bytes within the budget
// still are, and a truncated document or string is an error, never a read past its end.
func TestPlanOverTheBudgetRefusedBeforeTheRestIsRead(t *testing.T) {
	over := leanPlan(MaxPlanResources + 1)
	broken := append(over[:len(over)-2:len(over)-2], `,{"address":"a.c","change":{"actions":["update"]}} not JSON at all]}`...)
	if _, err := ParsePlan(broken); !errors.Is(err, ErrTooManyResources) {
		t.Fatalf("over the budget, the rest not JSON: %v, want ErrTooManyResources", err)
	}
	within := leanPlan(10)
	for name, doc := range map[string]string{
		"a tail that is not JSON":     string(within[:len(within)-2]) + ` not JSON at all]}`,
		"an object that does not end": `{"format_version":"1.2","resource_changes":[]`,
		"a key that does not end":     `{"format_version":"1.2","resource_cha`,
		"a string that does not end":  `{"format_version":"1.2","terraform_version":"1.9`,
		"an escape at the end":        `{"format_version":"1.2","terraform_version":"1.9\`,
		"a key and nothing after":     `{"format_version"`,
		"an empty array member":       `{"resource_changes":,"format_version":"1.2"}`,
	} {
		if _, err := ParsePlan([]byte(doc)); err == nil || !strings.HasPrefix(err.Error(), "not JSON") {
			t.Errorf("%s: %v, want it refused as not JSON", name, err)
		}
	}
}

// TestPlanOverTheBudgetRefusedBeforeAnyResourceIsDecoded: a plan past MaxPlanResources is refused
// by counting its resources' bytes, before any is decoded (issue 34: refusing bench/attack's
// bigplan decoded its first 20,000 resources, 72 ms a plan). Shown by plans whose every resource
// would fail to decode (an address that is a number, or an element that is not JSON inside):
// before, the first one's error was the answer; now a plan over the budget is refused for its
// size, and the same resources within the budget are still named for what is wrong with them.
// resource_changes and resource_drift share the one budget, the second array counted before any
// of it is decoded.
func TestPlanOverTheBudgetRefusedBeforeAnyResourceIsDecoded(t *testing.T) {
	list := func(n int, elem string) string {
		return strings.TrimSuffix(strings.Repeat(elem+",", n), ",")
	}
	const illTyped, notJSONInside = `{"address":1}`, `{"address" "a.b"}`
	for _, tt := range []struct {
		name, doc, want string
	}{
		{"over, ill-typed", `{"format_version":"1.2","resource_changes":[` + list(MaxPlanResources+1, illTyped) + `]}`, "more than 20000 resources"},
		{"within, ill-typed", `{"format_version":"1.2","resource_changes":[` + list(MaxPlanResources, illTyped) + `]}`, "resource_changes.address is JSON number, want string"},
		{"over, not JSON inside", `{"format_version":"1.2","resource_changes":[` + list(MaxPlanResources+1, notJSONInside) + `]}`, "more than 20000 resources"},
		{"within, not JSON inside", `{"format_version":"1.2","resource_changes":[` + list(MaxPlanResources, notJSONInside) + `]}`, "not JSON"},
		{"over across both arrays, the drift ill-typed", `{"format_version":"1.2","resource_changes":[` + list(15_000, `{"address":"a.b"}`) +
			`],"resource_drift":[` + list(5_001, illTyped) + `]}`, "more than 20000 resources"},
		{"within across both arrays, the drift ill-typed", `{"format_version":"1.2","resource_changes":[` + list(15_000, `{"address":"a.b"}`) +
			`],"resource_drift":[` + list(5_000, illTyped) + `]}`, "resource_drift.address is JSON number, want string"},
	} {
		_, err := ParsePlan([]byte(tt.doc))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want it to say %q", tt.name, err, tt.want)
		}
	}
}

// TestCountElementsIsExact: on any JSON array, countElements counts what encoding/json decodes,
// whatever its elements' strings hold (brackets, commas, escaped quotes), and says over exactly
// when there are more than the limit; on bytes that are not JSON it ends, within them, without
// a verdict before the limit. A plan of exactly MaxPlanResources such resources is read.
func TestCountElementsIsExact(t *testing.T) {
	for _, arr := range []string{
		`[]`, ` [ ] `, `[1]`, `[-1.5e3, 0, true,false ,null]`, `[""]`, `["]", "[", ",", "\"", "\\", "\\\"]"]`,
		`[[], [[]], {}, {"a":[1,{"b":"]}"}]}]`, "[\n\t{\"x\":\"}\"}\r\n,\n[\"\\\\\"]\n]",
	} {
		var want []json.RawMessage
		if err := json.Unmarshal([]byte(arr), &want); err != nil {
			t.Fatalf("%s: %v", arr, err)
		}
		b := []byte(strings.TrimLeft(arr, " "))
		if n, over := countElements(b, 100); n != len(want) || over {
			t.Errorf("%s: counted %d (over %v), want %d", arr, n, over, len(want))
		}
		if len(want) > 0 {
			if _, over := countElements(b, len(want)); over {
				t.Errorf("%s: over at its own length", arr)
			}
			if n, over := countElements(b, len(want)-1); !over || n != len(want) {
				t.Errorf("%s: %d not over at one less than its length", arr, n)
			}
		}
	}
	for _, bad := range []string{`[`, `[1`, `[1,`, `[,`, `[,,,,]`, `[1 2 3]`, `[}`, `["abc`, `["\`, `[{"a":[`, `[x,y,z]`, `[1,,2]`, `{"a":1}`, ``} {
		if n, over := countElements([]byte(bad), 1); over || n > 1 {
			t.Errorf("%q: counted %d, over %v: want no verdict", bad, n, over)
		}
	}
	elem := `{"address":"a.b","change":{"actions":["update"],"before":{"s":"],[\"{"},"after":{"s":"}]"}}}`
	at := `{"format_version":"1.2","resource_changes":[` + strings.TrimSuffix(strings.Repeat(elem+",", MaxPlanResources), ",") + `]}`
	if _, err := ParsePlan([]byte(at)); err != nil {
		t.Fatalf("a plan at the budget: %v", err)
	}
	if _, err := ParsePlan([]byte(strings.Replace(at, "[", "["+elem+",", 1))); !errors.Is(err, ErrTooManyResources) {
		t.Fatalf("one more: %v", err)
	}
}

// TestPlanAttackIsRefusedWithoutBuildingIt: a plan of 300,000 resources (18 MB, under the byte
// cap) peaked at 1.2 GiB; then it was refused having decoded the budget's 20,000 resources (9.5 MB
// allocated); now it is refused having decoded none, by a count of its bytes.
func TestPlanAttackIsRefusedWithoutBuildingIt(t *testing.T) {
	doc := leanPlan(300_000)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := ParsePlan(doc)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrTooManyResources) {
		t.Fatalf("err = %v", err)
	}
	// Allocated in all, garbage included: a bound on the peak. Building the plan allocated
	// several times the document, decoding its first 20,000 resources more than half of it; counting
	// them allocates nothing (a few kilobytes for the rest of ParsePlan, under 64 KiB).
	if got := after.TotalAlloc - before.TotalAlloc; got > 64<<10 {
		t.Fatalf("refusing a %d-byte plan allocated %d bytes", len(doc), got)
	}
}

// BenchmarkParsePlan: memory grows with the resources read, not the document's other parts; past
// the budget, the plan is refused as it is read.
func BenchmarkParsePlan(b *testing.B) {
	for _, n := range []int{2_000, MaxPlanResources} {
		doc := bigPlan(n)
		b.Run(fmt.Sprintf("resources=%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(doc)))
			b.ReportAllocs()
			for b.Loop() {
				ParsePlan(doc)
			}
		})
	}
}

// FuzzDeepPlan: any resource_changes up to the 64 MiB a plan may be, built as prefix×n middle
// suffix×n so the fuzzer reaches the sizes and depths no small input has, reads to a plan or an
// error, never a crash, and never past the resource budget; and counting the resources before
// decoding them answers as decoding first did (countingAgrees), on both sides of the budget.
// A middle that closes the array and opens resource_drift puts the suffixes there.
func FuzzDeepPlan(f *testing.F) {
	f.Add([]byte(`{"address":"a.b","change":{"actions":["update"],"before":{"x":1},"after":{"x":2}}},`), []byte(`{}`), []byte(``), uint32(30_000))
	f.Add([]byte(`[`), []byte(`1`), []byte(`]`), uint32(9_000))
	f.Add([]byte(`{"address":"a.b","change":{"actions":["update"]}},`), []byte(`{}],"resource_drift":[{}`), []byte(`,{"address":1}`), uint32(10_000))
	f.Add([]byte(`{"address":"a.b","change":{"actions":["no-op"]}},`), []byte(`{"s":"],[\""}`), []byte(`,{"address" "a.c"}`), uint32(MaxPlanResources/2))
	f.Fuzz(func(t *testing.T, prefix, middle, suffix []byte, n uint32) {
		limit := MaxPlanSize - 128
		if unit := len(prefix) + len(suffix); unit > 0 && int(n) > (limit-len(middle))/unit {
			n = uint32(max(limit-len(middle), 0) / unit)
		}
		doc := `{"format_version":"1.2","resource_changes":[` + strings.Repeat(string(prefix), int(n)) + string(middle) + strings.Repeat(string(suffix), int(n)) + `]}`
		p, err := ParsePlan([]byte(doc))
		countingAgrees(t, []byte(doc), p, err)
		if err != nil {
			return
		}
		if len(p.ResourceChanges) > MaxPlanResources {
			t.Fatalf("%d resources read, over the budget", len(p.ResourceChanges))
		}
		if _, err := Extract(p, Options{}); err != nil {
			t.Fatal(err)
		}
	})
}

// BenchmarkParsePlanRefusal: what refusing bench/attack's bigplan body (300,000 resources,
// 33 MB) costs parley serve each time a valid agent token posts it (issue 34).
func BenchmarkParsePlanRefusal(b *testing.B) {
	doc := attackPlan(300_000)
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParsePlan(doc); !errors.Is(err, ErrTooManyResources) {
			b.Fatal(err)
		}
	}
}
