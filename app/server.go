package app

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/pprof"
	"net/mail"
	"net/url"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/google/go-github/v60/github"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/time/rate"

	"github.com/parleyhq/parley/app/config"
	"github.com/parleyhq/parley/app/internal/ghauth"
	"github.com/parleyhq/parley/app/internal/ghclient"
	"github.com/parleyhq/parley/app/internal/livestate"
	"github.com/parleyhq/parley/app/internal/repocache"
	"github.com/parleyhq/parley/app/internal/webauth"
	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/internal/agentstore"
	"github.com/parleyhq/parley/internal/sqldb"
	"github.com/parleyhq/parley/internal/version"
	"github.com/parleyhq/parley/reconcile"
	"github.com/parleyhq/parley/reconcile/driftstate"
	"github.com/parleyhq/parley/reconcile/events"
	"github.com/parleyhq/parley/reconcile/gitops"
	"github.com/parleyhq/parley/webhooks"
	"github.com/parleyhq/parley/webhooks/guard"
	"github.com/parleyhq/parley/webhooks/store"
)

// githubApp gives each installation its own client: its own rate-limit state, ETag cache and
// concurrency bound, all counting into one metric.
type githubApp struct {
	app         *ghauth.App
	counter     *ghclient.Counter
	concurrency int
	remaining   *prometheus.GaugeVec

	mu      sync.Mutex
	clients map[int64]*github.Client
}

func (g *githubApp) Client(installation int64) (*github.Client, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if c, ok := g.clients[installation]; ok {
		return c, nil
	}
	rl := &ghclient.RateLimit{Base: &ghclient.ETagCache{Base: g.counter.Wrap(ghclient.NewLimit(http.DefaultTransport, g.concurrency))}}
	rl.OnRecord = func(remaining int) {
		g.remaining.WithLabelValues(strconv.FormatInt(installation, 10)).Set(float64(remaining))
	}
	c, err := g.app.Client(installation, rl)
	if err != nil {
		return nil, err
	}
	g.clients[installation] = c
	return c, nil
}

// BotLogin is the App's bot login, "<app-slug>[bot]": the author of Parley's own comments.
func (g *githubApp) BotLogin(ctx context.Context) (string, error) {
	return g.app.BotLogin(ctx, g.counter.Wrap(http.DefaultTransport))
}

// AppClient acts as the App itself, counted like every other call.
func (g *githubApp) AppClient() (*github.Client, error) {
	return g.app.AppClient(g.counter.Wrap(http.DefaultTransport))
}

func (g *githubApp) Token(ctx context.Context, installation int64) (string, error) {
	t, err := g.app.InstallationToken(ctx, installation)
	return t.Value(), err
}

// Server is `parley serve`: the webhook receiver, the workers that handle deliveries, and the
// operational endpoints, over one durable store.
type Server struct {
	cfg      config.Config
	log      *slog.Logger
	store    queue
	reg      *prometheus.Registry
	receiver *webhooks.Receiver
	events   map[string]*webhooks.EventReceiver // the drift event receivers, by path
	firehose *webhooks.FirehoseReceiver         // Amazon Data Firehose deliveries (/events/firehose/<name>)
	pubsub   *webhooks.PubSubReceiver           // Pub/Sub pushes (/events/pubsub/<cluster>)
	pool     *webhooks.Pool
	live     *livestate.DB
	drift    *Drift
	agents   *agentstore.DB
	props    *Proposals
	// lane is the processors lent to plans, pull requests' files, large admission reviews and
	// audit pipelines' batches, all but one (WorkLane).
	lane *WorkLane
	// admission is the admission webhook (/admission/<cluster>); nil without admission blocks.
	admission     *Admission
	admissionAddr atomic.Value // string: the admission listener's address, once listening
	pprofAddr     atomic.Value // string: the profiles' listener's address, once listening
	draining      atomic.Bool
	// shared is the PostgreSQL pool the live state, agent store and drift states share (the
	// delivery queue has its own); nil with SQLite.
	shared   *pgxpool.Pool
	sharedDB *sql.DB
	// locks is the pool the repositories' advisory locks hold their sessions in: apart from
	// shared, so that sessions waiting for a lock never starve the holder of one of the
	// connections it needs to finish.
	locks   *pgxpool.Pool
	locksDB *sql.DB
	// auth and details serve the details pages behind sign-in; nil unless configured.
	auth    *webauth.Auth
	details *Details
	// guards count what the intake listener refused.
	guards *guard.Metrics
	// retention prunes deliveries past their keeping.
	retention *webhooks.Retention
	// metricsAddr is where the operations listener listens once Run started it ("" when
	// operations are served on the intake listener).
	metricsAddr atomic.Value
	// appKey is what GitHub last said of the App's key (appkey.go); appClient asks it.
	appKey    appKeyState
	appClient func() (*github.Client, error)
}

