package config

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/mail"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/parleyhq/parley/internal/sqldb"
)

// Secret holds a credential. It prints as [redacted] through fmt, slog and JSON, so logging a Config
// never leaks one.
type Secret struct{ v string }

// NewSecret wraps s.
func NewSecret(s string) Secret { return Secret{v: s} }

// Reveal returns the secret's value: call it only where the value is used.
func (s Secret) Reveal() string { return s.v }

// IsZero reports whether no secret is set.
func (s Secret) IsZero() bool { return s.v == "" }

func (s Secret) String() string {
	if s.v == "" {
		return ""
	}
	return "[redacted]"
}

// GoString redacts under %#v too.
func (s Secret) GoString() string { return s.String() }

// LogValue redacts in structured logs.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalText redacts in JSON and text encodings.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Config is everything `parley serve` needs.
type Config struct {
	AppID          int64    // GitHub App ID
	PrivateKey     Secret   // PEM; from private_key_file or PARLEY_PRIVATE_KEY
	PrivateKeyFile string   // where PrivateKey was read from, if a file
	WebhookSecrets []Secret // every live secret; several during a rotation
	// AppDir holds the App's credentials as the manifest flow writes them (AppIDFile,
	// PrivateKeyFileName, WebhookSecretsFile: the keys of the chart's Secret), read for whatever the
	// keys above leave unset. With no App configured, serve runs the manifest flow at /setup to fill it.
	AppDir string
	// AppKeyCheckInterval is how often serve asks GitHub whether it accepts the App's key (0: never);
	// /readyz fails while GitHub rejects it.
	AppKeyCheckInterval time.Duration
	Listen              string // webhook and API listener
	MetricsListen       string // Prometheus /metrics listener ("" = on Listen)
	// PprofListen serves Go's CPU and heap profiles (net/http/pprof) on a listener of its own, for
	// an operator measuring serve under load; "" (the default) serves them nowhere. Never on
	// Listen or the admission listener: a profile is an operator's tool, not the internet's.
	PprofListen string
	// Store is where serve keeps its durable state: a SQLite file, created on first start (the
	// other SQLite files go beside it), or a postgres:// URL shared by every replica.
	Store string
	// DataDir holds what each replica derives from Git (the clone cache); "" = beside the SQLite
	// store, or $TMPDIR/parley with PostgreSQL.
	DataDir                    string
	GitHubURL                  string // REST API base URL: https://api.github.com/ or https://HOST/api/v3/ for GHES
	Workers                    int    // delivery workers
	PerInstallationConcurrency int
	MaxAttempts                int           // attempts before a delivery is dead-lettered
	ShutdownGrace              time.Duration // how long SIGTERM waits for in-flight deliveries
	// Lease is how long a worker holds a delivery it claimed: a replica that dies leaves its
	// deliveries to the others once their leases run out.
	Lease      time.Duration
	PolicyPath string // policy file, read from the default branch
	WriteMode  string // "pull-request" (default) or "direct": how gate commits reach the default branch
	// GitOpsRepository is the default repository ("owner/name") the drift endpoints judge events
	// against and write gates into: the one for events that no cluster, AWS account or Argo CD
	// repoURL routes. "" leaves such events unjudged (stored, then dead-lettered).
	GitOpsRepository string
	GitOpsBranch     string // "" = the repository's default branch
	// Clusters maps a cluster name (the <cluster> of POST /events/<source>/<cluster>) to the GitOps
	// repository that applies that cluster's objects.
	Clusters map[string]RepoRef
	// AWSAccounts maps an AWS account ID (a CloudTrail record's recipientAccountId) to the repository
	// holding the Terraform of that account.
	AWSAccounts map[string]RepoRef
	// ClusterEventSecrets and AWSAccountEventSecrets are each cluster's and account's own event
	// secret, read from the file its block's event_secret_file (or the *_EVENT_SECRET_FILES
	// environment) names: a cluster's posts events only to /events/<source>/<cluster>, an
	// account's only CloudTrail records of that account, unlike the source-wide secrets below.
	ClusterEventSecrets    map[string]Secret
	AWSAccountEventSecrets map[string]Secret
	// clusterSecretFiles and accountSecretFiles are where those secrets are read from.
	clusterSecretFiles, accountSecretFiles map[string]string
	// ProposalsRate is each agent token's rate of proposals per second (POST /v1/proposals),
	// with bursts of twice as many; 0 = no limit.
	ProposalsRate float64
	// ProposalsMaxAge is how old the branch a proposal is judged against may be: the repository
	// is fetched at most this often for proposals.
	ProposalsMaxAge time.Duration
	CommitAuthor    string // "Name <email>" of verdict commits
	// PublicURL is where people reach this server (https://parley.example.com): the details pages
	// and the sign-in callback are under it. With OAuthClientID and OAuthClientSecret it turns the
	// details pages on.
	PublicURL         string
	OAuthClientID     string // the GitHub App's client ID, for signing people in
	OAuthClientSecret Secret // the GitHub App's client secret
	// SessionSecret signs the sign-in cookies; every replica needs the same one. Empty: derived
	// from the App's private key, which every replica has.
	SessionSecret Secret
	DriftState    string // the drift state database; "" = drift.db beside the store
	// Event source credentials for drift endpoints.
	FluxHMACSecret  Secret
	ArgoCDToken     Secret
	KubeAuditToken  Secret
	CloudTrailToken Secret
	LogLevel        slog.Level
	// Intake bounds what a client can hold of the listener before it is authenticated (see
	// webhooks/guard): timeouts, connection caps, failed authentications per client address.
	ReadHeaderTimeout       time.Duration
	BodyTimeout             time.Duration
	WriteTimeout            time.Duration
	IdleTimeout             time.Duration
	MaxConnections          int
	MaxConnectionsPerClient int
	AuthFailuresPerMinute   float64
	// UnauthenticatedBodyBudget caps the bytes held at once by request bodies whose signature is
	// not checked yet, in memory or spooled to TMPDIR (0: no cap); one client address holds at
	// most a quarter of it, or one largest body if that is more.
	UnauthenticatedBodyBudget int64
	// TrustedProxies are the CIDRs of the proxies whose X-Forwarded-For (or Forwarded) names the
	// client address the per-client limits count.
	TrustedProxies []string
	// DeliveryRetention and DeadLetterRetention are how long done and dead-lettered deliveries
	// are kept; 0 keeps them for ever.
	DeliveryRetention   time.Duration
	DeadLetterRetention time.Duration
	// EventMaxAge and EventMaxFuture bound the times of the drift events the receivers accept;
	// 0 checks nothing on that side.
	EventMaxAge    time.Duration
	EventMaxFuture time.Duration
	// Budgets bound what a repository or a pull request can make the server read and render
	// (core.Budget, gitops.RenderProcess; docs/security.md): the largest file read, the most fields
	// one file and one pull request may change and still be judged, the longest value judged, and
	// each Helm chart's render and each kustomize build's time, memory (MiB) and how many run at once.
	MaxFileSize      int64
	MaxFieldsPerFile int
	MaxFields        int
	MaxValueSize     int
	RenderTimeout    time.Duration
	RenderMemory     int64
	RenderParallel   int

	// RenderWorker is the command that renders one Helm chart or builds one kustomization in a
	// child process under a time and memory budget (gitops.RenderProcess): `parley render-worker`,
	// set by parley serve, not by the file. Empty renders and builds in the server's own process,
	// which nothing stops.
	RenderWorker []string
	// Admission configures the admission webhook per cluster (/admission/<cluster>);
	// AdmissionListen, with AdmissionTLSCertFile and AdmissionTLSKeyFile, serves it over HTTPS on its
	// own address, as the API server requires.
	Admission            map[string]Admission
	AdmissionListen      string
	AdmissionTLSCertFile string
	AdmissionTLSKeyFile  string
	// Firehose and PubSub are the managed clusters' log pipelines (pipelines.go): a Firehose
	// delivery stream's endpoint per cluster or AWS account, a push subscription per cluster.
	Firehose map[string]Firehose
	PubSub   map[string]PubSub
}

