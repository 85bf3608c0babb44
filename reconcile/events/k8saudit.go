package events

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"

	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"

	"github.com/parleyhq/parley/core"
)

// The audit types come from k8s.io/apiserver/pkg/apis/audit/v1: the Flux event type this package
// must use already pulls k8s.io/apimachinery and k8s.io/api/core/v1 into the module, and the audit
// package adds three packages on top (measured with go list -deps: 81 non-standard packages for the
// Flux event alone, 84 with both), so hand-written structs would save nothing.

// DecodeK8sAudit decodes an audit.k8s.io/v1 EventList, as the audit webhook backend POSTs it.
//
// Only ResponseComplete events of successful create, update and patch requests on resources
// become observations; everything else is counted in Batch.Ignored. Field changes are read from the
// request object (update and create: the whole object; patch: the fields the patch touches, for
// every patch type; the scale subresource: the parent object's /spec/replicas). When the audit level
// is RequestResponse the values are taken from the response object, the live object after the write.
// See docs/events.md for the patch-type inference and the actor rules.
func DecodeK8sAudit(body []byte) (Batch, error) {
	if err := core.UniqueKeys(body); errors.Is(err, core.ErrDuplicateKey) {
		return Batch{}, fmt.Errorf("k8s-audit: decode EventList: %w", err)
	}
	var list auditv1.EventList
	if err := json.Unmarshal(body, &list); err != nil {
		return Batch{}, fmt.Errorf("k8s-audit: decode EventList: %w", jsonError(body, err))
	}
	if list.Kind != "" && list.Kind != "EventList" {
		return Batch{}, fmt.Errorf("k8s-audit: body is a %q, want an audit.k8s.io/v1 EventList", list.Kind)
	}
	var b Batch
	seen := map[string]bool{}
	for i := range list.Items {
		decodeAuditEvent(&b, &list.Items[i], seen)
	}
	return b, nil
}

// Ignore reasons for audit events.
const (
	ignStage          = "stage-not-response-complete"
	ignReadVerb       = "read-verb"
	ignDeleteVerb     = "delete-verb"
	ignOtherVerb      = "other-verb"
	ignNonResource    = "non-resource-request"
	ignFailed         = "failed-request"
	ignNoise          = "noise-resource"
	ignStatus         = "status-subresource"
	ignSubresource    = "other-subresource"
	ignDryRun         = "dry-run"
	ignMetadataLevel  = "no-request-object"
	ignNoEventID      = "no-event-id"
	ignUnknownKind    = "unknown-resource-kind"
	ignNoName         = "no-object-name"
	ignBadObject      = "unreadable-object"
	ignUnresolved     = "patch-part-unresolved"
	ignNoFieldChanged = "no-field-changed"
	ignTooManyFields  = "too-many-fields" // more than MaxFieldsPerObject: Batch.Problems names the object
)

// noiseResources are written constantly by the control plane and are never in Git.
var noiseResources = map[string]bool{
	"leases": true, "events": true, "endpoints": true, "endpointslices": true, "pods": true, "nodes": true,
	"bindings": true, "tokenreviews": true, "subjectaccessreviews": true, "selfsubjectaccessreviews": true,
	"selfsubjectrulesreviews": true, "localsubjectaccessreviews": true, "selfsubjectreviews": true,
	"certificatesigningrequests": true, "controllerrevisions": true,
}

// touch is one place a request wrote: a pointer and, when the request itself carries it, the value.
type touch struct {
	ptr     string
	val     any
	has     bool // val is the value the request wrote
	removed bool // the request removed the field
}

