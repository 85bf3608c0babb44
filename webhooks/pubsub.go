package webhooks

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/parleyhq/parley/webhooks/store"
)

// PubSubPath is where Pub/Sub push subscriptions deliver: PubSubPath + "/<cluster>"
// (PubSubPattern).
const PubSubPath = "/events/pubsub"

// PubSubPattern is the net/http.ServeMux pattern of the Pub/Sub endpoint.
func PubSubPattern() string { return ClusterPattern(PubSubPath) }

// SourcePubSub labels the Pub/Sub endpoint's metrics and logs; its deliveries are stored under
// the source of the body the message makes (store.SourceK8sAudit).
const SourcePubSub = "pubsub"

// googleIssuers are the issuers Google's OIDC tokens carry.
var googleIssuers = []string{"https://accounts.google.com", "accounts.google.com"}

// PubSubSubscription is one cluster's push subscription: who may push for it.
type PubSubSubscription struct {
	Cluster string
	// Audience is the push subscription's audience (its push endpoint URL unless set otherwise).
	Audience string
	// ServiceAccount is the email of the service account the subscription pushes as: the token's
	// email claim, verified.
	ServiceAccount string
	// Keys verify the token's signature: Google's published keys (NewKeySetURL(GoogleKeysURL)).
	Keys *KeySet
}

// PubSubUnwrapFunc decodes a push body for cluster into the message's ID, the parts its data
// makes (at most one) and what it left out; errors as FirehoseUnwrapFunc's.
type PubSubUnwrapFunc func(cluster string, body []byte) (messageID string, parts []Part, ignored map[string]int, err error)

// PubSubReceiverConfig configures a PubSubReceiver. Unwrap and Store are required.
type PubSubReceiverConfig struct {
	IntakeConfig
	Subscriptions []PubSubSubscription
	Unwrap        PubSubUnwrapFunc
}

// PubSubReceiver is the http.Handler of PubSubPattern: a Pub/Sub push subscription with
// authentication. Pub/Sub takes 200, 201, 202, 204 and 102 as an acknowledgement and redelivers
// anything else with backoff until the message's retention ends (seven days at most), so a 2xx
// is answered only once the message is stored, was stored before (its messageId is the delivery
// ID: a redelivery is a duplicate, judged once), or holds nothing Parley acts on.
//
// Checks, in order: the method (405); a subscription configured for the cluster, else 401 like a
// bad token (an unauthenticated caller learns nothing of which clusters exist); the bearer token
// (401): an RS256 JWT whose key ID is in the key set and whose signature verifies, issued by
// accounts.google.com for the subscription's audience, not expired and not issued in the future,
// whose email is the subscription's service account and is verified; the size (413); JSON
// (415, 400); the message (400 naming what is wrong, stale_event outside the freshness window);
// then the durable Put (503 when the store cannot commit).
type PubSubReceiver struct {
	eventIntake
	subs   map[string]PubSubSubscription
	unwrap PubSubUnwrapFunc
}

// NewPubSubReceiver checks cfg and returns a PubSubReceiver.
func NewPubSubReceiver(cfg PubSubReceiverConfig) (*PubSubReceiver, error) {
	if cfg.Store == nil || cfg.Unwrap == nil {
		return nil, errors.New("pubsub receiver: a store and an unwrap function are required")
	}
	r := &PubSubReceiver{eventIntake: newEventIntake(cfg.IntakeConfig), subs: map[string]PubSubSubscription{}, unwrap: cfg.Unwrap}
	for _, s := range cfg.Subscriptions {
		switch {
		case store.ValidScope(s.Cluster) != nil:
			return nil, fmt.Errorf("pubsub receiver: %w", store.ValidScope(s.Cluster))
		case s.Audience == "" || s.ServiceAccount == "" || s.Keys == nil:
			return nil, fmt.Errorf("pubsub receiver: cluster %q needs an audience, a service account and a key set", s.Cluster)
		}
		if _, dup := r.subs[s.Cluster]; dup {
			return nil, fmt.Errorf("pubsub receiver: cluster %q is configured twice", s.Cluster)
		}
		r.subs[s.Cluster] = s
	}
	return r, nil
}

// pushClaims are the claims of Google's push token Parley checks beyond the registered ones.
type pushClaims struct {
	Email         string `json:"email"`
	EmailVerified bool   `json:"email_verified"`
	jwt.RegisteredClaims
}

// verify checks the token of a push for sub and returns why it is refused.
func (r *PubSubReceiver) verify(req *http.Request, sub PubSubSubscription, token string) error {
	var claims pushClaims
	_, err := jwt.ParseWithClaims(token, &claims, func(t *jwt.Token) (any, error) {
		kid, _ := t.Header["kid"].(string)
		return sub.Keys.Key(req.Context(), kid)
	}, jwt.WithValidMethods([]string{"RS256"}), jwt.WithAudience(sub.Audience), jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(), jwt.WithTimeFunc(r.now), jwt.WithLeeway(30*time.Second))
	if err != nil {
		return fmt.Errorf("push token refused: %w", err)
	}
	iss, _ := claims.GetIssuer()
	switch {
	case !slices.Contains(googleIssuers, iss):
		return fmt.Errorf("push token refused: issuer %q is not accounts.google.com", truncate(iss, 80))
	case !strings.EqualFold(claims.Email, sub.ServiceAccount):
		return fmt.Errorf("push token refused: it is %q's, not the push service account's", truncate(claims.Email, 120))
	case !claims.EmailVerified:
		return errors.New("push token refused: its email is not verified")
	}
	return nil
}

