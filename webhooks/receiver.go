package webhooks

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/parleyhq/parley/webhooks/guard"
	"github.com/parleyhq/parley/webhooks/store"
)

// GitHubPath is where the GitHub App's webhook URL points; mount the Receiver there.
const GitHubPath = "/webhooks/github"

// MaxBodyBytes is GitHub's payload cap: 25 MB.
const MaxBodyBytes = 25 << 20

// GitHub's webhook headers.
const (
	HeaderEvent     = "X-GitHub-Event"
	HeaderDelivery  = "X-GitHub-Delivery"
	HeaderSignature = "X-Hub-Signature-256"
)

// Intake is what the Receiver needs of the store: a durable, deduplicating Put.
type Intake interface {
	Put(ctx context.Context, d store.Delivery) (inserted bool, err error)
}

// ReceiverConfig configures a Receiver. Store and at least one secret are required.
type ReceiverConfig struct {
	Store   Intake
	Secrets []Secret
	// Notify is called after a new delivery was stored (Pool.Notify), to wake a worker.
	Notify func()
	Logger *slog.Logger
	// Metrics may be nil: the receiver then counts into metrics nobody exports.
	Metrics *Metrics
	// MaxBodyBytes defaults to MaxBodyBytes.
	MaxBodyBytes int64
	// PutTimeout bounds the wait for the store, well inside GitHub's 10 s. Default 5s.
	PutTimeout time.Duration
	// Now defaults to time.Now; it stamps ReceivedAt.
	Now func() time.Time
	// Failures rate limits failed signatures per client address; nil: no limit.
	Failures *guard.Failures
	// Bodies caps the bytes held by bodies whose signature is not checked yet, shared by every
	// receiver; nil: no cap. SpoolDir is where a body past SpoolThreshold is spooled ("":
	// os.TempDir()).
	Bodies   *guard.Bodies
	SpoolDir string
}

// Receiver is the http.Handler for GitHub webhooks (POST GitHubPath). See the package doc for
// the order of checks and the status codes.
type Receiver struct {
	store      Intake
	secrets    atomic.Pointer[[]Secret]
	notify     func()
	log        *slog.Logger
	metrics    *Metrics
	maxBody    int64
	putTimeout time.Duration
	now        func() time.Time
	failures   *guard.Failures
	bodies     *guard.Bodies
	spoolDir   string
}

// NewReceiver checks cfg and returns a Receiver.
func NewReceiver(cfg ReceiverConfig) (*Receiver, error) {
	if cfg.Store == nil {
		return nil, errors.New("webhooks receiver: no store")
	}
	r := &Receiver{
		store:      cfg.Store,
		notify:     cfg.Notify,
		log:        orDiscard(cfg.Logger),
		metrics:    cfg.Metrics,
		maxBody:    cfg.MaxBodyBytes,
		putTimeout: cfg.PutTimeout,
		now:        cfg.Now,
		failures:   cfg.Failures,
		bodies:     cfg.Bodies,
		spoolDir:   cfg.SpoolDir,
	}
	if err := r.SetSecrets(cfg.Secrets...); err != nil {
		return nil, err
	}
	intakeDefaults(&r.metrics, &r.notify, &r.maxBody, &r.putTimeout, &r.now)
	return r, nil
}

// intakeDefaults fills in what both receivers default the same way: unexported metrics, no
// notification, GitHub's 25 MB body limit, a 5 s wait for the store, and the wall clock.
func intakeDefaults(m **Metrics, notify *func(), maxBody *int64, putTimeout *time.Duration, now *func() time.Time) {
	if *m == nil {
		*m = newMetrics()
	}
	if *notify == nil {
		*notify = func() {}
	}
	if *maxBody <= 0 {
		*maxBody = MaxBodyBytes
	}
	if *putTimeout <= 0 {
		*putTimeout = 5 * time.Second
	}
	if *now == nil {
		*now = time.Now
	}
}