// queue is the delivery store serve runs on: SQLite's or PostgreSQL's.
type queue interface {
	store.Deliveries
	Close() error
}

// closeStores closes every store opened so far.
func (s *Server) closeStores() error {
	var errs []error
	if s.store != nil {
		errs = append(errs, s.store.Close())
	}
	if s.live != nil {
		errs = append(errs, s.live.Close())
	}
	if s.drift != nil {
		errs = append(errs, s.drift.Close())
	}
	if s.agents != nil {
		errs = append(errs, s.agents.Close())
	}
	if s.sharedDB != nil {
		errs = append(errs, s.sharedDB.Close())
	}
	if s.shared != nil {
		s.shared.Close()
	}
	if s.locksDB != nil {
		errs = append(errs, s.locksDB.Close())
	}
	if s.locks != nil {
		s.locks.Close()
	}
	return errors.Join(errs...)
}

// NewServer opens the store (creating it on first start) and wires the handlers.
func NewServer(ctx context.Context, cfg config.Config, log *slog.Logger) (*Server, error) {
	s := &Server{cfg: cfg, log: log, reg: prometheus.NewRegistry(), lane: NewWorkLane(0)}
	fail := func(err error) (*Server, error) {
		s.closeStores()
		return nil, err
	}
	if err := s.openStores(ctx); err != nil {
		return fail(err)
	}
	st := s.store
	s.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), buildInfoGauge(version.Get()))
	metrics, err := webhooks.NewMetrics(s.reg, st)
	if err != nil {
		return fail(err)
	}
	if s.guards, err = guard.NewMetrics(s.reg); err != nil {
		return fail(err)
	}
	// One budget of failed authentications per client address, shared by every endpoint that
	// checks a credential: a client cannot spread its guesses over the endpoints.
	proxies, err := guard.ParseProxies(cfg.TrustedProxies)
	if err != nil {
		return fail(err)
	}
	failures := guard.NewFailures(guard.FailuresConfig{PerMinute: cfg.AuthFailuresPerMinute,
		Burst: int(max(1, cfg.AuthFailuresPerMinute)), Metrics: s.guards, Proxies: proxies})
	// One budget of bytes held by bodies whose signature is not checked yet, shared by every
	// signed endpoint; one address holds at most a quarter of it, or one largest body.
	bodies := guard.NewBodies(guard.BodiesConfig{Total: cfg.UnauthenticatedBodyBudget,
		PerClient: max(cfg.UnauthenticatedBodyBudget/4, webhooks.MaxBodyBytes), Proxies: proxies, Metrics: s.guards,
		Release: debug.FreeOSMemory})
	var secrets []webhooks.Secret
	for i, sec := range cfg.WebhookSecrets {
		ws, err := webhooks.NewSecret(sec.Reveal())
		if err != nil {
			return fail(fmt.Errorf("webhook secret %d: %w", i+1, err))
		}
		secrets = append(secrets, ws)
	}
	app, err := ghauth.NewApp(cfg.AppID, []byte(cfg.PrivateKey.Reveal()), ghauth.Options{BaseURL: cfg.GitHubURL})
	if err != nil {
		return fail(err)
	}
	counter, err := ghclient.NewCounter(nil, s.reg)
	if err != nil {
		return fail(err)
	}
	remaining := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "parley_github_rate_limit_remaining",
		Help: "GitHub's primary rate limit left, as last reported, per installation."}, []string{"installation"})
	s.reg.MustRegister(remaining)
	gh := &githubApp{app: app, counter: counter, concurrency: cfg.PerInstallationConcurrency, remaining: remaining, clients: map[int64]*github.Client{}}
	s.appClient = gh.AppClient
	repos := &repocache.Cache{Dir: filepath.Join(cfg.Dir(), "repos")}
	live := s.live
	perEvent := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "parley_github_calls_per_judgement",
		Help: "GitHub REST calls one pull request judgement made (goal: at most 4 when the verdict is unchanged).", Buckets: []float64{0, 1, 2, 3, 4, 6, 8, 12, 20}})
	s.reg.MustRegister(perEvent)
	prs := &PullRequests{Installations: gh, Repos: repos, PolicyPath: cfg.PolicyPath, Live: live, Log: log, CallsPerEvent: perEvent,
		Budget: readBudget(cfg)}
	if s.locks != nil {
		prs.Lock = sqldb.Locks{Pool: s.locks}.Lock
	}
	drift, err := s.newDrift(ctx, gh, repos)
	if err != nil {
		return fail(err)
	}
	s.drift = drift
	if cfg.Pages() {
		if s.auth, err = newSignIn(cfg, log); err != nil {
			return fail(err)
		}
		s.details = &Details{Auth: s.auth, GitHub: gh, Repos: repos, Live: live, Drift: drift, PolicyPath: cfg.PolicyPath, Log: log}
		prs.DetailsURL = func(fullName string, number int) string { return cfg.PublicURL + PullRequestPage(fullName, number) }
	}
	propMetrics, err := NewProposalMetrics(s.reg)
	if err != nil {
		return fail(err)
	}
	var served []string
	for _, r := range cfg.Repositories() {
		served = append(served, r.Repository)
	}
	s.props = &Proposals{Drift: drift, Agents: s.agents, Served: served, Rate: rate.Limit(cfg.ProposalsRate), Burst: max(1, int(2*cfg.ProposalsRate)),
		MaxAge: cfg.ProposalsMaxAge, Log: log, Metrics: propMetrics, Failures: failures}
	// The admission listener's own budget of failed authentications: its callers are API servers,
	// which connect directly, so no proxy's forwarding headers name its clients.
	admFailures := guard.NewFailures(guard.FailuresConfig{PerMinute: cfg.AuthFailuresPerMinute,
		Burst: int(max(1, cfg.AuthFailuresPerMinute)), Metrics: s.guards})
	if s.admission, err = newAdmission(cfg, drift, admFailures, s.reg, log); err != nil {
		return fail(err)
	}
	if s.admission != nil {
		s.admission.Lane = s.lane
	}
	route := func(event string) webhooks.Route { return webhooks.Route{Source: store.SourceGitHub, Event: event} }
	handlers := map[webhooks.Route]webhooks.Handler{
		route("pull_request"):              prs,
		route("pull_request_review"):       prs,
		route("check_run"):                 &Rerequests{PullRequests: prs},
		route("check_suite"):               &Rerequests{PullRequests: prs},
		route("push"):                      &Pushes{PullRequests: prs, Drift: drift},
		route("installation"):              &InstallationEvents{Repos: repos},
		route("installation_repositories"): &InstallationEvents{Repos: repos},
		route("issue_comment"):             &Comments{PullRequests: prs, Live: live},
	}
	// Drift events of every source are judged by the one drift loop.
	for _, src := range []string{store.SourceFlux, store.SourceArgoCD, store.SourceK8sAudit, store.SourceCloudTrail, events.SourceAdmission} {
		handlers[webhooks.Route{Source: src, Event: webhooks.EventName}] = drift
	}
	s.pool, err = webhooks.NewPool(webhooks.PoolConfig{Queue: st, Handlers: handlers, Workers: cfg.Workers,
		Lease: cfg.Lease, Grace: cfg.ShutdownGrace, Logger: log, Metrics: metrics})
	if err != nil {
		return fail(err)
	}
	if s.admission != nil {
		// Admitted writes confirmed stored (observe = true) are judged like the audit events.
		s.admission.Queue, s.admission.Notify = st, s.pool.Notify
	}
	s.retention = &webhooks.Retention{Store: st, Done: cfg.DeliveryRetention, Dead: cfg.DeadLetterRetention, Metrics: metrics, Logger: log}
	s.receiver, err = webhooks.NewReceiver(webhooks.ReceiverConfig{Store: st, Secrets: secrets, Notify: s.pool.Notify, Logger: log, Metrics: metrics,
		Failures: failures, Bodies: bodies})
	if err != nil {
		return fail(err)
	}
	eventMetrics, err := webhooks.NewEventMetrics(s.reg)
	if err != nil {
		return fail(err)
	}
	s.events = map[string]*webhooks.EventReceiver{}
	fresh := webhooks.Freshness{Past: cfg.EventMaxAge, Future: cfg.EventMaxFuture}
	for _, w := range cfg.SharedEventSecrets() {
		log.Warn("shared event secret: accepted, but it is as wide as all its holders together; give each cluster and account its own", "detail", w)
	}
	// A source without a secret gets a receiver all the same: it answers 403 naming the setting.
	for _, e := range []struct {
		path, source, setting string
		secret                config.Secret
	}{
		{webhooks.FluxPath, store.SourceFlux, "PARLEY_FLUX_HMAC_SECRET", cfg.FluxHMACSecret},
		{webhooks.ArgoCDPath, store.SourceArgoCD, "PARLEY_ARGOCD_TOKEN", cfg.ArgoCDToken},
		{webhooks.K8sAuditPath, store.SourceK8sAudit, "PARLEY_KUBE_AUDIT_TOKEN", cfg.KubeAuditToken},
		{webhooks.CloudTrailPath, store.SourceCloudTrail, "PARLEY_CLOUDTRAIL_TOKEN", cfg.CloudTrailToken},
	} {
		var secrets []webhooks.Secret
		if !e.secret.IsZero() {
			ws, err := webhooks.NewSecret(e.secret.Reveal())
			if err != nil {
				return fail(fmt.Errorf("%s: %w", e.setting, err))
			}
			secrets = append(secrets, ws)
		}
		source := e.source
		creds, err := eventCredentials(cfg, source)
		if err != nil {
			return fail(err)
		}
		s.events[e.path], err = webhooks.NewEventReceiver(webhooks.EventReceiverConfig{Source: source, Secrets: secrets, Setting: e.setting,
			ID: func(body []byte) ([]string, map[string]int, error) {
				id, err := events.Identify(source, body)
				if err == nil && len(id.IDs) > 0 {
					err = fresh.Check(id.Oldest, id.Newest, time.Now())
				}
				return id.IDs, id.Ignored, err
			},
			Clusters:    func(name string) bool { _, ok := cfg.Clusters[name]; return ok },
			Credentials: creds,
			Accounts: func(body []byte) ([]string, error) {
				o, err := events.OriginOf(source, body)
				return o.Accounts, err
			},
			Store: st, Notify: s.pool.Notify, Logger: log, Metrics: metrics, EventMetrics: eventMetrics,
			Failures: failures, Bodies: bodies})
		if err != nil {
			return fail(err)
		}
	}
	if s.firehose, s.pubsub, err = newPipelines(cfg, pipelineIntake{store: st, notify: s.pool.Notify, log: log, metrics: metrics,
		eventMetrics: eventMetrics, failures: failures, fresh: fresh, now: time.Now}); err != nil {
		return fail(err)
	}
	return s, nil
}

