package events

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/parleyhq/parley/core"
)

// SourceAdmission is the evidence source of the changes Parley's validating admission webhook saw:
// their event IDs are the AdmissionReview request's uid.
const SourceAdmission = "k8s-admission"

// The review types come from k8s.io/api/admission/v1, the official ones: the module already holds
// k8s.io/api through the audit types, and the API server's own encoder wrote the body.

// Admission is what one AdmissionReview asks, as Parley judges it: who writes which fields of
// which object. Changes is empty when Skipped says why there is nothing to judge.
type Admission struct {
	UID         string
	Operation   admissionv1.Operation
	DryRun      bool
	Object      core.Field // the object written (Path ""); the parent for the scale subresource
	Subresource string
	// Identity is the requesting user as the API server authenticated it (after impersonation:
	// userInfo names the impersonated user).
	Identity core.Identity
	// ResourceVersion is the old object's: the version this write replaces ("" for a create).
	ResourceVersion string
	// Old is the old object's fields and values as Changes reads them (nil for a create): what
	// is stored now, which tells whether an earlier admitted write landed (docs/admission.md).
	Old map[string]core.Value
	// Changes are the fields the write changes, oldObject against object, with the declarations of
	// the parley.dev/* annotations it sets. Their Source is SourceAdmission, EventID the uid.
	Changes []Observation
	// Skipped says why the request changes nothing Parley judges ("" when Changes holds them):
	// one of the ignore reasons the audit decoder uses, documented in docs/admission.md.
	Skipped string
	// Problem says why a write Parley would judge is not judged (Skipped is then
	// "too-many-fields"): it changes more than MaxFieldsPerObject fields, named with the object.
	Problem string
}

// maxAdmissionBytes bounds a review: the API server sends objects up to etcd's 1.5 MiB limit
// twice (object and oldObject), plus the envelope.
const maxAdmissionBytes = 4 << 20

// DecodeAdmissionReview reads an admission.k8s.io/v1 AdmissionReview as the API server POSTs it to
// a validating webhook. at is when it arrived: it anchors relative parley.dev/expires values.
//
// The body must be an AdmissionReview with a request and a uid (else an error: Parley cannot even
// answer it). Requests Parley does not judge (deletes, connects, the status and other
// subresources, the control plane's noise resources, kinds it cannot name) decode with Skipped set.
// The changed fields are read like the audit decoder reads a request object (the same leaves, the
// same fields left out): every field of a created object; the fields whose value differs between
// oldObject and object for an update; /spec/replicas of the parent for the scale subresource.
// The parley.dev/* annotations declare intent, motivation and expiry only when this write sets or
// changes one of them: a declaration left on the object by an earlier writer is not this
// writer's.
func DecodeAdmissionReview(body []byte, at time.Time) (Admission, error) {
	return DecodeAdmissionReviewContext(context.Background(), body, at)
}

// DecodeAdmissionReviewContext is DecodeAdmissionReview that stops when ctx ends (the API server
// gave up, or the fail-open budget ran out): flattening the objects, the part that grows with
// them, looks at ctx as it goes. Stopped, it returns the review as far as it was read (its uid
// known, no changes) and an error wrapping ctx's, so the caller can still answer the uid.
func DecodeAdmissionReviewContext(ctx context.Context, body []byte, at time.Time) (Admission, error) {
	return decodeAdmission(ctx, body, at, len(body) >= countFromBytesAt)
}

// countFromBytesAt is the size from which a review's objects are counted from their bytes before
// they are decoded into trees (countedTooMany). Below it a review is decoded in one pass, objects
// and all, as before: for the reviews a cluster sends every second (a few KiB) the objects' second
// reading would cost more than the count saves, and a review under it costs at most about a
// sixth of what the 1.4 MB bigmap review cost as trees. It is app's largeReview, the size from
// which a review takes the admission door's large-review lane.
const countFromBytesAt = 256 << 10

