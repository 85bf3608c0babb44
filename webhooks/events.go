package webhooks

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/parleyhq/parley/webhooks/guard"
	"github.com/parleyhq/parley/webhooks/store"
)

// Where the drift event sources POST; mount one EventReceiver at each, and the same receiver at
// ClusterPattern of each.
const (
	FluxPath       = "/events/" + store.SourceFlux
	ArgoCDPath     = "/events/" + store.SourceArgoCD
	K8sAuditPath   = "/events/" + store.SourceK8sAudit
	CloudTrailPath = "/events/" + store.SourceCloudTrail
)

// clusterWildcard is the name of the path wildcard ClusterPattern adds.
const clusterWildcard = "cluster"

// ClusterPattern returns the net/http.ServeMux pattern (Go 1.22 syntax) of the per-cluster
// endpoint under a drift event path: path + "/{cluster}", e.g. "/events/flux/{cluster}". Mount
// the same EventReceiver at both path and ClusterPattern(path): a delivery posted to
// /events/<source>/<cluster> is stored with store.Delivery.Scope set to the cluster, so that it
// can be routed to that cluster's repository, under an ID naming the cluster
// (ScopedDeliveryID); one posted to /events/<source> has no scope.
func ClusterPattern(path string) string { return path + "/{" + clusterWildcard + "}" }

// EventName is the store Delivery.Event of every drift event delivery, whatever its source: the
// sources send one kind of body each, so the source alone says how to decode it. Register pool
// handlers under Route{Source: store.SourceFlux, Event: EventName} and so on.
const EventName = "event"

// Authentication headers of the drift event sources.
const (
	// HeaderXSignature carries "<algorithm>=<hex HMAC of the body>", as Flux notification-controller's
	// generic-hmac provider sends it ("sha256=..."). sha384 and sha512 are accepted too. Sign
	// computes the sha256 form (the same as GitHub's X-Hub-Signature-256).
	HeaderXSignature = "X-Signature"
	// HeaderAuthorization carries "Bearer <token>" (Argo CD notifications, the audit webhook
	// backend's kubeconfig token, an EventBridge API destination's API-key header).
	HeaderAuthorization = "Authorization"
)

// ErrStale marks an EventIDFunc error for a body whose events happened outside the receiver's
// freshness window (Freshness.Check): it is answered 400 with reason stale_event.
var ErrStale = errors.New("events outside the freshness window")

// Freshness is the window of event times the drift receivers accept: from Past before now to
// Future after it (a zero bound checks nothing on that side). A sender that holds a credential
// could otherwise post events dated years ago or ahead (a captured signed body replayed long
// after its delivery was pruned, or a clock set to 2099) and have them judged as news.
// `parley ingest` reads files without the receivers, so old events can still be replayed on
// purpose.
type Freshness struct {
	Past, Future time.Duration
}

// Check returns an error wrapping ErrStale naming the first bound [oldest, newest] is outside of
// at now; zero times are not checked.
func (f Freshness) Check(oldest, newest, now time.Time) error {
	const layout = time.RFC3339
	if f.Past > 0 && !oldest.IsZero() && oldest.Before(now.Add(-f.Past)) {
		return fmt.Errorf("%w: an event at %s is more than %s old (the server's time is %s); replay old events with parley ingest",
			ErrStale, oldest.UTC().Format(layout), f.Past, now.UTC().Format(layout))
	}
	if f.Future > 0 && !newest.IsZero() && newest.After(now.Add(f.Future)) {
		return fmt.Errorf("%w: an event at %s is more than %s ahead of the server's time %s; check the sender's clock",
			ErrStale, newest.UTC().Format(layout), f.Future, now.UTC().Format(layout))
	}
	return nil
}

// EventIDFunc returns the IDs of the events in a body that Parley may act on (none: the body is
// answered "ignored" and not stored), what it left out counted by reason, or an error naming what
// makes the body something the source does not send. The app passes events.EventIDs bound to the
// source.
type EventIDFunc func(body []byte) (ids []string, ignored map[string]int, err error)

