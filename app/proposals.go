package app

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/internal/agentstore"
	"github.com/parleyhq/parley/policy/arbiter"
	"github.com/parleyhq/parley/reconcile"
	"github.com/parleyhq/parley/webhooks/guard"
)

// ProposalsPath is where agents ask before they change something.
const ProposalsPath = "/v1/proposals"

// maxProposalBytes bounds a proposal's body: a few claims, not a manifest.
const maxProposalBytes = 1 << 20

// maxProposalClaims bounds the claims of one proposal.
const maxProposalClaims = 100

// Proposals serves POST /v1/proposals: an agent, authenticated by its bearer token, proposes
// changes to fields and gets the verdict on each, synchronously, before it changes anything
// (docs/agents.md). Every answered proposal is logged; a retry under the same idempotency key
// gets the first answer.
type Proposals struct {
	Drift  *Drift
	Agents *agentstore.DB
	// Served are the repositories the configuration names (config.Repositories): a token made
	// before tokens named their repositories acts only where this is a single one.
	Served []string
	// Rate and Burst limit each token's proposals (token bucket); zero Rate means no limit.
	Rate  rate.Limit
	Burst int
	// MaxAge is how old the branch a proposal is judged against may be (a fetch at most this
	// often per repository); zero fetches every time.
	MaxAge  time.Duration
	Log     *slog.Logger
	Now     func() time.Time
	Metrics *ProposalMetrics
	// Failures rate limits failed token checks per client address: over its budget an
	// address's failures are answered 429; a valid token is never refused. nil: no limit.
	Failures *guard.Failures

	mu       sync.Mutex
	limiters map[string]*rate.Limiter // by token id
}

// ProposalMetrics are the proposals API's metrics.
type ProposalMetrics struct {
	answered *prometheus.CounterVec
	latency  prometheus.Histogram
}

// NewProposalMetrics registers the proposals API's metrics.
func NewProposalMetrics(reg prometheus.Registerer) (*ProposalMetrics, error) {
	m := &ProposalMetrics{
		answered: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "parley_proposals_total",
			Help: "Proposals answered, by HTTP status."}, []string{"status"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "parley_proposal_seconds",
			Help:    "From a proposal's arrival to its answer, the claims recorded.",
			Buckets: []float64{.001, .0025, .005, .01, .02, .05, .1, .25, .5, 1, 2.5}}),
	}
	for _, c := range []prometheus.Collector{m.answered, m.latency} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// ProposalRequest is the body of POST /v1/proposals (docs/schemas/proposal-request.schema.json).
// Claims are in the claim shape without actor, at and evidence: the actor is the token's
// identity, the time is the server's, and the evidence is the proposal.
type ProposalRequest struct {
	Repository     string            `json:"repository,omitempty"`
	IdempotencyKey string            `json:"idempotency_key,omitempty"`
	Claims         []json.RawMessage `json:"claims"`
}

// ProposalResponse is the answer (docs/schemas/proposal-response.schema.json).
type ProposalResponse struct {
	Proposal   string            `json:"proposal"`
	Repository string            `json:"repository"`
	Actor      core.ActorJSON    `json:"actor"`
	Accepted   int               `json:"accepted"`
	Refused    int               `json:"refused"`
	Verdicts   []ProposalVerdict `json:"verdicts"`
}

// ProposalVerdict is the answer on one proposed claim.
type ProposalVerdict struct {
	Field    string `json:"field"`
	Accepted bool   `json:"accepted"`
	Decision string `json:"decision"`
	Rule     string `json:"rule"`
	// Until is when an accepted claim's yield ends (its expiry), or when a hold lifts.
	Until string `json:"until,omitempty"`
	// Holder is who holds the field instead, why, and until when, when the proposal is refused.
	Holder      *core.ClaimJSON `json:"holder,omitempty"`
	Explanation string          `json:"explanation"`
	Verdict     core.Verdict    `json:"verdict"`
}

type proposalError struct {
	Error    string `json:"error"`
	Proposal string `json:"proposal,omitempty"`
}

func (h *Proposals) now() time.Time {
	if h.Now != nil {
		return h.Now().UTC()
	}
	return time.Now().UTC()
}

func (h *Proposals) log() *slog.Logger {
	if h.Log != nil {
		return h.Log
	}
	return slog.New(slog.DiscardHandler)
}

func (h *Proposals) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	status := h.serve(w, r)
	if h.Metrics != nil {
		h.Metrics.answered.WithLabelValues(strconv.Itoa(status)).Inc()
		h.Metrics.latency.Observe(time.Since(start).Seconds())
	}
}

