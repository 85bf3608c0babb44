package tfplan

import (
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

// TestPlanAttackIsRefusedWithoutBuildingIt: a plan of 300,000 resources (18 MB, under the byte
// cap) peaked at 1.2 GiB; now it is refused having built at most the budget's resources.
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
	// several times the document; refusing it allocates less than the document.
	if got := after.TotalAlloc - before.TotalAlloc; got > uint64(len(doc)) {
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
// error, never a crash, and never past the resource budget.
func FuzzDeepPlan(f *testing.F) {
	f.Add([]byte(`{"address":"a.b","change":{"actions":["update"],"before":{"x":1},"after":{"x":2}}},`), []byte(`{}`), []byte(``), uint32(30_000))
	f.Add([]byte(`[`), []byte(`1`), []byte(`]`), uint32(9_000))
	f.Fuzz(func(t *testing.T, prefix, middle, suffix []byte, n uint32) {
		limit := MaxPlanSize - 128
		if unit := len(prefix) + len(suffix); unit > 0 && int(n) > (limit-len(middle))/unit {
			n = uint32(max(limit-len(middle), 0) / unit)
		}
		doc := `{"format_version":"1.2","resource_changes":[` + strings.Repeat(string(prefix), int(n)) + string(middle) + strings.Repeat(string(suffix), int(n)) + `]}`
		p, err := ParsePlan([]byte(doc))
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