// StoreIsPostgres reports whether the store is a PostgreSQL database rather than a SQLite file.
func (c Config) StoreIsPostgres() bool { return sqldb.IsPostgres(c.Store) }

// StoreName is the store for logs and errors: a PostgreSQL URL without its password, anything
// else with password-like values redacted.
func (c Config) StoreName() string { return sqldb.RedactAny(c.Store) }

// Dir is the directory of what this replica derives from Git, and, with a SQLite store, of the
// other SQLite files.
func (c Config) Dir() string {
	switch {
	case c.DataDir != "":
		return c.DataDir
	case c.StoreIsPostgres():
		return filepath.Join(os.TempDir(), "parley")
	}
	return filepath.Dir(c.Store)
}

// RepoRef names a GitOps repository and the branch drift events are judged against.
type RepoRef struct {
	Repository string // owner/name
	Branch     string // "" = the repository's default branch
}

// Repositories lists every repository the configuration routes drift events to: the default
// (GitOpsRepository and GitOpsBranch), if set, first, then the clusters' and AWS accounts'
// repositories sorted by repository and branch. Each (repository, branch) pair appears once.
func (c Config) Repositories() []RepoRef {
	var out, routed []RepoRef
	if c.GitOpsRepository != "" {
		out = append(out, RepoRef{Repository: c.GitOpsRepository, Branch: c.GitOpsBranch})
	}
	for _, m := range []map[string]RepoRef{c.Clusters, c.AWSAccounts} {
		for _, r := range m {
			if !slices.Contains(out, r) && !slices.Contains(routed, r) {
				routed = append(routed, r)
			}
		}
	}
	slices.SortFunc(routed, func(a, b RepoRef) int {
		if n := strings.Compare(a.Repository, b.Repository); n != 0 {
			return n
		}
		return strings.Compare(a.Branch, b.Branch)
	})
	return append(out, routed...)
}

// Key documents one configuration key for `parley serve --help`.
type Key struct {
	HCL, Env, Default, Help string
}

