package events

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/parleyhq/parley/core"
)

// manyKeys is a JSON object of n keys: the nodeSelector of issue 34's attack.
func manyKeys(n int) string {
	var b strings.Builder
	b.WriteByte('{')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"k` + strconv.Itoa(i) + `":"v"`)
	}
	b.WriteByte('}')
	return b.String()
}

func bigDeployment(keys int) string {
	return `{"kind":"Deployment","apiVersion":"apps/v1","metadata":{"name":"web","namespace":"prod"},` +
		`"spec":{"replicas":3,"template":{"spec":{"nodeSelector":` + manyKeys(keys) + `,"containers":[{"name":"app","image":"a:1"}]}}}}`
}

// bigReview is an AdmissionReview creating a Deployment whose nodeSelector has keys keys.
func bigReview(keys int) []byte {
	return []byte(`{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":"u-1",` +
		`"kind":{"group":"apps","version":"v1","kind":"Deployment"},"resource":{"group":"apps","version":"v1","resource":"deployments"},` +
		`"namespace":"prod","name":"web","operation":"CREATE","userInfo":{"username":"mallory"},` +
		`"object":` + bigDeployment(keys) + `,"oldObject":null}}`)
}

// updateReview is an AdmissionReview updating Deployment prod/web from old to obj.
func updateReview(old, obj string) []byte {
	return []byte(`{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":"u-2",` +
		`"resource":{"group":"apps","version":"v1","resource":"deployments"},` +
		`"namespace":"prod","name":"web","operation":"UPDATE","userInfo":{"username":"mallory"},` +
		`"object":` + obj + `,"oldObject":` + old + `}}`)
}

func bigAudit(keys int) []byte {
	return []byte(auditEvent("create", "/apis/apps/v1/namespaces/ns/deployments", "deployments", "apps", "", bigDeployment(keys), ""))
}

// TestAdmissionFieldBudget: a review writing more fields than one object may have judged changes
// nothing and says so, naming the object; one within the budget is read in full.
func TestAdmissionFieldBudget(t *testing.T) {
	a, err := DecodeAdmissionReview(bigReview(40_000), admissionAt)
	if err != nil {
		t.Fatal(err)
	}
	// Reading stopped once the object alone had more than 1,000 fields: the problem gives a floor.
	if len(a.Changes) != 0 || a.Skipped != ignTooManyFields || a.UID != "u-1" || a.Old != nil ||
		a.Problem != "k8s:apps/Deployment/prod/web: more than 1000 changed fields, the most Parley judges in one object; not judged" {
		t.Fatalf("skipped %q, problem %q, %d changes", a.Skipped, a.Problem, len(a.Changes))
	}
	// Both objects large, neither larger than the other by the budget: every field is read, and
	// the problem counts them (1,500 values changed).
	upd := updateReview(bigDeployment(1_500), strings.ReplaceAll(bigDeployment(1_500), `:"v"`, `:"w"`))
	a, err = DecodeAdmissionReview(upd, admissionAt)
	if err != nil || a.Skipped != ignTooManyFields || a.Old != nil ||
		a.Problem != "k8s:apps/Deployment/prod/web: 1500 changed fields, above the 1000 Parley judges in one object; not judged" {
		t.Fatalf("both large: %v, skipped %q, problem %q", err, a.Skipped, a.Problem)
	}
	a, err = DecodeAdmissionReview(bigReview(MaxFieldsPerObject-3), admissionAt)
	if err != nil || a.Problem != "" || len(a.Changes) != MaxFieldsPerObject {
		t.Fatalf("at the budget: %v, problem %q, %d changes", err, a.Problem, len(a.Changes))
	}
}

// TestAuditFieldBudget: an audit event past the budget gives no observation, is counted as
// ignored, and its problem names the event and the object; the batch's other events still count.
func TestAuditFieldBudget(t *testing.T) {
	b, err := DecodeK8sAudit(bigAudit(40_000))
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Observations) != 0 || len(b.EventIDs) != 0 || b.Ignored[ignTooManyFields] != 1 || len(b.Problems) != 1 ||
		b.Problems[0] != "audit event id-1: k8s:apps/Deployment/ns/obj: more than 1000 changed fields, the most Parley judges in one object; not judged" {
		t.Fatalf("observations %d, ignored %v, problems %q", len(b.Observations), b.Ignored, b.Problems)
	}
	checkBatch(t, b, err)
}

