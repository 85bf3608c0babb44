package events

import (
	"encoding/json"
	"fmt"
)

// Sniff tells which source a saved body came from, by the keys each format must have: an audit
// EventList's kind, a Flux event's involvedObject, Parley's Argo CD template's "parley" version
// key, CloudTrail's Records, detail-type or eventName. It reads only the top-level keys.
func Sniff(body []byte) (string, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return "", fmt.Errorf("not a JSON object: %w", jsonError(body, err))
	}
	var kind string
	if raw, ok := top["kind"]; ok {
		_ = json.Unmarshal(raw, &kind)
	}
	switch {
	case kind == "EventList" || kind == "Event" && top["auditID"] != nil:
		return SourceK8sAudit, nil
	case top["involvedObject"] != nil:
		return SourceFlux, nil
	case top["parley"] != nil:
		return SourceArgoCD, nil
	case top["Records"] != nil || top["detail-type"] != nil || top["eventName"] != nil:
		return SourceCloudTrail, nil
	// The envelopes of the providers' log pipelines (Unwrap reads what they hold).
	case top["requestId"] != nil && top["records"] != nil:
		return SourceFirehose, nil
	case top["rawData"] != nil:
		return SourceFirehoseBackup, nil
	case top["messageType"] != nil && top["logGroup"] != nil:
		return SourceCloudWatchLogs, nil
	case top["message"] != nil && top["subscription"] != nil:
		return SourcePubSub, nil
	case top["protoPayload"] != nil:
		return SourceLogEntry, nil
	}
	return "", fmt.Errorf("cannot tell the source: not an audit EventList (kind), a Flux event (involvedObject), an Argo CD notification from Parley's template (parley), CloudTrail (Records, detail-type, eventName), nor a Firehose request or backup line, a CloudWatch Logs message, a Pub/Sub push or a LogEntry; name it with --source")
}