// Keys lists every configuration key, its environment override and default.
func Keys() []Key {
	return []Key{
		{"app_id", "PARLEY_APP_ID", "(required)", "GitHub App ID"},
		{"private_key_file", "PARLEY_PRIVATE_KEY_FILE", "(required unless PARLEY_PRIVATE_KEY)", "path of the App's PEM private key"},
		{"", "PARLEY_PRIVATE_KEY", "", "the App's PEM private key itself (overrides private_key_file)"},
		{"app_dir", "PARLEY_APP_DIR", "(none)", "directory of the App's credentials as the manifest flow writes them (app-id, private-key.pem, webhook-secrets: the chart Secret's keys), read for what the keys above leave unset; with none of them set, serve registers the App at /setup (docs/install.md)"},
		{"webhook_secrets", "PARLEY_WEBHOOK_SECRETS", "(required)", "webhook secrets, all accepted (comma-separated in the environment); list two while rotating"},
		{"app_key_check_interval", "PARLEY_APP_KEY_CHECK_INTERVAL", "5m", "how often serve asks GitHub (GET /app) whether it accepts the App's key, and at start; /readyz fails while GitHub rejects it (GitHub not answering leaves it ready, and says so); 0: never"},
		{"listen", "PARLEY_LISTEN", ":8080", "address for webhooks, event endpoints, /healthz and /readyz"},
		{"metrics_listen", "PARLEY_METRICS_LISTEN", "(same as listen)", "separate address for /metrics, /healthz and /readyz, held to none of listen's connection caps: point probes here so they answer under a flood"},
		{"pprof_listen", "PARLEY_PPROF_LISTEN", "(none: off)", "address serving Go's profiles (/debug/pprof/: CPU, heap, goroutines) on a listener of its own, never on listen or admission_listen; unauthenticated, so bind it to loopback (127.0.0.1:6060) and reach it with kubectl port-forward (docs/security.md)"},
		{"store", "PARLEY_STORE", "parley.db", "SQLite database file, created on first start, or a postgres:// URL for several replicas (put its password in the environment from a Secret, or use PGPASSWORD)"},
		{"data_dir", "PARLEY_DATA_DIR", "(beside store; $TMPDIR/parley with PostgreSQL)", "directory for what each replica derives from Git: the clone cache"},
		{"github_url", "PARLEY_GITHUB_URL", "https://api.github.com/", "GitHub REST API base URL (GitHub Enterprise Server: https://HOST/api/v3/)"},
		{"workers", "PARLEY_WORKERS", "4", "delivery workers"},
		{"per_installation_concurrency", "PARLEY_PER_INSTALLATION_CONCURRENCY", "4", "concurrent GitHub requests per installation"},
		{"max_attempts", "PARLEY_MAX_ATTEMPTS", "8", "attempts before a delivery goes to the dead-letter list"},
		{"shutdown_grace", "PARLEY_SHUTDOWN_GRACE", "25s", "how long SIGTERM waits for deliveries in flight"},
		{"lease", "PARLEY_LEASE", "5m", "how long a worker holds a delivery; with several replicas, how soon the deliveries of one that died are taken over"},
		{"policy_path", "PARLEY_POLICY_PATH", ".parley/policy.hcl", "policy file, always read from the default branch"},
		{"write_mode", "PARLEY_WRITE_MODE", "pull-request", "how gate, resume and adopt commits land: pull-request (a branch and pull request per field) or direct (pushed to gitops_branch)"},
		{"gitops_repository", "PARLEY_GITOPS_REPOSITORY", "(none)", "owner/name of the default GitOps repository: drift events that no cluster, aws_account or Argo CD repoURL routes are judged against it and their gates written to it; without it such events are stored but not judged (the App must be installed on every repository named here)"},
		{"gitops_branch", "PARLEY_GITOPS_BRANCH", "(the repository's default branch)", "branch holding the manifests, the policy and the gates"},
		{`cluster "NAME" {...}`, "PARLEY_CLUSTERS", "(none)", `repository (owner/name) and optional branch applying the objects of cluster NAME, the <cluster> of POST /events/<source>/<cluster>; a block per cluster; environment: NAME=owner/name[@branch],... (replaces every cluster block)`},
		{`aws_account "ID" {...}`, "PARLEY_AWS_ACCOUNTS", "(none)", `repository (owner/name) and optional branch holding the Terraform of the 12-digit AWS account ID (a CloudTrail record's recipientAccountId); a block per account; environment: ID=owner/name[@branch],... (replaces every aws_account block)`},
		{`cluster "NAME" { event_secret_file }`, "PARLEY_CLUSTER_EVENT_SECRET_FILES", "(none)", `file holding cluster NAME's own event secret (HMAC key for Flux, bearer token for the others): it posts only to /events/<source>/NAME, where the source-wide secrets post for every cluster; environment: NAME=/path,... added to the blocks' (a secret shared by several clusters is accepted, with a warning at start)`},
		{`aws_account "ID" { event_secret_file }`, "PARLEY_AWS_ACCOUNT_EVENT_SECRET_FILES", "(none)", `file holding AWS account ID's own bearer token for POST /events/cloudtrail: it posts only records of that account; environment: ID=/path,...`},
		{"proposals_rate", "PARLEY_PROPOSALS_RATE", "20", "proposals per second each agent token may send to POST /v1/proposals, in bursts of twice as many (0: no limit)"},
		{"proposals_max_age", "PARLEY_PROPOSALS_MAX_AGE", "2s", "how old the branch a proposal is judged against may be: the repository is fetched at most this often for proposals (0: every time)"},
		{"commit_author", "PARLEY_COMMIT_AUTHOR", "Parley <parley@users.noreply.github.com>", "author of gate, resume and adopt commits"},
		{"public_url", "PARLEY_PUBLIC_URL", "(none: no details pages)", "where people reach this server, e.g. https://parley.example.com; with the two OAuth settings it serves the details pages linked from check runs, behind sign-in with GitHub (callback: PUBLIC_URL/auth/callback)"},
		{"oauth_client_id", "PARLEY_OAUTH_CLIENT_ID", "(none)", "the GitHub App's client ID, to sign people in to the details pages"},
		{"", "PARLEY_OAUTH_CLIENT_SECRET", "", "the GitHub App's client secret (environment only)"},
		{"", "PARLEY_SESSION_SECRET", "(derived from the private key)", "key signing sign-in cookies, 32 bytes or more, the same on every replica (environment only)"},
		{"drift_state", "PARLEY_DRIFT_STATE", "drift.db beside store", "SQLite file of drift claims, verdicts and expiry timers"},
		{"", "PARLEY_FLUX_HMAC_SECRET", "", "secret of Flux's generic-hmac provider for POST /events/flux"},
		{"", "PARLEY_ARGOCD_TOKEN", "", "bearer token Argo CD notifications send to POST /events/argocd"},
		{"", "PARLEY_KUBE_AUDIT_TOKEN", "", "bearer token of the audit webhook backend for POST /events/k8s-audit"},
		{"", "PARLEY_CLOUDTRAIL_TOKEN", "", "bearer token for POST /events/cloudtrail"},
		{"log_level", "PARLEY_LOG_LEVEL", "info", "debug, info, warn or error"},
		{"read_header_timeout", "PARLEY_READ_HEADER_TIMEOUT", "10s", "how long a client may take to send a request's headers on listen"},
		{"body_timeout", "PARLEY_BODY_TIMEOUT", "30s", "how long a client may take to send a request's body once its headers are in; a slower body is cut off"},
		{"write_timeout", "PARLEY_WRITE_TIMEOUT", "2m", "how long a request may take from its headers to the end of its answer"},
		{"idle_timeout", "PARLEY_IDLE_TIMEOUT", "60s", "how long a keep-alive connection may wait for its next request"},
		{"max_connections", "PARLEY_MAX_CONNECTIONS", "1024", "open connections on listen, in total; at the cap a new connection takes the place of the oldest idle one (silent, or kept alive between requests) of the client holding the most, and when none is idle it is answered 503 and closed at once (0: no cap). metrics_listen is not counted: point probes there"},
		{"max_connections_per_client", "PARLEY_MAX_CONNECTIONS_PER_CLIENT", "64", "open connections on listen from one client IP address (IPv6: its /64); behind a proxy that hides client addresses every client is the proxy, so raise it or set 0 (no cap)"},
		{"delivery_retention", "PARLEY_DELIVERY_RETENTION", "168h", "how long a handled delivery is kept (and its ID and body remembered, so a redelivery or replay is a duplicate); keep it above GitHub's 3 days of redelivery (0: for ever)"},
		{"dead_letter_retention", "PARLEY_DEAD_LETTER_RETENTION", "720h", "how long a dead-lettered delivery is kept for parley deliveries to list and replay (0: for ever)"},
		{"event_max_age", "PARLEY_EVENT_MAX_AGE", "24h", "drift events (POST /events/...) older than this are refused (400 stale_event): a replayed old body is not news; parley ingest still replays old events on purpose (0: no bound)"},
		{"event_max_future", "PARLEY_EVENT_MAX_FUTURE", "5m", "drift events dated further than this ahead of the server's clock are refused (0: no bound)"},
		{"auth_failures_per_minute", "PARLEY_AUTH_FAILURES_PER_MINUTE", "30", "failed authentications (webhook signatures, event secrets and tokens, agent tokens; admission_listen's tokens and certificates on a budget of their own) one client address may make a minute, in bursts of as many; past it that address's failures are answered 429 with Retry-After instead of 401, after a hold of that long (at most 1 s). Credentials are checked first: a valid signature or token is never refused nor held (0: no limit)"},
		{"unauthenticated_body_budget", "PARLEY_UNAUTHENTICATED_BODY_BUDGET", "134217728", "bytes held at once by request bodies whose signature is still unchecked (GitHub's, Flux's and X-Signature deliveries), in memory up to 1 MiB each and past that in an unlinked file in TMPDIR; one client address holds at most a quarter of it (at least 25 MB, one largest body); a body that does not fit is answered 503 with Retry-After, before it is read when its length is declared (0: no cap)"},
		{"trusted_proxies", "PARLEY_TRUSTED_PROXIES", "(none)", "CIDRs (or addresses) of the reverse proxies in front of listen, e.g. the Ingress controller's pods; for a connection from one of them the client address the per-client limits count is the rightmost X-Forwarded-For hop (else Forwarded for=) that is not a trusted proxy; environment: comma-separated"},
		{"max_file_size", "PARLEY_MAX_FILE_SIZE", "8388608", "the largest file (bytes) the App's check and the drift loop read from a repository; a larger one is named and not judged, and the check cannot pass"},
		{"max_fields_per_file", "PARLEY_MAX_FIELDS_PER_FILE", "20000", "the most fields one file of a pull request may change and still be judged"},
		{"max_fields", "PARLEY_MAX_FIELDS", "50000", "the most fields one pull request may change in all; the files past it are named and not judged"},
		{"max_value_size", "PARLEY_MAX_VALUE_SIZE", "65536", "the longest value (bytes of JSON) judged; a longer one is named, never echoed"},
		{"render_timeout", "PARLEY_RENDER_TIMEOUT", "30s", "the longest one Helm chart may take to render, or one kustomization to build, in a worker process (kept between them; killed, and the next given a fresh one, when this is spent); a chart over it is not rendered and its objects are not gated, an overlay over it is not built and is read as its files are written"},
		{"render_memory", "PARLEY_RENDER_MEMORY", "512", "the most memory (MiB) one Helm chart's rendering or one kustomize build may use, beyond its worker process's own (about 100 MiB)"},
		{"render_parallel", "PARLEY_RENDER_PARALLEL", "2", "how many Helm charts render and kustomizations build at once"},
		{`admission "CLUSTER" {...}`, "", "(none)", `the validating admission webhook for cluster CLUSTER at /admission/CLUSTER (docs/admission.md): mode (warn, the default, or deny), token_file or client_ca_file (how its API server authenticates) or authentication = "none", gitops_users (default: Argo CD's and Flux's controllers)`},
		{"admission_listen", "", "(none: on listen)", "separate HTTPS address for /admission/...; needs the two TLS files"},
		{"admission_tls_cert_file", "", "(none)", "PEM certificate (chain) the admission listener serves; the API server checks it against the webhook's caBundle"},
		{"admission_tls_key_file", "", "(none)", "its PEM private key"},
		{`firehose "NAME" {...}`, "", "(none)", `an Amazon Data Firehose delivery stream posting EKS audit logs or CloudTrail records from CloudWatch Logs to /events/firehose/NAME (docs/admission.md), NAME a cluster or aws_account block's: access_key_file (the stream's access key; one a line, two while rotating)`},
		{`pubsub "CLUSTER" {...}`, "", "(none)", `a Pub/Sub push subscription posting GKE audit logs to /events/pubsub/CLUSTER (docs/admission.md): audience and service_account (what its OIDC token must say), keys_url (default Google's, ` + DefaultGoogleKeysURL + `) or keys_file (a JSON Web Key Set)`},
	}
}