// decodeAdmission is DecodeAdmissionReviewContext, with the objects counted from their bytes
// first when fromBytes (for any size, in tests).
func decodeAdmission(ctx context.Context, body []byte, at time.Time, fromBytes bool) (Admission, error) {
	if len(body) > maxAdmissionBytes {
		return Admission{}, fmt.Errorf("admission review: %d bytes, at most %d", len(body), maxAdmissionBytes)
	}
	if !fromBytes {
		rev, err := decodeReview(body)
		if err != nil {
			return Admission{}, err
		}
		a, done, err := admissionHead(rev.Kind, rev.APIVersion, rev.Request)
		if done {
			return a, err
		}
		return judgeAdmission(ctx, a, rev.Request, rev.Request.Object, rev.Request.OldObject, at)
	}
	// json.Unmarshal rather than decodeReview's Decoder: the body is already whole, and the
	// Decoder's copy of it was a tenth of this review's cost.
	var rev rawReview
	if err := json.Unmarshal(body, &rev); err != nil {
		// Refused as reading the trees refuses it, in the same words.
		return decodeAdmission(ctx, body, at, false)
	}
	if err := checkFoldedKeys(body); err != nil {
		return Admission{}, fmt.Errorf("admission review: %w", err)
	}
	var req *reviewRequest // the request but its objects
	if rev.Request != nil {
		req = &rev.Request.reviewRequest
	}
	a, done, err := admissionHead(rev.Kind, rev.APIVersion, req)
	if done {
		return a, err
	}
	objRaw, oldRaw := nonNull(rev.Request.Object), nonNull(rev.Request.OldObject)
	if objRaw == nil {
		return Admission{}, noObject(a, req)
	}
	if objRaw[0] != '{' {
		return Admission{}, notObject(a, "object")
	}
	if oldRaw != nil && oldRaw[0] != '{' {
		return Admission{}, notObject(a, "oldObject")
	}
	if counted, ok := countedTooMany(ctx, a, req, objRaw, oldRaw); ok {
		return counted, nil
	}
	// Within the budget, or not surely past it: the objects are read as trees, as below the size.
	obj, err := decodeTree(objRaw)
	if err != nil {
		return Admission{}, fmt.Errorf("admission review %s: object: %w", a.UID, err)
	}
	var old any
	if oldRaw != nil {
		if old, err = decodeTree(oldRaw); err != nil {
			return Admission{}, fmt.Errorf("admission review %s: oldObject: %w", a.UID, err)
		}
	}
	return judgeAdmission(ctx, a, req, obj, old, at)
}

// nonNull is an object's bytes, nil when absent or null (as the tree is nil).
func nonNull(raw json.RawMessage) []byte {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	return raw
}

func noObject(a Admission, req *reviewRequest) error {
	return fmt.Errorf("admission review %s: %s of %s %s/%s carries no object", a.UID, req.Operation, req.Resource.Resource, req.Namespace, req.Name)
}

func notObject(a Admission, which string) error {
	return fmt.Errorf("admission review %s: %s is not a JSON object", a.UID, which)
}

// countedTooMany answers a review too-many-fields from its objects' bytes, exactly when
// changedLeaves would find over with their trees, and with the same Admission: ok is false when
// it would not, or when the counter is unsure (a repeated key) or ctx has ended (the trees' path
// then says so), and the caller reads the trees. Everything before the fields (the kind and name
// from the object, the old resourceVersion) is read from the bytes as stringAt reads the trees.
func countedTooMany(ctx context.Context, a Admission, req *reviewRequest, obj, old []byte) (Admission, bool) {
	c := newLeafCounter(keepFor(req.SubResource))
	nObj, ok := c.count(obj)
	if !ok {
		return Admission{}, false
	}
	nOld := 0
	if old != nil {
		if nOld, ok = c.count(old); !ok {
			return Admission{}, false
		}
	}
	if !overByCounts(nOld, nObj, MaxFieldsPerObject) || ctx.Err() != nil {
		return Admission{}, false
	}
	// One pass over the object's members finds both the kind and the metadata.
	kindRaw, meta := c.members(obj, "kind", "metadata")
	kind := ""
	if req.SubResource == "" {
		kind = stringOf(kindRaw)
	}
	if kind == "" {
		kind = resourceKind(req.Resource.Group, req.Resource.Resource)
	}
	if kind == "" {
		a.Skipped = ignUnknownKind
		return a, true
	}
	name := req.Name
	if name == "" {
		nameRaw, _ := c.members(meta, "name", "")
		name = stringOf(nameRaw)
	}
	if name == "" {
		a.Skipped = ignNoName
		return a, true
	}
	a.Object = core.K8sField(req.Resource.Group, kind, req.Namespace, name, "")
	if old != nil {
		a.ResourceVersion = c.stringMember(old, "metadata", "resourceVersion")
	}
	a.Skipped, a.Problem = ignTooManyFields, tooManyFieldsUncounted(a.Object)
	return a, true
}

// overByCounts is when changedLeaves says over, from the two objects' counts of kept fields alone:
// object past oldObject by more than limit, or oldObject past object by more than limit while
// object has at most limit (when both have more, changedLeaves reads both in full and the
// changes are counted exactly).
func overByCounts(old, obj, limit int) bool {
	return obj-old > limit || (old-obj > limit && obj <= limit)
}

// keepFor is the filter of the fields a request writes: keepPath, or for the scale subresource
// only the parent's replicas.
func keepFor(subresource string) func(string) bool {
	if subresource == "scale" {
		return keepScale
	}
	return keepPath
}

func keepScale(p string) bool { return p == "/spec/replicas" }