// openStores opens the delivery queue, the live state and the agent store: SQLite files (the
// store and, beside it, live.db and agents.db), or the PostgreSQL database the store names, which
// replicas share.
func (s *Server) openStores(ctx context.Context) error {
	cfg := s.cfg
	if !cfg.StoreIsPostgres() {
		st, err := store.Open(ctx, cfg.Store, store.Options{MaxAttempts: cfg.MaxAttempts})
		if err != nil {
			return fmt.Errorf("open store %s: %w", cfg.Store, err)
		}
		s.store = st
		// One parley serve owns the SQLite file (the chart runs one replica), so leases found at
		// start belong to a process that died: its deliveries resume now, not when they expire.
		if n, err := st.ReclaimLeases(ctx); err != nil {
			return err
		} else if n > 0 {
			s.log.Info("resuming deliveries left unfinished by a previous process", "deliveries", n)
		}
		dir := filepath.Dir(cfg.Store)
		if s.live, err = livestate.Open(ctx, filepath.Join(dir, "live.db")); err != nil {
			return err
		}
		s.agents, err = agentstore.Open(ctx, filepath.Join(dir, "agents.db"))
		return err
	}
	// Several replicas: leases of a replica that died expire and are taken over (never reclaimed
	// at start: the other replicas' leases are live).
	pg, err := store.OpenPostgres(ctx, cfg.Store, store.PostgresOptions{MaxAttempts: cfg.MaxAttempts, MaxConns: int32(cfg.Workers + 4)})
	if err != nil {
		return fmt.Errorf("open store %s: %w", cfg.StoreName(), err)
	}
	s.store = pg
	takeovers := prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "parley_queue_lease_takeovers_total",
		Help: "Deliveries this replica claimed whose lease another worker held until it expired (a replica died or stalled)."},
		func() float64 { return float64(pg.Takeovers()) })
	if err := s.reg.Register(takeovers); err != nil {
		return err
	}
	if s.shared, s.sharedDB, err = sqldb.OpenPostgres(ctx, cfg.Store, int32(cfg.Workers+8)); err != nil {
		return err
	}
	// A lock holds a session while its repository is judged: at most one per repository in this
	// process (repoDrift.judging), for the workers, the timer loop and proposals.
	if s.locks, s.locksDB, err = sqldb.OpenPostgres(ctx, cfg.Store, int32(cfg.Workers+8)); err != nil {
		return err
	}
	if s.live, err = livestate.OpenPostgres(ctx, s.sharedDB); err != nil {
		return err
	}
	s.agents, err = agentstore.OpenPostgres(ctx, s.sharedDB, cfg.StoreName())
	return err
}