// UnreadEnv returns the PARLEY_ variables among environ (NAME=value entries, as os.Environ gives)
// that Load does not read, sorted: a misspelt or removed setting, which would otherwise configure
// nothing, silently. Keys lists exactly what Load reads (a test keeps the two equal).
func UnreadEnv(environ []string) []string {
	read := map[string]bool{}
	for _, k := range Keys() {
		read[k.Env] = true
	}
	var out []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "PARLEY_") && !read[name] {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Help renders Keys as a table for --help.
func Help() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-30s %-36s %-22s %s\n", "FILE KEY", "ENVIRONMENT", "DEFAULT", "MEANING")
	for _, k := range Keys() {
		h := k.HCL
		if h == "" {
			h = "-"
		}
		fmt.Fprintf(&b, "%-30s %-36s %-22s %s\n", h, k.Env, k.Default, k.Help)
	}
	return b.String()
}

// file is the HCL shape of the configuration file. Secrets other than the webhook secrets have no file
// key on purpose: they belong in the environment (a Kubernetes Secret), not in a file.
type file struct {
	AppID                      *int64           `hcl:"app_id,optional"`
	PrivateKeyFile             *string          `hcl:"private_key_file,optional"`
	WebhookSecrets             []string         `hcl:"webhook_secrets,optional"`
	AppDir                     *string          `hcl:"app_dir,optional"`
	AppKeyCheckInterval        *string          `hcl:"app_key_check_interval,optional"`
	Listen                     *string          `hcl:"listen,optional"`
	MetricsListen              *string          `hcl:"metrics_listen,optional"`
	PprofListen                *string          `hcl:"pprof_listen,optional"`
	Store                      *string          `hcl:"store,optional"`
	DataDir                    *string          `hcl:"data_dir,optional"`
	GitHubURL                  *string          `hcl:"github_url,optional"`
	Workers                    *int             `hcl:"workers,optional"`
	PerInstallationConcurrency *int             `hcl:"per_installation_concurrency,optional"`
	MaxAttempts                *int             `hcl:"max_attempts,optional"`
	ShutdownGrace              *string          `hcl:"shutdown_grace,optional"`
	Lease                      *string          `hcl:"lease,optional"`
	PolicyPath                 *string          `hcl:"policy_path,optional"`
	WriteMode                  *string          `hcl:"write_mode,optional"`
	GitOpsRepository           *string          `hcl:"gitops_repository,optional"`
	GitOpsBranch               *string          `hcl:"gitops_branch,optional"`
	CommitAuthor               *string          `hcl:"commit_author,optional"`
	PublicURL                  *string          `hcl:"public_url,optional"`
	OAuthClientID              *string          `hcl:"oauth_client_id,optional"`
	DriftState                 *string          `hcl:"drift_state,optional"`
	LogLevel                   *string          `hcl:"log_level,optional"`
	ProposalsRate              *float64         `hcl:"proposals_rate,optional"`
	ProposalsMaxAge            *string          `hcl:"proposals_max_age,optional"`
	ReadHeaderTimeout          *string          `hcl:"read_header_timeout,optional"`
	BodyTimeout                *string          `hcl:"body_timeout,optional"`
	WriteTimeout               *string          `hcl:"write_timeout,optional"`
	IdleTimeout                *string          `hcl:"idle_timeout,optional"`
	MaxConnections             *int             `hcl:"max_connections,optional"`
	MaxConnectionsPerClient    *int             `hcl:"max_connections_per_client,optional"`
	AuthFailuresPerMinute      *float64         `hcl:"auth_failures_per_minute,optional"`
	UnauthenticatedBodyBudget  *int64           `hcl:"unauthenticated_body_budget,optional"`
	TrustedProxies             []string         `hcl:"trusted_proxies,optional"`
	DeliveryRetention          *string          `hcl:"delivery_retention,optional"`
	DeadLetterRetention        *string          `hcl:"dead_letter_retention,optional"`
	EventMaxAge                *string          `hcl:"event_max_age,optional"`
	EventMaxFuture             *string          `hcl:"event_max_future,optional"`
	MaxFileSize                *int64           `hcl:"max_file_size,optional"`
	MaxFieldsPerFile           *int             `hcl:"max_fields_per_file,optional"`
	MaxFields                  *int             `hcl:"max_fields,optional"`
	MaxValueSize               *int             `hcl:"max_value_size,optional"`
	RenderTimeout              *string          `hcl:"render_timeout,optional"`
	RenderMemory               *int64           `hcl:"render_memory,optional"`
	RenderParallel             *int             `hcl:"render_parallel,optional"`
	Clusters                   []repoBlock      `hcl:"cluster,block"`
	AWSAccounts                []repoBlock      `hcl:"aws_account,block"`
	Admission                  []admissionBlock `hcl:"admission,block"`
	AdmissionListen            *string          `hcl:"admission_listen,optional"`
	AdmissionTLSCertFile       *string          `hcl:"admission_tls_cert_file,optional"`
	AdmissionTLSKeyFile        *string          `hcl:"admission_tls_key_file,optional"`
	Firehose                   []firehoseBlock  `hcl:"firehose,block"`
	PubSub                     []pubsubBlock    `hcl:"pubsub,block"`
}

// repoBlock is a cluster or aws_account block: its label is the cluster name or account ID.
type repoBlock struct {
	Name            string    `hcl:"name,label"`
	Repository      string    `hcl:"repository"`
	Branch          string    `hcl:"branch,optional"`
	EventSecretFile string    `hcl:"event_secret_file,optional"`
	DefRange        hcl.Range `hcl:",def_range"`
}

// secretFiles returns the event_secret_file of every block that has one, by label.
func secretFiles(blocks []repoBlock) map[string]string {
	m := map[string]string{}
	for _, b := range blocks {
		if b.EventSecretFile != "" {
			m[b.Name] = b.EventSecretFile
		}
	}
	return m
}

// parseFileMap parses NAME=/path,... from the environment, like parseRepoMap.
func parseFileMap(v string) (map[string]string, error) {
	m := map[string]string{}
	var errs []error
	for _, item := range strings.Split(v, ",") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		name, path, ok := strings.Cut(item, "=")
		name, path = strings.TrimSpace(name), strings.TrimSpace(path)
		switch _, dup := m[name]; {
		case !ok || name == "" || path == "":
			errs = append(errs, fmt.Errorf("item %q: want NAME=/path/to/file", item))
		case dup:
			errs = append(errs, fmt.Errorf("item %q: %q is given twice", item, name))
		default:
			m[name] = path
		}
	}
	return m, errors.Join(errs...)
}

// readEventSecrets reads the event secret files of kind ("cluster" or "aws_account"), each of
// which must name a configured block; env is the variable that could have named them.
func readEventSecrets(kind, env string, files map[string]string, routes map[string]RepoRef) (map[string]Secret, []error) {
	var errs []error
	var out map[string]Secret
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if _, ok := routes[name]; !ok {
			errs = append(errs, fmt.Errorf("%s %q has an event secret file (event_secret_file or %s) but no %s block", kind, name, env, kind))
			continue
		}
		b, err := os.ReadFile(files[name])
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %q: event_secret_file: %w", kind, name, err))
			continue
		}
		v := strings.TrimSpace(string(b))
		if v == "" {
			errs = append(errs, fmt.Errorf("%s %q: event_secret_file %s is empty", kind, name, files[name]))
			continue
		}
		if out == nil {
			out = map[string]Secret{}
		}
		out[name] = NewSecret(v)
	}
	return out, errs
}

