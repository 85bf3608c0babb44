package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/google/go-github/v60/github"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/parleyhq/parley/app/internal/repocache"
	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/reconcile"
	"github.com/parleyhq/parley/reconcile/driftstate"
	"github.com/parleyhq/parley/trailers/ledger"
	"github.com/parleyhq/parley/webhooks"
	"github.com/parleyhq/parley/webhooks/store"
)

// AppClients gives the drift loop the App's own client (to find the installation of the GitOps
// repository) and the installation's client and token.
type AppClients interface {
	Installations
	AppClient() (*github.Client, error)
}

// Drift judges drift events (the deliveries of POST /events/...) against the GitOps repository and
// lands the verdicts there, and runs the expiry timers. One Drift serves every event source.
type Drift struct {
	GitHub     AppClients
	Repos      *repocache.Cache
	Repository string // owner/name
	Branch     string // "" = the repository's default branch
	PolicyPath string
	Mode       reconcile.Mode
	Author     object.Signature
	State      *driftstate.DB
	Log        *slog.Logger
	Now        func() time.Time
	Metrics    *DriftMetrics

	rec    *reconcile.Reconciler
	snaps  reconcile.SnapshotCache // the branch's files, policy and managers while it does not move
	once   sync.Once
	mu     sync.Mutex
	target *driftTarget // the repository's installation, clone URL and branch, looked up once
	wake   chan struct{}
}

// receivedKey carries a delivery's arrival time to the writer, for the latency metric.
type receivedKey struct{}

type driftTarget struct {
	installation int64
	cloneURL     string
	branch       string
}

// DriftMetrics are the drift loop's Prometheus metrics.
type DriftMetrics struct {
	verdicts *prometheus.CounterVec
	latency  prometheus.Histogram
	timers   prometheus.Counter
}

// NewDriftMetrics registers the drift metrics.
func NewDriftMetrics(reg prometheus.Registerer) (*DriftMetrics, error) {
	m := &DriftMetrics{
		verdicts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "parley_drift_verdicts_total",
			Help: "Verdicts on drifted fields, by decision and by what they wrote to Git (gate, resume, adopt, none)."}, []string{"decision", "action"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "parley_drift_event_to_commit_seconds",
			Help:    "From a drift event's arrival to its verdict commit being pushed.",
			Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}}),
		timers: prometheus.NewCounter(prometheus.CounterOpts{Name: "parley_drift_timers_fired_total",
			Help: "Fields judged again because their yield, hold or recheck time came."}),
	}
	for _, c := range []prometheus.Collector{m.verdicts, m.latency, m.timers} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (d *Drift) init() {
	d.once.Do(func() {
		d.wake = make(chan struct{}, 1)
		d.rec = &reconcile.Reconciler{State: d.State, Writer: driftWriter{d}, Now: d.now, Log: d.log(),
			PullRequestBranches: d.Mode == reconcile.ModePullRequest}
	})
}

func (d *Drift) now() time.Time {
	if d.Now != nil {
		return d.Now()
	}
	return time.Now()
}

func (d *Drift) log() *slog.Logger {
	if d.Log != nil {
		return d.Log
	}
	return slog.New(slog.DiscardHandler)
}

// Handle implements webhooks.Handler for the drift event sources.
func (d *Drift) Handle(ctx context.Context, del store.Delivery) error {
	d.init()
	if d.Repository == "" {
		return webhooks.Permanent(fmt.Errorf("%s event %s: no gitops_repository is configured, so there is nothing to judge it against (set it, then replay the dead letters with parley deliveries replay)", del.Source, del.ID))
	}
	return d.withSnapshot(ctx, func(snap reconcile.Snapshot) error {
		batch, err := reconcile.Decode(del.Source, del.Body, snap.Files)
		if err != nil {
			return webhooks.Permanent(fmt.Errorf("%s event %s: %w", del.Source, del.ID, err))
		}
		rep, err := d.rec.Ingest(context.WithValue(ctx, receivedKey{}, del.ReceivedAt), snap, batch)
		if err != nil {
			return fmt.Errorf("%s event %s: %w", del.Source, del.ID, err)
		}
		d.observe(rep)
		d.log().Info("drift event judged", "source", del.Source, "delivery", del.ID, "fields", len(rep.Results),
			"duplicates", rep.Duplicates, "reverts", len(rep.Reverts), "head", snap.Head)
		d.poke()
		return nil
	})
}