// SetSecrets replaces the live secrets; requests already being verified finish with the old
// set. During a rotation configure both the old and the new secret, switch the App to the new
// one, then drop the old.
func (r *Receiver) SetSecrets(secrets ...Secret) error {
	live := make([]Secret, 0, len(secrets))
	for _, s := range secrets {
		if !s.IsZero() {
			live = append(live, s)
		}
	}
	if len(live) == 0 {
		return errors.New("webhooks receiver: no webhook secret configured (refusing to accept unsigned deliveries)")
	}
	r.secrets.Store(&live)
	return nil
}

// reply is the JSON body of every answer, so GitHub's delivery log shows what happened.
type reply struct {
	Status   string `json:"status"`
	Delivery string `json:"delivery,omitempty"`
	Error    string `json:"error,omitempty"`
	// Note says more about a "duplicate": the delivery that holds the same body.
	Note string `json:"note,omitempty"`
}

func writeReply(w http.ResponseWriter, code int, rep reply) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(rep)
}

func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	const source = store.SourceGitHub
	event := req.Header.Get(HeaderEvent)
	id := req.Header.Get(HeaderDelivery)
	// Header values are logged only once they are known to be well-formed.
	log := deliveryLogger(r.log, source, "", "")
	refuse := func(code int, reason string, err error) {
		r.metrics.rejected.WithLabelValues(source, reason).Inc()
		log.Info("webhook refused", slog.Int(LogKeyStatus, code), slog.String(LogKeyError, err.Error()))
		writeReply(w, code, reply{Status: "refused", Error: err.Error()})
	}

	if req.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		refuse(http.StatusMethodNotAllowed, reasonMethod, fmt.Errorf("method %s not allowed, use POST", req.Method))
		return
	}
	if err := checkHeader(HeaderEvent, event, validEvent); err != nil {
		refuse(http.StatusBadRequest, reasonHeader, err)
		return
	}
	if err := checkHeader(HeaderDelivery, id, validDeliveryID); err != nil {
		refuse(http.StatusBadRequest, reasonHeader, err)
		return
	}
	log = deliveryLogger(r.log, source, id, event)

	// The signature header is checked before the body is read: an unsigned request costs
	// nothing.
	mac, err := parseSignature(req.Header.Get(HeaderSignature))
	if err != nil {
		r.signatureFailure(w, req, log, source, err)
		return
	}
	if req.ContentLength > r.maxBody {
		refuse(http.StatusRequestEntityTooLarge, reasonTooLarge,
			fmt.Errorf("body of %d bytes exceeds the %d-byte limit", req.ContentLength, r.maxBody))
		return
	}
	// The body is hashed under every secret as it streams, in memory or a spool file reserved
	// in the unauthenticated body budget, so that a wrong signature costs one pass over what
	// was sent and holds nothing once it is answered.
	hmacs := newMACs(sha256.New, *r.secrets.Load())
	pending, err := readPending(w, req, r.maxBody, intake{budget: r.bodies, endpoint: source, spoolDir: r.spoolDir, pace: r.failures.Pace(req)}, hmacs.writers()...)
	defer pending.Close()
	if pending.spoolErr != nil {
		log.Warn("webhook body kept in memory: no spool file", slog.String(LogKeyError, pending.spoolErr.Error()))
	}
	if err != nil {
		readFailure(err, r.maxBody, refuse, func(err error) {
			r.metrics.rejected.WithLabelValues(source, reasonBusy).Inc()
			log.Warn("webhook refused", slog.Int(LogKeyStatus, http.StatusServiceUnavailable), slog.String(LogKeyError, err.Error()))
			w.Header().Set("Retry-After", busyRetryAfter)
			writeReply(w, http.StatusServiceUnavailable, reply{Status: "unavailable", Error: err.Error()})
		})
		return
	}
	ok := slices.Contains(hmacs.match(mac), true)
	if !ok {
		r.failures.ChargeBody(req, pending.size)
		r.signatureFailure(w, req, log, source, errSignatureMismatch)
		return
	}
	body, err := pending.Bytes()
	if err != nil {
		r.metrics.rejected.WithLabelValues(source, reasonBusy).Inc()
		log.Error("webhook body lost", slog.String(LogKeyError, err.Error()))
		w.Header().Set("Retry-After", busyRetryAfter)
		writeReply(w, http.StatusServiceUnavailable, reply{Status: "unavailable", Delivery: id, Error: "delivery could not be read back; redeliver it later"})
		return
	}
	// Authenticated: the body is no longer held on an unknown sender's behalf.
	pending.Close()

	// Authenticated from here on: the body may be looked at.
	if err := checkContentType(req.Header.Get("Content-Type")); err != nil {
		refuse(http.StatusUnsupportedMediaType, reasonContentType, err)
		return
	}
	// Only a cheap shape check on the acknowledgement path: a full json.Valid costs more CPU
	// than the HMAC for a 25 KB body. GitHub sends a JSON object; a handler that cannot decode
	// a body returns a permanent error and the delivery is dead-lettered.
	if !looksLikeJSONObject(body) {
		refuse(http.StatusBadRequest, reasonInvalidJSON, errors.New("body is not a JSON object"))
		return
	}

	outcome := put(req.Context(), r.store, r.putTimeout, r.metrics, log, "webhook", store.Delivery{
		Source:     source,
		ID:         id,
		Event:      event,
		Body:       body,
		ReceivedAt: r.now(),
	})
	switch outcome.kind {
	case putFailed:
		w.Header().Set("Retry-After", "5")
		writeReply(w, http.StatusServiceUnavailable, reply{Status: "unavailable", Delivery: id, Error: "delivery could not be stored; redeliver it later"})
		return
	case putDuplicate:
		writeReply(w, http.StatusOK, reply{Status: "duplicate", Delivery: id, Note: outcome.duplicateNote()})
		return
	}
	r.notify()
	log.Info("webhook stored", slog.Int(LogKeyStatus, http.StatusAccepted), slog.Int("bytes", len(body)))
	writeReply(w, http.StatusAccepted, reply{Status: "accepted", Delivery: id})
}