// SharedEventSecrets describes every event secret that authenticates more than one cluster or
// account, or that is also a source-wide secret: each is accepted, but whoever holds it can post
// for all of them. parley serve warns with these at start.
func (c Config) SharedEventSecrets() []string {
	holders := map[string][]string{}
	add := func(s Secret, who string) {
		if !s.IsZero() {
			holders[s.Reveal()] = append(holders[s.Reveal()], who)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(c.ClusterEventSecrets)) {
		add(c.ClusterEventSecrets[name], fmt.Sprintf("cluster %q", name))
	}
	for _, id := range slices.Sorted(maps.Keys(c.AWSAccountEventSecrets)) {
		add(c.AWSAccountEventSecrets[id], fmt.Sprintf("aws_account %q", id))
	}
	var out []string
	for _, wide := range []struct {
		s    Secret
		name string
	}{{c.FluxHMACSecret, "PARLEY_FLUX_HMAC_SECRET"}, {c.ArgoCDToken, "PARLEY_ARGOCD_TOKEN"}, {c.KubeAuditToken, "PARLEY_KUBE_AUDIT_TOKEN"}, {c.CloudTrailToken, "PARLEY_CLOUDTRAIL_TOKEN"}} {
		if who := holders[wide.s.Reveal()]; !wide.s.IsZero() && len(who) > 0 {
			out = append(out, fmt.Sprintf("the event secret of %s is also %s, which posts for every cluster and account", strings.Join(who, ", "), wide.name))
		}
	}
	for _, who := range holders {
		if len(who) > 1 {
			out = append(out, fmt.Sprintf("%s share one event secret: each can post the others' events", strings.Join(who, " and ")))
		}
	}
	slices.Sort(out)
	return out
}

// repoMap turns the blocks of one kind into a map, reporting every label defined twice.
func repoMap(kind string, blocks []repoBlock) (map[string]RepoRef, []error) {
	if len(blocks) == 0 {
		return nil, nil
	}
	m := make(map[string]RepoRef, len(blocks))
	first := make(map[string]hcl.Range, len(blocks))
	var errs []error
	for _, b := range blocks {
		if r, dup := first[b.Name]; dup {
			errs = append(errs, fmt.Errorf("%s:%d: %s %q is defined twice (first at line %d)",
				b.DefRange.Filename, b.DefRange.Start.Line, kind, b.Name, r.Start.Line))
			continue
		}
		first[b.Name] = b.DefRange
		m[b.Name] = RepoRef{Repository: b.Repository, Branch: b.Branch}
	}
	return m, errs
}

// parseRepoMap parses NAME=owner/name[@branch],... from the environment. Items are trimmed and
// empty ones skipped; an item without "=", with an empty name or branch, or a name given twice is
// an error naming the item.
func parseRepoMap(v string) (map[string]RepoRef, error) {
	m := map[string]RepoRef{}
	var errs []error
	for _, item := range strings.Split(v, ",") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		name, ref, ok := strings.Cut(item, "=")
		name, ref = strings.TrimSpace(name), strings.TrimSpace(ref)
		repo, branch, hasBranch := strings.Cut(ref, "@")
		switch _, dup := m[name]; {
		case !ok || name == "":
			errs = append(errs, fmt.Errorf("item %q: want NAME=owner/name[@branch]", item))
		case hasBranch && branch == "":
			errs = append(errs, fmt.Errorf("item %q: empty branch after @", item))
		case dup:
			errs = append(errs, fmt.Errorf("item %q: %q is given twice", item, name))
		default:
			m[name] = RepoRef{Repository: repo, Branch: branch}
		}
	}
	return m, errors.Join(errs...)
}

