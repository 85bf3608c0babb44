package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/parleyhq/parley/core"
)

// TerraformIndex finds the Terraform resources an AWS API call changed. It is implemented by the
// repository's parsed .tf files (TFIndexFromFiles) and may later be backed by state as well.
type TerraformIndex interface {
	// FindResource returns the address (with an empty Path) of the resource of the given type whose
	// attribute attr has value v.
	FindResource(resourceType, attr string, v core.Value) (core.Field, bool)
}

// TerraformValues is an optional capability of a TerraformIndex: the value Terraform sets for a field.
// DecodeCloudTrail uses it to find which tag block of an autoscaling group holds a tag key.
type TerraformValues interface {
	Value(f core.Field) (core.Value, bool)
}

// ctRecord is a CloudTrail record (the fields Parley reads).
type ctRecord struct {
	EventVersion string `json:"eventVersion"`
	EventID      string `json:"eventID"`
	EventTime    string `json:"eventTime"`
	EventSource  string `json:"eventSource"`
	EventName    string `json:"eventName"`
	EventType    string `json:"eventType"`
	UserIdentity struct {
		Type           string `json:"type"`
		PrincipalID    string `json:"principalId"`
		ARN            string `json:"arn"`
		AccountID      string `json:"accountId"`
		InvokedBy      string `json:"invokedBy"`
		SessionContext *struct {
			SessionIssuer struct {
				Type     string `json:"type"`
				ARN      string `json:"arn"`
				UserName string `json:"userName"`
			} `json:"sessionIssuer"`
		} `json:"sessionContext"`
	} `json:"userIdentity"`
	UserAgent         string          `json:"userAgent"`
	RequestParameters json.RawMessage `json:"requestParameters"`
	ReadOnly          bool            `json:"readOnly"`
	ErrorCode         string          `json:"errorCode"`
}

// DecodeCloudTrail decodes CloudTrail records: one raw record, a {"Records": [...]} file as
// CloudTrail delivers to S3, or an EventBridge envelope ("detail-type": "AWS API Call via
// CloudTrail") around one. Known API calls (see docs/events.md for the table) are mapped to the
// Terraform attributes they change, found through tf; read-only calls, failed calls (errorCode),
// unknown calls and resources tf does not know are counted in Ignored. tf may be nil: every known call
// then counts as "not-in-terraform".
//
// The EventID is CloudTrail's eventID, also inside an EventBridge envelope (whose own id differs),
// so the same call delivered through S3 and EventBridge is one event.
func DecodeCloudTrail(body []byte, tf TerraformIndex) (Batch, error) {
	var top struct {
		Records    []json.RawMessage `json:"Records"`
		DetailType *string           `json:"detail-type"`
		Detail     json.RawMessage   `json:"detail"`
		EventID    string            `json:"eventID"`
		EventName  string            `json:"eventName"`
	}
	if err := core.UniqueKeys(body); errors.Is(err, core.ErrDuplicateKey) {
		return Batch{}, fmt.Errorf("cloudtrail: decode: %w", err)
	}
	if err := json.Unmarshal(body, &top); err != nil {
		return Batch{}, fmt.Errorf("cloudtrail: decode: %w", jsonError(body, err))
	}
	var raws []json.RawMessage
	var b Batch
	switch {
	case top.Records != nil:
		raws = top.Records
	case top.DetailType != nil:
		if *top.DetailType != "AWS API Call via CloudTrail" {
			b.ignore("eventbridge-other-detail-type")
			return b, nil
		}
		if len(top.Detail) == 0 || bytes.Equal(bytes.TrimSpace(top.Detail), []byte("null")) {
			return Batch{}, fmt.Errorf("cloudtrail: EventBridge envelope has no detail")
		}
		raws = []json.RawMessage{top.Detail}
	case top.EventName != "" || top.EventID != "":
		raws = []json.RawMessage{body}
	default:
		return Batch{}, fmt.Errorf("cloudtrail: body is neither a CloudTrail record (no eventName), a Records file nor an EventBridge envelope (no detail-type)")
	}
	recs := make([]ctRecord, len(raws))
	for i, raw := range raws {
		if err := json.Unmarshal(raw, &recs[i]); err != nil {
			return Batch{}, fmt.Errorf("cloudtrail: record %d: %w", i, jsonError(raw, err))
		}
		if recs[i].EventName == "" || recs[i].EventSource == "" {
			return Batch{}, fmt.Errorf("cloudtrail: record %d has no eventSource or eventName", i)
		}
	}
	seen := map[string]bool{}
	for i := range recs {
		if err := decodeCTRecord(&b, &recs[i], tf, seen); err != nil {
			return Batch{}, fmt.Errorf("cloudtrail: record %d (%s %s): %w", i, recs[i].EventName, recs[i].EventID, err)
		}
	}
	return b, nil
}