// newDrift opens the drift states and configures the drift loop for the repositories events are
// routed to: the default repository's state is drift_state (drift.db beside the store), every
// other repository's is drift.<owner>.<name>.db beside it. Each state found there is opened at
// start, so that its timers fire even before its repository's next event.
// helmRenderer renders the GitOps repositories' charts and builds their kustomizations in child
// processes (cfg.RenderWorker) under the configured budgets (render_timeout, render_memory,
// render_parallel). Without a worker command it is nil: charts render and kustomizations build in
// this process.
func (s *Server) helmRenderer() gitops.HelmRenderer {
	if len(s.cfg.RenderWorker) == 0 {
		return nil
	}
	return &gitops.RenderProcess{Command: s.cfg.RenderWorker, Timeout: s.cfg.RenderTimeout, Memory: s.cfg.RenderMemory << 20, Parallel: s.cfg.RenderParallel}
}

// readBudget is what a repository or a pull request may make the server read and judge
// (max_file_size, max_fields_per_file, max_fields, max_value_size).
func readBudget(cfg config.Config) core.Budget {
	return core.Budget{FileBytes: cfg.MaxFileSize, FieldsPerFile: cfg.MaxFieldsPerFile, FieldsPerChange: cfg.MaxFields, ValueBytes: cfg.MaxValueSize}
}