func (d *Drift) observe(rep reconcile.Report) {
	if d.Metrics == nil {
		return
	}
	for _, r := range rep.Results {
		action := "none"
		if r.Change != nil {
			action = string(r.Change.Action)
		}
		d.Metrics.verdicts.WithLabelValues(string(r.Verdict.Decision), action).Inc()
	}
}

// poke wakes the timer loop: a verdict may have set an earlier timer.
func (d *Drift) poke() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// withSnapshot fetches the GitOps repository and runs fn on its branch's snapshot while holding
// the clone (writes push to the remote; the next fetch brings them back).
func (d *Drift) withSnapshot(ctx context.Context, fn func(reconcile.Snapshot) error) error {
	t, err := d.resolve(ctx)
	if err != nil {
		return err
	}
	token, err := d.GitHub.Token(ctx, t.installation)
	if err != nil {
		return fmt.Errorf("%s: installation token: %w", d.Repository, err)
	}
	dir, unlock, err := d.Repos.Sync(ctx, d.Repository, t.cloneURL, token)
	if err != nil {
		return fmt.Errorf("%s: %w", d.Repository, err)
	}
	defer unlock()
	led, err := reconcile.OpenLedger(dir, t.branch, d.PolicyPath, ledger.Options{})
	if err != nil {
		return fmt.Errorf("%s: open ledger: %w", d.Repository, err)
	}
	defer led.Close()
	snap, err := d.snaps.Load(ctx, dir, t.branch, d.PolicyPath, led, nil)
	if errors.Is(err, reconcile.ErrNoPolicy) {
		return webhooks.Permanent(fmt.Errorf("%s: %w: add %s to %s to judge drift", d.Repository, err, d.PolicyPath, t.branch))
	}
	if err != nil {
		return fmt.Errorf("%s: %w", d.Repository, err)
	}
	return fn(snap)
}

// resolve finds the installation covering the repository, its clone URL and branch, once.
func (d *Drift) resolve(ctx context.Context) (driftTarget, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.target != nil {
		return *d.target, nil
	}
	owner, name, _ := strings.Cut(d.Repository, "/")
	appc, err := d.GitHub.AppClient()
	if err != nil {
		return driftTarget{}, err
	}
	inst, _, err := appc.Apps.FindRepositoryInstallation(ctx, owner, name)
	if err != nil {
		return driftTarget{}, fmt.Errorf("%s: find the App's installation (is the App installed on it?): %w", d.Repository, err)
	}
	gh, err := d.GitHub.Client(inst.GetID())
	if err != nil {
		return driftTarget{}, err
	}
	repo, _, err := gh.Repositories.Get(ctx, owner, name)
	if err != nil {
		return driftTarget{}, fmt.Errorf("%s: %w", d.Repository, err)
	}
	t := driftTarget{installation: inst.GetID(), cloneURL: repo.GetCloneURL(), branch: d.Branch}
	if t.branch == "" {
		t.branch = repo.GetDefaultBranch()
	}
	if t.cloneURL == "" || t.branch == "" {
		return driftTarget{}, fmt.Errorf("%s: GitHub gave no clone URL or default branch", d.Repository)
	}
	d.target = &t
	return t, nil
}

// driftWriter lands verdict commits in the GitOps repository with the installation's token.
type driftWriter struct{ d *Drift }

func (w driftWriter) Write(ctx context.Context, c reconcile.Change) (reconcile.Landed, error) {
	d := w.d
	t, err := d.resolve(ctx)
	if err != nil {
		return reconcile.Landed{}, err
	}
	gw := &reconcile.GitWriter{URL: t.cloneURL, Base: t.branch, Mode: d.Mode, Author: d.Author, Now: d.now,
		Auth: func(ctx context.Context) (transport.AuthMethod, error) {
			tok, err := d.GitHub.Token(ctx, t.installation)
			if err != nil {
				return nil, err
			}
			return &githttp.BasicAuth{Username: "x-access-token", Password: tok}, nil
		}}
	if d.Mode == reconcile.ModePullRequest {
		gh, err := d.GitHub.Client(t.installation)
		if err != nil {
			return reconcile.Landed{}, err
		}
		owner, name, _ := strings.Cut(d.Repository, "/")
		gw.PRs = pullRequests{gh: gh, owner: owner, repo: name}
	}
	l, err := gw.Write(ctx, c)
	if received, ok := ctx.Value(receivedKey{}).(time.Time); ok && err == nil && l.Committed && d.Metrics != nil {
		d.Metrics.latency.Observe(d.now().Sub(received).Seconds())
	}
	return l, err
}