func decodeCTRecord(b *Batch, r *ctRecord, tf TerraformIndex, seen map[string]bool) error {
	if t, err := time.Parse(time.RFC3339, r.EventTime); err == nil {
		b.saw(t) // a record left out still tells the time; a relevant one with a bad time is refused below
	}
	switch {
	case r.ReadOnly:
		b.ignore("read-only")
		return nil
	case r.ErrorCode != "":
		b.ignore("error-code")
		return nil
	case r.EventType != "" && r.EventType != "AwsApiCall":
		b.ignore("not-api-call")
		return nil
	case r.EventID == "":
		b.ignore(ignNoEventID)
		return nil
	}
	m, ok := ctMappings[ctKey(r.EventSource, r.EventName)]
	if !ok {
		b.ignore("unknown-api-call")
		return nil
	}
	at, err := time.Parse(time.RFC3339, r.EventTime)
	if err != nil {
		return fmt.Errorf("eventTime: want an RFC 3339 time, got %q", r.EventTime)
	}
	at = at.UTC()
	var params map[string]any
	if len(r.RequestParameters) > 0 {
		p, err := decodeTree(r.RequestParameters)
		if err != nil {
			return fmt.Errorf("requestParameters: %w", err)
		}
		params, _ = p.(map[string]any)
	}
	if params == nil {
		b.ignore("no-request-parameters")
		return nil
	}
	targets := m(params)
	if len(targets) == 0 {
		b.ignore("no-mapped-parameter")
		return nil
	}
	id := ctIdentity(r)
	tags := ctTags(params)
	intent, mot, expires, problems := declaration(func(k string) (string, bool) { s, ok := tags[k]; return s, ok }, at)
	n := 0
	for _, t := range targets {
		var res core.Field
		found := false
		if tf != nil {
			res, found = tf.FindResource(t.resourceType, t.attr, treeValue(t.key))
		}
		if !found {
			b.ignore("not-in-terraform")
			continue
		}
		changes := t.changes
		if t.tag != nil {
			changes = tagChanges(tf, res, t.tag)
			if changes == nil {
				b.ignore("tag-block-unresolved")
				continue
			}
		}
		for _, c := range changes {
			o := Observation{Field: withPath(res, c.path), Identity: id, Manager: productToken(strings.TrimPrefix(r.UserAgent, "[")),
				At: at, Intent: intent, Motivation: mot, Expires: expires, Restated: t.restated, Problems: problems,
				EventID: r.EventID, Source: SourceCloudTrail}
			if !c.removed {
				o.Value = treeValue(c.val)
			}
			b.Observations = append(b.Observations, o)
			n++
		}
	}
	if n > 0 {
		b.addEventID(r.EventID, seen)
	}
	return nil
}

// ctIdentity names the caller. For an assumed role the policy matches the role (the session
// issuer's ARN): the session part of the assumed-role ARN is chosen by whoever assumes the role, so
// it is kept only as the display name. AWS services acting on their own are named by invokedBy.
func ctIdentity(r *ctRecord) core.Identity {
	ui := r.UserIdentity
	id := core.Identity{Source: core.SourceAWSPrincipal, ID: ui.ARN}
	switch {
	case ui.Type == "AssumedRole" && ui.SessionContext != nil && ui.SessionContext.SessionIssuer.ARN != "":
		id.ID, id.Name = ui.SessionContext.SessionIssuer.ARN, ui.ARN
	case ui.Type == "AWSService" && ui.InvokedBy != "":
		id.ID = ui.InvokedBy
	case id.ID == "" && ui.PrincipalID != "":
		id.ID = ui.PrincipalID
	}
	return id
}

// ctTags reads the parley.dev/* declaration tags a call carries in its own tags parameter
// ([{key, value}], as PutMetricAlarm and CreateOrUpdateTags take them).
func ctTags(params map[string]any) map[string]string {
	list, _ := params["tags"].([]any)
	var out map[string]string
	for _, t := range list {
		k, v := stringAt(t, "key"), stringAt(t, "value")
		if k == "" {
			k, v = stringAt(t, "Key"), stringAt(t, "Value")
		}
		if isParleyKey(k) {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}

// ctKey is the mapping table key: the service's event source and the API name without the version
// suffix some services add ("UpdateFunctionConfiguration20150331v2").
func ctKey(source, name string) string {
	if i := strings.IndexAny(name, "0123456789"); i > 0 && len(name)-i >= 8 {
		name = name[:i]
	}
	return source + " " + name
}