func decodeAuditEvent(b *Batch, ev *auditv1.Event, seen map[string]bool) {
	b.saw(ev.StageTimestamp.Time)
	b.saw(ev.RequestReceivedTimestamp.Time)
	if ev.Stage != auditv1.StageResponseComplete {
		b.ignore(ignStage)
		return
	}
	switch ev.Verb {
	case "create", "update", "patch":
	case "get", "list", "watch":
		b.ignore(ignReadVerb)
		return
	case "delete", "deletecollection":
		b.ignore(ignDeleteVerb)
		return
	default:
		b.ignore(ignOtherVerb)
		return
	}
	ref := ev.ObjectRef
	if ref == nil || ref.Resource == "" {
		b.ignore(ignNonResource)
		return
	}
	if st := ev.ResponseStatus; st != nil && (st.Code >= 300 || st.Code == 0 && st.Status == "Failure") {
		b.ignore(ignFailed)
		return
	}
	if noiseResources[ref.Resource] {
		b.ignore(ignNoise)
		return
	}
	switch ref.Subresource {
	case "", "scale":
	case "status":
		b.ignore(ignStatus)
		return
	default:
		b.ignore(ignSubresource)
		return
	}
	var query url.Values
	if _, q, ok := strings.Cut(ev.RequestURI, "?"); ok {
		query, _ = url.ParseQuery(q) // a malformed pair is dropped; the rest still counts
	}
	if query.Get("dryRun") != "" {
		b.ignore(ignDryRun)
		return
	}
	if ev.RequestObject == nil || len(ev.RequestObject.Raw) == 0 {
		b.ignore(ignMetadataLevel)
		return
	}
	if ev.AuditID == "" {
		b.ignore(ignNoEventID)
		return
	}
	req, err := decodeTree(ev.RequestObject.Raw)
	if err != nil {
		b.ignore(ignBadObject)
		return
	}
	var resp any
	if ev.ResponseObject != nil && len(ev.ResponseObject.Raw) > 0 {
		if r, err := decodeTree(ev.ResponseObject.Raw); err == nil && stringAt(r, "kind") != "Status" {
			resp = r
		}
	}

	// The object.
	obj, ok := auditObject(ref, req, resp)
	if !ok {
		b.ignore(ignUnknownKind)
		return
	}
	if obj.Name == "" {
		b.ignore(ignNoName)
		return
	}

	// What the request wrote.
	var touches []touch
	restated := false
	unresolved := 0
	switch r := req.(type) {
	case []any:
		if ev.Verb != "patch" {
			b.ignore(ignBadObject)
			return
		}
		touches, unresolved = jsonPatchTouches(r)
	case map[string]any:
		switch {
		case ev.Verb != "patch":
			restated = true
			flattenTree(r, "", 0, func(p string, v any) bool {
				touches = append(touches, touch{ptr: p, val: v, has: true})
				return true
			})
		case isApply(r, query):
			restated = true
			unresolved = mergeTouches(r, resp, "", true, 0, &touches)
		default:
			unresolved = mergeTouches(r, resp, "", false, 0, &touches)
		}
	default:
		b.ignore(ignBadObject)
		return
	}
	for range unresolved {
		b.ignore(ignUnresolved)
	}

	// Who, when, why.
	user, via := ev.User, core.Identity{}
	if iu := ev.ImpersonatedUser; iu != nil && iu.Username != "" {
		via = core.Identity{Source: core.SourceKubeUser, ID: ev.User.Username, Groups: ev.User.Groups}
		user = *iu
	}
	id := core.Identity{Source: core.SourceKubeUser, ID: user.Username, Groups: user.Groups}
	manager := query.Get("fieldManager")
	if manager == "" {
		manager = productToken(ev.UserAgent)
	}
	at := ev.StageTimestamp.Time
	if at.IsZero() {
		at = ev.RequestReceivedTimestamp.Time
	}
	at = at.UTC()
	ann := stringMapAt(resp, "metadata", "annotations")
	if ann == nil && ref.Subresource == "" {
		ann = stringMapAt(req, "metadata", "annotations")
	}
	intent, mot, expires, problems := declaration(func(k string) (string, bool) { s, ok := ann[k]; return s, ok }, at)

	n, first := 0, len(b.Observations)
	emit := func(ptr string, v core.Value) bool {
		if n++; n > MaxFieldsPerObject {
			return false // over the budget: none of this event's fields is judged (below)
		}
		b.Observations = append(b.Observations, Observation{
			Field: withPath(obj, ptr), Value: v, Identity: id, Via: via, Manager: manager, At: at,
			Intent: intent, Motivation: mot, Expires: expires, Restated: restated, Problems: problems,
			EventID: string(ev.AuditID), Source: SourceK8sAudit,
		})
		return true
	}
	done := map[string]bool{}
	keep := keepPath
	if ref.Subresource == "scale" {
		keep = func(p string) bool { return p == "/spec/replicas" }
	}
	for _, t := range touches {
		if !emitTouch(t, resp, keep, done, emit, b) {
			break
		}
	}
	if n > MaxFieldsPerObject {
		clear(b.Observations[first:])
		b.Observations = b.Observations[:first]
		b.ignore(ignTooManyFields)
		// Reading stopped at the first field past the budget: the count is a floor.
		b.Problems = append(b.Problems, fmt.Sprintf("audit event %s: %s: more than %d changed fields, the most Parley judges in one object; not judged",
			ev.AuditID, obj, MaxFieldsPerObject))
		return
	}
	if n == 0 {
		b.ignore(ignNoFieldChanged)
		return
	}
	b.addEventID(string(ev.AuditID), seen)
}