// EventReceiverConfig configures an EventReceiver. Source, ID and Store are required.
type EventReceiverConfig struct {
	// Source is store.SourceFlux, SourceArgoCD, SourceK8sAudit or SourceCloudTrail. Flux
	// authenticates with X-Signature only (its generic-hmac provider); the others with
	// Authorization: Bearer or X-Signature.
	Source string
	// Secrets are the HMAC keys (Flux) or bearer tokens (the others). Several are accepted at
	// once so that a secret can be rotated without dropping events. None: the source is not
	// enabled and every request is answered 403.
	Secrets []Secret
	// Setting names what an operator sets to enable the source (e.g. "PARLEY_FLUX_HMAC_SECRET");
	// the 403 quotes it.
	Setting string
	ID      EventIDFunc
	Store   Intake
	// Notify is called after a new delivery was stored (Pool.Notify).
	Notify func()
	Logger *slog.Logger
	// Metrics and EventMetrics may be nil: the receiver then counts into metrics nobody exports.
	Metrics      *Metrics
	EventMetrics *EventMetrics
	// MaxBodyBytes defaults to MaxBodyBytes (25 MB): an audit EventList or a CloudTrail Records
	// file is far larger than a GitHub event but still bounded by the sender's batch size.
	MaxBodyBytes int64
	// PutTimeout bounds the wait for the store. Default 5s.
	PutTimeout time.Duration
	// Now defaults to time.Now; it stamps ReceivedAt.
	Now func() time.Time
	// Clusters reports whether name is a cluster the server is configured for. It is asked
	// only about requests to ClusterPattern(path) whose credentials were verified and whose
	// cluster name is valid (store.ValidScope). Nil: no cluster is known, and every request
	// to a per-cluster path is answered 404.
	Clusters func(name string) bool
	// Failures rate limits failed credentials per client address; nil: no limit.
	Failures *guard.Failures
	// Bodies caps the bytes held by signed bodies whose X-Signature is not checked yet, shared
	// by every receiver; nil: no cap. SpoolDir is where a body past SpoolThreshold is spooled
	// ("": os.TempDir()).
	Bodies   *guard.Bodies
	SpoolDir string
	// Credentials are narrower than Secrets: each authenticates only one cluster's or one AWS
	// account's deliveries (403 for any other), so a cluster's token cannot post for another.
	// A secret both in Secrets and here, or in several credentials, is accepted as the widest.
	Credentials []Credential
	// Accounts returns the AWS accounts of a body's records; it is needed with Account
	// credentials (the app passes events.OriginOf's Accounts).
	Accounts func(body []byte) ([]string, error)
}

// Credential is an event secret of one cluster or one AWS account.
type Credential struct {
	Secret Secret
	// Cluster: the credential posts only to ClusterPattern(path) for this cluster.
	Cluster string
	// Account: the credential posts only to the unscoped path, bodies whose every record is of
	// this AWS account (CloudTrail's recipientAccountId).
	Account string
}

// EventMetrics are the drift receivers' own metrics, shared by the four receivers. The delivery
// counters (received, duplicates, signature failures, rejections) are the intake's Metrics, with
// event label EventName.
type EventMetrics struct {
	ignored *prometheus.CounterVec
}

func newEventMetrics() *EventMetrics {
	return &EventMetrics{ignored: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "parley_events_ignored_total",
		Help: "Events in authenticated drift event bodies that held nothing Parley acts on (answered 200 \"ignored\", not stored), by source and the decoder's reason.",
	}, []string{"source", "reason"})}
}

// NewEventMetrics creates the drift receivers' metrics and registers them in reg.
func NewEventMetrics(reg prometheus.Registerer) (*EventMetrics, error) {
	m := newEventMetrics()
	if err := reg.Register(m.ignored); err != nil {
		return nil, fmt.Errorf("register event metrics: %w", err)
	}
	return m, nil
}

