package events

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
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
	if len(a.Changes) != 0 || a.Skipped != ignTooManyFields || a.UID != "u-1" ||
		a.Problem != "k8s:apps/Deployment/prod/web: 40003 changed fields, above the 1000 Parley judges in one object; not judged" {
		t.Fatalf("skipped %q, problem %q, %d changes", a.Skipped, a.Problem, len(a.Changes))
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
		if err == nil && len(a.Changes) > MaxFieldsPerObject {
			t.Fatalf("%d changes, over the budget", len(a.Changes))
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
