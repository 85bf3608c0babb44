package app

import (
	"context"
	"crypto/subtle"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/parleyhq/parley/app/config"
	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/policy"
	"github.com/parleyhq/parley/policy/arbiter"
	"github.com/parleyhq/parley/reconcile"
	"github.com/parleyhq/parley/reconcile/events"
	"github.com/parleyhq/parley/webhooks/guard"
)

// AdmissionPrefix is where a cluster's API server sends its admission reviews:
// /admission/<cluster>, the cluster named as in its cluster and admission blocks.
const AdmissionPrefix = "/admission/"

// maxAdmissionBody bounds a review's body before it is decoded (events.DecodeAdmissionReview
// checks the same bound): two objects of etcd's 1.5 MiB limit and the envelope.
const maxAdmissionBody = 4 << 20

// Admission is the validating admission webhook (docs/admission.md): the API server asks before
// it stores a write, and Parley judges the fields the write changes as a proposal by the writer,
// against Git and the standing live claims. An accepted change is allowed and recorded as a live
// claim (the audit, Flux or Argo CD event that follows is then the claimed change); a refused one
// is denied with the verdict's explanation, or allowed with a warning in warn mode.
//
// It fails open: a review Parley cannot judge in time (the repository unreachable, no policy) is
// allowed and counted, as the webhook's failurePolicy: Ignore does for a Parley that does not
// answer at all.
type Admission struct {
	Drift *Drift
	// Clusters is each cluster's admission block; Routes its cluster block (the repository).
	Clusters map[string]config.Admission
	Routes   map[string]config.RepoRef
	// MaxAge is how old the branch a review is judged against may be (as for proposals).
	MaxAge time.Duration
	// Budget is how long judging one review may take before it is allowed unjudged (fail open):
	// shorter than the webhook's timeoutSeconds, so that Parley answers and counts it rather than
	// the API server giving up. Default 2 s.
	Budget time.Duration
	// ClientCAs are the CA pools of the clusters whose API servers authenticate with a client
	// certificate (client_ca_file), by cluster.
	ClientCAs map[string]*x509.CertPool
	// Failures rate limits wrong credentials per client address, as on the intake listener: past
	// the budget a wrong token or certificate is answered 429 after its hold (guard.Failures.Hold),
	// so that a client guessing tokens gets an answer a second per request it has in flight
	// instead of as many as it sends. A valid token or certificate is checked first and never
	// refused nor held. nil: no limit.
	Failures *guard.Failures
	Log      *slog.Logger
	Now      func() time.Time
	Metrics  *AdmissionMetrics

	// Queue and Notify take the admitted writes of the clusters with observe = true once a later
	// review confirmed them (admission_observe.go): the delivery store and the workers' wake-up.
	Queue  AdmissionQueue
	Notify func()
	// ConfirmWithin is how long an admitted write is held for its confirmation; default 30 min.
	ConfirmWithin time.Duration
	// MaxPendingBytes bounds the reviews held for confirmation; default 64 MiB. A write past
	// it is not held (counted as overflow).
	MaxPendingBytes int64
	pending         pendingWrites
	// warm runs reviews' judging on goroutines with grown stacks (warmstack.go); nil: inline.
	// Started and closed by whoever serves the handler (Server.Run).
	warm *warmStacks
	// large is the lane reviews of largeReview bytes or more take one at a time.
	large lane
	// Lane is where a large review's reading and judging take their CPU, with the plans' and
	// pull requests' (WorkLane), so that together they never hold every processor the ordinary
	// reviews need; nil: anywhere.
	Lane *WorkLane
}

// AdmissionMetrics are the admission webhook's metrics.
type AdmissionMetrics struct {
	decisions    *prometheus.CounterVec
	failOpen     *prometheus.CounterVec
	latency      prometheus.Histogram
	observations *prometheus.CounterVec
}