// EventReceiver is the http.Handler for one drift event source (POST FluxPath, ArgoCDPath,
// K8sAuditPath or CloudTrailPath, and the per-cluster ClusterPattern of each). It stores each
// relevant body once, as it came, under the source's own event ID (see DeliveryID), and
// processes nothing on the request's goroutine.
//
// The order of checks follows the GitHub Receiver:
//
//  1. the method (405);
//  2. whether the source is enabled (403 naming the setting);
//  3. a bearer token, or the presence and form of X-Signature (401, before the body is read);
//  4. the size (413), and for a signed body room in the unauthenticated body budget (503 with
//     Retry-After, before the body is read when its length is declared);
//  5. the X-Signature HMAC of the raw body against every secret, computed as it streams (401).
//     A failed credential (3 or 5) is answered 429 with Retry-After instead of 401 once its
//     client address has failed too often; a valid one is never refused for that;
//  6. on a per-cluster path, the cluster name: its form (400, reason invalid_cluster), then
//     whether the server knows the cluster (404, reason unknown_cluster, naming the
//     configuration block to add). Only now, once the credentials are verified, so that an
//     unauthenticated caller learns nothing of which clusters exist; then, when only a cluster's
//     or an AWS account's Credential matched, that it posts for its own cluster, or records of
//     its own account only (403, reason wrong_scope);
//  7. application/json (415);
//  8. a JSON object (400);
//  9. the source's decoder, whose error names what is wrong with the body (400), and the events'
//     times against the freshness window the ID function checks (400, reason stale_event);
//  10. then the delivery ID and a durable Put: 202 when stored, 200 "duplicate" when that ID
//     was stored before, 503 with Retry-After when the store cannot commit.
//
// A body that decodes but holds no relevant event is answered 200 "ignored", counted in
// parley_events_ignored_total by reason, and not stored.
//
// The cluster of a per-cluster path is stored as the delivery's Scope and is part of its
// identity: its ID (ScopedDeliveryID) and the body digest the store deduplicates by. The same
// body posted under two clusters (or under a cluster and the unscoped path) is two deliveries,
// each judged in its own cluster's repository; only a redelivery to the same path is a
// duplicate. Otherwise the first to post a body would decide its cluster: a cluster whose
// credential posts only to its own path could post another cluster's body first (Flux and
// Argo CD event IDs are derived from what the events say, so they can be predicted) and have
// the rightful cluster's post answered "duplicate" and never judged under its cluster.
type EventReceiver struct {
	eventIntake
	source   string
	bearer   bool
	setting  string
	id       EventIDFunc
	secrets  atomic.Pointer[[]Secret]
	clusters func(name string) bool
	bodies   *guard.Bodies
	spoolDir string
	creds    []Credential
	accounts func(body []byte) ([]string, error)
}

// NewEventReceiver checks cfg and returns an EventReceiver. No secret is not an error: the
// receiver then answers 403, which tells whoever points a source at Parley what to configure.
func NewEventReceiver(cfg EventReceiverConfig) (*EventReceiver, error) {
	r := &EventReceiver{
		eventIntake: newEventIntake(IntakeConfig{Store: cfg.Store, Notify: cfg.Notify, Logger: cfg.Logger, Metrics: cfg.Metrics,
			EventMetrics: cfg.EventMetrics, MaxBodyBytes: cfg.MaxBodyBytes, PutTimeout: cfg.PutTimeout, Now: cfg.Now, Failures: cfg.Failures}),
		source:   cfg.Source,
		setting:  cfg.Setting,
		id:       cfg.ID,
		clusters: cfg.Clusters,
		bodies:   cfg.Bodies,
		spoolDir: cfg.SpoolDir,
		accounts: cfg.Accounts,
	}
	for _, c := range cfg.Credentials {
		if c.Secret.IsZero() {
			continue
		}
		if (c.Cluster == "") == (c.Account == "") {
			return nil, fmt.Errorf("event receiver %s: a credential names exactly one cluster or one account", cfg.Source)
		}
		if c.Account != "" && cfg.Accounts == nil {
			return nil, fmt.Errorf("event receiver %s: account %s's credential needs the Accounts function", cfg.Source, c.Account)
		}
		r.creds = append(r.creds, c)
	}
	switch cfg.Source {
	case store.SourceFlux:
		// The generic-hmac provider signs; a bearer token would be an extra header an operator
		// has to add by hand, so Flux is held to the signature.
	case store.SourceArgoCD, store.SourceK8sAudit, store.SourceCloudTrail:
		r.bearer = true
	default:
		return nil, fmt.Errorf("event receiver: unknown source %q (want %s, %s, %s or %s)", cfg.Source,
			store.SourceFlux, store.SourceArgoCD, store.SourceK8sAudit, store.SourceCloudTrail)
	}
	if cfg.Store == nil {
		return nil, fmt.Errorf("event receiver %s: no store", cfg.Source)
	}
	if cfg.ID == nil {
		return nil, fmt.Errorf("event receiver %s: no ID function", cfg.Source)
	}
	r.SetSecrets(cfg.Secrets...)
	return r, nil
}

