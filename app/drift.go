package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/google/go-github/v60/github"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/parleyhq/parley/app/config"
	"github.com/parleyhq/parley/app/internal/repocache"
	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/reconcile"
	"github.com/parleyhq/parley/reconcile/driftstate"
	"github.com/parleyhq/parley/reconcile/events"
	"github.com/parleyhq/parley/reconcile/gitops"
	"github.com/parleyhq/parley/trailers/ledger"
	"github.com/parleyhq/parley/webhooks"
	"github.com/parleyhq/parley/webhooks/store"
)

// AppClients gives the drift loop the App's own client (to find the installation of a GitOps
// repository) and the installation's client and token.
type AppClients interface {
	Installations
	AppClient() (*github.Client, error)
}

// Drift judges drift events (the deliveries of POST /events/...) in the GitOps repository that
// applies their objects, lands the verdicts there, and runs the expiry timers. One Drift serves
// every event source and every repository events are routed to (see route): each repository has
// its own drift state, its own policy (read from its branch) and its own timers.
type Drift struct {
	GitHub AppClients
	Repos  *repocache.Cache
	// Helm renders the charts of the repositories' GitOps sources for discovery; nil renders them
	// in this process, which nothing stops (parley serve gives a gitops.RenderProcess, which also
	// builds their kustomizations under the same budgets). Close closes it when it is an
	// io.Closer: a RenderProcess ends the workers it keeps between charts.
	Helm gitops.HelmRenderer
	// FileBudget is the largest file read from a repository's branch (core.Budget.FileBytes);
	// zero: the default, 8 MiB.
	FileBudget int64
	// Repository is the default repository ("owner/name"): events that no Argo CD repoURL, AWS
	// account or cluster routes elsewhere are judged there. "" = no default.
	Repository string
	Branch     string         // the default repository's branch; "" = its default branch
	State      *driftstate.DB // the default repository's drift state
	// Clusters routes the events posted to /events/<source>/<cluster>; Accounts routes CloudTrail
	// records by the AWS account they were made in.
	Clusters map[string]config.RepoRef
	Accounts map[string]config.RepoRef
	// GitHubHosts are the hosts whose Git URLs name repositories the App may be installed on (Argo
	// CD repoURLs); none = github.com.
	GitHubHosts []string
	// OpenState opens a repository's drift state, every repository's the default one's included,
	// in place of State and StatePath: with several replicas, their shared PostgreSQL database.
	OpenState func(ctx context.Context, repository string) (*driftstate.DB, error)
	// Lock serialises the judging of one repository across replicas (a PostgreSQL advisory lock
	// named after it): events, timers, pushes and proposals of a repository are judged by one
	// replica at a time, each reading what the one before wrote, so a timer fires once and a
	// verdict lands once. nil: this process is the only one.
	Lock func(ctx context.Context, name string) (unlock func(), err error)
	// Discover lists the repositories whose drift states exist (other replicas may have begun to
	// serve one); the timer loop serves each it finds, so that the timers of a replica that died
	// fire on the others. nil: only the repositories this process was told about.
	Discover func(ctx context.Context) ([]string, error)
	// TimerPoll is how often the timer loop looks again at the timers without being woken: what
	// other replicas set is seen this late at most. Default 1 minute.
	TimerPoll time.Duration
	// StatePath returns the drift state file of a repository other than the default one; nil or ""
	// keeps that state in memory (tests).
	StatePath  func(repository string) string
	PolicyPath string
	Mode       reconcile.Mode
	Author     object.Signature
	Log        *slog.Logger
	Now        func() time.Time
	Metrics    *DriftMetrics

	once    sync.Once
	mu      sync.Mutex
	repos   map[string]*repoDrift  // the repositories served so far, by lower-cased name
	targets map[string]driftTarget // installations found, by lower-cased name
	absent  map[string]time.Time   // repositories the App is not installed on, until when to believe it
	wake    chan struct{}
	// nextWake is when the timer loop, waiting, wakes by itself (Unix nanoseconds on Now's clock),
	// or 0 while it is not waiting (reading the timers, firing them): a timer set for no earlier
	// needs no poke (pokeFor). The loop clears it before it reads the next timer, so a timer
	// committed after that read is always either seen by the read or poked for.
	nextWake atomic.Int64
}

// repoDrift is the drift loop of one repository.
type repoDrift struct {
	d      *Drift
	name   string // owner/name
	branch string // "" = the repository's default branch
	state  *driftstate.DB
	// group writes the state's batches with group commit (proposals and admission reviews at
	// hundreds a second share fsyncs); its writer goroutine stops in Drift.Close.
	group *driftstate.Group
	rec   *reconcile.Reconciler
	snaps reconcile.SnapshotCache // the branch's files, policy and managers while it does not move

	synced atomic.Int64 // when the clone was last fetched (unix nanoseconds)
	view   proposalView // the snapshot proposals are judged against
	// judging is held, in this process, around the cross-replica lock (Drift.Lock): a process
	// waits for its own goroutines here, so it holds at most one database session per repository
	// waiting for another replica.
	judging sync.Mutex
}