// pullRequests opens one pull request per work branch.
type pullRequests struct {
	gh          *github.Client
	owner, repo string
}

func (p pullRequests) Ensure(ctx context.Context, head, base, title, body string) (int, error) {
	open, _, err := p.gh.PullRequests.List(ctx, p.owner, p.repo, &github.PullRequestListOptions{State: "open", Head: p.owner + ":" + head, Base: base})
	if err != nil {
		return 0, err
	}
	if len(open) > 0 {
		return open[0].GetNumber(), nil
	}
	body += "\n---\nOpened by Parley for a verdict on a live change; merging it lets the GitOps tool act on the verdict. Later verdicts on the same field update this pull request.\n"
	pr, _, err := p.gh.PullRequests.Create(ctx, p.owner, p.repo, &github.NewPullRequest{Title: &title, Head: &head, Base: &base, Body: &body})
	if err != nil {
		return 0, err
	}
	return pr.GetNumber(), nil
}

func (p pullRequests) Close(ctx context.Context, head, base, comment string) (int, error) {
	open, _, err := p.gh.PullRequests.List(ctx, p.owner, p.repo, &github.PullRequestListOptions{State: "open", Head: p.owner + ":" + head, Base: base})
	if err != nil || len(open) == 0 {
		return 0, err
	}
	n := open[0].GetNumber()
	if _, _, err := p.gh.Issues.CreateComment(ctx, p.owner, p.repo, n, &github.IssueComment{Body: &comment}); err != nil {
		return n, err
	}
	closed := "closed"
	_, _, err = p.gh.PullRequests.Edit(ctx, p.owner, p.repo, n, &github.PullRequest{State: &closed})
	return n, err
}

// RecheckGated judges every field Parley gated again: a push changed the branch (the policy, or
// Git's own value), and a gate stands only as long as its verdict does. Fields whose verdict did
// not change write nothing.
func (d *Drift) RecheckGated(ctx context.Context) error {
	d.init()
	if d.Repository == "" {
		return nil
	}
	return d.withSnapshot(ctx, func(snap reconcile.Snapshot) error {
		fields := reconcile.GatedFields(snap.Files)
		if len(fields) == 0 {
			return nil
		}
		rep, err := d.rec.Recheck(ctx, snap, fields)
		if err != nil {
			return err
		}
		d.observe(rep)
		d.log().Info("gated fields judged again after a push", "fields", len(fields), "head", snap.Head)
		d.poke()
		return nil
	})
}

// RunTimers judges fields again when their yield, hold or recheck time comes, until ctx ends.
// Timers live in the drift state, so they survive restarts: a timer that came due while Parley was
// down fires at start.
func (d *Drift) RunTimers(ctx context.Context) {
	d.init()
	if d.Repository == "" {
		return
	}
	const idle, retry = time.Minute, 30 * time.Second
	for {
		wait := idle
		next, ok, err := d.State.Next(ctx)
		if err != nil {
			d.log().Error("drift timers: read next", "error", err.Error())
			wait = retry
		} else if ok {
			wait = min(max(next.Sub(d.now()), 0), idle)
		}
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-d.wake:
				t.Stop()
				continue
			case <-t.C:
			}
		}
		if ctx.Err() != nil {
			return
		}
		if err := d.fireDue(ctx); err != nil {
			d.log().Error("drift timers: recheck failed; retrying", "error", err.Error(), "retry_in", retry.String())
			select {
			case <-ctx.Done():
				return
			case <-time.After(retry):
			}
		}
	}
}

func (d *Drift) fireDue(ctx context.Context) error {
	due, err := d.State.Due(ctx, d.now())
	if err != nil || len(due) == 0 {
		return err
	}
	fields := make([]core.Field, 0, len(due))
	for _, t := range due {
		fields = append(fields, t.Field)
	}
	return d.withSnapshot(ctx, func(snap reconcile.Snapshot) error {
		rep, err := d.rec.Recheck(ctx, snap, fields)
		if err != nil {
			return err
		}
		if d.Metrics != nil {
			d.Metrics.timers.Add(float64(len(fields)))
		}
		d.observe(rep)
		d.log().Info("drift timers fired", "fields", len(fields), "head", snap.Head)
		return nil
	})
}