// emitTouch emits the observations for one touched place: the live values below it when the
// response object is known, else the request's own values.
// It returns false when emit did (the event is over its budget).
func emitTouch(t touch, resp any, keep func(string) bool, done map[string]bool, emit func(string, core.Value) bool, b *Batch) bool {
	one := func(p string, v func() core.Value) bool {
		if !keep(p) || done[p] {
			return true
		}
		done[p] = true
		return emit(p, v())
	}
	absent := func() core.Value { return core.Value{} }
	if resp != nil {
		v, ok := lookup(resp, t.ptr)
		if !ok {
			return one(t.ptr, absent)
		}
		return flattenTree(v, t.ptr, 0, func(p string, v any) bool { return one(p, func() core.Value { return treeValue(v) }) })
	}
	switch {
	case t.removed || t.has && t.val == nil:
		return one(t.ptr, absent)
	case t.has:
		return flattenTree(t.val, t.ptr, 0, func(p string, v any) bool { return one(p, func() core.Value { return treeValue(v) }) })
	default:
		b.ignore(ignUnresolved)
	}
	return true
}

// keepPath says which parts of an object are fields someone can claim: everything but the identity,
// server-owned metadata and status; labels and annotations are kept, except the bookkeeping
// annotations tools write and Parley's own declaration annotations.
func keepPath(p string) bool {
	switch {
	case p == "" || p == "/apiVersion" || p == "/kind":
		return false
	case p == "/status" || strings.HasPrefix(p, "/status/"):
		return false
	case p == "/metadata" || strings.HasPrefix(p, "/metadata/"):
		if !keepPrefix(p) {
			return false
		}
		toks := core.SplitPointer(p)
		if len(toks) >= 3 && toks[1] == "annotations" {
			switch k := toks[2]; {
			case isParleyKey(k), k == "kubectl.kubernetes.io/last-applied-configuration",
				k == "deployment.kubernetes.io/revision", k == "kubectl.kubernetes.io/restartedAt":
				return false
			}
		}
	}
	return true
}

// keepPrefix reports whether p is labels, annotations or below them.
func keepPrefix(p string) bool {
	for _, k := range []string{"/metadata/labels", "/metadata/annotations"} {
		if p == k || strings.HasPrefix(p, k+"/") {
			return true
		}
	}
	return false
}

func withPath(f core.Field, p string) core.Field { f.Path = p; return f }

// auditObject names the object: group, namespace and name from objectRef (the name from the
// object's metadata for a create, which may have left it to the request body), the kind from the
// object itself when it is not a subresource, else from the resource table.
func auditObject(ref *auditv1.ObjectReference, req, resp any) (core.Field, bool) {
	name := ref.Name
	kind := ""
	if ref.Subresource == "" {
		if name == "" {
			name = stringAt(resp, "metadata", "name")
		}
		if name == "" {
			name = stringAt(req, "metadata", "name")
		}
		kind = stringAt(resp, "kind")
		if kind == "" {
			kind = stringAt(req, "kind")
		}
	}
	if kind == "" {
		kind = resourceKind(ref.APIGroup, ref.Resource)
	}
	if kind == "" {
		return core.Field{}, false
	}
	return core.K8sField(ref.APIGroup, kind, ref.Namespace, name, ""), true
}

// isApply infers a server-side apply: the patch content type is not in the audit event, but an
// apply patch must carry apiVersion and kind (it is an applied configuration) and a fieldManager
// query parameter (required for apply), while merge and strategic merge patches practically never
// state apiVersion and kind.
func isApply(p map[string]any, query url.Values) bool {
	return query.Get("fieldManager") != "" && stringAt(p, "apiVersion") != "" && stringAt(p, "kind") != ""
}

// productToken is the first product of a User-Agent: "kube-controller-manager" from
// "kube-controller-manager/v1.36.3 (linux/amd64) kubernetes/abc/system:serviceaccount:...".
func productToken(ua string) string {
	ua = strings.TrimSpace(ua)
	if i := strings.IndexAny(ua, "/ "); i >= 0 {
		ua = ua[:i]
	}
	return ua
}