// putKind is what a durable Put came to.
type putKind int

const (
	putStored putKind = iota
	putDuplicate
	putFailed
)

// putOutcome is a Put's kind and, for a duplicate of another delivery's body, that delivery's ID.
type putOutcome struct {
	kind     putKind
	storedAs string
}

// duplicateNote is what a duplicate's reply says: nothing for a redelivery of a stored ID, the
// stored delivery for a body stored under another one.
func (o putOutcome) duplicateNote() string {
	if o.storedAs == "" {
		return ""
	}
	return "this body was already delivered as " + o.storedAs + "; nothing stored"
}

// put stores d durably, waiting at most timeout for the store, and counts and logs the outcome
// (what names the kind of request in the log: "webhook", "event"); the caller answers the request:
// a 2xx only for putStored and putDuplicate.
func put(ctx context.Context, st Intake, timeout time.Duration, m *Metrics, log *slog.Logger, what string, d store.Delivery) putOutcome {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	inserted, err := st.Put(ctx, d)
	if dup, ok := errors.AsType[*store.DuplicateBodyError](err); ok {
		// A replay: the signed body is stored already, under another ID (or relabelled as
		// another event). Answered like a redelivery, so a sender never retries it, and
		// logged with the delivery that holds the body.
		m.duplicates.WithLabelValues(d.Source, d.Event).Inc()
		log.Warn(what+" duplicate body", slog.Int(LogKeyStatus, http.StatusOK), slog.String("stored_as", dup.Stored.ID))
		return putOutcome{kind: putDuplicate, storedAs: dup.Stored.ID}
	}
	switch {
	case err != nil:
		m.rejected.WithLabelValues(d.Source, reasonStoreFailure).Inc()
		log.Error(what+" not stored", slog.Int(LogKeyStatus, http.StatusServiceUnavailable), slog.String(LogKeyError, err.Error()))
		return putOutcome{kind: putFailed}
	case !inserted:
		m.duplicates.WithLabelValues(d.Source, d.Event).Inc()
		log.Info(what+" duplicate", slog.Int(LogKeyStatus, http.StatusOK))
		return putOutcome{kind: putDuplicate}
	}
	m.received.WithLabelValues(d.Source, d.Event).Inc()
	return putOutcome{kind: putStored}
}