// SetSecrets replaces the live secrets (zero secrets are dropped); requests already being
// verified finish with the old set. No secret disables the source.
func (r *EventReceiver) SetSecrets(secrets ...Secret) {
	live := make([]Secret, 0, len(secrets))
	for _, s := range secrets {
		if !s.IsZero() {
			live = append(live, s)
		}
	}
	r.secrets.Store(&live)
}

// Source returns the store source the receiver stores deliveries under.
func (r *EventReceiver) Source() string { return r.source }

// eventReply is the JSON body of every answer. Ignored is set on an "ignored" answer, so the
// sender's log says why nothing was kept.
type eventReply struct {
	Status   string         `json:"status"`
	Delivery string         `json:"delivery,omitempty"`
	Events   int            `json:"events,omitempty"`
	Ignored  map[string]int `json:"ignored,omitempty"`
	Error    string         `json:"error,omitempty"`
	Note     string         `json:"note,omitempty"`
}

func writeEventReply(w http.ResponseWriter, code int, rep eventReply) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(rep)
}

// Reasons of the drift receivers, besides the GitHub receiver's.
const (
	reasonNotEnabled     = "not_enabled"
	reasonInvalidEvent   = "invalid_event"
	reasonInvalidCluster = "invalid_cluster"
	reasonUnknownCluster = "unknown_cluster"
	reasonStaleEvent     = "stale_event"
	reasonWrongScope     = "wrong_scope"
)

// matchCredentials returns the credentials match accepts, trying every one (no early exit).
func (r *EventReceiver) matchCredentials(match func(Credential) bool) []Credential {
	var out []Credential
	for _, c := range r.creds {
		if match(c) {
			out = append(out, c)
		}
	}
	return out
}

// permits checks that one of the narrow credentials a request presented may post body to scope
// (its cluster, "" for the unscoped path): a cluster's only to its own path, an account's only
// records of that account on the unscoped path.
func (r *EventReceiver) permits(narrow []Credential, scope string, body []byte) error {
	var accounts []string
	var accountsErr error
	read := false
	for _, c := range narrow {
		if c.Cluster != "" && c.Cluster == scope {
			return nil
		}
		if c.Account == "" || scope != "" {
			continue
		}
		if !read {
			accounts, accountsErr = r.accounts(body)
			read = true
		}
		if accountsErr == nil && len(accounts) > 0 && !slices.ContainsFunc(accounts, func(a string) bool { return a != c.Account }) {
			return nil
		}
	}
	if accountsErr != nil {
		return fmt.Errorf("the credential is an AWS account's, and the body's accounts cannot be read: %w", accountsErr)
	}
	if scope != "" {
		return fmt.Errorf("the credential presented does not post for cluster %q: each cluster's event secret posts only to its own /events/%s/<cluster>", scope, r.source)
	}
	if len(accounts) > 0 {
		return fmt.Errorf("the credential presented does not post records of AWS account %s", strings.Join(accounts, ", "))
	}
	return fmt.Errorf("the credential presented is a cluster's or an AWS account's: post to /events/%s/<cluster> with a cluster's, or CloudTrail records of its own account with an account's", r.source)
}