func (s *Server) newDrift(ctx context.Context, gh *githubApp, repos *repocache.Cache) (*Drift, error) {
	path := s.cfg.DriftState
	if path == "" {
		path = filepath.Join(filepath.Dir(s.cfg.Store), "drift.db")
	}
	dir := filepath.Dir(path)
	mode, err := reconcile.ParseMode(s.cfg.WriteMode)
	if err != nil {
		return nil, err
	}
	author, err := mail.ParseAddress(s.cfg.CommitAuthor)
	if err != nil {
		return nil, fmt.Errorf("commit_author: %w", err)
	}
	metrics, err := NewDriftMetrics(s.reg)
	if err != nil {
		return nil, err
	}
	if s.shared != nil {
		return s.newSharedDrift(ctx, gh, repos, mode, author, metrics)
	}
	st, err := driftstate.Open(ctx, path)
	if err != nil {
		return nil, err
	}
	if s.cfg.GitOpsRepository == "" && len(s.cfg.Clusters) == 0 && len(s.cfg.AWSAccounts) == 0 {
		s.log.Warn("no gitops_repository, cluster or aws_account configured: drift events are judged only when an Argo CD repoURL names a repository the App is installed on")
	}
	d := &Drift{GitHub: gh, Repos: repos, Helm: s.helmRenderer(), FileBudget: s.cfg.MaxFileSize, Repository: s.cfg.GitOpsRepository, Branch: s.cfg.GitOpsBranch,
		Clusters: s.cfg.Clusters, Accounts: s.cfg.AWSAccounts, GitHubHosts: []string{gitHost(s.cfg.GitHubURL)},
		StatePath:  func(repo string) string { return repoStatePath(dir, repo) },
		PolicyPath: s.cfg.PolicyPath, Mode: mode, Author: object.Signature{Name: author.Name, Email: author.Address},
		State: st, Log: s.log, Metrics: metrics}
	found, err := repoStates(dir)
	if err != nil {
		d.Close()
		return nil, err
	}
	return s.serveRepositories(ctx, d, found)
}

// serveRepositories opens the drift state of every configured repository and of every one a state
// was found for, so that their timers run from the start; on failure it closes d.
func (s *Server) serveRepositories(ctx context.Context, d *Drift, found []string) (*Drift, error) {
	for _, ref := range s.cfg.Repositories() {
		if err := d.Serve(ctx, ref.Repository, ref.Branch); err != nil {
			d.Close()
			return nil, err
		}
	}
	for _, repo := range found {
		if err := d.Serve(ctx, repo, d.branchOf(repo)); err != nil {
			d.Close()
			return nil, err
		}
	}
	return d, nil
}

// sharedTimerPoll is how soon a replica sees the timers another replica set (one indexed query per
// repository each time): the longest a timer of a replica that died waits past its time.
const sharedTimerPoll = 10 * time.Second

// newSharedDrift is newDrift for replicas sharing a PostgreSQL database: every repository's state
// is its schema there, judging a repository takes its advisory lock, and at start every state the
// database holds is opened, so that its timers fire on whichever replica is up.
func (s *Server) newSharedDrift(ctx context.Context, gh *githubApp, repos *repocache.Cache, mode reconcile.Mode, author *mail.Address, metrics *DriftMetrics) (*Drift, error) {
	locks := sqldb.Locks{Pool: s.locks}
	d := &Drift{GitHub: gh, Repos: repos, Helm: s.helmRenderer(), FileBudget: s.cfg.MaxFileSize, Repository: s.cfg.GitOpsRepository, Branch: s.cfg.GitOpsBranch,
		Clusters: s.cfg.Clusters, Accounts: s.cfg.AWSAccounts, GitHubHosts: []string{gitHost(s.cfg.GitHubURL)},
		OpenState: func(ctx context.Context, repo string) (*driftstate.DB, error) {
			return driftstate.OpenPostgres(ctx, s.sharedDB, s.cfg.StoreName(), repo)
		},
		Lock:       locks.Lock,
		PolicyPath: s.cfg.PolicyPath, Mode: mode, Author: object.Signature{Name: author.Name, Email: author.Address},
		Log: s.log, Metrics: metrics}
	d.Discover = func(ctx context.Context) ([]string, error) { return driftstate.PostgresRepositories(ctx, s.sharedDB) }
	d.TimerPoll = sharedTimerPoll
	found, err := d.Discover(ctx)
	if err != nil {
		return nil, err
	}
	return s.serveRepositories(ctx, d, found)
}

