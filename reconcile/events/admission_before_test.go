package events

import (
	"context"
	"errors"
	"fmt"
	"time"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/parleyhq/parley/core"
)

// decodeAdmissionBefore is DecodeAdmissionReviewContext as it was before the objects were counted
// from their bytes (4c20361), verbatim: FuzzCountedAdmissionIsExact holds both of today's ways
// through, the count first and the trees, to it.
func decodeAdmissionBefore(ctx context.Context, body []byte, at time.Time) (Admission, error) {
	if len(body) > maxAdmissionBytes {
		return Admission{}, fmt.Errorf("admission review: %d bytes, at most %d", len(body), maxAdmissionBytes)
	}
	rev, err := decodeReview(body)
	if err != nil {
		return Admission{}, err
	}
	if rev.Kind != "AdmissionReview" || rev.APIVersion != admissionv1.SchemeGroupVersion.String() {
		return Admission{}, fmt.Errorf("admission review: body is kind %q, apiVersion %q: want an AdmissionReview of %s (admissionReviewVersions: [\"v1\"])",
			rev.Kind, rev.APIVersion, admissionv1.SchemeGroupVersion)
	}
	req := rev.Request
	if req == nil {
		return Admission{}, errors.New("admission review: no request")
	}
	if req.UID == "" {
		return Admission{}, errors.New("admission review: the request has no uid")
	}
	a := Admission{UID: req.UID, Operation: req.Operation, DryRun: req.DryRun != nil && *req.DryRun, Subresource: req.SubResource,
		Identity: core.Identity{Source: core.SourceKubeUser, ID: req.UserInfo.Username, Groups: req.UserInfo.Groups}}
	switch req.Operation {
	case admissionv1.Create, admissionv1.Update:
	case admissionv1.Delete:
		a.Skipped = ignDeleteVerb
		return a, nil
	default:
		a.Skipped = ignOtherVerb
		return a, nil
	}
	if noiseResources[req.Resource.Resource] {
		a.Skipped = ignNoise
		return a, nil
	}
	switch req.SubResource {
	case "", "scale":
	case "status":
		a.Skipped = ignStatus
		return a, nil
	default:
		a.Skipped = ignSubresource
		return a, nil
	}
	// The objects were decoded with the review, as trees (an absent or null one is nil).
	obj, old := req.Object, req.OldObject
	if obj == nil {
		return Admission{}, fmt.Errorf("admission review %s: %s of %s %s/%s carries no object", a.UID, req.Operation, req.Resource.Resource, req.Namespace, req.Name)
	}
	if _, ok := obj.(map[string]any); !ok {
		return Admission{}, fmt.Errorf("admission review %s: object is not a JSON object", a.UID)
	}
	if old != nil {
		if _, ok := old.(map[string]any); !ok {
			return Admission{}, fmt.Errorf("admission review %s: oldObject is not a JSON object", a.UID)
		}
	}

	// The object: the kind from the object itself, except for the scale subresource, whose object
	// is an autoscaling/v1 Scale: there the parent's kind comes from the resource table.
	kind := ""
	if req.SubResource == "" {
		kind = stringAt(obj, "kind")
	}
	if kind == "" {
		kind = resourceKind(req.Resource.Group, req.Resource.Resource)
	}
	if kind == "" {
		a.Skipped = ignUnknownKind
		return a, nil
	}
	name := req.Name
	if name == "" {
		name = stringAt(obj, "metadata", "name")
	}
	if name == "" {
		a.Skipped = ignNoName
		return a, nil
	}
	a.Object = core.K8sField(req.Resource.Group, kind, req.Namespace, name, "")
	a.ResourceVersion = stringAt(old, "metadata", "resourceVersion")

	keep := keepPath
	if req.SubResource == "scale" {
		keep = func(p string) bool { return p == "/spec/replicas" }
	}
	before, after, over, err := changedLeaves(ctx, old, obj, keep, MaxFieldsPerObject)
	if err != nil {
		return Admission{UID: a.UID, Object: a.Object}, fmt.Errorf("admission review %s: %w", a.UID, err)
	}
	if over {
		// Reading stopped once the objects' sizes alone proved the budget spent: the count is a floor.
		a.Skipped, a.Problem = ignTooManyFields, tooManyFieldsUncounted(a.Object)
		return a, nil
	}
	if old != nil {
		a.Old = before
	}

	var intent core.Intent
	var mot core.Motivation
	var expires time.Time
	var problems []string
	if req.SubResource == "" {
		ann := stringMapAt(obj, "metadata", "annotations")
		if declares(ann, stringMapAt(old, "metadata", "annotations")) {
			intent, mot, expires, problems = declaration(func(k string) (string, bool) { s, ok := ann[k]; return s, ok }, at)
		}
	}
	// The budget counts the fields the write changes, before any becomes an observation.
	changed := 0
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
	if changed > MaxFieldsPerObject {
		a.Skipped, a.Problem = ignTooManyFields, TooManyFields(a.Object, changed)
		a.Old = nil
		return a, nil
	}
	manager := fieldManager(req.Options)
	emit := func(p string, v core.Value) {
		a.Changes = append(a.Changes, Observation{Field: withPath(a.Object, p), Value: v, Identity: a.Identity, Manager: manager, At: at,
			Intent: intent, Motivation: mot, Expires: expires, Restated: req.Operation == admissionv1.Create, Problems: problems,
			EventID: a.UID, Source: SourceAdmission})
	}
	for _, p := range sortedKeysOf(after) {
		if v, ok := before[p]; !ok || !v.Equal(after[p]) {
			emit(p, after[p])
		}
	}
	for _, p := range sortedKeysOf(before) {
		if _, ok := after[p]; !ok {
			emit(p, core.Value{}) // removed
		}
	}
	if len(a.Changes) == 0 {
		a.Skipped = ignNoFieldChanged
	}
	return a, nil
}