// proposalView is a branch snapshot kept, with its ledger open, for the proposals of the next
// maxAge: a proposal is then judged without touching the clone. Proposals read it under the read
// lock. When it is stale, one proposal refreshes it (the others keep reading the stale view
// meanwhile, so a fetch never stalls them all) and swaps it in under the write lock, closing the
// old ledger once no one reads it.
type proposalView struct {
	mu         sync.RWMutex
	snap       reconcile.Snapshot
	led        io.Closer
	at         time.Time
	refreshing atomic.Bool
}

// receivedKey carries a delivery's arrival time to the writer, for the latency metric.
type receivedKey struct{}

type driftTarget struct {
	installation int64
	cloneURL     string
	branch       string
}

// errNotInstalled marks a repository the App is not installed on.
var errNotInstalled = errors.New("the App is not installed on it")

// absentFor is how long a repository found without the App is not asked about again: Argo CD
// notifications of applications reading repositories Parley does not serve come on every sync.
const absentFor = 5 * time.Minute

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
		d.repos = map[string]*repoDrift{}
		d.targets = map[string]driftTarget{}
		d.absent = map[string]time.Time{}
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

// Serve starts serving a repository: it opens (creating on first use) its drift state, so that
// its timers run. The server calls it at start for every repository that has a drift state, and
// events call it for the repository they are routed to. branch "" is the default branch.
func (d *Drift) Serve(ctx context.Context, name, branch string) error {
	_, err := d.repo(ctx, name, branch)
	return err
}

func (d *Drift) repo(ctx context.Context, name, branch string) (*repoDrift, error) {
	d.init()
	d.mu.Lock()
	defer d.mu.Unlock()
	key := strings.ToLower(name)
	if rd := d.repos[key]; rd != nil {
		return rd, nil
	}
	st := d.State
	if d.OpenState != nil {
		var err error
		if st, err = d.OpenState(ctx, name); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	} else if !strings.EqualFold(name, d.Repository) || st == nil {
		path := ":memory:"
		if d.StatePath != nil {
			if p := d.StatePath(name); p != "" {
				path = p
			}
		}
		var err error
		if st, err = driftstate.Open(ctx, path); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	if err := st.Bind(ctx, name); err != nil {
		if st != d.State {
			st.Close()
		}
		return nil, webhooks.Permanent(err)
	}
	rd := &repoDrift{d: d, name: name, branch: branch, state: st, group: driftstate.NewGroup(st, groupCommitMax)}
	rd.snaps.Helm, rd.snaps.FileBudget = d.Helm, d.FileBudget
	// The memo keeps what proposals and admission reviews read of the drift state per field, checked
	// against the fields' versions (reconcile.FieldMemo): a review reads the state only on a miss.
	rd.rec = &reconcile.Reconciler{State: rd.group, Writer: driftWriter{rd}, Now: d.now, Log: d.log().With("repository", name),
		PullRequestBranches: d.Mode == reconcile.ModePullRequest, Memo: &reconcile.FieldMemo{}}
	d.repos[key] = rd
	d.poke() // its timers may be due
	return rd, nil
}

// groupCommitMax bounds the batches one drift state transaction takes: enough for a second of
// admission reviews at 500/s arriving during one slow fsync, few enough that one transaction never
// holds SQLite's single connection (and the reads waiting on it) for long.
const groupCommitMax = 64

// served returns the repositories served so far.
// stateOf is the drift state of a repository this process serves; nil when it serves none.
func (d *Drift) stateOf(name string) *driftstate.DB {
	d.init()
	d.mu.Lock()
	defer d.mu.Unlock()
	if rd := d.repos[strings.ToLower(name)]; rd != nil {
		return rd.state
	}
	return nil
}

func (d *Drift) served() []*repoDrift {
	d.init()
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]*repoDrift, 0, len(d.repos))
	for _, rd := range d.repos {
		out = append(out, rd)
	}
	slices.SortFunc(out, func(a, b *repoDrift) int { return strings.Compare(a.name, b.name) })
	return out
}