// newSignIn configures sign-in to the details pages with the App's OAuth client. The cookies are
// signed with the session secret or, without one, with a key derived from the App's private key,
// which every replica has.
func newSignIn(cfg config.Config, log *slog.Logger) (*webauth.Auth, error) {
	public, err := url.Parse(cfg.PublicURL)
	if err != nil {
		return nil, fmt.Errorf("public_url: %w", err)
	}
	api, err := url.Parse(cfg.GitHubURL)
	if err != nil {
		return nil, fmt.Errorf("github_url: %w", err)
	}
	key := []byte(cfg.SessionSecret.Reveal())
	if len(key) == 0 {
		m := hmac.New(sha256.New, []byte(cfg.PrivateKey.Reveal()))
		m.Write([]byte("parley sign-in cookies v1"))
		key = m.Sum(nil)
	}
	return webauth.New(webauth.Config{ClientID: cfg.OAuthClientID, ClientSecret: cfg.OAuthClientSecret.Reveal(), PublicURL: public,
		GitHubWeb: gitHubWeb(api), APIBase: api, Key: key, Log: log})
}

// gitHubWeb is GitHub's web address for the REST API at api: https://github.com/ for
// api.github.com, the server itself for GitHub Enterprise Server (https://HOST/api/v3/).
func gitHubWeb(api *url.URL) *url.URL {
	web := *api
	if strings.EqualFold(api.Hostname(), "api.github.com") {
		web.Host = "github.com"
		web.Path = "/"
		return &web
	}
	web.Path = strings.TrimSuffix(strings.TrimSuffix(api.Path, "/"), "/api/v3") + "/"
	return &web
}

// gitHost is the host of Git URLs on the GitHub whose REST API is at apiURL: github.com for
// api.github.com, the server itself for GitHub Enterprise Server (https://HOST/api/v3/).
func gitHost(apiURL string) string {
	u, err := url.Parse(apiURL)
	if err != nil {
		return "github.com"
	}
	if strings.EqualFold(u.Hostname(), "api.github.com") {
		return "github.com"
	}
	return u.Hostname()
}

// repoStatePath is the drift state file of a repository that is not the default one. GitHub
// owners hold no dots, so the first dot after "drift." ends the owner.
func repoStatePath(dir, repo string) string {
	owner, name, _ := strings.Cut(repo, "/")
	return filepath.Join(dir, "drift."+strings.ToLower(owner)+"."+strings.ToLower(name)+".db")
}

// repoStates lists the repositories that have a drift state file in dir.
func repoStates(dir string) ([]string, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "drift.*.*.db"))
	if err != nil {
		return nil, err
	}
	var repos []string
	for _, p := range paths {
		rest := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(p), "drift."), ".db")
		owner, name, ok := strings.Cut(rest, ".")
		if ok && owner != "" && name != "" {
			repos = append(repos, owner+"/"+name)
		}
	}
	return repos, nil
}

// Handler serves the webhook endpoint, the drift event endpoints (POST /events/...), /healthz, /readyz and (unless metrics have their own
// listener) /metrics.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("POST "+webhooks.GitHubPath, s.receiver)
	for path, rcv := range s.events {
		mux.Handle(path, rcv) // any method: the receiver answers 405 with Allow itself
		// Events posted for a cluster (/events/<source>/<cluster>) go to the cluster's repository.
		mux.Handle(webhooks.ClusterPattern(path), rcv)
	}
	// The managed clusters' log pipelines (Firehose, Pub/Sub push): any method, as above.
	mux.Handle(webhooks.FirehosePattern(), s.firehose)
	mux.Handle(webhooks.PubSubPattern(), s.pubsub)
	mux.Handle(ProposalsPath, s.props) // any method: it answers 405 with Allow itself
	mux.Handle(PlansPath, &Plans{Proposals: s.props, Lane: s.lane})
	mux.Handle(MCPPath, &MCP{Proposals: s.props, Version: buildVersion()})
	if s.admission != nil && s.cfg.AdmissionListen == "" {
		mux.Handle(AdmissionPrefix, s.admission) // behind a proxy that terminates TLS
	}
	if s.details != nil {
		s.auth.Register(mux)
		s.details.Register(mux)
	}
	s.operations(mux)
	if s.cfg.MetricsListen == "" {
		mux.Handle("GET /metrics", s.metrics())
	}
	return mux
}

// operations mounts /healthz and /readyz.
func (s *Server) operations(mux *http.ServeMux) {
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET /readyz", s.ready)
}

// limits are the intake listener's bounds, from the configuration.
func (s *Server) limits() guard.Limits {
	return guard.Limits{
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		BodyTimeout:       s.cfg.BodyTimeout,
		WriteTimeout:      s.cfg.WriteTimeout,
		IdleTimeout:       s.cfg.IdleTimeout,
		MaxConns:          s.cfg.MaxConnections,
		MaxConnsPerClient: s.cfg.MaxConnectionsPerClient,
	}
}