// ServeHTTP answers one delivery, checking it in the order the EventReceiver doc lists.
func (r *EventReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	source := r.source
	// Nothing from the request is logged before it is authenticated and its ID derived; the
	// Authorization header and the secrets are never logged.
	log := deliveryLogger(r.log, source, "", EventName)
	refuse, unauthorized := eventRefusals(w, req, r.metrics, r.failures, log, source, "event")

	if req.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		refuse(http.StatusMethodNotAllowed, reasonMethod, fmt.Errorf("method %s not allowed, use POST", req.Method))
		return
	}
	secrets := *r.secrets.Load()
	if len(secrets) == 0 && len(r.creds) == 0 {
		msg := fmt.Sprintf("%s events are not enabled on this server", source)
		if r.setting != "" {
			msg += ": set " + r.setting + " to enable them"
		}
		refuse(http.StatusForbidden, reasonNotEnabled, errors.New(msg))
		return
	}

	// Credentials are checked before the body is read where they can be: a bearer token at once,
	// the form of a signature header; only the HMAC itself needs the body.
	var sig *xSignature
	// wide: a source-wide secret matched; narrow: the cluster and account credentials that did.
	var wide bool
	var narrow []Credential
	authz, sigHeader := req.Header.Get(HeaderAuthorization), req.Header.Get(HeaderXSignature)
	switch {
	case r.bearer && authz != "":
		token, ok := bearerToken(authz)
		if !ok {
			unauthorized(reasonMalformed, errors.New("malformed Authorization header: want Bearer <token>"))
			return
		}
		wide, narrow = matchToken(secrets, token), r.matchCredentials(func(c Credential) bool { return matchToken([]Secret{c.Secret}, token) })
		if !wide && len(narrow) == 0 {
			unauthorized(reasonMismatch, errors.New("bearer token does not match any configured token"))
			return
		}
	case sigHeader != "":
		s, err := parseXSignature(sigHeader)
		if err != nil {
			unauthorized(reasonMalformed, err)
			return
		}
		sig = s
	case r.bearer:
		unauthorized(reasonMissing, fmt.Errorf("missing credentials: send %s: Bearer <token> or %s: sha256=<hex HMAC of the body>", HeaderAuthorization, HeaderXSignature))
		return
	default:
		unauthorized(reasonMissing, fmt.Errorf("missing %s header: configure a generic-hmac provider", HeaderXSignature))
		return
	}

	if req.ContentLength > r.maxBody {
		refuse(http.StatusRequestEntityTooLarge, reasonTooLarge,
			fmt.Errorf("body of %d bytes exceeds the %d-byte limit", req.ContentLength, r.maxBody))
		return
	}
	// A signed body is hashed under every secret and credential as it streams, held in memory
	// or a spool file reserved in the unauthenticated body budget; a body under a verified
	// bearer token is authenticated already, and read as it is.
	in := intake{endpoint: source, noSpool: true}
	var hmacs macs
	if sig != nil {
		in = intake{budget: r.bodies, endpoint: source, spoolDir: r.spoolDir, pace: r.failures.Pace(req)}
		// The source-wide secrets first, then each credential's, in r.creds's order.
		all := append([]Secret{}, secrets...)
		for _, c := range r.creds {
			all = append(all, c.Secret)
		}
		hmacs = newMACs(sig.newHash, all)
	}
	pending, err := readPending(w, req, r.maxBody, in, hmacs.writers()...)
	defer pending.Close()
	if pending.spoolErr != nil {
		log.Warn("event body kept in memory: no spool file", slog.String(LogKeyError, pending.spoolErr.Error()))
	}
	if err != nil {
		readFailure(err, r.maxBody, refuse, func(err error) {
			r.metrics.rejected.WithLabelValues(source, reasonBusy).Inc()
			log.Warn("event refused", slog.Int(LogKeyStatus, http.StatusServiceUnavailable), slog.String(LogKeyError, err.Error()))
			w.Header().Set("Retry-After", busyRetryAfter)
			writeEventReply(w, http.StatusServiceUnavailable, eventReply{Status: "unavailable", Error: err.Error()})
		})
		return
	}
	if sig != nil {
		// Every secret and credential is compared, without an early exit.
		for i, match := range hmacs.match(sig.mac) {
			switch {
			case i < len(secrets):
				wide = wide || match
			case match:
				narrow = append(narrow, r.creds[i-len(secrets)])
			}
		}
		if !wide && len(narrow) == 0 {
			r.failures.ChargeBody(req, pending.size)
			unauthorized(reasonMismatch, fmt.Errorf("%s does not match the body under any configured secret", HeaderXSignature))
			return
		}
	}
	body, err := pending.Bytes()
	if err != nil {
		r.metrics.rejected.WithLabelValues(source, reasonBusy).Inc()
		log.Error("event body lost", slog.String(LogKeyError, err.Error()))
		w.Header().Set("Retry-After", busyRetryAfter)
		writeEventReply(w, http.StatusServiceUnavailable, eventReply{Status: "unavailable", Error: "event could not be read back; send it again later"})
		return
	}
	// Authenticated: the body is no longer held on an unknown sender's behalf.
	pending.Close()

	// Authenticated from here on: the cluster and the body may be looked at. A request to the
	// unscoped path has no cluster wildcard, and PathValue returns "".
	scope := req.PathValue(clusterWildcard)
	if scope != "" {
		if err := store.ValidScope(scope); err != nil {
			refuse(http.StatusBadRequest, reasonInvalidCluster, err)
			return
		}
		if r.clusters == nil || !r.clusters(scope) {
			refuse(http.StatusNotFound, reasonUnknownCluster, fmt.Errorf(
				`unknown cluster %q: add a cluster %q { repository = "owner/name" } block to the server configuration (docs/install.md)`,
				scope, scope))
			return
		}
		log = log.With(slog.String(LogKeyCluster, scope))
	}
	if !wide {
		if err := r.permits(narrow, scope, body); err != nil {
			refuse(http.StatusForbidden, reasonWrongScope, err)
			return
		}
	}
	if err := checkContentType(req.Header.Get("Content-Type")); err != nil {
		refuse(http.StatusUnsupportedMediaType, reasonContentType, err)
		return
	}
	if !looksLikeJSONObject(body) {
		refuse(http.StatusBadRequest, reasonInvalidJSON, errors.New("body is not a JSON object"))
		return
	}
	// Unlike GitHub's, these bodies carry no delivery header: the ID comes from the events inside,
	// so the body is decoded here. The decode also refuses, while the sender still has the body,
	// what no worker could ever read.
	ids, ignored, err := r.id(body)
	if errors.Is(err, ErrStale) {
		refuse(http.StatusBadRequest, reasonStaleEvent, err)
		return
	}
	if err != nil {
		refuse(http.StatusBadRequest, reasonInvalidEvent, err)
		return
	}
	if len(ids) == 0 {
		for reason, n := range ignored {
			r.events.ignored.WithLabelValues(source, ignoredLabel(reason)).Add(float64(n))
		}
		log.Info("event ignored", slog.Int(LogKeyStatus, http.StatusOK), slog.Any("ignored", ignored))
		writeEventReply(w, http.StatusOK, eventReply{Status: "ignored", Ignored: ignored})
		return
	}
	id := DeliveryID(ids)
	if scope != "" {
		id = ScopedDeliveryID(scope, id)
	}
	log = deliveryLogger(r.log, source, id, EventName)
	if scope != "" {
		log = log.With(slog.String(LogKeyCluster, scope))
	}

	outcome := put(req.Context(), r.store, r.putTimeout, r.metrics, log, "event", store.Delivery{
		Source:     source,
		ID:         id,
		Event:      EventName,
		Body:       body,
		ReceivedAt: r.now(),
		Scope:      scope,
	})
	switch outcome.kind {
	case putFailed:
		w.Header().Set("Retry-After", "5")
		writeEventReply(w, http.StatusServiceUnavailable, eventReply{Status: "unavailable", Delivery: id, Error: "event could not be stored; send it again later"})
		return
	case putDuplicate:
		writeEventReply(w, http.StatusOK, eventReply{Status: "duplicate", Delivery: id, Events: len(ids), Note: outcome.duplicateNote()})
		return
	}
	r.notify()
	log.Info("event stored", slog.Int(LogKeyStatus, http.StatusAccepted), slog.Int("bytes", len(body)), slog.Int("events", len(ids)))
	writeEventReply(w, http.StatusAccepted, eventReply{Status: "accepted", Delivery: id, Events: len(ids)})
}