// Admission decisions, the decision label of parley_admission_reviews_total.
const (
	admAllowed   = "allowed"   // judged and accepted (recorded unless a dry run)
	admDenied    = "denied"    // refused in deny mode
	admWarned    = "warned"    // refused in warn mode: allowed with warnings
	admGitOps    = "gitops"    // a GitOps controller's own write: Git's claim
	admUncovered = "uncovered" // no field block covers what the write changes
	admSkipped   = "skipped"   // nothing Parley judges (a delete, the status subresource, ...)
	admFailOpen  = "fail-open" // allowed unjudged: Parley could not judge it in time
	admRejected  = "rejected"  // not answered with a review: unauthenticated or unreadable
	admBusy      = "busy"      // not answered with a review: the large-review lane stayed taken (503)
)

// NewAdmissionMetrics registers the admission webhook's metrics.
func NewAdmissionMetrics(reg prometheus.Registerer) (*AdmissionMetrics, error) {
	m := &AdmissionMetrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "parley_admission_reviews_total",
			Help: "Admission reviews answered, by cluster and decision (allowed, denied, warned, gitops, uncovered, skipped, fail-open, rejected, busy)."},
			[]string{"cluster", "decision", "dry_run"}),
		failOpen: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "parley_admission_fail_open_total",
			Help: "Admission reviews allowed without a judgement because Parley could not judge them, by cluster and reason (timeout, no-policy, error)."},
			[]string{"cluster", "reason"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "parley_admission_seconds",
			Help:    "From an admission review's arrival to its answer.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}}),
		observations: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "parley_admission_observations_total",
			Help: "Admitted writes of clusters with observe = true, by cluster and outcome (held, confirmed, not-landed, expired, overflow, lost)."},
			[]string{"cluster", "outcome"}),
	}
	for _, c := range []prometheus.Collector{m.decisions, m.failOpen, m.latency, m.observations} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (h *Admission) now() time.Time {
	if h.Now != nil {
		return h.Now().UTC()
	}
	return time.Now().UTC()
}

func (h *Admission) log() *slog.Logger {
	if h.Log != nil {
		return h.Log
	}
	return slog.New(slog.DiscardHandler)
}

func (h *Admission) count(cluster, decision string, dryRun bool, start time.Time) {
	if h.Metrics == nil {
		return
	}
	h.Metrics.decisions.WithLabelValues(cluster, decision, fmt.Sprint(dryRun)).Inc()
	h.Metrics.latency.Observe(time.Since(start).Seconds())
}