// Close closes every repository's drift state, the default one's included.
func (d *Drift) Close() error {
	var errs []error
	closedDefault := false
	for _, rd := range d.served() {
		closedDefault = closedDefault || rd.state == d.State
		errs = append(errs, rd.closeView(), rd.group.Close(), rd.state.Close())
	}
	if d.State != nil && !closedDefault {
		errs = append(errs, d.State.Close())
	}
	if c, ok := d.Helm.(io.Closer); ok {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// branchOf is the branch configured for a repository, wherever it is configured; "" = its
// default branch.
func (d *Drift) branchOf(name string) string {
	if strings.EqualFold(name, d.Repository) {
		return d.Branch
	}
	for _, routes := range []map[string]config.RepoRef{d.Clusters, d.Accounts} {
		for _, ref := range routes {
			if strings.EqualFold(ref.Repository, name) {
				return ref.Branch
			}
		}
	}
	return ""
}

// route picks the repository a delivery is judged in, in this order:
//
//  1. an Argo CD notification: the first of the Application's source repoURLs (manifest sources
//     before value sources) that names a repository on GitHub the App is installed on;
//  2. CloudTrail: the repository configured for the AWS account the records were made in;
//  3. an event posted for a cluster (/events/<source>/<cluster>): the cluster's repository;
//  4. the default repository.
//
// Flux and audit events say nothing of where their objects are kept, so they go by 3 and 4.
func (d *Drift) route(ctx context.Context, del store.Delivery) (*repoDrift, error) {
	o, err := events.OriginOf(del.Source, del.Body)
	if err != nil {
		return nil, webhooks.Permanent(fmt.Errorf("%s event %s: %w", del.Source, del.ID, err))
	}
	var passed []string // why earlier candidates were passed over, for the error if nothing is left
	for _, u := range o.RepoURLs {
		name, ok := repoFromURL(u, d.GitHubHosts)
		if !ok {
			passed = append(passed, fmt.Sprintf("repoURL %s is not a repository on %s", u, strings.Join(d.hosts(), " or ")))
			continue
		}
		branch := d.branchOf(name)
		if _, err := d.resolve(ctx, name, branch); errors.Is(err, errNotInstalled) {
			passed = append(passed, fmt.Sprintf("repoURL %s: %v", u, err))
			continue
		} else if err != nil {
			return nil, err
		}
		return d.repo(ctx, name, branch)
	}
	if len(o.Accounts) > 0 {
		var to []config.RepoRef
		for _, a := range o.Accounts {
			if ref, ok := d.Accounts[a]; ok && !slices.ContainsFunc(to, func(r config.RepoRef) bool { return strings.EqualFold(r.Repository, ref.Repository) }) {
				to = append(to, ref)
			}
		}
		switch len(to) {
		case 0:
			passed = append(passed, fmt.Sprintf("no aws_account block for %s", strings.Join(o.Accounts, ", ")))
		case 1:
			return d.repo(ctx, to[0].Repository, to[0].Branch)
		default:
			return nil, webhooks.Permanent(fmt.Errorf("%s event %s holds records of accounts %s, which belong to different repositories: send each account's records on their own (CloudTrail writes one file per account)",
				del.Source, del.ID, strings.Join(o.Accounts, ", ")))
		}
	}
	if del.Scope != "" {
		ref, ok := d.Clusters[del.Scope]
		if !ok {
			return nil, webhooks.Permanent(fmt.Errorf("%s event %s was posted for cluster %q, which the configuration no longer names: add its cluster block back, then replay the dead letters with parley deliveries replay",
				del.Source, del.ID, del.Scope))
		}
		return d.repo(ctx, ref.Repository, ref.Branch)
	}
	if d.Repository != "" {
		return d.repo(ctx, d.Repository, d.Branch)
	}
	why := "nothing routes it"
	if len(passed) > 0 {
		why = strings.Join(passed, "; ")
	}
	return nil, webhooks.Permanent(fmt.Errorf("%s event %s: no repository to judge it in (%s): set gitops_repository (the default), post the source's events to /events/%s/<cluster> with a cluster block, or for CloudTrail an aws_account block; then replay the dead letters with parley deliveries replay",
		del.Source, del.ID, why, del.Source))
}

func (d *Drift) hosts() []string {
	if len(d.GitHubHosts) == 0 {
		return []string{"github.com"}
	}
	return d.GitHubHosts
}

// repoFromURL returns the "owner/name" a Git URL names on one of hosts (none: github.com), in
// the forms Argo CD and Flux accept (https, ssh and scp-like; see gitops.RepoKey). Hosts compare
// case-insensitively.
func repoFromURL(raw string, hosts []string) (string, bool) {
	if len(hosts) == 0 {
		hosts = []string{"github.com"}
	}
	host, p, ok := strings.Cut(gitops.RepoKey(raw), "/")
	if !ok || !slices.ContainsFunc(hosts, func(h string) bool { return strings.EqualFold(h, host) }) {
		return "", false
	}
	owner, name, ok := strings.Cut(p, "/")
	if !ok || owner == "" || name == "" || strings.Contains(name, "/") {
		return "", false
	}
	// RepoKey lower-cases; GitHub names compare case-insensitively, so the original case of
	// the URL is kept for messages where it can be found.
	if i := strings.Index(strings.ToLower(raw), owner+"/"+name); i >= 0 {
		return raw[i : i+len(owner)+1+len(name)], true
	}
	return owner + "/" + name, true
}

// Handle implements webhooks.Handler for the drift event sources.
func (d *Drift) Handle(ctx context.Context, del store.Delivery) error {
	d.init()
	rd, err := d.route(ctx, del)
	if err != nil {
		return err
	}
	unlock, err := rd.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	// Timers that came due fire before any body is judged, whether or not its events touch a
	// field: a yield that ended is resumed now, not when the timer loop next wakes (the loop may
	// sleep up to its poll, or run on another replica that is down).
	if err := rd.fireDueLocked(ctx); err != nil {
		return fmt.Errorf("%s event %s: %s: fire the timers due first: %w", del.Source, del.ID, rd.name, err)
	}
	return rd.withSnapshot(ctx, func(snap reconcile.Snapshot) error {
		batch, err := decodeDelivery(del, snap.Files)
		if err != nil {
			return webhooks.Permanent(fmt.Errorf("%s event %s: %w", del.Source, del.ID, err))
		}
		rep, err := rd.rec.Ingest(context.WithValue(ctx, receivedKey{}, del.ReceivedAt), snap, batch)
		if err != nil {
			return fmt.Errorf("%s event %s: %s: %w", del.Source, del.ID, rd.name, err)
		}
		d.observe(rep)
		d.log().Info("drift event judged", "source", del.Source, "delivery", del.ID, "repository", rd.name, "fields", len(rep.Results),
			"duplicates", rep.Duplicates, "reverts", len(rep.Reverts), "head", snap.Head)
		d.poke()
		return nil
	})
}

// decodeDelivery decodes a stored drift event. An admitted change (source k8s-admission) is the
// AdmissionReview as the webhook received it, put in the queue once a later review confirmed that
// it landed (docs/admission.md): its changes are read as they were at admission.
func decodeDelivery(del store.Delivery, files map[string][]byte) (events.Batch, error) {
	if del.Source != events.SourceAdmission {
		return reconcile.Decode(del.Source, del.Body, files)
	}
	adm, err := events.DecodeAdmissionReview(del.Body, del.ReceivedAt)
	if err != nil {
		return events.Batch{}, err
	}
	return adm.Batch(del.ReceivedAt), nil
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

// pokeFor wakes the timer loop for a timer set to come due at due, unless the loop is waiting
// and wakes by then anyway (and reads the timers again).
func (d *Drift) pokeFor(due time.Time) {
	if next := d.nextWake.Load(); next == 0 || due.UnixNano() < next {
		d.poke()
	}
}

// poke wakes the timer loop: a verdict may have set an earlier timer.
func (d *Drift) poke() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// lock takes the repository's cross-replica lock (Drift.Lock), if there is one.
func (rd *repoDrift) lock(ctx context.Context) (func(), error) {
	if rd.d.Lock == nil {
		return func() {}, nil
	}
	rd.judging.Lock()
	unlock, err := rd.d.Lock(ctx, "parley/drift/"+strings.ToLower(rd.name))
	if err != nil {
		rd.judging.Unlock()
		return nil, fmt.Errorf("%s: %w", rd.name, err)
	}
	return func() {
		unlock()
		rd.judging.Unlock()
	}, nil
}

// withSnapshot fetches the repository and runs fn on its branch's snapshot while holding the
// clone (writes push to the remote; the next fetch brings them back).
func (rd *repoDrift) withSnapshot(ctx context.Context, fn func(reconcile.Snapshot) error) error {
	return rd.withSnapshotWithin(ctx, 0, fn)
}

// withSnapshotWithin is withSnapshot that skips the fetch when the clone was fetched less than
// maxAge ago: a proposal is answered in milliseconds, from a branch at most maxAge old.
func (rd *repoDrift) withSnapshotWithin(ctx context.Context, maxAge time.Duration, fn func(reconcile.Snapshot) error) error {
	d := rd.d
	return rd.withClone(ctx, maxAge, func(dir, branch string) error {
		led, err := reconcile.OpenLedger(dir, branch, repoPath(d.PolicyPath), ledger.Options{})
		if err != nil {
			return fmt.Errorf("%s: open ledger: %w", rd.name, err)
		}
		defer led.Close()
		snap, err := rd.snaps.Load(ctx, dir, branch, repoPath(d.PolicyPath), led, nil)
		if errors.Is(err, reconcile.ErrNoPolicy) {
			return webhooks.Permanent(fmt.Errorf("%s: %w: add %s to %s to judge drift", rd.name, err, d.PolicyPath, branch))
		}
		if err != nil {
			return fmt.Errorf("%s: %w", rd.name, err)
		}
		return fn(snap)
	})
}

// withClone runs fn on the repository's clone, fetched unless it was fetched less than maxAge ago,
// holding the clone meanwhile.
func (rd *repoDrift) withClone(ctx context.Context, maxAge time.Duration, fn func(dir, branch string) error) error {
	d := rd.d
	t, err := d.resolve(ctx, rd.name, rd.branch)
	if err != nil {
		return err
	}
	var dir string
	var unlock func()
	fresh := false
	if maxAge > 0 && time.Since(time.Unix(0, rd.synced.Load())) < maxAge {
		dir, unlock, fresh = d.Repos.Open(rd.name)
	}
	if !fresh {
		token, err := d.GitHub.Token(ctx, t.installation)
		if err != nil {
			return fmt.Errorf("%s: installation token: %w", rd.name, err)
		}
		if dir, unlock, err = d.Repos.Sync(ctx, rd.name, t.cloneURL, token); err != nil {
			return fmt.Errorf("%s: %w", rd.name, err)
		}
		rd.synced.Store(time.Now().UnixNano())
	}
	defer unlock()
	return fn(dir, t.branch)
}

// resolve finds the installation covering a repository, its clone URL and branch, once. A
// repository the App is not installed on is an errNotInstalled, permanent, remembered for
// absentFor.
func (d *Drift) resolve(ctx context.Context, name, branch string) (driftTarget, error) {
	d.init()
	key := strings.ToLower(name)
	d.mu.Lock()
	t, ok := d.targets[key]
	until, absent := d.absent[key]
	d.mu.Unlock()
	if ok {
		return t, nil
	}
	if absent && d.now().Before(until) {
		return driftTarget{}, webhooks.Permanent(fmt.Errorf("%s: %w", name, errNotInstalled))
	}
	owner, repoName, _ := strings.Cut(name, "/")
	appc, err := d.GitHub.AppClient()
	if err != nil {
		return driftTarget{}, err
	}
	inst, resp, err := appc.Apps.FindRepositoryInstallation(ctx, owner, repoName)
	if err != nil {
		if resp != nil && resp.StatusCode == http.StatusNotFound {
			d.mu.Lock()
			d.absent[key] = d.now().Add(absentFor)
			d.mu.Unlock()
			return driftTarget{}, webhooks.Permanent(fmt.Errorf("%s: %w (install it there, then replay the dead letters with parley deliveries replay)", name, errNotInstalled))
		}
		return driftTarget{}, fmt.Errorf("%s: find the App's installation (is the App installed on it?): %w", name, err)
	}
	gh, err := d.GitHub.Client(inst.GetID())
	if err != nil {
		return driftTarget{}, err
	}
	repo, _, err := gh.Repositories.Get(ctx, owner, repoName)
	if err != nil {
		return driftTarget{}, fmt.Errorf("%s: %w", name, err)
	}
	t = driftTarget{installation: inst.GetID(), cloneURL: repo.GetCloneURL(), branch: branch}
	if t.branch == "" {
		t.branch = repo.GetDefaultBranch()
	}
	if t.cloneURL == "" || t.branch == "" {
		return driftTarget{}, fmt.Errorf("%s: GitHub gave no clone URL or default branch", name)
	}
	d.mu.Lock()
	d.targets[key] = t
	delete(d.absent, key)
	d.mu.Unlock()
	return t, nil
}

// driftWriter lands verdict commits in its repository with the installation's token.
type driftWriter struct{ rd *repoDrift }

func (w driftWriter) Write(ctx context.Context, c reconcile.Change) (reconcile.Landed, error) {
	gw, err := w.gitWriter(ctx)
	if err != nil {
		return reconcile.Landed{}, err
	}
	l, err := gw.Write(ctx, c)
	if d := w.rd.d; err == nil && l.Committed && d.Metrics != nil {
		if received, ok := ctx.Value(receivedKey{}).(time.Time); ok {
			d.Metrics.latency.Observe(d.now().Sub(received).Seconds())
		}
	}
	return l, err
}

// Settle implements reconcile.Settler: a hold or escalation put to people on a pull request ended.
func (w driftWriter) Settle(ctx context.Context, branch, comment string) (int, error) {
	gw, err := w.gitWriter(ctx)
	if err != nil {
		return 0, err
	}
	return gw.Settle(ctx, branch, comment)
}

// gitWriter writes to the repository with the installation's token.
func (w driftWriter) gitWriter(ctx context.Context) (*reconcile.GitWriter, error) {
	rd, d := w.rd, w.rd.d
	t, err := d.resolve(ctx, rd.name, rd.branch)
	if err != nil {
		return nil, err
	}
	gw := &reconcile.GitWriter{URL: t.cloneURL, Base: t.branch, Mode: d.Mode, Author: d.Author, Now: d.now,
		Auth: func(ctx context.Context) (transport.AuthMethod, error) {
			tok, err := d.GitHub.Token(ctx, t.installation)
			if err != nil {
				return nil, err
			}
			return &githttp.BasicAuth{Username: "x-access-token", Password: tok}, nil
		}}
	// Pull requests in both modes: in direct mode a question (an adopted value Parley cannot
	// place, a hold put to people) still goes through one.
	gh, err := d.GitHub.Client(t.installation)
	if err != nil {
		return nil, err
	}
	owner, name, _ := strings.Cut(rd.name, "/")
	gw.PRs = pullRequests{gh: gh, owner: owner, repo: name}
	return gw, nil
}

// pullRequests opens one pull request per work branch.
type pullRequests struct {
	gh          *github.Client
	owner, repo string
}

func (p pullRequests) Ensure(ctx context.Context, head, base, title, body string) (int, bool, error) {
	open, err := p.open(ctx, head, base)
	if err != nil || open != 0 {
		return open, false, err
	}
	body += "\n---\nOpened by Parley for a verdict on a live change; merging it lets the GitOps tool act on the verdict. Later verdicts on the same field update this pull request.\n"
	pr, _, err := p.gh.PullRequests.Create(ctx, p.owner, p.repo, &github.NewPullRequest{Title: &title, Head: &head, Base: &base, Body: &body})
	if err != nil {
		return 0, false, err
	}
	return pr.GetNumber(), true, nil
}

func (p pullRequests) Comment(ctx context.Context, head, base, body string) (int, error) {
	n, err := p.open(ctx, head, base)
	if err != nil || n == 0 {
		return 0, err
	}
	_, _, err = p.gh.Issues.CreateComment(ctx, p.owner, p.repo, n, &github.IssueComment{Body: &body})
	return n, err
}

func (p pullRequests) Close(ctx context.Context, head, base, comment string) (int, error) {
	n, err := p.Comment(ctx, head, base, comment)
	if err != nil || n == 0 {
		return n, err
	}
	closed := "closed"
	_, _, err = p.gh.PullRequests.Edit(ctx, p.owner, p.repo, n, &github.PullRequest{State: &closed})
	return n, err
}

// open is the number of the open pull request from head into base, 0 when there is none.
func (p pullRequests) open(ctx context.Context, head, base string) (int, error) {
	open, _, err := p.gh.PullRequests.List(ctx, p.owner, p.repo, &github.PullRequestListOptions{State: "open", Head: p.owner + ":" + head, Base: base})
	if err != nil || len(open) == 0 {
		return 0, err
	}
	return open[0].GetNumber(), nil
}

// Pushed judges again every field Parley gated in a repository whose branch moved (a push to
// ref): the policy, or Git's own value, may have changed, and a gate stands only as long as its
// verdict does. Fields whose verdict did not change write nothing. A repository the drift loop
// does not serve is left alone; defaultBranch is the repository's, used when no branch is
// configured for it.
func (d *Drift) Pushed(ctx context.Context, repository, defaultBranch, ref string) error {
	d.init()
	d.mu.Lock()
	rd := d.repos[strings.ToLower(repository)]
	d.mu.Unlock()
	if rd == nil {
		return nil
	}
	branch := rd.branch
	if branch == "" {
		branch = defaultBranch
	}
	if ref != "refs/heads/"+branch {
		return nil
	}
	return rd.recheckGated(ctx)
}

func (rd *repoDrift) recheckGated(ctx context.Context) error {
	d := rd.d
	unlock, err := rd.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	return rd.withSnapshot(ctx, func(snap reconcile.Snapshot) error {
		fields := reconcile.GatedFields(snap.Files)
		if len(fields) == 0 {
			return nil
		}
		rep, err := rd.rec.Recheck(ctx, snap, fields)
		if err != nil {
			return err
		}
		d.observe(rep)
		d.log().Info("gated fields judged again after a push", "repository", rd.name, "fields", len(fields), "head", snap.Head)
		d.poke()
		return nil
	})
}

// RunTimers judges fields again when their yield, hold or recheck time comes, in every repository
// served, until ctx ends. Timers live in each repository's drift state, so they survive restarts:
// a timer that came due while Parley was down fires at start.
func (d *Drift) RunTimers(ctx context.Context) {
	d.init()
	const retry = 30 * time.Second
	idle := cmp.Or(d.TimerPoll, time.Minute)
	if d.Repository != "" {
		// The default repository's timers run from the start, before any event names it.
		if err := d.Serve(ctx, d.Repository, d.Branch); err != nil {
			d.log().Error("drift timers: the default repository's state", "repository", d.Repository, "error", err.Error())
		}
	}
	for {
		d.nextWake.Store(0) // not waiting: every timer set from now on pokes
		d.discover(ctx)
		wait := idle
		for _, rd := range d.served() {
			next, ok, err := rd.state.Next(ctx)
			if err != nil {
				d.log().Error("drift timers: read next", "repository", rd.name, "error", err.Error())
				wait = min(wait, retry)
			} else if ok {
				wait = min(wait, max(next.Sub(d.now()), 0))
			}
		}
		if wait > 0 {
			d.nextWake.Store(d.now().Add(wait).UnixNano())
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
		failed := false
		for _, rd := range d.served() {
			if err := rd.fireDue(ctx); err != nil {
				d.log().Error("drift timers: recheck failed; retrying", "repository", rd.name, "error", err.Error(), "retry_in", retry.String())
				failed = true
			}
		}
		if failed {
			select {
			case <-ctx.Done():
				return
			case <-time.After(retry):
			}
		}
	}
}

// discover serves the repositories Discover finds that this process does not serve yet.
func (d *Drift) discover(ctx context.Context) {
	if d.Discover == nil {
		return
	}
	names, err := d.Discover(ctx)
	if err != nil {
		d.log().Error("drift timers: list the repositories", "error", err.Error())
		return
	}
	for _, name := range names {
		if err := d.Serve(ctx, name, d.branchOf(name)); err != nil {
			d.log().Error("drift timers: open a repository's state", "repository", name, "error", err.Error())
		}
	}
}

// fireDue judges again the fields of every repository whose timers are due.
func (d *Drift) fireDue(ctx context.Context) error {
	var errs []error
	for _, rd := range d.served() {
		errs = append(errs, rd.fireDue(ctx))
	}
	return errors.Join(errs...)
}

func (rd *repoDrift) fireDue(ctx context.Context) error {
	d := rd.d
	if due, err := rd.state.Due(ctx, d.now()); err != nil || len(due) == 0 {
		return err
	}
	// Read again under the repository's lock, so that of replicas that found the same timers due
	// one fires them; the others find them moved on.
	unlock, err := rd.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	return rd.fireDueLocked(ctx)
}

// fireDueLocked judges again the repository's fields whose timers are due; the caller holds the
// repository's lock.
func (rd *repoDrift) fireDueLocked(ctx context.Context) error {
	d := rd.d
	due, err := rd.state.Due(ctx, d.now())
	if err != nil || len(due) == 0 {
		return err
	}
	fields := make([]core.Field, 0, len(due))
	for _, t := range due {
		fields = append(fields, t.Field)
	}
	return rd.withSnapshot(ctx, func(snap reconcile.Snapshot) error {
		rep, err := rd.rec.Recheck(ctx, snap, fields)
		if err != nil {
			return err
		}
		if d.Metrics != nil {
			d.Metrics.timers.Add(float64(len(fields)))
		}
		d.observe(rep)
		d.log().Info("drift timers fired", "repository", rd.name, "fields", len(fields), "head", snap.Head)
		return nil
	})
}

// ErrUnknownRepository is Propose's error for a repository the drift loop cannot judge in: none
// was named and there is no default, or the App is not installed on it.
var ErrUnknownRepository = errors.New("unknown repository")

// Propose judges changes an actor asks to make in a repository ("" = the default repository),
// before it makes them, under that repository's policy and standing claims (reconcile.Propose).
// The branch is read as fetched at most maxAge ago. It returns the repository judged in.
func (d *Drift) Propose(ctx context.Context, repository string, maxAge time.Duration, id string, claims []core.Claim) (string, []reconcile.Proposed, error) {
	var out []reconcile.Proposed
	// No repository lock: a drift event holds it while it pushes to Git, and a proposal is answered
	// in milliseconds. The record is a compare-and-swap on the fields' state instead
	// (reconcile.Reconciler.ProposeIf), which holds across replicas as the lock did.
	repo, err := d.withRepoView(ctx, repository, maxAge, func(rd *repoDrift, snap reconcile.Snapshot) error {
		var err error
		out, err = rd.rec.Propose(ctx, snap, id, claims)
		return err
	})
	if err == nil {
		d.poke() // an accepted proposal sets a timer
	}
	return repo, out, err
}

// WithBranch runs fn on a repository's branch ("" = the default repository) as proposals see it:
// a snapshot at most maxAge old. It returns the repository it ran on.
func (d *Drift) WithBranch(ctx context.Context, repository string, maxAge time.Duration, fn func(reconcile.Snapshot) error) (string, error) {
	return d.withRepoView(ctx, repository, maxAge, func(_ *repoDrift, snap reconcile.Snapshot) error { return fn(snap) })
}

// proposalSnapshot returns the snapshot to judge a proposal against, and the function that
// releases it. It is at most maxAge old, or, while another proposal refreshes it, at most maxAge
// plus the time that refresh takes.
func (rd *repoDrift) proposalSnapshot(ctx context.Context, maxAge time.Duration) (reconcile.Snapshot, func(), error) {
	v := &rd.view
	refreshed := time.Time{} // when this call refreshed the view: that view is fresh for it, even with maxAge 0
	for {
		v.mu.RLock()
		have, fresh := v.led != nil, v.led != nil && (time.Since(v.at) < maxAge || !refreshed.IsZero() && !v.at.Before(refreshed))
		if fresh {
			return v.snap, v.mu.RUnlock, nil
		}
		if v.refreshing.CompareAndSwap(false, true) {
			v.mu.RUnlock()
			started := time.Now()
			err := rd.refreshView(ctx, maxAge)
			v.refreshing.Store(false)
			if err != nil {
				return reconcile.Snapshot{}, nil, err
			}
			refreshed = started
			continue
		}
		if have {
			return v.snap, v.mu.RUnlock, nil // another proposal is refreshing it
		}
		v.mu.RUnlock()
		// The first view is being loaded: wait for it.
		select {
		case <-ctx.Done():
			return reconcile.Snapshot{}, nil, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// refreshView loads the branch (fetching the clone unless it was fetched less than maxAge ago) and
// swaps it in as the proposals' view.
func (rd *repoDrift) refreshView(ctx context.Context, maxAge time.Duration) error {
	loadedAt := time.Now()
	var snap reconcile.Snapshot
	var led io.Closer
	err := rd.withClone(ctx, maxAge, func(dir, branch string) error {
		l, err := reconcile.OpenLedger(dir, branch, repoPath(rd.d.PolicyPath), ledger.Options{})
		if err != nil {
			return fmt.Errorf("%s: open ledger: %w", rd.name, err)
		}
		if snap, err = rd.snaps.Load(ctx, dir, branch, repoPath(rd.d.PolicyPath), l, nil); err != nil {
			l.Close()
			return fmt.Errorf("%s: %w", rd.name, err)
		}
		led = l
		return nil
	})
	if err != nil {
		return err
	}
	v := &rd.view
	v.mu.Lock()
	old := v.led
	v.snap, v.led, v.at = snap, led, loadedAt
	v.mu.Unlock()
	if old != nil {
		return old.Close() // no reader holds it: the write lock waited for them
	}
	return nil
}

// closeView closes the proposals' ledger.
func (rd *repoDrift) closeView() error {
	rd.view.mu.Lock()
	defer rd.view.mu.Unlock()
	if rd.view.led == nil {
		return nil
	}
	err := rd.view.led.Close()
	rd.view.led = nil
	return err
}

// Explain judges a field of a repository ("" = the default repository) as it stands, from the
// proposals' view of its branch. Nothing is recorded.
func (d *Drift) Explain(ctx context.Context, repository string, maxAge time.Duration, f core.Field) (string, core.Verdict, error) {
	var v core.Verdict
	repo, err := d.withRepoView(ctx, repository, maxAge, func(rd *repoDrift, snap reconcile.Snapshot) error {
		var err error
		v, err = rd.rec.Explain(ctx, snap, f)
		return err
	})
	return repo, v, err
}

// Claims lists who holds the fields of a repository matching p (at most limit), from the
// proposals' view of its branch.
func (d *Drift) Claims(ctx context.Context, repository string, maxAge time.Duration, p core.FieldPattern, limit int) (string, []reconcile.Holders, bool, error) {
	var hs []reconcile.Holders
	var more bool
	repo, err := d.withRepoView(ctx, repository, maxAge, func(rd *repoDrift, snap reconcile.Snapshot) error {
		var err error
		hs, more, err = rd.rec.Claims(ctx, snap, p, limit)
		return err
	})
	return repo, hs, more, err
}

// withRepoView runs fn on a repository's proposals' view, resolving "" to the default repository
// and refusing a repository the App is not installed on (ErrUnknownRepository).
func (d *Drift) withRepoView(ctx context.Context, repository string, maxAge time.Duration, fn func(*repoDrift, reconcile.Snapshot) error) (string, error) {
	d.init()
	if repository == "" {
		repository = d.Repository
	}
	if repository == "" {
		return "", fmt.Errorf("%w: name the repository (no default gitops_repository is configured)", ErrUnknownRepository)
	}
	if _, err := d.resolve(ctx, repository, d.branchOf(repository)); errors.Is(err, errNotInstalled) {
		return "", fmt.Errorf("%w: %w", ErrUnknownRepository, err)
	} else if err != nil {
		return "", err
	}
	rd, err := d.repo(ctx, repository, d.branchOf(repository))
	if err != nil {
		return "", err
	}
	snap, release, err := rd.proposalSnapshot(ctx, maxAge)
	if err != nil {
		return "", err
	}
	defer release()
	return rd.name, fn(rd, snap)
}
