package events

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"

	"github.com/parleyhq/parley/core"
)

// More envelope sources, as Sniff names them.
const (
	// SourcePubSub is a Pub/Sub push request body: {message:{data, attributes, messageId,
	// publishTime}, subscription}.
	SourcePubSub = "pubsub"
	// SourceLogEntry is a Cloud Logging LogEntry (what a log sink publishes to Pub/Sub).
	SourceLogEntry = "gcp-log-entry"
)

// PubSubPush is a Pub/Sub push request body.
type PubSubPush struct {
	MessageID    string
	PublishTime  time.Time
	Subscription string
	Attributes   map[string]string
	Data         []byte // message.data, base64-decoded
}

// DecodePubSubPush decodes a push request body. Pub/Sub writes messageId and publishTime in both
// camel and snake case; either is read.
func DecodePubSubPush(body []byte) (PubSubPush, error) {
	if err := core.UniqueKeys(body); errors.Is(err, core.ErrDuplicateKey) {
		return PubSubPush{}, fmt.Errorf("pubsub: decode push: %w", err)
	}
	var raw struct {
		Message *struct {
			Data         *string           `json:"data"`
			Attributes   map[string]string `json:"attributes"`
			MessageID    string            `json:"messageId"`
			MessageIDS   string            `json:"message_id"`
			PublishTime  string            `json:"publishTime"`
			PublishTimeS string            `json:"publish_time"`
		} `json:"message"`
		Subscription string `json:"subscription"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		return PubSubPush{}, fmt.Errorf("pubsub: decode push: %w", jsonError(body, err))
	}
	m := raw.Message
	if m == nil {
		return PubSubPush{}, errors.New("pubsub: push has no message")
	}
	p := PubSubPush{MessageID: m.MessageID, Subscription: raw.Subscription, Attributes: m.Attributes}
	if p.MessageID == "" {
		p.MessageID = m.MessageIDS
	}
	if p.MessageID == "" {
		return PubSubPush{}, errors.New("pubsub: message has no messageId")
	}
	if pt := m.PublishTime + m.PublishTimeS; pt != "" {
		if m.PublishTime != "" {
			pt = m.PublishTime
		}
		t, err := time.Parse(time.RFC3339Nano, pt)
		if err != nil {
			return PubSubPush{}, fmt.Errorf("pubsub: message %s: publishTime %q: want an RFC 3339 time", p.MessageID, pt)
		}
		p.PublishTime = t.UTC()
	}
	if m.Data == nil {
		return PubSubPush{}, fmt.Errorf("pubsub: message %s has no data", p.MessageID)
	}
	d, err := base64.StdEncoding.DecodeString(*m.Data)
	if err != nil {
		return PubSubPush{}, fmt.Errorf("pubsub: message %s: data is not base64: %w", p.MessageID, err)
	}
	p.Data = d
	return p, nil
}

// gkeEntry is the part of a Cloud Logging LogEntry of a GKE audit log that maps to an audit Event.
type gkeEntry struct {
	InsertID  string `json:"insertId"`
	Timestamp string `json:"timestamp"`
	Resource  struct {
		Type string `json:"type"`
	} `json:"resource"`
	Operation *struct {
		ID    string `json:"id"`
		First bool   `json:"first"`
		Last  bool   `json:"last"`
	} `json:"operation"`
	Labels       map[string]string `json:"labels"`
	ProtoPayload *struct {
		ServiceName        string `json:"serviceName"`
		MethodName         string `json:"methodName"`
		ResourceName       string `json:"resourceName"`
		AuthenticationInfo struct {
			PrincipalEmail string `json:"principalEmail"`
		} `json:"authenticationInfo"`
		RequestMetadata struct {
			CallerIP                string `json:"callerIp"`
			CallerSuppliedUserAgent string `json:"callerSuppliedUserAgent"`
		} `json:"requestMetadata"`
		Status *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"status"`
		Request  json.RawMessage `json:"request"`
		Response json.RawMessage `json:"response"`
	} `json:"protoPayload"`
}

