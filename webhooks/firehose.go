package webhooks

import (
	"bytes"
	"compress/gzip"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/parleyhq/parley/webhooks/store"
)

// FirehosePath is where Amazon Data Firehose HTTP endpoint deliveries arrive: each delivery
// stream posts to FirehosePath + "/<name>" (FirehosePattern), name being the cluster or AWS
// account the stream carries the logs of.
const FirehosePath = "/events/firehose"

// FirehosePattern is the net/http.ServeMux pattern of the Firehose endpoint.
func FirehosePattern() string { return ClusterPattern(FirehosePath) }

// Firehose's request headers (protocol 1.0).
const (
	HeaderFirehoseRequestID = "X-Amz-Firehose-Request-Id"
	HeaderFirehoseAccessKey = "X-Amz-Firehose-Access-Key"
	HeaderFirehoseSourceARN = "X-Amz-Firehose-Source-Arn"
	HeaderFirehoseProtocol  = "X-Amz-Firehose-Protocol-Version"
)

// SourceFirehose labels the Firehose endpoint's metrics and logs. Its deliveries are stored
// under the sources of the bodies its records make (store.SourceK8sAudit, SourceCloudTrail).
const SourceFirehose = "firehose"

// ErrWrongScope marks an unwrap error for records the endpoint's credential may not post (a
// CloudTrail record of another AWS account than the endpoint's): answered 403.
var ErrWrongScope = errors.New("records outside the endpoint's scope")

// ErrTooLarge marks an unwrap error for records that decompress to more than the receiver
// takes: answered 413.
var ErrTooLarge = errors.New("records too large")

// Part is one delivery an envelope makes: a body of a drift source (an audit EventList, a
// CloudTrail Records file) and the IDs of the events in it Parley may act on, as the source's
// EventIDFunc reads them (none: the part is not stored).
type Part struct {
	Source string
	Body   []byte
	IDs    []string
}

// FirehoseSource is one delivery stream's endpoint: FirehosePath/<Name>.
type FirehoseSource struct {
	// Name is a cluster name or an AWS account ID.
	Name string
	// Keys are the access keys the stream may send (X-Amz-Firehose-Access-Key); several while
	// one is rotated. Each is that endpoint's credential only.
	Keys []Secret
	// Cluster: Name is a cluster, and deliveries are stored with Scope Name (judged in its
	// repository); else Name is an AWS account and CloudTrail records route by account.
	Cluster bool
}

// FirehoseUnwrapFunc decodes a request body (decompressed) of the endpoint named name into the
// request ID it states, the parts its records make and what it left out, by reason. An error
// names what is wrong with the body; wrapping ErrStale, ErrWrongScope or ErrTooLarge picks the
// answer's status. The app passes events.DecodeFirehose with each part identified.
type FirehoseUnwrapFunc func(name string, body []byte) (requestID string, parts []Part, ignored map[string]int, err error)

// FirehoseReceiverConfig configures a FirehoseReceiver. Unwrap and Store are required.
type FirehoseReceiverConfig struct {
	IntakeConfig
	Sources []FirehoseSource
	Unwrap  FirehoseUnwrapFunc
	// MaxDecodedBytes bounds the body once its Content-Encoding: gzip is undone (default 4 ×
	// MaxBodyBytes).
	MaxDecodedBytes int64
}

// FirehoseReceiver is the http.Handler of FirehosePattern: Amazon Data Firehose's HTTP endpoint
// delivery, protocol 1.0. Every answer is the JSON Firehose requires, {requestId, timestamp},
// with errorMessage on an error; only a 200 tells Firehose the records are delivered, and
// anything else makes it retry the same request (same X-Amz-Firehose-Request-Id) for the
// stream's retry duration, then write the records to its S3 backup, from where `parley ingest`
// replays them.
//
// Checks, in order: the method (405); whether any stream is configured (403); too many failed
// authentications from the client address (429); the access key against the named endpoint's
// keys, compared in constant time, an unknown name failing like a wrong key so that an
// unauthenticated caller learns nothing of which endpoints exist (401); the request ID header
// and the protocol version (400); the size (413); Content-Encoding gzip or none (415), the
// decompressed size (413); the records (400 naming what is wrong; 403 for records of another
// account; 400 stale_event outside the freshness window); then each part's durable Put, under
// an ID made of the request ID and the part's index, so that a retried request is a duplicate
// of what was stored and is judged once; a part posted for a cluster is stored with the
// cluster as its Scope. 200 only once every part is stored (or was already); 503 when the store
// cannot commit, and the retry stores what is missing.
type FirehoseReceiver struct {
	eventIntake
	sources    map[string]FirehoseSource
	unwrap     FirehoseUnwrapFunc
	maxDecoded int64
}

