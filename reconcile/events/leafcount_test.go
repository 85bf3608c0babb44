package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/parleyhq/parley/core"
)

// TestKeepIsDecidedByThePrefix: what the counter assumes of its filters, that a path deeper than
// keepDecidedAt tokens is kept exactly when its first keepDecidedAt tokens are.
func TestKeepIsDecidedByThePrefix(t *testing.T) {
	prefixes := []string{"/spec/template/spec/nodeSelector", "/spec/replicas/x/y", "/status/a/b/c", "/metadata/name/a/b",
		"/metadata/labels/app/x", "/metadata/annotations/parley.dev~1intent/x", "/metadata/annotations/a~1b/0",
		"/metadata/annotations/kubectl.kubernetes.io~1last-applied-configuration/x", "/kind/a/b/c", "/apiVersion/0/1/2",
		"/metadata/managedFields/0/fieldsV1", "/spec/status/a/b", "/statusx/a/b/c"}
	for _, keep := range []func(string) bool{keepPath, keepScale} {
		for _, p := range prefixes {
			for _, deeper := range []string{"/k", "/k/0", "/a~1b/c/d/e"} {
				if keep(p) != keep(p+deeper) {
					t.Errorf("keep(%q) = %v, keep(%q) = %v", p, keep(p), p+deeper, keep(p+deeper))
				}
			}
		}
	}
}

// FuzzCountedAdmissionIsExact: counting a review's objects from their bytes never changes an
// answer. For any body, decodeAdmission answers with the count first, and reading the trees (as
// every review under countFromBytesAt still is), exactly as the decoder before the count did
// (decodeAdmissionBefore): the same Admission, the same error. And, so that the counter is held to flatten on small
// objects too (the budget is rarely crossed by a fuzzer's input), for each object in the body the
// count of kept leaves is flatten's for both filters, unsure only when the object repeats a key,
// and the strings read from the bytes are stringAt's.
func FuzzCountedAdmissionIsExact(f *testing.F) {
	seedFiles(f, "admission")
	f.Add(attackReview(1_200))
	f.Fuzz(func(t *testing.T, body []byte) {
		ctx := context.Background()
		got, err := decodeAdmission(ctx, body, admissionAt, true)
		trees, terr := decodeAdmission(ctx, body, admissionAt, false)
		want, werr := decodeAdmissionBefore(ctx, body, admissionAt)
		if fmt.Sprint(err) != fmt.Sprint(werr) || !reflect.DeepEqual(got, want) {
			t.Fatalf("counted first: %+v, %v\nbefore: %+v, %v", got, err, want, werr)
		}
		if fmt.Sprint(terr) != fmt.Sprint(werr) || !reflect.DeepEqual(trees, want) {
			t.Fatalf("from the trees: %+v, %v\nbefore: %+v, %v", trees, terr, want, werr)
		}
		var rev rawReview
		if json.Unmarshal(body, &rev) != nil || rev.Request == nil {
			return
		}
		for _, raw := range [][]byte{rev.Request.Object, rev.Request.OldObject} {
			raw = nonNull(raw)
			if raw == nil || raw[0] != '{' {
				continue
			}
			tree, err := decodeTree(raw)
			if err != nil {
				t.Fatalf("the review decoded, its object not: %v", err)
			}
			for _, keep := range []func(string) bool{keepPath, keepScale} {
				c := newLeafCounter(keep)
				n, ok := c.count(raw)
				leaves, _, _ := leavesUpTo(ctx, tree, keep, 0)
				switch {
				case !ok && !errors.Is(core.UniqueKeys(raw), core.ErrDuplicateKey):
					t.Fatalf("unsure of %s, which repeats no key", raw)
				case ok && n != len(leaves):
					t.Fatalf("counted %d kept leaves in %s, flatten has %d: %v", n, raw, len(leaves), leaves)
				}
				for _, path := range [][]string{{"kind"}, {"metadata", "name"}, {"metadata", "resourceVersion"}} {
					if s, w := c.stringMember(raw, path...), stringAt(tree, path...); s != w {
						t.Fatalf("%v read %q from the bytes of %s, %q from the tree", path, s, raw, w)
					}
				}
			}
		}
	})
}

// TestBigMapReviewIsCountedNotDecoded: bench/attack's bigmap review (and its reverse, the map
// removed) is answered from its objects' bytes: far fewer allocations than decoding the review
// with its objects as trees, which is what answering it cost before (185,827 allocations, 1.3 s
// of CPU per 15 s of attack, issue 34).
func TestBigMapReviewIsCountedNotDecoded(t *testing.T) {
	const keys = 90_000
	big, small := bigDeployment(keys), bigDeployment(0)
	for _, tc := range []struct {
		name string
		body []byte
	}{
		{"bench/attack's bigmap", attackReview(keys)},
		{"create", bigReview(keys)},
		{"removed", updateReview(big, small)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			decoding := testing.AllocsPerRun(1, func() {
				if _, err := decodeReview(tc.body); err != nil {
					t.Fatal(err)
				}
			})
			var a Admission
			all := testing.AllocsPerRun(2, func() {
				var err error
				if a, err = DecodeAdmissionReview(tc.body, admissionAt); err != nil {
					t.Fatal(err)
				}
			})
			if a.Skipped != ignTooManyFields || !strings.Contains(a.Problem, "more than 1000 changed fields") {
				t.Fatalf("skipped %q, problem %q", a.Skipped, a.Problem)
			}
			t.Logf("%.0f allocations; decoding the review as trees takes %.0f", all, decoding)
			if bound := decoding / 20; all > bound {
				t.Fatalf("%.0f allocations, more than %.0f (5%% of decoding the objects as trees, %.0f)", all, bound, decoding)
			}
		})
	}
}