// Load reads path (if not "") and then the environment through getenv, and validates the result.
// Every problem is reported, each naming the key and where it came from.
func Load(path string, getenv func(string) string) (Config, error) {
	c := Config{
		Listen: ":8080", Store: "parley.db", GitHubURL: "https://api.github.com/", Workers: 4,
		PerInstallationConcurrency: 4, MaxAttempts: 8, ShutdownGrace: 25 * time.Second, Lease: 5 * time.Minute,
		PolicyPath: ".parley/policy.hcl", WriteMode: "pull-request", LogLevel: slog.LevelInfo,
		ProposalsRate: 20, ProposalsMaxAge: 2 * time.Second,
		CommitAuthor:      "Parley <parley@users.noreply.github.com>",
		ReadHeaderTimeout: 10 * time.Second, BodyTimeout: 30 * time.Second, WriteTimeout: 2 * time.Minute,
		AppKeyCheckInterval: 5 * time.Minute,
		IdleTimeout:         60 * time.Second, MaxConnections: 1024, MaxConnectionsPerClient: 64, AuthFailuresPerMinute: 30,
		UnauthenticatedBodyBudget: 128 << 20,
		DeliveryRetention:         7 * 24 * time.Hour, DeadLetterRetention: 30 * 24 * time.Hour,
		EventMaxAge: 24 * time.Hour, EventMaxFuture: 5 * time.Minute,
		// The defaults of core.DefaultBudget and gitops.RenderProcess, which this package does not
		// import; TestBudgetDefaultsAreTheLibraries' keeps them the same.
		MaxFileSize: 8 << 20, MaxFieldsPerFile: 20_000, MaxFields: 50_000, MaxValueSize: 64 << 10,
		RenderTimeout: 30 * time.Second, RenderMemory: 512, RenderParallel: 2,
	}
	var errs []error
	if path != "" {
		src, err := os.ReadFile(path)
		if err != nil {
			return Config{}, fmt.Errorf("read config: %w", err)
		}
		var f file
		hf, diags := hclsyntax.ParseConfig(src, path, hcl.InitialPos)
		if !diags.HasErrors() {
			diags = gohcl.DecodeBody(hf.Body, nil, &f)
		}
		if diags.HasErrors() {
			return Config{}, fmt.Errorf("config %s: %w", path, diags)
		}
		setP(&c.AppID, f.AppID)
		setP(&c.PrivateKeyFile, f.PrivateKeyFile)
		setP(&c.AppDir, f.AppDir)
		for _, s := range f.WebhookSecrets {
			c.WebhookSecrets = append(c.WebhookSecrets, NewSecret(s))
		}
		setP(&c.Listen, f.Listen)
		setP(&c.MetricsListen, f.MetricsListen)
		setP(&c.PprofListen, f.PprofListen)
		setP(&c.Store, f.Store)
		setP(&c.DataDir, f.DataDir)
		setP(&c.GitHubURL, f.GitHubURL)
		setP(&c.Workers, f.Workers)
		setP(&c.PerInstallationConcurrency, f.PerInstallationConcurrency)
		setP(&c.MaxAttempts, f.MaxAttempts)
		setP(&c.PolicyPath, f.PolicyPath)
		setP(&c.WriteMode, f.WriteMode)
		setP(&c.GitOpsRepository, f.GitOpsRepository)
		setP(&c.GitOpsBranch, f.GitOpsBranch)
		setP(&c.CommitAuthor, f.CommitAuthor)
		setP(&c.PublicURL, f.PublicURL)
		setP(&c.OAuthClientID, f.OAuthClientID)
		setP(&c.DriftState, f.DriftState)
		var dupErrs []error
		c.Clusters, dupErrs = repoMap("cluster", f.Clusters)
		errs = append(errs, dupErrs...)
		c.AWSAccounts, dupErrs = repoMap("aws_account", f.AWSAccounts)
		errs = append(errs, dupErrs...)
		c.clusterSecretFiles, c.accountSecretFiles = secretFiles(f.Clusters), secretFiles(f.AWSAccounts)
		c.Admission, dupErrs = admissionMap(f.Admission)
		errs = append(errs, dupErrs...)
		c.Firehose, dupErrs = firehoseMap(f.Firehose)
		errs = append(errs, dupErrs...)
		c.PubSub, dupErrs = pubsubMap(f.PubSub)
		errs = append(errs, dupErrs...)
		setP(&c.AdmissionListen, f.AdmissionListen)
		setP(&c.AdmissionTLSCertFile, f.AdmissionTLSCertFile)
		setP(&c.AdmissionTLSKeyFile, f.AdmissionTLSKeyFile)
		setP(&c.ProposalsRate, f.ProposalsRate)
		if f.ProposalsMaxAge != nil {
			d, err := time.ParseDuration(*f.ProposalsMaxAge)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: proposals_max_age: %w", path, err))
			}
			c.ProposalsMaxAge = d
		}
		if f.AppKeyCheckInterval != nil {
			d, err := time.ParseDuration(*f.AppKeyCheckInterval)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: app_key_check_interval: %w", path, err))
			}
			c.AppKeyCheckInterval = d
		}
		if f.ShutdownGrace != nil {
			d, err := time.ParseDuration(*f.ShutdownGrace)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: shutdown_grace: %w", path, err))
			}
			c.ShutdownGrace = d
		}
		if f.Lease != nil {
			d, err := time.ParseDuration(*f.Lease)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: lease: %w", path, err))
			}
			c.Lease = d
		}
		fileDuration := func(key string, src *string, dst *time.Duration) {
			if src == nil {
				return
			}
			d, err := time.ParseDuration(*src)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %s: %w", path, key, err))
			}
			*dst = d
		}
		fileDuration("read_header_timeout", f.ReadHeaderTimeout, &c.ReadHeaderTimeout)
		fileDuration("body_timeout", f.BodyTimeout, &c.BodyTimeout)
		fileDuration("write_timeout", f.WriteTimeout, &c.WriteTimeout)
		fileDuration("idle_timeout", f.IdleTimeout, &c.IdleTimeout)
		fileDuration("delivery_retention", f.DeliveryRetention, &c.DeliveryRetention)
		fileDuration("dead_letter_retention", f.DeadLetterRetention, &c.DeadLetterRetention)
		fileDuration("event_max_age", f.EventMaxAge, &c.EventMaxAge)
		fileDuration("event_max_future", f.EventMaxFuture, &c.EventMaxFuture)
		fileDuration("render_timeout", f.RenderTimeout, &c.RenderTimeout)
		setP(&c.MaxFileSize, f.MaxFileSize)
		setP(&c.MaxFieldsPerFile, f.MaxFieldsPerFile)
		setP(&c.MaxFields, f.MaxFields)
		setP(&c.MaxValueSize, f.MaxValueSize)
		setP(&c.RenderMemory, f.RenderMemory)
		setP(&c.RenderParallel, f.RenderParallel)
		setP(&c.MaxConnections, f.MaxConnections)
		setP(&c.MaxConnectionsPerClient, f.MaxConnectionsPerClient)
		setP(&c.AuthFailuresPerMinute, f.AuthFailuresPerMinute)
		setP(&c.UnauthenticatedBodyBudget, f.UnauthenticatedBodyBudget)
		if f.TrustedProxies != nil {
			c.TrustedProxies = f.TrustedProxies
		}
		if f.LogLevel != nil {
			if err := c.LogLevel.UnmarshalText([]byte(*f.LogLevel)); err != nil {
				errs = append(errs, fmt.Errorf("%s: log_level: %w", path, err))
			}
		}
	}
	env := func(name string, apply func(string) error) {
		if v := getenv(name); v != "" {
			if err := apply(v); err != nil {
				errs = append(errs, fmt.Errorf("environment %s: %w", name, err))
			}
		}
	}
	str := func(dst *string) func(string) error { return func(v string) error { *dst = v; return nil } }
	num := func(dst *int) func(string) error {
		return func(v string) error {
			n, err := strconv.Atoi(v)
			*dst = n
			return err
		}
	}
	sec := func(dst *Secret) func(string) error { return func(v string) error { *dst = NewSecret(v); return nil } }
	env("PARLEY_APP_ID", func(v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		c.AppID = n
		return err
	})
	env("PARLEY_PRIVATE_KEY_FILE", str(&c.PrivateKeyFile))
	env("PARLEY_PRIVATE_KEY", sec(&c.PrivateKey))
	env("PARLEY_APP_DIR", str(&c.AppDir))
	env("PARLEY_APP_KEY_CHECK_INTERVAL", func(v string) error {
		d, err := time.ParseDuration(v)
		c.AppKeyCheckInterval = d
		return err
	})
	env("PARLEY_WEBHOOK_SECRETS", func(v string) error {
		c.WebhookSecrets = nil
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				c.WebhookSecrets = append(c.WebhookSecrets, NewSecret(s))
			}
		}
		return nil
	})
	env("PARLEY_LISTEN", str(&c.Listen))
	env("PARLEY_METRICS_LISTEN", str(&c.MetricsListen))
	env("PARLEY_PPROF_LISTEN", str(&c.PprofListen))
	env("PARLEY_STORE", str(&c.Store))
	env("PARLEY_DATA_DIR", str(&c.DataDir))
	env("PARLEY_GITHUB_URL", str(&c.GitHubURL))
	env("PARLEY_WORKERS", num(&c.Workers))
	env("PARLEY_PER_INSTALLATION_CONCURRENCY", num(&c.PerInstallationConcurrency))
	env("PARLEY_MAX_ATTEMPTS", num(&c.MaxAttempts))
	env("PARLEY_SHUTDOWN_GRACE", func(v string) error {
		d, err := time.ParseDuration(v)
		c.ShutdownGrace = d
		return err
	})
	env("PARLEY_LEASE", func(v string) error {
		d, err := time.ParseDuration(v)
		c.Lease = d
		return err
	})
	env("PARLEY_POLICY_PATH", str(&c.PolicyPath))
	env("PARLEY_WRITE_MODE", str(&c.WriteMode))
	env("PARLEY_GITOPS_REPOSITORY", str(&c.GitOpsRepository))
	env("PARLEY_GITOPS_BRANCH", str(&c.GitOpsBranch))
	repos := func(dst *map[string]RepoRef) func(string) error {
		return func(v string) error {
			m, err := parseRepoMap(v)
			*dst = m
			return err
		}
	}
	// The environment's routes replace every block, their event secret files with them.
	env("PARLEY_CLUSTERS", func(v string) error { c.clusterSecretFiles = nil; return repos(&c.Clusters)(v) })
	env("PARLEY_AWS_ACCOUNTS", func(v string) error { c.accountSecretFiles = nil; return repos(&c.AWSAccounts)(v) })
	// The environment's event secret files add to the blocks' (a name in both: the environment's).
	files := func(dst *map[string]string) func(string) error {
		return func(v string) error {
			m, err := parseFileMap(v)
			if *dst == nil {
				*dst = map[string]string{}
			}
			maps.Copy(*dst, m)
			return err
		}
	}
	env("PARLEY_CLUSTER_EVENT_SECRET_FILES", files(&c.clusterSecretFiles))
	env("PARLEY_AWS_ACCOUNT_EVENT_SECRET_FILES", files(&c.accountSecretFiles))
	env("PARLEY_PROPOSALS_RATE", func(v string) error {
		n, err := strconv.ParseFloat(v, 64)
		c.ProposalsRate = n
		return err
	})
	env("PARLEY_PROPOSALS_MAX_AGE", func(v string) error {
		d, err := time.ParseDuration(v)
		c.ProposalsMaxAge = d
		return err
	})
	env("PARLEY_COMMIT_AUTHOR", str(&c.CommitAuthor))
	env("PARLEY_PUBLIC_URL", str(&c.PublicURL))
	env("PARLEY_OAUTH_CLIENT_ID", str(&c.OAuthClientID))
	env("PARLEY_OAUTH_CLIENT_SECRET", sec(&c.OAuthClientSecret))
	env("PARLEY_SESSION_SECRET", sec(&c.SessionSecret))
	env("PARLEY_DRIFT_STATE", str(&c.DriftState))
	env("PARLEY_FLUX_HMAC_SECRET", sec(&c.FluxHMACSecret))
	env("PARLEY_ARGOCD_TOKEN", sec(&c.ArgoCDToken))
	env("PARLEY_KUBE_AUDIT_TOKEN", sec(&c.KubeAuditToken))
	env("PARLEY_CLOUDTRAIL_TOKEN", sec(&c.CloudTrailToken))
	env("PARLEY_LOG_LEVEL", func(v string) error { return c.LogLevel.UnmarshalText([]byte(v)) })
	dur := func(dst *time.Duration) func(string) error {
		return func(v string) error {
			d, err := time.ParseDuration(v)
			*dst = d
			return err
		}
	}
	env("PARLEY_READ_HEADER_TIMEOUT", dur(&c.ReadHeaderTimeout))
	env("PARLEY_BODY_TIMEOUT", dur(&c.BodyTimeout))
	env("PARLEY_WRITE_TIMEOUT", dur(&c.WriteTimeout))
	env("PARLEY_IDLE_TIMEOUT", dur(&c.IdleTimeout))
	env("PARLEY_DELIVERY_RETENTION", dur(&c.DeliveryRetention))
	env("PARLEY_DEAD_LETTER_RETENTION", dur(&c.DeadLetterRetention))
	env("PARLEY_EVENT_MAX_AGE", dur(&c.EventMaxAge))
	env("PARLEY_EVENT_MAX_FUTURE", dur(&c.EventMaxFuture))
	env("PARLEY_MAX_CONNECTIONS", num(&c.MaxConnections))
	env("PARLEY_MAX_CONNECTIONS_PER_CLIENT", num(&c.MaxConnectionsPerClient))
	env("PARLEY_TRUSTED_PROXIES", func(v string) error {
		c.TrustedProxies = nil
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				c.TrustedProxies = append(c.TrustedProxies, s)
			}
		}
		return nil
	})
	num64 := func(dst *int64) func(string) error {
		return func(v string) error {
			n, err := strconv.ParseInt(v, 10, 64)
			*dst = n
			return err
		}
	}
	env("PARLEY_UNAUTHENTICATED_BODY_BUDGET", num64(&c.UnauthenticatedBodyBudget))
	env("PARLEY_MAX_FILE_SIZE", num64(&c.MaxFileSize))
	env("PARLEY_MAX_FIELDS_PER_FILE", num(&c.MaxFieldsPerFile))
	env("PARLEY_MAX_FIELDS", num(&c.MaxFields))
	env("PARLEY_MAX_VALUE_SIZE", num(&c.MaxValueSize))
	env("PARLEY_RENDER_TIMEOUT", dur(&c.RenderTimeout))
	env("PARLEY_RENDER_MEMORY", num64(&c.RenderMemory))
	env("PARLEY_RENDER_PARALLEL", num(&c.RenderParallel))
	env("PARLEY_AUTH_FAILURES_PER_MINUTE", func(v string) error {
		n, err := strconv.ParseFloat(v, 64)
		c.AuthFailuresPerMinute = n
		return err
	})

	errs = append(errs, c.readAppDir()...)
	if c.PrivateKey.IsZero() && c.PrivateKeyFile != "" {
		pem, err := os.ReadFile(c.PrivateKeyFile)
		if err != nil {
			errs = append(errs, fmt.Errorf("private_key_file: %w", err))
		}
		c.PrivateKey = NewSecret(string(pem))
	}
	var secretErrs []error
	c.ClusterEventSecrets, secretErrs = readEventSecrets("cluster", "PARLEY_CLUSTER_EVENT_SECRET_FILES", c.clusterSecretFiles, c.Clusters)
	errs = append(errs, secretErrs...)
	c.AWSAccountEventSecrets, secretErrs = readEventSecrets("aws_account", "PARLEY_AWS_ACCOUNT_EVENT_SECRET_FILES", c.accountSecretFiles, c.AWSAccounts)
	errs = append(errs, secretErrs...)
	errs = append(errs, c.validate()...)
	if len(errs) == 1 && errs[0] == ErrNoApp {
		return c, ErrNoApp // the rest is valid: serve runs the manifest flow with it
	}
	if len(errs) > 0 {
		return Config{}, errors.Join(errs...)
	}
	return c, nil
}

