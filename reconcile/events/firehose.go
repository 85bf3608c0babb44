package events

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/parleyhq/parley/core"
)

// Managed clusters' audit logs reach Parley through their providers' log pipelines: EKS writes
// them to CloudWatch Logs, whose subscription filter feeds Amazon Data Firehose, which POSTs them
// to an HTTP endpoint; GKE writes them to Cloud Logging, whose sink publishes them to Pub/Sub,
// which pushes them. Neither pipeline adds a format of its own to judge: the events inside are
// audit.k8s.io/v1 Events (EKS), GKE audit LogEntries mapped to such Events (pubsub.go), or
// CloudTrail records. So the envelopes are only unwrapped here, into the bodies the Kubernetes
// audit and CloudTrail decoders already read (an EventList, a Records file), and the server
// stores and judges those exactly as it does what its own audit and CloudTrail doors receive.

// Envelope sources, as Sniff names them: bodies that hold other sources' events.
const (
	// SourceFirehose is an Amazon Data Firehose HTTP endpoint delivery request (protocol 1.0).
	SourceFirehose = "firehose"
	// SourceFirehoseBackup is one line of the S3 object Firehose writes the records it could not
	// deliver to (its S3 backup, "http-endpoint-failed/..."): {"rawData": base64 record, ...}.
	SourceFirehoseBackup = "firehose-backup"
	// SourceCloudWatchLogs is one CloudWatch Logs subscription message, decompressed.
	SourceCloudWatchLogs = "cloudwatch-logs"
)

// MaxUnwrapped is the default budget of an envelope's decompressed records: a Firehose request
// of 64 MiB records (its largest buffer) is far more than a 5 MiB buffer of gzip CloudWatch
// data, which is about what this allows at the usual compression of JSON logs.
const MaxUnwrapped = 128 << 20

// ErrUnwrapBudget marks an envelope whose records decompress to more than the budget allows.
var ErrUnwrapBudget = errors.New("records decompress to more than the budget")

// SourceBody is a body one of the event decoders reads: an audit EventList (SourceK8sAudit) or a
// CloudTrail Records file (SourceCloudTrail).
type SourceBody struct {
	Source string
	Body   []byte
}

// LogRecords collects what log pipeline records hold, as the existing decoders read it: audit
// events and CloudTrail records, in arrival order, and what was left out, by reason.
type LogRecords struct {
	Audit      []json.RawMessage
	CloudTrail []json.RawMessage
	Ignored    map[string]int
	// Latest is the newest log event's time (CloudWatch's timestamp), zero when none.
	Latest int64
}

// Ignore reasons of the envelopes.
const (
	ignControlMessage = "control-message"
	ignOtherLogStream = "not-audit-log-stream"
	ignUnknownLog     = "unknown-log-event"
	ignNotK8sAudit    = "not-k8s-audit-log"
)

func (l *LogRecords) ignore(reason string) {
	if l.Ignored == nil {
		l.Ignored = map[string]int{}
	}
	l.Ignored[reason]++
}

// Bodies returns the records as decoder bodies: audit events as EventLists, CloudTrail records as
// Records files, each body at most maxBytes long (0: no limit) unless one event alone is longer.
// The split is a function of the records alone, so the same records always make the same bodies:
// a redelivered request stores under the same IDs.
func (l LogRecords) Bodies(maxBytes int) []SourceBody {
	var out []SourceBody
	chunk := func(source, head, tail string, items []json.RawMessage) {
		var buf bytes.Buffer
		n := 0
		flush := func() {
			if n == 0 {
				return
			}
			buf.WriteString(tail)
			out = append(out, SourceBody{Source: source, Body: bytes.Clone(buf.Bytes())})
			buf.Reset()
			n = 0
		}
		for _, it := range items {
			if n > 0 && maxBytes > 0 && buf.Len()+1+len(it)+len(tail) > maxBytes {
				flush()
			}
			if n == 0 {
				buf.WriteString(head)
			} else {
				buf.WriteByte(',')
			}
			buf.Write(it)
			n++
		}
		flush()
	}
	chunk(SourceK8sAudit, `{"kind":"EventList","apiVersion":"audit.k8s.io/v1","metadata":{},"items":[`, "]}", l.Audit)
	chunk(SourceCloudTrail, `{"Records":[`, "]}", l.CloudTrail)
	return out
}