// NewFirehoseReceiver checks cfg and returns a FirehoseReceiver.
func NewFirehoseReceiver(cfg FirehoseReceiverConfig) (*FirehoseReceiver, error) {
	if cfg.Store == nil || cfg.Unwrap == nil {
		return nil, errors.New("firehose receiver: a store and an unwrap function are required")
	}
	r := &FirehoseReceiver{eventIntake: newEventIntake(cfg.IntakeConfig), sources: map[string]FirehoseSource{}, unwrap: cfg.Unwrap,
		maxDecoded: cfg.MaxDecodedBytes}
	for _, s := range cfg.Sources {
		if err := store.ValidScope(s.Name); err != nil {
			return nil, fmt.Errorf("firehose receiver: %w", err)
		}
		if _, dup := r.sources[s.Name]; dup {
			return nil, fmt.Errorf("firehose receiver: %q is configured twice", s.Name)
		}
		var live []Secret
		for _, k := range s.Keys {
			if !k.IsZero() {
				live = append(live, k)
			}
		}
		if len(live) == 0 {
			return nil, fmt.Errorf("firehose receiver: %q has no access key", s.Name)
		}
		s.Keys = live
		r.sources[s.Name] = s
	}
	if r.maxDecoded <= 0 {
		r.maxDecoded = 4 * r.maxBody
	}
	return r, nil
}

// firehoseReply is Firehose's response body.
type firehoseReply struct {
	RequestID    string `json:"requestId"`
	Timestamp    int64  `json:"timestamp"`
	ErrorMessage string `json:"errorMessage,omitempty"`
}

// matchKey compares key with every one of keys in constant time, without an early exit (see
// matchToken); an endpoint that does not exist is compared with a key nobody holds, so it costs
// the same as a wrong key.
func matchKey(keys []Secret, key string) bool {
	if len(keys) == 0 {
		var none [sha256.Size]byte
		got := sha256.Sum256([]byte(key))
		_ = hmac.Equal(got[:], none[:])
		return false
	}
	return matchToken(keys, key)
}

