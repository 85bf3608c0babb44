package events

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/core"
)

var admissionAt = time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)

func readAdmission(t *testing.T, name string) Admission {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "admission", name))
	if err != nil {
		t.Fatal(err)
	}
	a, err := DecodeAdmissionReview(b, admissionAt)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func changeList(a Admission) string {
	var lines []string
	for _, c := range a.Changes {
		lines = append(lines, c.Field.String()+" = "+c.Value.String())
	}
	return strings.Join(lines, "\n")
}

func TestAdmissionScaleSubresourceIsTheParentsReplicas(t *testing.T) {
	a := readAdmission(t, "scale-hpa.json")
	if a.Skipped != "" || a.UID != "0df28fbd-5f5f-4d1e-a6b9-000000000001" || a.Operation != "UPDATE" || a.DryRun || a.Subresource != "scale" {
		t.Fatalf("%+v", a)
	}
	if got := changeList(a); got != "k8s:apps/Deployment/prod/web#/spec/replicas = 7" {
		t.Fatalf("changes:\n%s", got)
	}
	c := a.Changes[0]
	if c.Identity.ID != "system:serviceaccount:kube-system:horizontal-pod-autoscaler" || c.Identity.Source != core.SourceKubeUser ||
		len(c.Identity.Groups) != 3 || c.Source != SourceAdmission || c.EventID != a.UID || c.Restated || !c.At.Equal(admissionAt) {
		t.Fatalf("observation %+v", c)
	}
	if a.ResourceVersion != "4711" {
		t.Fatalf("resourceVersion %q", a.ResourceVersion)
	}
}

func TestAdmissionUpdateChangesOnlyWhatDiffersWithItsDeclaration(t *testing.T) {
	a := readAdmission(t, "patch-oncall.json")
	// Only replicas changed: resourceVersion, generation, managedFields, status and the parley.dev
	// annotations are no fields; the rest of the object is as it was.
	if got := changeList(a); got != "k8s:apps/Deployment/prod/web#/spec/replicas = 8" {
		t.Fatalf("changes:\n%s", got)
	}
	c := a.Changes[0]
	if c.Motivation.Kind != "incident" || c.Motivation.Ref != "INC-4211" || !c.Expires.Equal(admissionAt.Add(2*time.Hour)) || c.Manager != "kubectl-patch" ||
		c.Identity.ID != "alice@parley.example" {
		t.Fatalf("observation %+v", c)
	}
}

func TestAdmissionDeclarationLeftByAnEarlierWriterIsNotThisWritersOwn(t *testing.T) {
	b, err := os.ReadFile("testdata/admission/patch-oncall.json")
	if err != nil {
		t.Fatal(err)
	}
	// The cost optimizer scales down an object on which on-call's incident declaration still stands.
	s := strings.Replace(string(b), `"annotations": {"deployment.kubernetes.io/revision": "2"}}`,
		`"annotations": {"deployment.kubernetes.io/revision": "2", "parley.dev/motivation": "incident INC-4211", "parley.dev/expires": "2h"}}`, 1)
	s = strings.Replace(s, `"alice@parley.example"`, `"system:serviceaccount:finops:cost-optimizer"`, 1)
	a, err := DecodeAdmissionReview([]byte(s), admissionAt)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Changes) != 1 || !a.Changes[0].Motivation.IsZero() || !a.Changes[0].Expires.IsZero() {
		t.Fatalf("the cost optimizer inherited on-call's declaration: %+v", a.Changes)
	}
}

func TestAdmissionCreateRestatesEveryField(t *testing.T) {
	a := readAdmission(t, "create-configmap-dryrun.json")
	if !a.DryRun || a.Operation != "CREATE" || a.ResourceVersion != "" {
		t.Fatalf("%+v", a)
	}
	want := "k8s:core/ConfigMap/prod/flags#/data/checkout = \"on\"\nk8s:core/ConfigMap/prod/flags#/data/search = \"off\""
	if got := changeList(a); got != want {
		t.Fatalf("changes:\n%s\nwant:\n%s", got, want)
	}
	for _, c := range a.Changes {
		if !c.Restated {
			t.Fatalf("a create's field not restated: %+v", c)
		}
	}
}