// AddGKEAuditEntry maps one Cloud Logging LogEntry of a GKE audit log (resource.type k8s_cluster,
// protoPayload.serviceName k8s.io) to the audit.k8s.io/v1 Event the cluster's API server
// recorded, and adds it to l; any other LogEntry is counted as not-k8s-audit-log. The mapping
// (docs/events.md, "GKE"):
//
//   - user.username: protoPayload.authenticationInfo.principalEmail (GKE's Kubernetes username:
//     the Google account, or system:serviceaccount:<namespace>:<name>);
//   - verb: the last part of methodName (io.k8s.apps.v1.deployments.patch: patch);
//   - objectRef and requestURI: resourceName, <group>/<version>[/namespaces/<ns>]/<resource>/<name>
//     [/<subresource>], the group "core" being the core group;
//   - requestObject and responseObject: request and response without the "@type" GKE adds;
//   - responseStatus: protoPayload.status, a gRPC code (0 or absent: success);
//   - auditID: operation.id (the API server's audit ID), else insertId; stage ResponseComplete
//     unless operation says the entry is a first stage only;
//   - times: the entry's timestamp; userAgent: requestMetadata.callerSuppliedUserAgent.
//
// GKE's entries carry no request URI query, so fieldManager and dryRun are not known: a
// server-side apply is read as a merge patch, its manager from the user agent.
func (l *LogRecords) AddGKEAuditEntry(entry []byte) error {
	var e gkeEntry
	if err := json.Unmarshal(entry, &e); err != nil {
		return fmt.Errorf("gke audit log entry: %w", jsonError(entry, err))
	}
	p := e.ProtoPayload
	if p == nil || e.Resource.Type != "k8s_cluster" || p.ServiceName != "k8s.io" {
		l.ignore(ignNotK8sAudit)
		return nil
	}
	at, err := time.Parse(time.RFC3339Nano, e.Timestamp)
	if err != nil {
		return fmt.Errorf("gke audit log entry %s: timestamp %q: want an RFC 3339 time", e.InsertID, e.Timestamp)
	}
	l.Latest = max(l.Latest, at.UnixMilli())
	id := e.InsertID
	stage := auditv1.StageResponseComplete
	if o := e.Operation; o != nil {
		if o.ID != "" {
			id = o.ID
		}
		if o.First && !o.Last {
			stage = auditv1.StageRequestReceived
		}
	}
	verb := p.MethodName[strings.LastIndexByte(p.MethodName, '.')+1:]
	ref, uri := gkeObjectRef(p.ResourceName)
	ev := auditv1.Event{
		TypeMeta:                 metav1.TypeMeta{Kind: "Event", APIVersion: "audit.k8s.io/v1"},
		Level:                    auditv1.LevelRequest,
		AuditID:                  types.UID(id),
		Stage:                    stage,
		RequestURI:               uri,
		Verb:                     verb,
		UserAgent:                p.RequestMetadata.CallerSuppliedUserAgent,
		ObjectRef:                ref,
		RequestReceivedTimestamp: metav1.NewMicroTime(at),
		StageTimestamp:           metav1.NewMicroTime(at),
		Annotations:              e.Labels,
	}
	ev.User.Username = p.AuthenticationInfo.PrincipalEmail
	if ip := p.RequestMetadata.CallerIP; ip != "" {
		ev.SourceIPs = []string{ip}
	}
	code := int32(200)
	if s := p.Status; s != nil && s.Code != 0 {
		code = grpcHTTPStatus(s.Code)
	}
	ev.ResponseStatus = &metav1.Status{Code: code}
	if code >= 300 {
		ev.ResponseStatus.Status, ev.ResponseStatus.Message = metav1.StatusFailure, p.Status.Message
	}
	if ev.RequestObject, err = withoutType(p.Request); err != nil {
		return fmt.Errorf("gke audit log entry %s: request: %w", e.InsertID, err)
	}
	if ev.ResponseObject, err = withoutType(p.Response); err != nil {
		return fmt.Errorf("gke audit log entry %s: response: %w", e.InsertID, err)
	}
	if ev.ResponseObject != nil {
		ev.Level = auditv1.LevelRequestResponse
	}
	b, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("gke audit log entry %s: %w", e.InsertID, err)
	}
	l.Audit = append(l.Audit, b)
	return nil
}

// gkeObjectRef reads a GKE audit resourceName: "apps/v1/namespaces/prod/deployments/web",
// "core/v1/namespaces/prod/configmaps/x/status", "rbac.authorization.k8s.io/v1/clusterroles/r".
// An unreadable name gives no objectRef (the event is then a non-resource request).
func gkeObjectRef(name string) (*auditv1.ObjectReference, string) {
	parts := strings.Split(name, "/")
	if len(parts) < 3 {
		return nil, "/" + name
	}
	ref := &auditv1.ObjectReference{APIGroup: parts[0], APIVersion: parts[1]}
	rest := parts[2:]
	if len(rest) >= 2 && rest[0] == "namespaces" && len(rest) > 2 {
		ref.Namespace, rest = rest[1], rest[2:]
	}
	ref.Resource = rest[0]
	if len(rest) > 1 {
		ref.Name = rest[1]
	}
	if len(rest) > 2 {
		ref.Subresource = rest[2]
	}
	if ref.APIGroup == "core" {
		ref.APIGroup = ""
	}
	uri := "/apis/" + parts[0] + "/" + strings.Join(parts[1:], "/")
	if ref.APIGroup == "" {
		uri = "/api/" + strings.Join(parts[1:], "/")
	}
	return ref, uri
}

// withoutType returns a request or response object without the "@type" key GKE adds (it is not
// a field of the object, and a patch would otherwise seem to write it); nil for none.
func withoutType(raw json.RawMessage) (*runtime.Unknown, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, jsonError(raw, err)
	}
	delete(obj, "@type")
	if len(obj) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	return &runtime.Unknown{Raw: b, ContentType: runtime.ContentTypeJSON}, nil
}

// grpcHTTPStatus maps the gRPC code of a failed call to the HTTP status the API server answered
// (as numbers: this package serves no HTTP and does not import it).
func grpcHTTPStatus(code int) int32 {
	switch code {
	case 3, 9, 11: // INVALID_ARGUMENT, FAILED_PRECONDITION, OUT_OF_RANGE
		return 400
	case 5: // NOT_FOUND
		return 404
	case 6, 10: // ALREADY_EXISTS, ABORTED
		return 409
	case 7: // PERMISSION_DENIED
		return 403
	case 16: // UNAUTHENTICATED
		return 401
	case 8: // RESOURCE_EXHAUSTED
		return 429
	case 4: // DEADLINE_EXCEEDED
		return 504
	case 14: // UNAVAILABLE
		return 503
	}
	return 500
}