// DeliveryID derives the store ID of a body from the IDs of the events it holds (the sources'
// own IDs: auditID, CloudTrail eventID, or the decoder's derived Flux and Argo CD IDs).
//
// One event: its ID, when it is a valid delivery ID (letters, digits and "-_.:", at most 128
// characters), else "event-" and the first 32 hex digits of its SHA-256. Several events (an audit
// EventList, a CloudTrail Records file): "batch-" and the first 32 hex digits of the SHA-256 of
// the sorted, distinct IDs joined by "\n", so a resent identical batch is a duplicate whatever
// the order of its events.
//
// Deduplication is per body: an event that arrives again inside a different batch (the audit
// backend regrouped it, or CloudTrail delivered it through both S3 and EventBridge) makes a new
// delivery. Dropping such repeated events is the processing side's job (events.Deduper, by
// event ID). The cluster a body was posted under is added by ScopedDeliveryID. ids must not be
// empty.
func DeliveryID(ids []string) string {
	distinct := make([]string, 0, len(ids))
	for _, id := range ids {
		if id != "" {
			distinct = append(distinct, id)
		}
	}
	slices.Sort(distinct)
	distinct = slices.Compact(distinct)
	if len(distinct) == 1 {
		if validDeliveryID(distinct[0]) {
			return distinct[0]
		}
		return "event-" + hash32(distinct[0])
	}
	return "batch-" + hash32(strings.Join(distinct, "\n"))
}