// ServeHTTP answers one Firehose delivery, in the order the FirehoseReceiver doc lists.
func (r *FirehoseReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	rid := req.Header.Get(HeaderFirehoseRequestID)
	log := deliveryLogger(r.log, SourceFirehose, "", EventName)
	answer := func(code int, msg string) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(firehoseReply{RequestID: rid, Timestamp: r.now().UnixMilli(), ErrorMessage: msg})
	}
	refuse := func(code int, reason string, err error) {
		r.metrics.rejected.WithLabelValues(SourceFirehose, reason).Inc()
		log.Info("firehose delivery refused", slog.Int(LogKeyStatus, code), slog.String(LogKeyError, err.Error()))
		answer(code, err.Error())
	}
	if req.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		refuse(http.StatusMethodNotAllowed, reasonMethod, fmt.Errorf("method %s not allowed, use POST", req.Method))
		return
	}
	if len(r.sources) == 0 {
		refuse(http.StatusForbidden, reasonNotEnabled, errors.New("firehose deliveries are not enabled on this server: add a firehose block naming the cluster or AWS account, with its access_key_file"))
		return
	}
	name := req.PathValue(clusterWildcard)
	src := r.sources[name]
	key := req.Header.Get(HeaderFirehoseAccessKey)
	if key == "" || !matchKey(src.Keys, key) {
		reason, msg := reasonMismatch, "the access key does not match this endpoint's"
		if key == "" {
			reason, msg = reasonMissing, "missing "+HeaderFirehoseAccessKey+" header: set the delivery stream's access key"
		}
		// Only a failed credential counts against the address, and a valid one is never refused
		// for its address's failures (a proxy's address is every sender's).
		if throttled(w, req, r.failures, r.metrics, SourceFirehose) {
			return
		}
		r.metrics.signatureFailures.WithLabelValues(SourceFirehose, reason).Inc()
		log.Warn("firehose credentials refused", slog.Int(LogKeyStatus, http.StatusUnauthorized), slog.String(LogKeyError, msg))
		answer(http.StatusUnauthorized, msg)
		return
	}
	// Authenticated: the endpoint exists and the request may be looked at.
	log = log.With(slog.String(LogKeyCluster, name))
	if err := checkHeader(HeaderFirehoseRequestID, rid, validDeliveryID); err != nil {
		refuse(http.StatusBadRequest, reasonMalformed, err)
		return
	}
	log = deliveryLogger(r.log, SourceFirehose, rid, EventName).With(slog.String(LogKeyCluster, name),
		slog.String("source_arn", truncate(req.Header.Get(HeaderFirehoseSourceARN), 256)))
	if v := req.Header.Get(HeaderFirehoseProtocol); v != "" && v != "1.0" {
		refuse(http.StatusBadRequest, reasonMalformed, fmt.Errorf("%s %s: this server speaks protocol 1.0", HeaderFirehoseProtocol, strconv.QuoteToASCII(truncate(v, 20))))
		return
	}
	if req.ContentLength > r.maxBody {
		refuse(http.StatusRequestEntityTooLarge, reasonTooLarge, fmt.Errorf("body of %d bytes exceeds the %d-byte limit: lower the stream's buffer size", req.ContentLength, r.maxBody))
		return
	}
	body, err := readAuthenticated(w, req, r.maxBody, SourceFirehose)
	if err != nil {
		if mbe, ok := errors.AsType[*http.MaxBytesError](err); ok {
			refuse(http.StatusRequestEntityTooLarge, reasonTooLarge, fmt.Errorf("body exceeds the %d-byte limit: lower the stream's buffer size", mbe.Limit))
			return
		}
		refuse(http.StatusBadRequest, reasonReadBody, fmt.Errorf("read body: %w", err))
		return
	}
	switch enc := req.Header.Get("Content-Encoding"); enc {
	case "", "identity":
	case "gzip":
		if body, err = gunzipLimited(body, r.maxDecoded); errors.Is(err, ErrTooLarge) {
			refuse(http.StatusRequestEntityTooLarge, reasonTooLarge, err)
			return
		} else if err != nil {
			refuse(http.StatusBadRequest, reasonReadBody, err)
			return
		}
	default:
		refuse(http.StatusUnsupportedMediaType, reasonContentType, fmt.Errorf("Content-Encoding %s: want gzip or none", strconv.QuoteToASCII(truncate(enc, 40))))
		return
	}
	bodyID, parts, ignored, err := r.unwrap(name, body)
	switch {
	case errors.Is(err, ErrStale):
		refuse(http.StatusBadRequest, reasonStaleEvent, err)
		return
	case errors.Is(err, ErrWrongScope):
		refuse(http.StatusForbidden, reasonWrongScope, err)
		return
	case errors.Is(err, ErrTooLarge):
		refuse(http.StatusRequestEntityTooLarge, reasonTooLarge, err)
		return
	case err != nil:
		refuse(http.StatusBadRequest, reasonInvalidEvent, err)
		return
	case bodyID != rid:
		refuse(http.StatusBadRequest, reasonInvalidEvent, fmt.Errorf("the body's requestId %s is not the %s header's", strconv.QuoteToASCII(truncate(bodyID, 80)), HeaderFirehoseRequestID))
		return
	}
	for reason, n := range ignored {
		r.events.ignored.WithLabelValues(SourceFirehose, ignoredLabel(reason)).Add(float64(n))
	}
	stored, events := 0, 0
	for i, p := range parts {
		if len(p.IDs) == 0 {
			continue
		}
		events += len(p.IDs)
		d := store.Delivery{Source: p.Source, ID: r.partID(rid, i, name), Event: EventName, Body: p.Body, ReceivedAt: r.now()}
		if src.Cluster {
			d.Scope = name
		}
		switch put(req.Context(), r.store, r.putTimeout, r.metrics, log.With(slog.String("part", d.ID)), "firehose part", d).kind {
		case putFailed:
			w.Header().Set("Retry-After", "5")
			answer(http.StatusServiceUnavailable, "records could not be stored; Firehose retries the request")
			return
		case putStored:
			stored++
		}
	}
	if stored > 0 {
		r.notify()
	}
	log.Info("firehose delivery acknowledged", slog.Int(LogKeyStatus, http.StatusOK), slog.Int("records_bytes", len(body)),
		slog.Int("events", events), slog.Int("parts_stored", stored), slog.Any("ignored", ignored))
	answer(http.StatusOK, "")
}

// partID is the store ID of a request's part i: the request ID (Firehose keeps it across the
// attempts of a request), the part's index, and the endpoint's name, so that one stream's IDs
// never meet another's.
func (r *FirehoseReceiver) partID(rid string, i int, name string) string {
	id := rid
	if len(id) > 64 {
		id = hash32(id)
	}
	return ScopedDeliveryID(name, fmt.Sprintf("firehose-%s-%d", id, i))
}

// gunzipLimited undoes Content-Encoding: gzip, reading at most limit bytes.
func gunzipLimited(b []byte, limit int64) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("Content-Encoding gzip: %w", err)
	}
	out, err := io.ReadAll(io.LimitReader(zr, limit+1))
	if err != nil {
		return nil, fmt.Errorf("Content-Encoding gzip: %w", err)
	}
	if int64(len(out)) > limit {
		return nil, fmt.Errorf("%w: the body decompresses to more than %d bytes; lower the stream's buffer size", ErrTooLarge, limit)
	}
	return out, nil
}