func TestAdmissionRemovedFieldIsAnAbsentValue(t *testing.T) {
	b, err := os.ReadFile("testdata/admission/patch-oncall.json")
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(b), `"labels": {"app": "web"},
        "annotations": {"deployment.kubernetes.io/revision": "2", "parley.dev/motivation"`, `"annotations": {"deployment.kubernetes.io/revision": "2", "parley.dev/motivation"`, 1)
	a, err := DecodeAdmissionReview([]byte(s), admissionAt)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Changes) != 2 || a.Changes[1].Field.Path != "/metadata/labels/app" || !a.Changes[1].Value.Absent() {
		t.Fatalf("changes: %+v", a.Changes)
	}
}

func TestAdmissionSkips(t *testing.T) {
	if a := readAdmission(t, "delete.json"); a.Skipped != ignDeleteVerb || len(a.Changes) != 0 {
		t.Fatalf("delete: %+v", a)
	}
	b, _ := os.ReadFile("testdata/admission/scale-hpa.json")
	for sub, want := range map[string]string{"status": ignStatus, "ephemeralcontainers": ignSubresource} {
		s := strings.Replace(string(b), `"subResource": "scale"`, `"subResource": "`+sub+`"`, 1)
		if a, err := DecodeAdmissionReview([]byte(s), admissionAt); err != nil || a.Skipped != want {
			t.Fatalf("%s: %+v %v", sub, a, err)
		}
	}
	s := strings.Replace(string(b), `"spec": {"replicas": 7}`, `"spec": {"replicas": 3}`, 1)
	if a, err := DecodeAdmissionReview([]byte(s), admissionAt); err != nil || a.Skipped != ignNoFieldChanged {
		t.Fatalf("unchanged: %+v %v", a, err)
	}
	s = strings.Replace(string(b), `"resource": "deployments"}`, `"resource": "leases"}`, 1)
	if a, err := DecodeAdmissionReview([]byte(s), admissionAt); err != nil || a.Skipped != ignNoise {
		t.Fatalf("noise: %+v %v", a, err)
	}
}

func TestAdmissionReviewErrorsNameWhatIsWrong(t *testing.T) {
	ok, _ := os.ReadFile("testdata/admission/scale-hpa.json")
	for _, tc := range []struct{ body, want string }{
		{``, "admission review: empty body"},
		{`{"kind":`, "admission review: invalid JSON"},
		{`[]`, "admission review: at byte"},
		{`{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1beta1","request":{"uid":"x"}}`, `apiVersion "admission.k8s.io/v1beta1": want an AdmissionReview of admission.k8s.io/v1`},
		{`{"kind":"EventList","apiVersion":"audit.k8s.io/v1"}`, `body is kind "EventList"`},
		{`{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1"}`, "admission review: no request"},
		{`{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"operation":"UPDATE"}}`, "the request has no uid"},
		{strings.Replace(string(ok), `"object": {`, `"object": ["x"], "x": {`, 1), "object is not a JSON object"},
		{strings.Replace(string(ok), `"oldObject": {`, `"oldObject": 7, "x": {`, 1), "oldObject is not a JSON object"},
		{`{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":"u","operation":"UPDATE","resource":{"resource":"deployments"}}}`, "carries no object"},
		{strings.Repeat(" ", maxAdmissionBytes+1), "bytes, at most"},
		// Decoded in one pass, the review still refuses what json.Unmarshal refused, as it did.
		{string(ok) + ` {}`, "admission review: invalid JSON at byte"},
		{string(ok) + ` x`, "invalid character 'x' after top-level value"},
		{string(ok[:len(ok)/2]), "admission review: invalid JSON at byte"},
		{strings.Replace(string(ok), `"uid": "0df28fbd`, `"uid": 7, "x": "`, 1), "request.uid: want"},
		{strings.Replace(string(ok), `"groups": [`, `"groups": "x", "x": [`, 1), "request.userInfo.groups: want []string, got JSON string"},
		{strings.Replace(string(ok), `"object": {`, `"object": null, "x": {`, 1), "UPDATE of deployments prod/web carries no object"},
	} {
		a, err := DecodeAdmissionReview([]byte(tc.body), admissionAt)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%.60q: error %v, want %q", tc.body, err, tc.want)
		}
		if err != nil && (a.UID != "" || len(a.Changes) != 0) {
			t.Errorf("%.60q: an error with a partial admission %+v", tc.body, a)
		}
	}
}