// ScopedDeliveryID is the store ID of a body posted for cluster: DeliveryID's id, "@" and the
// cluster, so the same events posted for two clusters are two deliveries. '@' is in neither a
// DeliveryID nor a cluster name (store.ValidScope), so no scoped ID equals an unscoped one or
// another cluster's.
func ScopedDeliveryID(cluster, id string) string { return id + "@" + cluster }

func hash32(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:32]
}

// ignoredLabel keeps a reason fit for a metric label: the decoders' reasons are short fixed
// words, and anything else (a future decoder's mistake) is folded into "other" rather than
// allowed to grow the label set.
func ignoredLabel(reason string) string {
	if reason == "" || len(reason) > 48 {
		return "other"
	}
	for _, c := range []byte(reason) {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' && c != '_' {
			return "other"
		}
	}
	return reason
}

// bearerToken reads "Bearer <token>"; the scheme is case-insensitive (RFC 9110).
func bearerToken(h string) (string, bool) {
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// matchToken compares the SHA-256 of token with that of every secret in constant time, without
// an early exit: comparing digests of equal length hides the secrets' lengths as well.
func matchToken(secrets []Secret, token string) bool {
	got := sha256.Sum256([]byte(token))
	ok := false
	for _, s := range secrets {
		want := sha256.Sum256(s.value)
		if hmac.Equal(got[:], want[:]) {
			ok = true
		}
	}
	return ok
}

// xSignature is a parsed X-Signature header.
type xSignature struct {
	newHash func() hash.Hash
	mac     []byte
}

// xSignatureAlgorithms are the SHA-2 HMACs Flux's notification-controller can sign with.
var xSignatureAlgorithms = map[string]struct {
	newHash func() hash.Hash
	size    int
}{
	"sha256": {sha256.New, sha256.Size},
	"sha384": {sha512.New384, sha512.Size384},
	"sha512": {sha512.New, sha512.Size},
}

var errXSignatureMalformed = errors.New("malformed " + HeaderXSignature +
	" header: want sha256=<hex HMAC-SHA256 of the body> (sha384= and sha512= are accepted too)")

func parseXSignature(h string) (*xSignature, error) {
	alg, hexMAC, ok := strings.Cut(strings.TrimSpace(h), "=")
	if !ok {
		return nil, errXSignatureMalformed
	}
	a, ok := xSignatureAlgorithms[strings.ToLower(alg)]
	if !ok || len(hexMAC) != 2*a.size {
		return nil, errXSignatureMalformed
	}
	mac, err := hex.DecodeString(hexMAC)
	if err != nil {
		return nil, errXSignatureMalformed
	}
	return &xSignature{newHash: a.newHash, mac: mac}, nil
}