func (s *Server) metrics() http.Handler { return promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}) }

// ready answers 200 while the store answers, GitHub does not reject the App's key and the server
// is not draining.
func (s *Server) ready(w http.ResponseWriter, r *http.Request) {
	if s.draining.Load() {
		http.Error(w, "draining", http.StatusServiceUnavailable)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if _, err := s.store.Stats(ctx, time.Now()); err != nil {
		http.Error(w, "store unavailable", http.StatusServiceUnavailable)
		return
	}
	ok, note := s.appKeyReadiness()
	if !ok {
		http.Error(w, note, http.StatusServiceUnavailable)
		return
	}
	if note != "" {
		fmt.Fprintln(w, "ok; "+note)
		return
	}
	fmt.Fprintln(w, "ok")
}

// Run serves until ctx ends, then drains: it stops accepting deliveries, lets the workers finish
// what they hold within the shutdown grace (unfinished deliveries are released and resume on the
// next start), and closes the store. ready, if not nil, receives the listener's address.
func (s *Server) Run(ctx context.Context, ready func(addr string)) error {
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		s.closeStores()
		return fmt.Errorf("listen on %s: %w", s.cfg.Listen, err)
	}
	limits := s.limits()
	srv, ln := guard.Intake(s.Handler(), ln, limits, s.guards)
	var msrv *http.Server
	var mln net.Listener
	if s.cfg.MetricsListen != "" {
		if mln, err = net.Listen("tcp", s.cfg.MetricsListen); err != nil {
			ln.Close()
			s.closeStores()
			return fmt.Errorf("listen on %s: %w", s.cfg.MetricsListen, err)
		}
		// The operations listener answers the probes and Prometheus apart from the intake: none
		// of its connection caps count here, so a flood on listen leaves these answering. Its
		// timeouts are the intake's; it reads no bodies.
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", s.metrics())
		s.operations(mux)
		msrv = guard.Server(mux, guard.Limits{ReadHeaderTimeout: limits.ReadHeaderTimeout, WriteTimeout: limits.WriteTimeout, IdleTimeout: limits.IdleTimeout})
	}
	var psrv *http.Server
	var pln net.Listener
	if s.cfg.PprofListen != "" {
		if pln, err = net.Listen("tcp", s.cfg.PprofListen); err != nil {
			ln.Close()
			if mln != nil {
				mln.Close()
			}
			s.closeStores()
			return fmt.Errorf("pprof listener %s: %w", s.cfg.PprofListen, err)
		}
		// A CPU profile takes as long as the operator asks (?seconds=): no write timeout.
		psrv = guard.Server(pprofMux(), guard.Limits{ReadHeaderTimeout: limits.ReadHeaderTimeout, IdleTimeout: limits.IdleTimeout})
	}
	var asrv *http.Server
	var aln net.Listener
	if s.admission != nil && s.cfg.AdmissionListen != "" {
		if asrv, err = admissionServer(s.cfg, s.admission); err == nil {
			aln, err = net.Listen("tcp", s.cfg.AdmissionListen)
		}
		if err != nil {
			ln.Close()
			if mln != nil {
				mln.Close()
			}
			if pln != nil {
				pln.Close()
			}
			s.closeStores()
			return fmt.Errorf("admission listener %s: %w", s.cfg.AdmissionListen, err)
		}
	}
	if s.admission != nil {
		// The admission reviews' warm-stack workers live while the listeners serve them: closed
		// below once both have shut down, which waits for a review being judged on one.
		s.admission.warm.Start()
	}
	poolCtx, stopPool := context.WithCancel(context.WithoutCancel(ctx))
	defer stopPool()
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	wg.Add(1)
	go func() { // owned by Run; ends when stopPool is called and in-flight work has drained
		defer wg.Done()
		if err := s.pool.Run(poolCtx); err != nil && !errors.Is(err, context.Canceled) {
			errs <- fmt.Errorf("workers: %w", err)
		}
	}()
	serve := func(srv *http.Server, ln net.Listener) {
		defer wg.Done()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errs <- err
		}
	}
	wg.Add(1)
	go func() { // owned by Run; ends with the pool's context
		defer wg.Done()
		s.drift.RunTimers(poolCtx)
	}()
	wg.Add(1)
	go func() { // owned by Run; ends with the pool's context
		defer wg.Done()
		s.retention.Run(poolCtx)
	}()
	if s.cfg.AppKeyCheckInterval > 0 {
		wg.Add(1)
		go func() { // owned by Run; ends with the pool's context
			defer wg.Done()
			s.watchAppKey(poolCtx, s.appClient, s.cfg.AppKeyCheckInterval)
		}()
	}
	wg.Add(1)
	go serve(srv, ln)
	if msrv != nil {
		wg.Add(1)
		go serve(msrv, mln)
	}
	if psrv != nil {
		wg.Add(1)
		go serve(psrv, pln)
		s.pprofAddr.Store(pln.Addr().String())
		s.log.Info("profiles serving", "addr", pln.Addr().String())
	}
	if s.admission != nil {
		wg.Add(1)
		go func() { // owned by Run; ends with the pool's context
			defer wg.Done()
			s.admission.Warm(poolCtx)
		}()
	}
	if asrv != nil {
		wg.Add(1)
		go func() { // owned by Run; ends when asrv is shut down
			defer wg.Done()
			if err := asrv.ServeTLS(aln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errs <- fmt.Errorf("admission listener: %w", err)
			}
		}()
		s.admissionAddr.Store(aln.Addr().String())
		s.log.Info("admission webhook serving", "addr", aln.Addr().String(), "clusters", len(s.cfg.Admission))
	}
	build := version.Get()
	s.log.Info("parley serving", "addr", ln.Addr().String(), "store", s.cfg.StoreName(), "workers", s.cfg.Workers,
		"version", build.Version, "revision", build.ShortRevision(), "goversion", build.GoVersion)
	if mln != nil {
		s.metricsAddr.Store(mln.Addr().String())
	}
	if ready != nil {
		ready(ln.Addr().String())
	}
	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-errs:
	}
	s.draining.Store(true)
	s.log.Info("parley draining", "grace", s.cfg.ShutdownGrace)
	shutCtx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownGrace)
	defer cancel()
	_ = srv.Shutdown(shutCtx) // no new deliveries; those being stored finish first
	if msrv != nil {
		_ = msrv.Shutdown(shutCtx)
	}
	if psrv != nil {
		_ = psrv.Close() // a CPU profile in progress is cut short: nothing durable depends on it
	}
	if asrv != nil {
		_ = asrv.Shutdown(shutCtx)
	}
	if s.admission != nil {
		// A review still being answered after the grace finishes inline: Close only stops the
		// workers, after the job each holds.
		s.admission.warm.Close()
	}
	stopPool()
	wg.Wait()
	if err := s.closeStores(); err != nil && runErr == nil {
		runErr = err
	}
	s.log.Info("parley stopped")
	return runErr
}