func (h *Proposals) serve(w http.ResponseWriter, r *http.Request) int {
	fail := func(code int, format string, args ...any) int {
		writeJSON(w, code, proposalError{Error: fmt.Sprintf(format, args...)})
		return code
	}
	tok, body, code := h.admit(w, r, maxProposalBytes)
	if code != 0 {
		return code
	}
	if err := core.UniqueKeys(body); errors.Is(err, core.ErrDuplicateKey) {
		return fail(http.StatusBadRequest, "body: %v", err)
	}
	var req ProposalRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return fail(http.StatusBadRequest, "body: %v", err)
	}
	if dec.More() {
		return fail(http.StatusBadRequest, "body: one JSON object expected")
	}
	if k := r.Header.Get("Idempotency-Key"); k != "" {
		if req.IdempotencyKey != "" && req.IdempotencyKey != k {
			return fail(http.StatusBadRequest, "the Idempotency-Key header and idempotency_key differ")
		}
		req.IdempotencyKey = k
	}
	if len(req.IdempotencyKey) > 200 {
		return fail(http.StatusBadRequest, "idempotency_key is longer than 200 characters")
	}
	if err := h.mayActOn(tok, req.Repository); err != nil {
		return fail(http.StatusForbidden, "%v", err)
	}
	if prev, ok, err := h.Agents.Lookup(r.Context(), tok.ID, req.IdempotencyKey); err != nil {
		h.log().Error("proposals: log", "error", err.Error())
		w.Header().Set("Retry-After", "5")
		return fail(http.StatusServiceUnavailable, "the proposals log is unavailable; send the proposal again later")
	} else if ok {
		if prev.RequestSHA256 != agentstore.RequestDigest(body) {
			return fail(http.StatusUnprocessableEntity, "idempotency key %q was used for a different proposal (%s)", req.IdempotencyKey, prev.ID)
		}
		w.Header().Set("Idempotent-Replayed", "true")
		writeRaw(w, prev.Status, prev.Response)
		return prev.Status
	}
	now := h.now()
	claims, err := proposalClaims(req, tok, now)
	if err != nil {
		return fail(http.StatusUnprocessableEntity, "%v", err)
	}
	id := agentstore.ProposalID(tok.ID, req.IdempotencyKey)
	repo, judged, err := h.Drift.Propose(r.Context(), req.Repository, h.MaxAge, id, claims)
	switch {
	case errors.Is(err, ErrUnknownRepository):
		return fail(http.StatusNotFound, "%v", err)
	case errors.Is(err, reconcile.ErrNoPolicy):
		return fail(http.StatusConflict, "%v", err)
	case err != nil:
		h.log().Error("proposal not judged", "proposal", id, "token", tok.Name, "error", err.Error())
		w.Header().Set("Retry-After", "5")
		return fail(http.StatusServiceUnavailable, "proposal %s could not be judged: %v; send it again (with the same idempotency key)", id, err)
	}
	resp := NewProposalResponse(id, repo, tok.Identity, judged)
	out, err := json.Marshal(resp)
	if err != nil {
		return fail(http.StatusInternalServerError, "encode the answer: %v", err)
	}
	first, err := h.Agents.Record(r.Context(), agentstore.Proposal{ID: id, TokenID: tok.ID, IdempotencyKey: req.IdempotencyKey, Repository: repo,
		RequestSHA256: agentstore.RequestDigest(body), Status: http.StatusOK, Response: out, Accepted: resp.Accepted, Refused: resp.Refused, At: now})
	switch {
	case errors.Is(err, agentstore.ErrKeyReused):
		return fail(http.StatusUnprocessableEntity, "idempotency key %q was used for a different proposal (%s)", req.IdempotencyKey, first.ID)
	case err != nil:
		// The verdicts stand (accepted claims are recorded); only the log entry is missing.
		h.log().Error("proposal answered but not logged", "proposal", id, "error", err.Error())
	case first.ID == id && !bytes.Equal(first.Response, out):
		out = first.Response // a concurrent retry answered first: give the same answer
	}
	h.log().Info("proposal judged", "proposal", id, "token", tok.Name, "repository", repo, "accepted", resp.Accepted, "refused", resp.Refused)
	writeRaw(w, http.StatusOK, out)
	return http.StatusOK
}

// mayActOn checks that tok may act on the repository a request names ("" = the default one). With
// neither, there is nothing to act on, and the drift loop answers that no repository was named.
func (h *Proposals) mayActOn(tok agentstore.Token, repository string) error {
	if repository == "" && h.Drift != nil {
		repository = h.Drift.Repository
	}
	if repository == "" {
		return nil
	}
	return tok.MayActOn(repository, h.Served)
}