func (c *Config) validate() []error {
	var errs []error
	if c.AppID <= 0 && c.PrivateKey.IsZero() && len(c.WebhookSecrets) == 0 && c.AppDir != "" {
		// Nothing of an App yet, and a place to put one: serve offers the manifest flow.
		errs = append(errs, ErrNoApp)
	} else {
		if c.AppID <= 0 {
			errs = append(errs, errors.New("app_id (PARLEY_APP_ID) is required and must be a positive number"))
		}
		if c.PrivateKey.IsZero() {
			errs = append(errs, errors.New("a private key is required: private_key_file, PARLEY_PRIVATE_KEY_FILE or PARLEY_PRIVATE_KEY"))
		}
		if len(c.WebhookSecrets) == 0 {
			errs = append(errs, errors.New("at least one webhook secret is required: webhook_secrets or PARLEY_WEBHOOK_SECRETS"))
		}
	}
	u, err := url.Parse(c.GitHubURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		errs = append(errs, fmt.Errorf("github_url %q is not an http(s) URL", c.GitHubURL))
	} else if !strings.HasSuffix(c.GitHubURL, "/") {
		c.GitHubURL += "/"
	}
	if c.Workers < 1 || c.Workers > 256 {
		errs = append(errs, fmt.Errorf("workers = %d: want 1 to 256", c.Workers))
	}
	if c.PerInstallationConcurrency < 1 || c.PerInstallationConcurrency > 100 {
		errs = append(errs, fmt.Errorf("per_installation_concurrency = %d: want 1 to 100 (GitHub allows 100 concurrent requests)", c.PerInstallationConcurrency))
	}
	if c.MaxAttempts < 1 {
		errs = append(errs, fmt.Errorf("max_attempts = %d: want at least 1", c.MaxAttempts))
	}
	if c.AppKeyCheckInterval < 0 {
		errs = append(errs, fmt.Errorf("app_key_check_interval = %s: want a positive duration, or 0 for never", c.AppKeyCheckInterval))
	}
	if c.ShutdownGrace < 0 {
		errs = append(errs, fmt.Errorf("shutdown_grace = %s: want a positive duration", c.ShutdownGrace))
	}
	if c.Lease < 10*time.Second || c.Lease > time.Hour {
		errs = append(errs, fmt.Errorf("lease = %s: want 10s to 1h (longer than a delivery takes to judge)", c.Lease))
	}
	if c.WriteMode != "pull-request" && c.WriteMode != "direct" {
		errs = append(errs, fmt.Errorf("write_mode = %q: want pull-request or direct", c.WriteMode))
	}
	if c.ProposalsRate < 0 || c.ProposalsRate > 100000 {
		errs = append(errs, fmt.Errorf("proposals_rate = %g: want 0 (no limit) to 100000 per second", c.ProposalsRate))
	}
	if c.ProposalsMaxAge < 0 || c.ProposalsMaxAge > time.Hour {
		errs = append(errs, fmt.Errorf("proposals_max_age = %s: want 0 to 1h", c.ProposalsMaxAge))
	}
	errs = append(errs, c.validateIntake()...)
	if err := sqldb.CheckTarget(c.Store); err != nil {
		errs = append(errs, fmt.Errorf("store (PARLEY_STORE): %w", err))
	}
	// drift_state is a SQLite file: a URL there would become a file name, password and all.
	if err := sqldb.CheckTarget(c.DriftState); c.DriftState != "" && err != nil {
		errs = append(errs, fmt.Errorf("drift_state (PARLEY_DRIFT_STATE): %w", err))
	} else if sqldb.IsPostgres(c.DriftState) && !c.StoreIsPostgres() {
		errs = append(errs, fmt.Errorf("drift_state (PARLEY_DRIFT_STATE) = %s: a PostgreSQL drift state is the store's database; set store to it instead", sqldb.RedactAny(c.DriftState)))
	}
	if c.StoreIsPostgres() {
		if _, err := pgxpool.ParseConfig(c.Store); err != nil {
			errs = append(errs, fmt.Errorf("store = %s: not a PostgreSQL URL pgx can read", c.StoreName()))
		}
		if c.DriftState != "" {
			errs = append(errs, fmt.Errorf("drift_state = %q: with a PostgreSQL store the drift state is in that database; remove drift_state", c.DriftState))
		}
	}
	if c.GitOpsRepository != "" && !isRepository(c.GitOpsRepository) {
		errs = append(errs, fmt.Errorf("gitops_repository = %q: want owner/name", c.GitOpsRepository))
	}
	for _, name := range slices.Sorted(maps.Keys(c.Clusters)) {
		if !clusterName.MatchString(name) {
			errs = append(errs, fmt.Errorf("cluster %q (PARLEY_CLUSTERS): want a name of 1 to 63 characters A-Z a-z 0-9 . _ - starting with a letter or digit", name))
		}
		if r := c.Clusters[name].Repository; !isRepository(r) {
			errs = append(errs, fmt.Errorf("cluster %q (PARLEY_CLUSTERS): repository = %q: want owner/name", name, r))
		}
	}
	for _, id := range slices.Sorted(maps.Keys(c.AWSAccounts)) {
		if !awsAccountID.MatchString(id) {
			errs = append(errs, fmt.Errorf("aws_account %q (PARLEY_AWS_ACCOUNTS): want a 12-digit AWS account ID", id))
		}
		if r := c.AWSAccounts[id].Repository; !isRepository(r) {
			errs = append(errs, fmt.Errorf("aws_account %q (PARLEY_AWS_ACCOUNTS): repository = %q: want owner/name", id, r))
		}
	}
	// One repository is served on one branch: its drift state, gates and timers are one per
	// repository.
	branches := map[string]string{}
	for _, r := range c.Repositories() {
		key := strings.ToLower(r.Repository)
		if b, ok := branches[key]; ok && b != r.Branch {
			errs = append(errs, fmt.Errorf("repository %s is configured with branches %q and %q (gitops_branch, cluster or aws_account blocks): one repository is served on one branch", r.Repository, b, r.Branch))
		}
		branches[key] = r.Branch
	}
	errs = append(errs, c.validatePages()...)
	errs = append(errs, c.validateAdmission()...)
	errs = append(errs, c.validatePipelines()...)
	if a, err := mail.ParseAddress(c.CommitAuthor); err != nil || a.Name == "" {
		errs = append(errs, fmt.Errorf("commit_author = %q: want \"Name <email>\"", c.CommitAuthor))
	}
	return errs
}