// MetricsAddr is the address the operations listener (metrics_listen) is bound to, once Run has
// started; "" without one.
func (s *Server) MetricsAddr() string {
	a, _ := s.metricsAddr.Load().(string)
	return a
}

// PprofAddr is the address pprof_listen is bound to once Run listens; "" without one.
func (s *Server) PprofAddr() string {
	a, _ := s.pprofAddr.Load().(string)
	return a
}

// pprofMux serves net/http/pprof's handlers on a mux of their own: the package's init registers
// them on http.DefaultServeMux, which no listener of serve uses, so they are reachable only here.
func pprofMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index) // heap, goroutine, allocs, block, mutex by name
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// AdmissionAddr is the address admission_listen listens on, once Run listens; "" without one.
func (s *Server) AdmissionAddr() string {
	a, _ := s.admissionAddr.Load().(string)
	return a
}

// Store exposes the delivery store (for `parley deliveries`).
func (s *Server) Store() store.Deliveries { return s.store }

// eventCredentials are the cluster and AWS account event secrets a source's receiver accepts:
// every cluster's for each source, every account's for CloudTrail.
func eventCredentials(cfg config.Config, source string) ([]webhooks.Credential, error) {
	var out []webhooks.Credential
	for _, name := range slices.Sorted(maps.Keys(cfg.ClusterEventSecrets)) {
		ws, err := webhooks.NewSecret(cfg.ClusterEventSecrets[name].Reveal())
		if err != nil {
			return nil, fmt.Errorf("cluster %q: event secret: %w", name, err)
		}
		out = append(out, webhooks.Credential{Secret: ws, Cluster: name})
	}
	if source != store.SourceCloudTrail {
		return out, nil
	}
	for _, id := range slices.Sorted(maps.Keys(cfg.AWSAccountEventSecrets)) {
		ws, err := webhooks.NewSecret(cfg.AWSAccountEventSecrets[id].Reveal())
		if err != nil {
			return nil, fmt.Errorf("aws_account %q: event secret: %w", id, err)
		}
		out = append(out, webhooks.Credential{Secret: ws, Account: id})
	}
	return out, nil
}

// buildInfoGauge is parley_build_info, always 1, whose labels say which build answers: a dashboard
// joins it to see which version each replica ran when a metric moved.
func buildInfoGauge(info version.Info) prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "parley_build_info",
		Help:        "Which build of parley serve this is (always 1): version, commit and Go release, as parley version prints them.",
		ConstLabels: prometheus.Labels{"version": info.Version, "revision": info.ShortRevision(), "goversion": info.GoVersion}})
	g.Set(1)
	return g
}