// admit authenticates a request by its bearer token, applies the token's rate limit, and reads
// its JSON body up to limit bytes. A non-zero code is the error already answered.
func (h *Proposals) admit(w http.ResponseWriter, r *http.Request, limit int64) (agentstore.Token, []byte, int) {
	tok, src, code := h.open(w, r, limit)
	if code != 0 {
		return tok, nil, code
	}
	// A body declared within the limit is read into a buffer of its size: reading a 60 MiB plan
	// with io.ReadAll grows its buffer by doubling, holding about twice the body (issue 34's
	// bigplan attack peaked at 475 MiB with one connection sending bodies over the limit).
	var body []byte
	var err error
	if r.ContentLength >= 0 { // net/http ends the body at its declared length
		body = make([]byte, r.ContentLength)
		_, err = io.ReadFull(src, body)
	} else {
		body, err = io.ReadAll(src)
	}
	if err != nil {
		return agentstore.Token{}, nil, bodyError(w, err, limit)
	}
	return tok, body, 0
}

// open is admit up to the body: it authenticates the request, checks its method, Content-Type
// and declared length, and returns the reader of its body, paced for an address over its failure
// budget and, for a body of no declared length, ended past limit (an error bodyError answers).
// Plans reads a plan from it as the plan arrives (readPlan). A non-zero code is the error
// already answered.
func (h *Proposals) open(w http.ResponseWriter, r *http.Request, limit int64) (agentstore.Token, io.Reader, int) {
	fail := func(code int, format string, args ...any) (agentstore.Token, io.Reader, int) {
		writeJSON(w, code, proposalError{Error: fmt.Sprintf(format, args...)})
		return agentstore.Token{}, nil, code
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		return fail(http.StatusMethodNotAllowed, "method %s not allowed, use POST", r.Method)
	}
	tok, code := h.authenticate(w, r)
	if code != 0 {
		return tok, nil, code
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(strings.ToLower(strings.TrimSpace(ct)), "application/json") {
		return fail(http.StatusUnsupportedMediaType, "Content-Type %q: want application/json", ct)
	}
	// A body declared past the limit is refused before a byte of it is read.
	if r.ContentLength > limit {
		return fail(http.StatusRequestEntityTooLarge, "body of %d bytes exceeds the %d-byte limit", r.ContentLength, limit)
	}
	// An address over its failure budget (wrong tokens, or plans refused: Plans) has its bodies
	// read at guard.PaceBytesPerSecond: an agent's own plans are still heard, but one sending
	// plans it knows are refused no longer has each read and decoded as fast as it can send them.
	src := io.Reader(r.Body)
	if pace := h.Failures.Pace(r); pace != nil {
		src = guard.PacedReader(r.Context(), r.Body, pace)
	}
	if r.ContentLength < 0 {
		src = http.MaxBytesReader(w, io.NopCloser(src), limit)
	}
	return tok, src, 0
}

// bodyError answers err, from reading a body open returned, and returns its code.
func bodyError(w http.ResponseWriter, err error, limit int64) int {
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
		writeJSON(w, http.StatusRequestEntityTooLarge, proposalError{Error: fmt.Sprintf("body exceeds the %d-byte limit", limit)})
		return http.StatusRequestEntityTooLarge
	}
	writeJSON(w, http.StatusBadRequest, proposalError{Error: fmt.Sprintf("read body: %v", err)})
	return http.StatusBadRequest
}

// authenticate checks a request's bearer token and applies the token's rate limit. A non-zero
// code is the error already answered.
func (h *Proposals) authenticate(w http.ResponseWriter, r *http.Request) (agentstore.Token, int) {
	fail := func(code int, format string, args ...any) (agentstore.Token, int) {
		writeJSON(w, code, proposalError{Error: fmt.Sprintf(format, args...)})
		return agentstore.Token{}, code
	}
	// The token is checked first, whatever the address did before: a valid token is never
	// refused for its neighbours' failures (behind a proxy every agent can be one address). A
	// failure over the address's budget is answered 429 rather than 401, after its hold.
	throttled := func() bool {
		wait, over := h.Failures.Failed(r, "agents")
		if over {
			h.Failures.Hold(r, wait)
			w.Header().Set("Retry-After", guard.RetryAfter(wait))
			fail(http.StatusTooManyRequests, "too many failed authentications from this address; try again after Retry-After seconds")
		}
		return over
	}
	scheme, bearer, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	if !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(bearer) == "" {
		if throttled() {
			return agentstore.Token{}, http.StatusTooManyRequests
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="parley"`)
		return fail(http.StatusUnauthorized, "missing credentials: send Authorization: Bearer <token> (parley tokens create)")
	}
	tok, err := h.Agents.Verify(r.Context(), strings.TrimSpace(bearer), h.now())
	if errors.Is(err, agentstore.ErrUnknownToken) || errors.Is(err, agentstore.ErrRevoked) {
		if throttled() {
			return agentstore.Token{}, http.StatusTooManyRequests
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="parley", error="invalid_token"`)
		return fail(http.StatusUnauthorized, "the token is not valid (unknown or revoked)")
	}
	if err != nil {
		h.log().Error("agent API: token store", "error", err.Error())
		w.Header().Set("Retry-After", "5")
		return fail(http.StatusServiceUnavailable, "the token store is unavailable; send the request again later")
	}
	if lim := h.limiter(tok.ID); lim != nil && !lim.Allow() {
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int(1/float64(h.Rate)))))
		return fail(http.StatusTooManyRequests, "token %s is over its rate of %g requests per second; slow down", tok.Name, float64(h.Rate))
	}
	return tok, 0
}