// ServeHTTP answers one push, in the order the PubSubReceiver doc lists.
func (r *PubSubReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	log := deliveryLogger(r.log, SourcePubSub, "", EventName)
	refuse, unauthorized := eventRefusals(w, req, r.metrics, r.failures, log, SourcePubSub, "pubsub push")
	if req.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		refuse(http.StatusMethodNotAllowed, reasonMethod, fmt.Errorf("method %s not allowed, use POST", req.Method))
		return
	}
	if len(r.subs) == 0 {
		refuse(http.StatusForbidden, reasonNotEnabled, errors.New("pubsub pushes are not enabled on this server: add a pubsub block naming the cluster, its audience and push service account"))
		return
	}
	cluster := req.PathValue(clusterWildcard)
	authz := req.Header.Get(HeaderAuthorization)
	if authz == "" {
		unauthorized(reasonMissing, errors.New("missing Authorization header: enable authentication on the push subscription"))
		return
	}
	token, ok := bearerToken(authz)
	if !ok {
		unauthorized(reasonMalformed, errors.New("malformed Authorization header: want Bearer <token>"))
		return
	}
	sub, known := r.subs[cluster]
	if !known {
		unauthorized(reasonMismatch, errors.New("push token refused: no push subscription is configured for this endpoint"))
		return
	}
	if err := r.verify(req, sub, token); err != nil {
		unauthorized(reasonMismatch, err)
		return
	}
	log = log.With(slog.String(LogKeyCluster, cluster))
	if req.ContentLength > r.maxBody {
		refuse(http.StatusRequestEntityTooLarge, reasonTooLarge, fmt.Errorf("body of %d bytes exceeds the %d-byte limit", req.ContentLength, r.maxBody))
		return
	}
	body, err := readAuthenticated(w, req, r.maxBody, SourcePubSub)
	if err != nil {
		if mbe, ok := errors.AsType[*http.MaxBytesError](err); ok {
			refuse(http.StatusRequestEntityTooLarge, reasonTooLarge, fmt.Errorf("body exceeds the %d-byte limit", mbe.Limit))
			return
		}
		refuse(http.StatusBadRequest, reasonReadBody, fmt.Errorf("read body: %w", err))
		return
	}
	if err := checkContentType(req.Header.Get("Content-Type")); err != nil {
		refuse(http.StatusUnsupportedMediaType, reasonContentType, err)
		return
	}
	if !looksLikeJSONObject(body) {
		refuse(http.StatusBadRequest, reasonInvalidJSON, errors.New("body is not a JSON object"))
		return
	}
	msgID, parts, ignored, err := r.unwrap(cluster, body)
	switch {
	case errors.Is(err, ErrStale):
		refuse(http.StatusBadRequest, reasonStaleEvent, err)
		return
	case err != nil:
		refuse(http.StatusBadRequest, reasonInvalidEvent, err)
		return
	}
	for reason, n := range ignored {
		r.events.ignored.WithLabelValues(SourcePubSub, ignoredLabel(reason)).Add(float64(n))
	}
	id := msgID
	if !validDeliveryID(id) || len(id) > 64 {
		id = hash32(id)
	}
	log = deliveryLogger(r.log, SourcePubSub, msgID, EventName).With(slog.String(LogKeyCluster, cluster))
	stored, events, delivery := 0, 0, ""
	for i, p := range parts {
		if len(p.IDs) == 0 {
			continue
		}
		events += len(p.IDs)
		d := store.Delivery{Source: p.Source, ID: ScopedDeliveryID(cluster, fmt.Sprintf("pubsub-%s-%d", id, i)), Event: EventName,
			Body: p.Body, ReceivedAt: r.now(), Scope: cluster}
		delivery = d.ID
		switch put(req.Context(), r.store, r.putTimeout, r.metrics, log, "pubsub message", d).kind {
		case putFailed:
			w.Header().Set("Retry-After", "5")
			writeEventReply(w, http.StatusServiceUnavailable, eventReply{Status: "unavailable", Delivery: d.ID, Error: "message could not be stored; Pub/Sub redelivers it"})
			return
		case putStored:
			stored++
		}
	}
	if events == 0 {
		log.Info("pubsub message ignored", slog.Int(LogKeyStatus, http.StatusOK), slog.Any("ignored", ignored))
		writeEventReply(w, http.StatusOK, eventReply{Status: "ignored", Ignored: ignored})
		return
	}
	status := "duplicate"
	if stored > 0 {
		status = "accepted"
		r.notify()
	}
	log.Info("pubsub message acknowledged", slog.Int(LogKeyStatus, http.StatusOK), slog.String("status", status), slog.Int("events", events))
	writeEventReply(w, http.StatusOK, eventReply{Status: status, Delivery: delivery, Events: events})
}