// FirehoseRequest is an Amazon Data Firehose HTTP endpoint delivery request body.
type FirehoseRequest struct {
	RequestID string
	Timestamp int64 // milliseconds since the epoch
	// Records are the records' data, base64-decoded.
	Records [][]byte
}

// DecodeFirehoseRequest decodes a Firehose request body {requestId, timestamp, records:[{data}]}.
// The error names the key or record that is wrong.
func DecodeFirehoseRequest(body []byte) (FirehoseRequest, error) {
	if err := core.UniqueKeys(body); errors.Is(err, core.ErrDuplicateKey) {
		return FirehoseRequest{}, fmt.Errorf("firehose: decode request: %w", err)
	}
	var raw struct {
		RequestID *string `json:"requestId"`
		Timestamp *int64  `json:"timestamp"`
		Records   *[]struct {
			Data *string `json:"data"`
		} `json:"records"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		return FirehoseRequest{}, fmt.Errorf("firehose: decode request: %w", jsonError(body, err))
	}
	switch {
	case raw.RequestID == nil || *raw.RequestID == "":
		return FirehoseRequest{}, errors.New("firehose: request has no requestId")
	case raw.Timestamp == nil:
		return FirehoseRequest{}, errors.New("firehose: request has no timestamp")
	case raw.Records == nil:
		return FirehoseRequest{}, errors.New("firehose: request has no records array")
	}
	req := FirehoseRequest{RequestID: *raw.RequestID, Timestamp: *raw.Timestamp}
	for i, r := range *raw.Records {
		if r.Data == nil {
			return FirehoseRequest{}, fmt.Errorf("firehose: record %d has no data", i)
		}
		d, err := base64.StdEncoding.DecodeString(*r.Data)
		if err != nil {
			return FirehoseRequest{}, fmt.Errorf("firehose: record %d: data is not base64: %w", i, err)
		}
		req.Records = append(req.Records, d)
	}
	return req, nil
}

// DecodeFirehose decodes a Firehose request and the CloudWatch Logs subscription messages its
// records hold, decompressing at most budget bytes of records (0: MaxUnwrapped).
func DecodeFirehose(body []byte, budget int64) (FirehoseRequest, LogRecords, error) {
	req, err := DecodeFirehoseRequest(body)
	if err != nil {
		return FirehoseRequest{}, LogRecords{}, err
	}
	if budget <= 0 {
		budget = MaxUnwrapped
	}
	var l LogRecords
	for i, d := range req.Records {
		if err := l.AddCloudWatchLogs(d, &budget); err != nil {
			return FirehoseRequest{}, LogRecords{}, fmt.Errorf("firehose: record %d: %w", i, err)
		}
	}
	return req, l, nil
}

// gzipMagic starts every gzip stream.
var gzipMagic = []byte{0x1f, 0x8b}

// Gunzip decompresses b when it is gzip (several members are read as one stream, as gzip does),
// reading at most *budget bytes and taking what it read off the budget; anything else is returned
// as it is. A stream that decompresses to more than the budget is ErrUnwrapBudget.
func Gunzip(b []byte, budget *int64) ([]byte, error) {
	if !bytes.HasPrefix(b, gzipMagic) {
		return b, nil
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("gzip: %w", err)
	}
	out, err := io.ReadAll(io.LimitReader(zr, *budget+1))
	if err != nil {
		return nil, fmt.Errorf("gzip: %w", err)
	}
	if int64(len(out)) > *budget {
		return nil, fmt.Errorf("%w of %d bytes", ErrUnwrapBudget, *budget)
	}
	*budget -= int64(len(out))
	return out, nil
}

// cwlMessage is a CloudWatch Logs subscription message.
type cwlMessage struct {
	MessageType         string   `json:"messageType"`
	Owner               string   `json:"owner"`
	LogGroup            string   `json:"logGroup"`
	LogStream           string   `json:"logStream"`
	SubscriptionFilters []string `json:"subscriptionFilters"`
	LogEvents           *[]struct {
		ID        string `json:"id"`
		Timestamp int64  `json:"timestamp"`
		Message   string `json:"message"`
	} `json:"logEvents"`
}

// AddCloudWatchLogs adds one CloudWatch Logs subscription message (gzip, as the subscription
// writes it, or already decompressed when the Firehose stream decompresses) to l, within budget.
//
// A CONTROL_MESSAGE (CloudWatch checking that the destination is reachable) is counted and
// otherwise ignored. In an EKS control plane log group (/aws/eks/<cluster>/cluster) only the
// kube-apiserver-audit-* streams hold audit events; the other streams (the API server's own log,
// the authenticator, the scheduler) are counted as not-audit-log-stream. Elsewhere each message
// is read for what it is: an audit Event (kind Event with an auditID) or a CloudTrail record
// (eventVersion and eventName); anything else is counted as unknown-log-event. A message of an
// audit stream that is not a JSON object is an error: the pipeline carries something Parley
// cannot read, and the sender should keep it. A stream that extracts the messages sends them
// without the envelope, one a line; each must then be an audit Event or a CloudTrail record.
func (l *LogRecords) AddCloudWatchLogs(data []byte, budget *int64) error {
	plain, err := Gunzip(data, budget)
	if err != nil {
		return fmt.Errorf("cloudwatch logs message: %w", err)
	}
	var m cwlMessage
	if err := json.Unmarshal(plain, &m); err != nil && !bytes.Contains(plain, []byte("\n")) {
		return fmt.Errorf("cloudwatch logs message: %w", jsonError(plain, err))
	}
	switch m.MessageType {
	case "":
		return l.addExtracted(plain)
	case "CONTROL_MESSAGE":
		l.ignore(ignControlMessage)
		return nil
	case "DATA_MESSAGE":
	default:
		return fmt.Errorf("cloudwatch logs message: messageType %q: want DATA_MESSAGE or CONTROL_MESSAGE", m.MessageType)
	}
	if m.LogEvents == nil {
		return fmt.Errorf("cloudwatch logs message of %s/%s: no logEvents", m.LogGroup, m.LogStream)
	}
	eks := strings.HasPrefix(m.LogGroup, "/aws/eks/") && strings.HasSuffix(m.LogGroup, "/cluster")
	auditStream := strings.HasPrefix(m.LogStream, "kube-apiserver-audit")
	for i, ev := range *m.LogEvents {
		l.Latest = max(l.Latest, ev.Timestamp)
		if eks && !auditStream {
			l.ignore(ignOtherLogStream)
			continue
		}
		msg := []byte(ev.Message)
		kind := logEventKind(msg, eks)
		switch {
		case kind == SourceK8sAudit:
			l.Audit = append(l.Audit, json.RawMessage(msg))
		case kind == SourceCloudTrail && !eks:
			l.CloudTrail = append(l.CloudTrail, json.RawMessage(msg))
		case eks:
			return fmt.Errorf("log event %d (%s) of %s/%s: not an audit.k8s.io/v1 Event", i, ev.ID, m.LogGroup, m.LogStream)
		default:
			l.ignore(ignUnknownLog)
		}
	}
	return nil
}

// addExtracted reads a record of a stream that decompresses and extracts the log messages: the
// messages themselves, one a line, without the subscription's envelope.
func (l *LogRecords) addExtracted(plain []byte) error {
	for i, line := range bytes.Split(plain, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		switch logEventKind(line, false) {
		case SourceK8sAudit:
			l.Audit = append(l.Audit, json.RawMessage(line))
		case SourceCloudTrail:
			l.CloudTrail = append(l.CloudTrail, json.RawMessage(line))
		default:
			return fmt.Errorf("cloudwatch logs message: line %d is neither a subscription message (messageType) nor an extracted audit Event or CloudTrail record", i+1)
		}
	}
	return nil
}

// logEventKind tells an audit Event from a CloudTrail record by their required keys; "" for
// anything else, a message that is not a JSON object included. In an EKS audit stream (audit)
// an object with an auditID is an audit event even without its kind.
func logEventKind(msg []byte, audit bool) string {
	var top map[string]json.RawMessage
	if json.Unmarshal(msg, &top) != nil {
		return ""
	}
	var kind string
	_ = json.Unmarshal(top["kind"], &kind)
	switch {
	case top["auditID"] != nil && (kind == "Event" || audit && kind == ""):
		return SourceK8sAudit
	case top["eventVersion"] != nil && top["eventName"] != nil:
		return SourceCloudTrail
	}
	return ""
}

// DecodeFirehoseBackup reads one record of a Firehose S3 backup object: a JSON object whose
// rawData is the base64 record Firehose could not deliver (with attemptsMade, errorCode,
// errorMessage and times beside it), here a CloudWatch Logs subscription message.
func DecodeFirehoseBackup(line []byte, budget int64) (LogRecords, error) {
	var raw struct {
		RawData   *string `json:"rawData"`
		ErrorCode string  `json:"errorCode"`
	}
	if err := json.Unmarshal(line, &raw); err != nil {
		return LogRecords{}, fmt.Errorf("firehose backup: %w", jsonError(line, err))
	}
	if raw.RawData == nil {
		return LogRecords{}, errors.New("firehose backup: no rawData")
	}
	d, err := base64.StdEncoding.DecodeString(*raw.RawData)
	if err != nil {
		return LogRecords{}, fmt.Errorf("firehose backup: rawData is not base64: %w", err)
	}
	if budget <= 0 {
		budget = MaxUnwrapped
	}
	var l LogRecords
	if err := l.AddCloudWatchLogs(d, &budget); err != nil {
		return LogRecords{}, fmt.Errorf("firehose backup: %w", err)
	}
	return l, nil
}

// Unwrap returns the decoder bodies an envelope holds, and true, when body is one (a Firehose
// request, a line of its S3 backup, a CloudWatch Logs subscription message, a Pub/Sub push or a
// Cloud Logging LogEntry of a GKE audit log); false for a body of one of the decoders' own
// sources. `parley ingest` replays envelopes through it; an envelope of nothing relevant has no
// bodies and its ignored counts.
func Unwrap(body []byte) (bodies []SourceBody, ignored map[string]int, ok bool, err error) {
	src, serr := Sniff(body)
	if serr != nil {
		return nil, nil, false, nil
	}
	budget := int64(MaxUnwrapped)
	var l LogRecords
	switch src {
	case SourceFirehose:
		_, l, err = DecodeFirehose(body, budget)
	case SourceFirehoseBackup:
		l, err = DecodeFirehoseBackup(body, budget)
	case SourceCloudWatchLogs:
		err = l.AddCloudWatchLogs(body, &budget)
	case SourcePubSub:
		var p PubSubPush
		if p, err = DecodePubSubPush(body); err == nil {
			err = l.AddGKEAuditEntry(p.Data)
		}
	case SourceLogEntry:
		err = l.AddGKEAuditEntry(body)
	default:
		return nil, nil, false, nil
	}
	if err != nil {
		return nil, nil, true, err
	}
	return l.Bodies(0), l.Ignored, true, nil
}