// admissionHead reads what a review asks before its objects: the checks that refuse it, and the
// requests Parley does not judge (done, with Skipped set).
func admissionHead(kind, apiVersion string, req *reviewRequest) (a Admission, done bool, err error) {
	if kind != "AdmissionReview" || apiVersion != admissionv1.SchemeGroupVersion.String() {
		return Admission{}, true, fmt.Errorf("admission review: body is kind %q, apiVersion %q: want an AdmissionReview of %s (admissionReviewVersions: [\"v1\"])",
			kind, apiVersion, admissionv1.SchemeGroupVersion)
	}
	if req == nil {
		return Admission{}, true, errors.New("admission review: no request")
	}
	if req.UID == "" {
		return Admission{}, true, errors.New("admission review: the request has no uid")
	}
	a = Admission{UID: req.UID, Operation: req.Operation, DryRun: req.DryRun != nil && *req.DryRun, Subresource: req.SubResource,
		Identity: core.Identity{Source: core.SourceKubeUser, ID: req.UserInfo.Username, Groups: req.UserInfo.Groups}}
	switch req.Operation {
	case admissionv1.Create, admissionv1.Update:
	case admissionv1.Delete:
		a.Skipped = ignDeleteVerb
		return a, true, nil
	default:
		a.Skipped = ignOtherVerb
		return a, true, nil
	}
	if noiseResources[req.Resource.Resource] {
		a.Skipped = ignNoise
		return a, true, nil
	}
	switch req.SubResource {
	case "", "scale":
	case "status":
		a.Skipped = ignStatus
		return a, true, nil
	default:
		a.Skipped = ignSubresource
		return a, true, nil
	}
	return a, false, nil
}