// NewProposalResponse is the answer to a judged proposal: the verdict on each claim, who holds
// the field when it is refused. parley propose builds its offline answers with it too.
func NewProposalResponse(id, repository string, identity core.Identity, judged []reconcile.Proposed) ProposalResponse {
	resp := ProposalResponse{Proposal: id, Repository: repository, Actor: core.Claim{Actor: core.Actor{Identity: identity}}.JSON().Actor,
		Verdicts: []ProposalVerdict{}}
	for _, p := range judged {
		pv := ProposalVerdict{Field: p.Claim.Field.String(), Accepted: p.Accepted, Decision: string(p.Verdict.Decision), Rule: p.Verdict.Rule,
			Explanation: arbiter.Explain(p.Verdict), Verdict: p.Verdict}
		if !p.Verdict.Until.IsZero() {
			pv.Until = p.Verdict.Until.UTC().Format(time.RFC3339)
		}
		if p.Holder != nil {
			hj := p.Holder.JSON()
			pv.Holder = &hj
		}
		if p.Accepted {
			resp.Accepted++
			resp.Actor.PolicyActor = p.Claim.Actor.Name
		} else {
			resp.Refused++
		}
		resp.Verdicts = append(resp.Verdicts, pv)
	}
	return resp
}

// proposalClaims reads the proposed claims: the claim shape, without actor, at or evidence.
func proposalClaims(req ProposalRequest, tok agentstore.Token, now time.Time) ([]core.Claim, error) {
	if len(req.Claims) == 0 {
		return nil, errors.New("claims: propose at least one claim")
	}
	if len(req.Claims) > maxProposalClaims {
		return nil, fmt.Errorf("claims: %d claims, at most %d in one proposal", len(req.Claims), maxProposalClaims)
	}
	out := make([]core.Claim, 0, len(req.Claims))
	seen := map[core.Field]int{}
	for i, raw := range req.Claims {
		var cj core.ClaimJSON
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&cj); err != nil {
			return nil, fmt.Errorf("claims[%d]: %v", i, err)
		}
		if cj.Actor.Source != "" || cj.Actor.ID != nil || cj.At != "" || cj.Evidence != nil {
			return nil, fmt.Errorf("claims[%d]: actor, at and evidence are not sent: the actor is the token's identity (%s), the time the server's", i, tok.Identity)
		}
		id := tok.Identity.ID
		cj.Actor = core.ActorJSON{Source: string(tok.Identity.Source), ID: &id}
		c, err := cj.Claim(core.Field{}, now)
		if err != nil {
			return nil, fmt.Errorf("claims[%d]: %v", i, err)
		}
		if !c.Expires.IsZero() && !c.Expires.After(now) {
			return nil, fmt.Errorf("claims[%d]: expires %s is not in the future", i, c.Expires.Format(time.RFC3339))
		}
		if j, dup := seen[c.Field]; dup {
			return nil, fmt.Errorf("claims[%d]: %s is proposed already in claims[%d]; one claim per field", i, c.Field, j)
		}
		seen[c.Field] = i
		out = append(out, c)
	}
	return out, nil
}

func (h *Proposals) limiter(tokenID string) *rate.Limiter {
	if h.Rate <= 0 {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.limiters == nil {
		h.limiters = map[string]*rate.Limiter{}
	}
	l := h.limiters[tokenID]
	if l == nil {
		l = rate.NewLimiter(h.Rate, max(h.Burst, 1))
		h.limiters[tokenID] = l
	}
	return l
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	code, b := answerJSON(code, v)
	writeRaw(w, code, b)
}

// answerJSON is v encoded as writeJSON writes it, and the status to write it with.
func answerJSON(code int, v any) (int, []byte) {
	b, err := json.Marshal(v)
	if err != nil {
		return http.StatusInternalServerError, []byte(`{"error":"encode the answer"}`)
	}
	return code, b
}

func writeRaw(w http.ResponseWriter, code int, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write(append(b, '\n'))
}