func (h *Admission) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	cluster := strings.TrimPrefix(r.URL.Path, AdmissionPrefix)
	fail := func(code int, format string, args ...any) {
		writeJSON(w, code, proposalError{Error: fmt.Sprintf(format, args...)})
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		fail(http.StatusMethodNotAllowed, "method %s not allowed, use POST", r.Method)
		return
	}
	cfg, ok := h.Clusters[cluster]
	route, routed := h.Routes[cluster]
	if !ok || !routed {
		// An unknown name gets the answer a wrong credential gets, so that nobody without one
		// can tell which cluster names are configured; the operator finds the name in the log. It
		// is not counted: the label's values stay the configured clusters.
		if h.throttled(w, r) {
			return
		}
		h.log().Warn("admission review for a cluster without an admission block refused as unauthenticated", "cluster", cluster)
		w.Header().Set("WWW-Authenticate", `Bearer realm="parley"`)
		fail(http.StatusUnauthorized, "%s", credentialsRefused(cluster))
		return
	}
	if why := h.authenticate(r, cluster, cfg); why != "" {
		h.count(cluster, admRejected, false, start)
		if h.throttled(w, r) {
			return
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="parley"`)
		fail(http.StatusUnauthorized, "%s", why)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxAdmissionBody))
	if err != nil {
		h.count(cluster, admRejected, false, start)
		fail(http.StatusRequestEntityTooLarge, "body: %v", err)
		return
	}
	budget := h.Budget
	if budget <= 0 {
		budget = 2 * time.Second
	}
	if len(body) >= largeReview {
		// Read and judged one at a time, within the same budget: a review that cannot have the
		// lane in time gets no answer Parley could stand by, and the API server applies the
		// webhook's failurePolicy.
		release, ok := h.large.acquire(r.Context(), start.Add(budget))
		if !ok {
			h.count(cluster, admBusy, false, start)
			h.log().Warn("large admission review not judged: the large-review lane stayed taken for the budget", "cluster", cluster, "bytes", len(body))
			w.Header().Set("Retry-After", "1")
			fail(http.StatusServiceUnavailable, "admission review of %d bytes: another review of %d bytes or more is being judged and did not finish within %s; the API server applies the webhook's failurePolicy", len(body), largeReview, budget)
			return
		}
		defer release()
		laneCtx, cancel := context.WithDeadline(r.Context(), start.Add(budget))
		cpu, err := h.Lane.Acquire(laneCtx)
		cancel()
		if err != nil {
			h.count(cluster, admBusy, false, start)
			h.log().Warn("large admission review not judged: no processor lent to large work came free within the budget", "cluster", cluster, "bytes", len(body))
			w.Header().Set("Retry-After", "1")
			fail(http.StatusServiceUnavailable, "admission review of %d bytes: the processors lent to large work stayed taken for %s; the API server applies the webhook's failurePolicy", len(body), budget)
			return
		}
		defer cpu()
	}
	// From here a review is CPU: checking and decoding the body, judging, building the answer. It
	// runs on a warm-stack worker when one is idle (warmstack.go: a new HTTP/2 stream's goroutine
	// would grow its stack several times over), inline otherwise; the answer is written here.
	var code int
	var answer []byte
	h.warm.Do(func() { code, answer = h.judge(r, cluster, cfg, route, body, start, budget) })
	writeRaw(w, code, answer)
}

// judge checks, decodes and judges a review's body, authenticated and read, and returns the answer
// to write: its status and JSON. start is the review's arrival, from which budget runs.
func (h *Admission) judge(r *http.Request, cluster string, cfg config.Admission, route config.RepoRef, body []byte,
	start time.Time, budget time.Duration) (int, []byte) {
	if err := core.UniqueKeys(body); errors.Is(err, core.ErrDuplicateKey) {
		// encoding/json keeps the last of two keys silently: a review naming "object" or
		// "userInfo" twice would be judged on one and read by a person on the other. The API
		// server never sends one (it encodes the objects it decoded), so this is no review of its.
		h.count(cluster, admRejected, false, start)
		return answerJSON(http.StatusBadRequest, proposalError{Error: fmt.Sprintf("admission review: %v", err)})
	}
	// The fail-open budget runs from the review's arrival: reading the objects grows with them (a
	// nodeSelector of 90,000 keys), so it counts against the same 2 s as judging, as does the wait
	// for the large-review lane, and it stops when the API server hangs up.
	ctx, cancel := context.WithDeadline(r.Context(), start.Add(budget))
	defer cancel()
	adm, err := events.DecodeAdmissionReviewContext(ctx, body, h.now())
	if err != nil && adm.UID != "" && ctx.Err() != nil {
		resp, decision := h.failOpen(cluster, adm, err)
		h.count(cluster, decision, adm.DryRun, start)
		return answerJSON(http.StatusOK, admissionv1.AdmissionReview{
			TypeMeta: metav1.TypeMeta{Kind: "AdmissionReview", APIVersion: admissionv1.SchemeGroupVersion.String()},
			Response: resp,
		})
	}
	if err != nil {
		// Without a uid there is no review to answer: the API server treats this as a call that
		// failed and applies the failurePolicy (Ignore: the write goes through).
		h.count(cluster, admRejected, false, start)
		return answerJSON(http.StatusBadRequest, proposalError{Error: err.Error()})
	}
	observe := cfg.Observe && h.Queue != nil && !adm.DryRun
	if observe {
		// What this review's oldObject shows stored decides the writes held before it.
		h.settle(r.Context(), cluster, adm, h.now())
	}
	resp, decision := h.review(ctx, cluster, cfg, route, adm)
	h.count(cluster, decision, adm.DryRun, start)
	if observe && (decision == admAllowed || decision == admWarned) {
		h.hold(cluster, adm, body, h.now())
	}
	if level, ok := reviewLogLevel(decision); ok && h.log().Enabled(ctx, level) {
		h.log().Log(ctx, level, "admission review", "cluster", cluster, "uid", adm.UID, "object", adm.Object.String(), "user", adm.Identity.ID,
			"decision", decision, "dry_run", adm.DryRun, "fields", len(adm.Changes))
	}
	return answerJSON(http.StatusOK, admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{Kind: "AdmissionReview", APIVersion: admissionv1.SchemeGroupVersion.String()},
		Response: resp,
	})
}

// reviewLogLevel is the level of a judged review's log line, by its decision: a refusal (denied,
// or warned in warn mode) and a review allowed unjudged at info, since someone's change was
// stopped, flagged or let through unjudged and the line says whose (a fail-open has its error line
// too, from failOpen); a change that went through as the policy expects (allowed, a GitOps
// controller's own write) at debug, since at an HPA's pace those lines were a twentieth of serve's
// CPU and say nothing the counters do not (parley_admission_reviews_total). Uncovered and skipped
// reviews log nothing.
func reviewLogLevel(decision string) (slog.Level, bool) {
	switch decision {
	case admDenied, admWarned, admFailOpen:
		return slog.LevelInfo, true
	case admAllowed, admGitOps:
		return slog.LevelDebug, true
	}
	return 0, false
}

// throttled counts r's failed authentication and, when its client address is over its budget of
// failures, answers 429 with Retry-After after the hold and reports true. Called only once the
// credentials have failed.
func (h *Admission) throttled(w http.ResponseWriter, r *http.Request) bool {
	wait, over := h.Failures.Failed(r, "admission")
	if !over {
		return false
	}
	h.Failures.Hold(r, wait)
	w.Header().Set("Retry-After", guard.RetryAfter(wait))
	writeJSON(w, http.StatusTooManyRequests, proposalError{Error: "too many failed authentications from this address; try again after Retry-After seconds"})
	return true
}

// authenticate checks the API server's credentials for the cluster: its bearer token, or a client
// certificate chaining to the cluster's CA. It returns why the request is refused, "" if not.
func (h *Admission) authenticate(r *http.Request, cluster string, cfg config.Admission) string {
	if cfg.Unauthenticated {
		return ""
	}
	if !cfg.Token.IsZero() {
		scheme, tok, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		if strings.EqualFold(scheme, "Bearer") && subtle.ConstantTimeCompare([]byte(strings.TrimSpace(tok)), []byte(cfg.Token.Reveal())) == 1 {
			return ""
		}
	}
	if pool := h.ClientCAs[cluster]; pool != nil && r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		inter := x509.NewCertPool()
		for _, c := range r.TLS.PeerCertificates[1:] {
			inter.AddCert(c)
		}
		if _, err := r.TLS.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter,
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err == nil {
			return ""
		}
	}
	return credentialsRefused(cluster)
}

// credentialsRefused is the answer to a review without valid credentials for cluster, and to one
// for a cluster that is not configured: the same words, so that they cannot be told apart.
func credentialsRefused(cluster string) string {
	return fmt.Sprintf("cluster %s: the API server's credentials are missing or wrong (its admission kubeconfig's token or client certificate)", cluster)
}

// failOpen answers a review Parley could not judge: allowed, with a warning saying why, logged and
// counted by reason.
func (h *Admission) failOpen(cluster string, adm events.Admission, err error) (*admissionv1.AdmissionResponse, string) {
	reason := "error"
	switch {
	case errors.Is(err, errFieldBudget):
		reason = "budget"
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		reason = "timeout"
	case errors.Is(err, reconcile.ErrNoPolicy):
		reason = "no-policy"
	}
	if h.Metrics != nil {
		h.Metrics.failOpen.WithLabelValues(cluster, reason).Inc()
	}
	h.log().Error("admission review not judged; allowed (fail open)", "cluster", cluster, "uid", adm.UID, "object", adm.Object.String(),
		"reason", reason, "error", err.Error())
	why := reason
	if reason == "budget" {
		why = adm.Problem
	}
	return &admissionv1.AdmissionResponse{UID: admissionUID(adm.UID), Allowed: true,
		Warnings: []string{"Parley could not judge this change (" + why + "); allowed unjudged"}}, admFailOpen
}

// errFieldBudget marks a review that writes more fields than one object may have judged.
var errFieldBudget = errors.New("more changed fields than Parley judges in one object")

// review judges one decoded review and answers it; decision labels the answer. ctx carries the
// fail-open budget's deadline.
func (h *Admission) review(ctx context.Context, cluster string, cfg config.Admission, route config.RepoRef, adm events.Admission) (*admissionv1.AdmissionResponse, string) {
	resp := &admissionv1.AdmissionResponse{UID: admissionUID(adm.UID), Allowed: true}
	if adm.Skipped != "" && adm.Problem == "" {
		return resp, admSkipped
	}
	if gitOpsUser(cfg.GitOpsUsers, adm.Identity.ID) {
		return resp, admGitOps
	}
	if adm.Problem != "" {
		// Not judged, as a pull request's file past its budget is not: the write is allowed (the
		// webhook fails open) with the problem as the warning, and counted.
		return h.failOpen(cluster, adm, fmt.Errorf("%s: %w", adm.Problem, errFieldBudget))
	}

	var pol *policy.Policy
	covered := 0
	pick := func(snap reconcile.Snapshot) []core.Claim {
		pol = snap.Policy
		if !covers(pol, adm.Object) {
			return nil
		}
		covered = len(adm.Changes)
		// A created object's fields that equal Git's are Git's claim, restated: not the writer's.
		return events.Claims(events.Batch{Observations: adm.Changes}, nil, snap.GitValue)
	}
	id := "admission/" + cluster + "/" + adm.UID
	var denied []string
	warned := 0
	base := len(resp.Warnings)
	decide := func(judged []reconcile.Proposed) bool {
		// Asked again when the review is judged again (another write recorded on its fields
		// between its judgement and its record): only the last judgement's answer stands.
		denied, warned, resp.Warnings = nil, 0, resp.Warnings[:base]
		for _, p := range judged {
			if p.Accepted {
				continue
			}
			mode := cfg.Mode
			if fr := pol.FieldRuleFor(p.Claim.Field); fr != nil && fr.Admission != "" {
				mode = fr.Admission
			}
			if mode == policy.AdmissionDeny {
				denied = append(denied, arbiter.Explain(p.Verdict))
				continue
			}
			owner := ""
			if fr := pol.FieldRuleFor(p.Claim.Field); fr != nil {
				owner = fr.Owner
			}
			resp.Warnings = append(resp.Warnings, warning(p, owner))
			warned++
		}
		return len(denied) == 0 && !adm.DryRun
	}
	err := h.Drift.admit(ctx, route.Repository, h.MaxAge, id, pick, decide)
	if err != nil {
		return h.failOpen(cluster, adm, err)
	}
	if covered == 0 {
		resp.Warnings = nil
		return resp, admUncovered
	}
	for _, o := range adm.Changes {
		for _, p := range o.Problems {
			resp.Warnings = append(resp.Warnings, "parley: "+p)
		}
		if len(o.Problems) > 0 {
			break // every change of a review carries the same declaration
		}
	}
	switch {
	case len(denied) > 0:
		resp.Allowed = false
		resp.Result = &metav1.Status{Status: metav1.StatusFailure, Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden,
			Message: "Parley's policy refuses this change (the verdict on each field follows; propose it in Git, or ask who holds the field):\n" +
				strings.Join(denied, "\n")}
		return resp, admDenied
	case warned > 0:
		return resp, admWarned
	}
	return resp, admAllowed
}

// warning is one refused field in warn mode, as kubectl prints it: short (the API server's advice
// is under 120 characters), the full verdict being on the field's page and in parley explain.
func warning(p reconcile.Proposed, owner string) string {
	v := p.Verdict
	s := "parley: " + v.Field.Path + " of " + v.Field.Kind + " " + v.Field.Namespace + "/" + v.Field.Name + ": " + string(v.Decision)
	if v.Rule != "" {
		s += " (" + v.Rule + ")"
	}
	if p.Holder != nil {
		who := p.Holder.Actor.Name
		if who == "" {
			who = p.Holder.Actor.Identity.ID
		}
		s += ", held by " + who
		if !p.Holder.Expires.IsZero() {
			s += " until " + p.Holder.Expires.UTC().Format(time.RFC3339)
		}
	} else if owner != "" && strings.HasPrefix(v.Rule, "owner.") {
		s += ", held by its owner " + owner
	}
	return s
}

// covers reports whether a field block of the policy can match a field of obj: then every field
// the write changes is judged, as the drift loop would judge each of them from an audit event.
// Rules without fields apply everywhere and do not count: they would make every object covered.
func covers(pol *policy.Policy, obj core.Field) bool {
	for _, fr := range pol.Fields {
		for _, p := range fr.Match {
			if p.MatchObject(obj) {
				return true
			}
		}
	}
	return false
}

// gitOpsUser reports whether username is one of the GitOps controllers' (globs: * matches within
// a name).
func gitOpsUser(globs []string, username string) bool {
	for _, g := range globs {
		if ok, _ := path.Match(g, username); ok {
			return true
		}
	}
	return false
}

// admit judges, on a repository's proposals' view, the claims pick takes from the snapshot, and
// records the accepted ones as Propose would when decide, given the verdicts, says the write
// goes ahead. No claims: nothing is judged, so a review of fields no policy covers costs a policy
// lookup. No lock is taken either: a review is judged while a drift event may be pushing to Git,
// and its record is a compare-and-swap on the fields' state (reconcile.Reconciler.ProposeIf), so
// decide may be asked more than once, each time on what stands then.
func (d *Drift) admit(ctx context.Context, repository string, maxAge time.Duration, id string,
	pick func(reconcile.Snapshot) []core.Claim, decide func([]reconcile.Proposed) (record bool)) error {
	var timers []time.Time // when the timers the record set come due
	_, err := d.withRepoView(ctx, repository, maxAge, func(rd *repoDrift, snap reconcile.Snapshot) error {
		if snap.Policy == nil {
			return reconcile.ErrNoPolicy
		}
		claims := pick(snap)
		if len(claims) == 0 {
			return nil
		}
		judged, recorded, err := rd.rec.ProposeIf(ctx, snap, id, claims, decide)
		for _, p := range judged {
			if due, ok := reconcile.TimerDue(p.Verdict); recorded && p.Accepted && ok {
				timers = append(timers, due)
			}
		}
		return err
	})
	if err == nil {
		// An accepted change whose verdict ends (a declared expiry, a recheck) sets a timer the
		// loop may have to wake earlier for; only then. At admission rates a wake for every
		// record (the HPA's, rechecked an hour on, where the loop already waits for an earlier
		// timer) was a read of the drift state for nothing.
		for _, due := range timers {
			d.pokeFor(due)
		}
	}
	return err
}

// admissionUID is the response's uid: the request's, echoed.
func admissionUID(uid string) types.UID { return types.UID(uid) }