// judgeAdmission reads the fields a request writes from its objects as trees (an absent or null
// one is nil).
func judgeAdmission(ctx context.Context, a Admission, req *reviewRequest, obj, old any, at time.Time) (Admission, error) {
	if obj == nil {
		return Admission{}, noObject(a, req)
	}
	if _, ok := obj.(map[string]any); !ok {
		return Admission{}, notObject(a, "object")
	}
	if old != nil {
		if _, ok := old.(map[string]any); !ok {
			return Admission{}, notObject(a, "oldObject")
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

	before, after, over, err := changedLeaves(ctx, old, obj, keepFor(req.SubResource), MaxFieldsPerObject)
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

// review is the part of an admission.k8s.io/v1 AdmissionReview Parley reads, with the API's JSON
// names: the official types (k8s.io/api/admission/v1) cost a review's decoding the fields nobody
// reads (the request's kinds and resources again, userInfo's extras) and a copy of each object
// before it was decoded a second time as a tree. Here the objects are decoded once, as trees with
// exact numbers, with the rest of the review. Fields Parley does not read are not type-checked.
//
// rawReview holds the objects as bytes instead, for a review large enough to be counted from its
// bytes first; its errors are never shown (reading the trees names what is wrong, as always).
type review struct {
	Kind       string         `json:"kind"`
	APIVersion string         `json:"apiVersion"`
	Request    *reviewRequest `json:"request"`
}

type reviewRequest struct {
	UID      string `json:"uid"`
	Resource struct {
		Group    string `json:"group"`
		Resource string `json:"resource"`
	} `json:"resource"`
	SubResource string                `json:"subResource"`
	Name        string                `json:"name"`
	Namespace   string                `json:"namespace"`
	Operation   admissionv1.Operation `json:"operation"`
	UserInfo    struct {
		Username string   `json:"username"`
		Groups   []string `json:"groups"`
	} `json:"userInfo"`
	Object    any             `json:"object"`    // a tree (decodeTree's), nil when absent or null
	OldObject any             `json:"oldObject"` // likewise
	DryRun    *bool           `json:"dryRun"`
	Options   json.RawMessage `json:"options"`
}

type rawReview struct {
	Kind       string      `json:"kind"`
	APIVersion string      `json:"apiVersion"`
	Request    *rawRequest `json:"request"`
}

// rawRequest is reviewRequest with its objects as bytes: encoding/json fills the outer fields,
// which shadow the embedded ones, so reviewRequest.Object and OldObject stay nil.
type rawRequest struct {
	reviewRequest
	Object    json.RawMessage `json:"object"` // nil when absent, "null" when null
	OldObject json.RawMessage `json:"oldObject"`
}

// decodeReview decodes a review body in one pass, numbers kept exact as decodeTree keeps them. A
// body that does not decode (or has anything after the review) is decoded again by json.Unmarshal,
// whose error (a syntax error with its byte, a value of the wrong type with its key) names what is
// wrong as it always did. A review in which two keys fill one field is refused (checkFoldedKeys).
func decodeReview(body []byte) (review, error) {
	var rev review
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	err := d.Decode(&rev)
	if err == nil && len(bytes.TrimSpace(body[d.InputOffset():])) == 0 {
		if err := checkFoldedKeys(body); err != nil {
			return review{}, fmt.Errorf("admission review: %w", err)
		}
		return rev, nil
	}
	var again review
	if uerr := json.Unmarshal(body, &again); uerr != nil {
		err = uerr
	} else if err == nil {
		// Unreachable by what encoding/json promises (Unmarshal refuses what follows a value); kept
		// so that a difference between the two refuses the review rather than judges part of it.
		err = fmt.Errorf("data after the review at byte %d", d.InputOffset())
	}
	return review{}, fmt.Errorf("admission review: %w", jsonError(body, err))
}

// Batch is the review's changes as the drift loop takes in observations: one event, the review's
// uid, at when it was admitted.
func (a Admission) Batch(at time.Time) Batch {
	b := Batch{Observations: a.Changes, Latest: at.UTC()}
	if len(a.Changes) > 0 {
		b.EventIDs = []string{a.UID}
	}
	return b
}

// changedLeaves flattens oldObject and object (trees, nil when absent) into their kept fields and
// canonical values, unless ctx ends first (the error names which object was being read), or
// unless their counts of kept fields alone prove that more than limit fields change: over, with
// before and after incomplete.
//
// The proof is exact: each kept field of object that oldObject lacks is a change, so at least
// |after| - |before| fields change, and likewise at least |before| - |after| (removals). So the
// smaller of the two is flattened in full and the larger only up to limit+1 fields past it: a
// 90,000-key map costs about limit fields, not 90,000 (issue 34). Which is the smaller is learnt
// by flattening both up to limit+1 fields first; only when both are that large is oldObject
// flattened in full, as before.
func changedLeaves(ctx context.Context, old, obj any, keep func(string) bool, limit int) (before, after map[string]core.Value, over bool, err error) {
	probe := limit + 1
	before, big, err := leavesUpTo(ctx, old, keep, probe)
	if err != nil {
		return nil, nil, false, fmt.Errorf("oldObject: %w", err)
	}
	if big {
		after, objBig, err := leavesUpTo(ctx, obj, keep, probe)
		if err != nil {
			return nil, nil, false, fmt.Errorf("object: %w", err)
		}
		if !objBig { // object is the smaller: oldObject past it by more than limit removes too many
			before, over, err := leavesUpTo(ctx, old, keep, len(after)+limit+1)
			if err != nil {
				return nil, nil, false, fmt.Errorf("oldObject: %w", err)
			}
			return before, after, over, nil
		}
		if before, _, err = leavesUpTo(ctx, old, keep, 0); err != nil {
			return nil, nil, false, fmt.Errorf("oldObject: %w", err)
		}
	}
	after, over, err = leavesUpTo(ctx, obj, keep, len(before)+limit+1)
	if err != nil {
		return nil, nil, false, fmt.Errorf("object: %w", err)
	}
	return before, after, over, nil
}

// leavesUpTo flattens an object into its claimable fields and their canonical values, unless ctx
// ends first, stopping at limit of them (no limit when 0): reached says it has that many, and then
// out holds only those it read (in no particular order).
func leavesUpTo(ctx context.Context, v any, keep func(string) bool, limit int) (out map[string]core.Value, reached bool, err error) {
	out = map[string]core.Value{}
	if v == nil {
		return out, false, nil
	}
	n := 0
	flattenAnyOrder(v, func(p string, v any) bool { // into a map: the order is the map's
		if n++; n%ctxEvery == 0 && ctx.Err() != nil {
			return false
		}
		if keep(p) {
			out[p] = treeValue(v)
			if len(out) == limit {
				reached = true
				return false
			}
		}
		return true
	})
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	return out, reached, nil
}

func sortedKeysOf(m map[string]core.Value) []string { return slices.Sorted(maps.Keys(m)) }

// declares reports whether a write sets, changes or removes a parley.dev/* annotation: only then
// is the declaration the writer's own.
func declares(now, before map[string]string) bool {
	for k, v := range now {
		if isParleyKey(k) {
			if w, ok := before[k]; !ok || w != v {
				return true
			}
		}
	}
	for k := range before {
		if _, ok := now[k]; isParleyKey(k) && !ok {
			return true
		}
	}
	return false
}

// fieldManager reads the fieldManager of the request's options (CreateOptions, UpdateOptions or
// PatchOptions); "" when there is none or the options do not decode.
func fieldManager(raw []byte) string {
	if len(raw) == 0 {
		return ""
	}
	var o struct {
		FieldManager string `json:"fieldManager"`
	}
	if json.Unmarshal(raw, &o) != nil {
		return ""
	}
	return strings.TrimSpace(o.FieldManager)
}
