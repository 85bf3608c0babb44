package events

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestReviewWithKeysThatFoldTogetherIsRefused: encoding/json fills one field from keys that differ
// only in case (or decode to the same name), so such a review would be judged on one object and
// read by a person on the other. Each spelling below is refused, whichever size path reads it.
func TestReviewWithKeysThatFoldTogetherIsRefused(t *testing.T) {
	body, err := os.ReadFile(filepath.Join("testdata", "admission", "scale-hpa.json"))
	if err != nil {
		t.Fatal(err)
	}
	review := string(body)
	for _, tc := range []struct {
		name, old, new, want string
	}{
		{"object twice, the second null", `"request": {`, `"request": {"OBJECT": null, `, `request names "object" twice`},
		{"object spelt with an escape", `"request": {`, `"request": {"\u004fbject": {"spec": {"replicas": 1}}, `, `request names "object" twice`},
		{"subResource with a long s", `"request": {`, `"request": {"ſubResource": "status", `, `request names "subResource" twice`},
		{"request twice", `"kind": "AdmissionReview",`, `"kind": "AdmissionReview", "Request": {"uid": "other"},`, `review names "request" twice`},
		{"username twice", `"userInfo": {`, `"userInfo": {"UserName": "system:serviceaccount:kube-system:flux", `, `request.userInfo names "username" twice`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(review, tc.old) {
				t.Fatalf("testdata lacks %q", tc.old)
			}
			body := []byte(strings.Replace(review, tc.old, tc.new, 1))
			for _, fromBytes := range []bool{false, true} {
				a, err := decodeAdmission(context.Background(), body, time.Unix(0, 0), fromBytes)
				if !errors.Is(err, errFoldedTwice) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("fromBytes=%t: %v (%d changes), want an error naming %s", fromBytes, err, len(a.Changes), tc.want)
				}
			}
		})
	}
}

// TestKeysFoldingOnlyInTheObjectsAreRead: the objects are maps, where keys that differ in case are
// different keys (a label "Name" beside "name"), and strings that spell a field name in another
// case are data: neither is refused, though each makes mayFoldTwice look closer.
func TestKeysFoldingOnlyInTheObjectsAreRead(t *testing.T) {
	body, err := os.ReadFile(filepath.Join("testdata", "admission", "scale-hpa.json"))
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(body), `"spec"`, `"metadata": {"labels": {"Name": "OBJECT", "name": "x"}, "annotations": {"note": "ſchön"}}, "spec"`, 1)
	if edited == string(body) || !mayFoldTwice([]byte(edited)) {
		t.Fatal("the edit did not take, or mayFoldTwice cleared it without a closer look")
	}
	for _, fromBytes := range []bool{false, true} {
		if _, err := decodeAdmission(context.Background(), []byte(edited), time.Unix(0, 0), fromBytes); err != nil {
			t.Fatalf("fromBytes=%t: %v", fromBytes, err)
		}
	}
	if mayFoldTwice(body) {
		t.Error("the HPA's scale review, as the API server sends it, needs the closer look: it should not")
	}
}

// BenchmarkCheckFoldedKeys is what checkFoldedKeys adds to each review of testdata/admission (as
// the API server sends them, so mayFoldTwice alone answers).
func BenchmarkCheckFoldedKeys(b *testing.B) {
	bodies := admissionBodies(b)
	b.ReportAllocs()
	for b.Loop() {
		for _, body := range bodies {
			if err := checkFoldedKeys(body); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// TestKeysThatCannotBeReadRefuseTheReview: foldedTwice runs only on a body that decoded, but a
// body whose keys it cannot read is refused, never cleared.
func TestKeysThatCannotBeReadRefuseTheReview(t *testing.T) {
	if err := foldedTwice([]byte(`{"request": {"uid": "u", "OBJECT": {`)); err == nil {
		t.Fatal("a body cut short cleared the key check")
	}
}