// TestAdmissionDecodingStopsWithItsContext: a caller that has gone (or a budget that ran out)
// stops the flattening; the uid is still known, so the review can be answered.
func TestAdmissionDecodingStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	a, err := DecodeAdmissionReviewContext(ctx, bigReview(10_000), admissionAt)
	if !errors.Is(err, context.Canceled) || a.UID != "u-1" || len(a.Changes) != 0 {
		t.Fatalf("uid %q, %d changes, err %v", a.UID, len(a.Changes), err)
	}
}

// BenchmarkDecodeManyKeys: decoding grows as n log n in an object's keys (an insertion sort made
// 40,000 keys cost 4.6 s and 90,000 keys 21 s), and past the field budget nothing becomes a claim.
func BenchmarkDecodeManyKeys(b *testing.B) {
	for _, keys := range []int{10_000, 40_000, 90_000} {
		review, audit := bigReview(keys), bigAudit(keys)
		b.Run("admission/"+strconv.Itoa(keys), func(b *testing.B) {
			b.SetBytes(int64(len(review)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := DecodeAdmissionReview(review, admissionAt); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("audit/"+strconv.Itoa(keys), func(b *testing.B) {
			b.SetBytes(int64(len(audit)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := DecodeK8sAudit(audit); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// amplify is prefix×n middle suffix×n, n lowered so that it fits in limit bytes: inputs as deep
// or as wide as a door accepts, which the fuzzer's small inputs never reach.
func amplify(prefix, middle, suffix []byte, n uint32, limit int) []byte {
	if unit := len(prefix) + len(suffix); unit > 0 && int(n) > (limit-len(middle))/unit {
		n = uint32(max(limit-len(middle), 0) / unit)
	}
	return append(append(bytes.Repeat(prefix, int(n)), middle...), bytes.Repeat(suffix, int(n))...)
}

// FuzzDeepAdmissionReview: any object a review can carry, up to the 4 MiB a review may be,
// decodes to a review or an error, never a crash, and within the field budget.
func FuzzDeepAdmissionReview(f *testing.F) {
	f.Add([]byte(`{"a":`), []byte(`1`), []byte(`}`), uint32(5_000))
	f.Add([]byte(`[`), []byte(`{}`), []byte(`]`), uint32(9_000))
	f.Add([]byte(`"k":"v",`), []byte(`"z":1`), []byte(``), uint32(2_000))
	f.Fuzz(func(t *testing.T, prefix, middle, suffix []byte, n uint32) {
		spec := amplify(prefix, middle, suffix, n, maxAdmissionBytes-1024)
		body := []byte(`{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":"u","operation":"CREATE",` +
			`"resource":{"group":"apps","version":"v1","resource":"deployments"},"namespace":"p","name":"w",` +
			`"object":{"kind":"Deployment","metadata":{"name":"w"},"spec":{` + string(spec) + `}}}}`)
		a, err := DecodeAdmissionReview(body, admissionAt)
		if err != nil {
			return
		}
		if len(a.Changes) > MaxFieldsPerObject {
			t.Fatalf("%d changes, over the budget", len(a.Changes))
		}
		// The decision is the one counting every field gives, however early reading stopped.
		rev, err := decodeReview(body)
		if err != nil {
			t.Fatalf("decoded as a review, then not: %v", err)
		}
		_, _, changed := changedReference(rev.Request.OldObject, rev.Request.Object, keepPath)
		switch {
		case changed > MaxFieldsPerObject && a.Skipped != ignTooManyFields:
			t.Fatalf("%d changed fields, skipped %q", changed, a.Skipped)
		case changed <= MaxFieldsPerObject && (a.Skipped == ignTooManyFields || len(a.Changes) != changed):
			t.Fatalf("%d changed fields, skipped %q with %d changes", changed, a.Skipped, len(a.Changes))
		}
	})
}

// FuzzDeepK8sAudit: the same for an audit event's request object.
func FuzzDeepK8sAudit(f *testing.F) {
	f.Add([]byte(`{"a":`), []byte(`1`), []byte(`}`), uint32(5_000))
	f.Add([]byte(`"k":"v",`), []byte(`"z":1`), []byte(``), uint32(2_000))
	f.Fuzz(func(t *testing.T, prefix, middle, suffix []byte, n uint32) {
		spec := amplify(prefix, middle, suffix, n, 4<<20)
		b, err := DecodeK8sAudit(bigAuditOf(`{"kind":"Deployment","metadata":{"name":"obj"},"spec":{` + string(spec) + `}}`))
		checkBatch(t, b, err)
		if len(b.Observations) > MaxFieldsPerObject {
			t.Fatalf("%d observations, over the budget", len(b.Observations))
		}
	})
}

func bigAuditOf(obj string) []byte {
	return []byte(auditEvent("create", "/apis/apps/v1/namespaces/ns/deployments", "deployments", "apps", "", obj, ""))
}

// attackReview is bench/attack's bigmap review (bigMapReview in bench/attack/admission.go): an
// UPDATE of a Deployment whose oldObject has an empty nodeSelector and whose object's carries keys
// keys, as the API server would send it with a valid token.
func attackReview(keys int) []byte {
	var sel strings.Builder
	for k := range keys {
		if k > 0 {
			sel.WriteByte(',')
		}
		fmt.Fprintf(&sel, `"node.example.com/k%06d":"v"`, k)
	}
	name := "svc-7"
	deployment := func(selector string) string {
		return fmt.Sprintf(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":%q,"namespace":"prod"},`+
			`"spec":{"replicas":2,"selector":{"matchLabels":{"app":%q}},"template":{"metadata":{"labels":{"app":%q}},`+
			`"spec":{"nodeSelector":{%s},"containers":[{"name":"app","image":"registry.example.com/%s:1.0.0"}]}}}}`, name, name, name, selector, name)
	}
	return fmt.Appendf(nil, `{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":"bigmap-7",`+
		`"kind":{"group":"apps","version":"v1","kind":"Deployment"},"resource":{"group":"apps","version":"v1","resource":"deployments"},`+
		`"name":%q,"namespace":"prod","operation":"UPDATE","userInfo":{"username":"mallory@example.com","groups":["system:authenticated"]},`+
		`"object":%s,"oldObject":%s,"dryRun":false}}`, name, deployment(sel.String()), deployment(""))
}

// BenchmarkDecodeBigMapReview is one review of bench/attack's bigmap attack (90,000 keys, 1.4 MB)
// as parley serve decodes it: answered too-many-fields (issue 34).
func BenchmarkDecodeBigMapReview(b *testing.B) {
	body := attackReview(90_000)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		a, err := DecodeAdmissionReviewContext(context.Background(), body, admissionAt)
		if err != nil || a.Skipped != ignTooManyFields {
			b.Fatalf("skipped %q, err %v", a.Skipped, err)
		}
	}
}

// TestBigMapReviewStopsAtTheBudget: issue 34's 90,000-key review is refused for its size having
// read about the budget's worth of fields, not all 90,000 (flattening them was half of a review's
// 2.66 s under attack), and so is the removal of such a map (oldObject the large one). The
// allocations past decoding the body bound the fields read: flattening all the keys costs several
// allocations each (a path, a map entry), past the bound; reading 1,001 fields stays far below it.
func TestBigMapReviewStopsAtTheBudget(t *testing.T) {
	const keys = 90_000
	big, small := bigDeployment(keys), bigDeployment(0)
	for _, tc := range []struct {
		name string
		body []byte
	}{
		{"bench/attack's bigmap", attackReview(keys)},
		{"create", bigReview(keys)},
		{"added", updateReview(small, big)},
		{"removed", updateReview(big, small)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := DecodeAdmissionReview(tc.body, admissionAt)
			if err != nil || a.Skipped != ignTooManyFields || len(a.Changes) != 0 {
				t.Fatalf("err %v, skipped %q, %d changes", err, a.Skipped, len(a.Changes))
			}
			if !strings.Contains(a.Problem, "more than 1000 changed fields") {
				t.Errorf("problem %q: counted every field", a.Problem)
			}
			decoding := testing.AllocsPerRun(1, func() {
				if _, err := decodeReview(tc.body); err != nil {
					t.Fatal(err)
				}
			})
			all := testing.AllocsPerRun(1, func() {
				if _, err := DecodeAdmissionReview(tc.body, admissionAt); err != nil {
					t.Fatal(err)
				}
			})
			t.Logf("%.0f allocations, %.0f of them decoding the body", all, decoding)
			if bound := float64(10 * MaxFieldsPerObject); all-decoding > bound {
				t.Fatalf("%.0f allocations past decoding the body (%.0f), more than %.0f: the fields were read past the budget", all-decoding, decoding, bound)
			}
		})
	}
}

// changedReference is how the changed fields were counted before changedLeaves could stop early:
// both objects flattened in full, then compared.
func changedReference(old, obj any, keep func(string) bool) (before, after map[string]core.Value, changed int) {
	before, _, _ = leavesUpTo(context.Background(), old, keep, 0)
	after, _, _ = leavesUpTo(context.Background(), obj, keep, 0)
	for p, v := range after {
		if w, ok := before[p]; !ok || !w.Equal(v) {
			changed++
		}
	}
	for p := range before {
		if _, ok := after[p]; !ok {
			changed++
		}
	}
	return before, after, changed
}

// FuzzChangedLeavesIsExact: stopping early never changes a decision. For any two objects and any
// budget, changedLeaves says over only when counting every field finds more than the budget
// changed, and otherwise returns both objects' fields exactly as flattening them in full does (so
// the count, the problem and the changes are today's). Budgets are small so that small inputs
// reach every way through: either object the larger, both larger than the first look.
func FuzzChangedLeavesIsExact(f *testing.F) {
	// At the bound, either way: exactly the budget's fields added, or removed.
	f.Add([]byte(``), []byte(`{"a":1}`), uint8(1))
	f.Add([]byte(`{"a":1,"b":2}`), []byte(`{"a":1}`), uint8(1))
	f.Add([]byte(`{"a":1}`), []byte(`{"a":2,"b":[1,2],"c":{"d":null}}`), uint8(1))
	f.Add([]byte(`{"a":1,"b":2,"c":3,"d":4}`), []byte(`{"a":1}`), uint8(1))
	f.Add([]byte(`{"a":1,"b":2,"c":3,"d":4}`), []byte(`{"a":1,"b":2,"c":3,"e":5}`), uint8(1))
	f.Add([]byte(``), []byte(`{"spec":{"m":{"x":"1","y":"2","z":"3"}},"status":{"s":1}}`), uint8(2))
	f.Add([]byte(`{"metadata":{"name":"n","labels":{"a":"b"}},"spec":[{"a":1},{"b":2}]}`), []byte(`{"metadata":{"name":"m"},"spec":[{"a":1}]}`), uint8(0))
	f.Fuzz(func(t *testing.T, oldRaw, objRaw []byte, limit uint8) {
		tree := func(raw []byte) (any, bool) {
			if len(bytes.TrimSpace(raw)) == 0 {
				return nil, true
			}
			v, err := decodeTree(raw)
			return v, err == nil
		}
		old, ok := tree(oldRaw)
		obj, ok2 := tree(objRaw)
		if !ok || !ok2 {
			return
		}
		budget := int(limit % 16)
		before, after, over, err := changedLeaves(context.Background(), old, obj, keepPath, budget)
		if err != nil {
			t.Fatal(err)
		}
		wantBefore, wantAfter, changed := changedReference(old, obj, keepPath)
		if over {
			if changed <= budget {
				t.Fatalf("over a budget of %d, but %d fields change", budget, changed)
			}
			return
		}
		if !reflect.DeepEqual(before, wantBefore) || !reflect.DeepEqual(after, wantAfter) {
			t.Fatalf("budget %d: read\n%v\n%v\nwant\n%v\n%v", budget, before, after, wantBefore, wantAfter)
		}
	})
}