// signatureFailure answers a request whose signature is missing, malformed or wrong: 401, or 429
// with Retry-After once its client address is over its budget of failures.
func (r *Receiver) signatureFailure(w http.ResponseWriter, req *http.Request, log *slog.Logger, source string, err error) {
	if throttled(w, req, r.failures, r.metrics, source) {
		return
	}
	reason := reasonMismatch
	switch {
	case errors.Is(err, errSignatureMissing):
		reason = reasonMissing
	case errors.Is(err, errSignatureMalformed):
		reason = reasonMalformed
	}
	r.metrics.signatureFailures.WithLabelValues(source, reason).Inc()
	log.Warn("webhook signature refused", slog.Int(LogKeyStatus, http.StatusUnauthorized), slog.String(LogKeyError, err.Error()))
	writeReply(w, http.StatusUnauthorized, reply{Status: "unauthorized", Error: err.Error()})
}

// throttled counts req's failed authentication and, when its client address is over its budget
// of failures, answers 429 with Retry-After after the hold (guard.Failures.Hold) and reports
// true. It is called only once the credentials have failed: a request whose credentials verify
// is never throttled nor held.
func throttled(w http.ResponseWriter, req *http.Request, f *guard.Failures, m *Metrics, source string) bool {
	wait, ok := f.Failed(req, source)
	if !ok {
		return false
	}
	f.Hold(req, wait)
	m.rejected.WithLabelValues(source, reasonThrottled).Inc()
	w.Header().Set("Retry-After", guard.RetryAfter(wait))
	writeReply(w, http.StatusTooManyRequests, reply{Status: "throttled",
		Error: "too many failed authentications from this address; try again after Retry-After seconds"})
	return true
}

func checkHeader(name, value string, valid func(string) bool) error {
	if value == "" {
		return fmt.Errorf("missing %s header", name)
	}
	if !valid(value) {
		return fmt.Errorf("malformed %s header %s", name, strconv.QuoteToASCII(truncate(value, 80)))
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// validEvent accepts GitHub event names: lower-case letters, digits and underscores, as in
// "pull_request_review" and "projects_v2_item". The name becomes a metric label and a log attribute, so the check is
// strict.
func validEvent(s string) bool {
	if len(s) > 64 {
		return false
	}
	for _, c := range []byte(s) {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' {
			return false
		}
	}
	return true
}

// validDeliveryID accepts GitHub's GUIDs and any other short token of letters, digits and
// "-_.:" (other sources' event IDs), nothing that could forge a log line.
func validDeliveryID(s string) bool {
	if len(s) > 128 {
		return false
	}
	for _, c := range []byte(s) {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '-', c == '_', c == '.', c == ':':
		default:
			return false
		}
	}
	return true
}

// checkContentType accepts application/json (with or without parameters). GitHub Apps always
// send JSON; the form encoding a repository webhook can be set to is refused rather than
// stored in a shape no handler reads.
func checkContentType(ct string) error {
	if ct == "" {
		return errors.New("missing Content-Type header, want application/json")
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || mt != "application/json" {
		return fmt.Errorf("Content-Type %s not supported, configure the webhook to send application/json", strconv.QuoteToASCII(truncate(ct, 80)))
	}
	return nil
}

// looksLikeJSONObject reports whether body, trimmed of JSON whitespace, starts with '{' and
// ends with '}'.
func looksLikeJSONObject(body []byte) bool {
	body = bytes.Trim(body, " \t\r\n")
	return len(body) >= 2 && body[0] == '{' && body[len(body)-1] == '}'
}

// busyRetryAfter is the Retry-After of a 503 for a full body budget: long enough for the bodies
// holding it to be answered.
const busyRetryAfter = "5"

// readFailure answers a body that could not be read: 413 past the limit, busy (503) for a full
// budget or a spool file that could not be written, 400 for a body the client broke off.
func readFailure(err error, limit int64, refuse func(code int, reason string, err error), busy func(error)) {
	if mbe, ok := errors.AsType[*http.MaxBytesError](err); ok {
		refuse(http.StatusRequestEntityTooLarge, reasonTooLarge, fmt.Errorf("body exceeds the %d-byte limit", mbe.Limit))
		return
	}
	if errors.Is(err, errBodyBudget) || errors.Is(err, errSpool) {
		busy(err)
		return
	}
	refuse(http.StatusBadRequest, reasonReadBody, fmt.Errorf("read body: %w", err))
}