// validateIntake checks the listener's bounds: positive timeouts (a zero one would hold nothing
// open to no limit, which is what they are there to prevent) and caps that are not negative.
func (c *Config) validateIntake() []error {
	var errs []error
	for _, d := range []struct {
		key string
		v   time.Duration
	}{{"read_header_timeout", c.ReadHeaderTimeout}, {"body_timeout", c.BodyTimeout}, {"write_timeout", c.WriteTimeout}, {"idle_timeout", c.IdleTimeout}} {
		if d.v <= 0 || d.v > time.Hour {
			errs = append(errs, fmt.Errorf("%s = %s: want more than 0 and at most 1h", d.key, d.v))
		}
	}
	for _, b := range []struct {
		key string
		v   int64
	}{{"max_file_size", c.MaxFileSize}, {"max_fields_per_file", int64(c.MaxFieldsPerFile)}, {"max_fields", int64(c.MaxFields)},
		{"max_value_size", int64(c.MaxValueSize)}, {"render_memory", c.RenderMemory}, {"render_parallel", int64(c.RenderParallel)}} {
		if b.v <= 0 {
			errs = append(errs, fmt.Errorf("%s = %d: want more than 0 (a budget of none would let one repository take the server)", b.key, b.v))
		}
	}
	if c.RenderTimeout <= 0 {
		errs = append(errs, fmt.Errorf("render_timeout = %s: want more than 0", c.RenderTimeout))
	}
	if c.MaxConnections < 0 {
		errs = append(errs, fmt.Errorf("max_connections = %d: want 0 (no cap) or more", c.MaxConnections))
	}
	if c.MaxConnectionsPerClient < 0 {
		errs = append(errs, fmt.Errorf("max_connections_per_client = %d: want 0 (no cap) or more", c.MaxConnectionsPerClient))
	}
	if c.DeliveryRetention < 0 {
		errs = append(errs, fmt.Errorf("delivery_retention = %s: want 0 (for ever) or more", c.DeliveryRetention))
	}
	if c.EventMaxAge < 0 || c.EventMaxFuture < 0 {
		errs = append(errs, fmt.Errorf("event_max_age = %s, event_max_future = %s: want 0 (no bound) or more", c.EventMaxAge, c.EventMaxFuture))
	}
	if c.DeadLetterRetention < 0 {
		errs = append(errs, fmt.Errorf("dead_letter_retention = %s: want 0 (for ever) or more", c.DeadLetterRetention))
	}
	if c.UnauthenticatedBodyBudget < 0 {
		errs = append(errs, fmt.Errorf("unauthenticated_body_budget = %d: want 0 (no cap) or more", c.UnauthenticatedBodyBudget))
	}
	for _, p := range c.TrustedProxies {
		if _, err := netip.ParsePrefix(p); err != nil {
			if _, err := netip.ParseAddr(p); err != nil {
				errs = append(errs, fmt.Errorf("trusted_proxies: %q is neither a CIDR (10.0.0.0/8) nor an IP address", p))
			}
		}
	}
	if c.AuthFailuresPerMinute < 0 {
		errs = append(errs, fmt.Errorf("auth_failures_per_minute = %g: want 0 (no limit) or more", c.AuthFailuresPerMinute))
	}
	return errs
}

// Pages reports whether the details pages are configured: a public URL and the App's OAuth
// client.
func (c Config) Pages() bool {
	return c.PublicURL != "" && c.OAuthClientID != "" && !c.OAuthClientSecret.IsZero()
}

// validatePages checks the details pages' settings: all of them or none, an absolute public URL
// (https, or http on a loopback host for trying it out), a long enough session secret.
func (c *Config) validatePages() []error {
	var errs []error
	set := 0
	for _, v := range []bool{c.PublicURL != "", c.OAuthClientID != "", !c.OAuthClientSecret.IsZero()} {
		if v {
			set++
		}
	}
	if set != 0 && set != 3 {
		errs = append(errs, errors.New("public_url, oauth_client_id and PARLEY_OAUTH_CLIENT_SECRET turn the details pages on together: set all three or none"))
	}
	if c.PublicURL != "" {
		u, err := url.Parse(c.PublicURL)
		loopback := err == nil && (u.Hostname() == "localhost" || u.Hostname() == "127.0.0.1" || u.Hostname() == "::1")
		switch {
		case err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http"):
			errs = append(errs, fmt.Errorf("public_url = %q: want an absolute URL such as https://parley.example.com", c.PublicURL))
		case u.Scheme == "http" && !loopback:
			errs = append(errs, fmt.Errorf("public_url = %q: want https (sign-in cookies are Secure); http only on localhost", c.PublicURL))
		case u.RawQuery != "" || u.Fragment != "":
			errs = append(errs, fmt.Errorf("public_url = %q: no query or fragment", c.PublicURL))
		default:
			c.PublicURL = strings.TrimSuffix(u.String(), "/")
		}
	}
	if !c.SessionSecret.IsZero() && len(c.SessionSecret.Reveal()) < 32 {
		errs = append(errs, errors.New("PARLEY_SESSION_SECRET: want 32 bytes or more"))
	}
	return errs
}

var (
	clusterName  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)
	awsAccountID = regexp.MustCompile(`^[0-9]{12}$`)
)

// isRepository reports whether s has the form owner/name.
func isRepository(s string) bool {
	owner, name, ok := strings.Cut(s, "/")
	return ok && owner != "" && name != "" && !strings.Contains(name, "/")
}

func setP[T any](dst *T, src *T) {
	if src != nil {
		*dst = *src
	}
}
