// Package agentstore keeps what the proposals API needs between requests: the bearer tokens agents
// authenticate with, each mapped to the identity the policy knows the agent by, and the log of
// proposals (every one, accepted or refused, with its answer, so a retried request with the same
// idempotency key gets the same answer). It is a small SQLite database beside the delivery store, or
// with several replicas of parley serve their shared PostgreSQL database (OpenPostgres).
//
// A token is "parley_<id>_<secret>". Only the SHA-256 of the secret is stored; the id finds the
// row, and the secret is compared in constant time. A token is shown once, when it is created.
package agentstore

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	_ "modernc.org/sqlite" // the pure-Go SQLite driver, registered as "sqlite"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/internal/sqldb"
)

// DB is the agent store.
type DB struct {
	db     *sql.DB
	path   string // for errors: the SQLite file, or the PostgreSQL database without its password
	engine sqldb.Engine
	owned  bool // Close closes db (a SQLite file it opened, not a shared PostgreSQL pool)
}

// sqliteMigrations are the schema of an agents.db file, applied in order (sqldb.MigrateSQLite;
// the first is written IF NOT EXISTS for files made before migrations were versioned). Never edit
// a released one: append.
var sqliteMigrations = []string{`
CREATE TABLE IF NOT EXISTS tokens (
	id TEXT PRIMARY KEY, name TEXT NOT NULL UNIQUE, secret_sha256 TEXT NOT NULL,
	identity_source TEXT NOT NULL, identity_id TEXT NOT NULL,
	created_at INTEGER NOT NULL, last_used_at INTEGER NOT NULL DEFAULT 0, revoked_at INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS proposals (
	id TEXT PRIMARY KEY, token_id TEXT NOT NULL, idempotency_key TEXT NOT NULL DEFAULT '',
	repository TEXT NOT NULL, request_sha256 TEXT NOT NULL, status INTEGER NOT NULL, response BLOB NOT NULL,
	accepted INTEGER NOT NULL, refused INTEGER NOT NULL, at INTEGER NOT NULL);
CREATE UNIQUE INDEX IF NOT EXISTS proposals_key ON proposals (token_id, idempotency_key) WHERE idempotency_key != '';
CREATE INDEX IF NOT EXISTS proposals_at ON proposals (at);`,
	// The repositories a token may act on, comma-separated; '' for a token made before tokens
	// named them (see Token.MayActOn).
	`ALTER TABLE tokens ADD COLUMN repositories TEXT NOT NULL DEFAULT '';`,
}

// postgresMigrations are the schema on PostgreSQL (sqldb.MigratePostgres), whose database every
// store shares, hence the table names. Never edit a released one: append.
var postgresMigrations = []string{
	`CREATE TABLE agent_tokens (
	id TEXT PRIMARY KEY, name TEXT NOT NULL UNIQUE, secret_sha256 TEXT NOT NULL,
	identity_source TEXT NOT NULL, identity_id TEXT NOT NULL,
	created_at BIGINT NOT NULL, last_used_at BIGINT NOT NULL DEFAULT 0, revoked_at BIGINT NOT NULL DEFAULT 0);
CREATE TABLE agent_proposals (
	id TEXT PRIMARY KEY, token_id TEXT NOT NULL, idempotency_key TEXT NOT NULL DEFAULT '',
	repository TEXT NOT NULL, request_sha256 TEXT NOT NULL, status INTEGER NOT NULL, response BYTEA NOT NULL,
	accepted INTEGER NOT NULL, refused INTEGER NOT NULL, at BIGINT NOT NULL);
CREATE UNIQUE INDEX agent_proposals_key ON agent_proposals (token_id, idempotency_key) WHERE idempotency_key != '';
CREATE INDEX agent_proposals_at ON agent_proposals (at);`,
	`ALTER TABLE agent_tokens ADD COLUMN repositories TEXT NOT NULL DEFAULT '';`,
}

// OpenPostgres uses the shared PostgreSQL database db, migrating it first; name is how errors
// name it (sqldb.Redact of its URL). Close leaves db open for its owner.
func OpenPostgres(ctx context.Context, db *sql.DB, name string) (*DB, error) {
	if err := sqldb.MigratePostgres(ctx, db, "agentstore", postgresMigrations); err != nil {
		return nil, fmt.Errorf("agent store: %w", err)
	}
	return &DB{db: db, path: name, engine: sqldb.Postgres}, nil
}

// q is a query for the store's engine: {tokens} and {proposals} name its tables, ? its parameters.
func (d *DB) q(query string) string {
	tokens, proposals := "tokens", "proposals"
	if d.engine == sqldb.Postgres {
		tokens, proposals = "agent_tokens", "agent_proposals"
	}
	return sqldb.Rebind(d.engine, strings.NewReplacer("{tokens}", tokens, "{proposals}", proposals).Replace(query))
}

// Open opens (creating on first use) the store at path; ":memory:" is a private in-memory one.
//
// Commits are synchronous=NORMAL (WAL): a crash can lose the last log entries, never corrupt the
// file. That is enough here: what must survive, an accepted proposal's claim, is in the drift
// state, written with FULL before the answer; a lost log entry only means a retry under the same
// key is judged again, and it records its claim once (the proposal's id comes from the key).
// Token changes are rare and made by hand, and are checkpointed at close.
func Open(ctx context.Context, path string) (*DB, error) {
	dsn := "file:" + path + "?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)"
	if path == ":memory:" {
		dsn = "file:agentstore-" + randomID(8) + "?mode=memory&cache=shared"
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open agent store %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	if err := sqldb.MigrateSQLite(ctx, db, "agent store "+path, sqliteMigrations); err != nil {
		db.Close()
		return nil, err
	}
	return &DB{db: db, path: path, owned: true}, nil
}

// Close closes the store (a shared PostgreSQL pool stays open for its owner).
func (d *DB) Close() error {
	if !d.owned {
		return nil
	}
	return d.db.Close()
}

// Token is a token's record; the secret itself is never stored.
type Token struct {
	ID       string        `json:"id"`
	Name     string        `json:"name"`
	Identity core.Identity `json:"-"`
	// Repositories are the repositories ("owner/name") the token may act on; none for a token
	// made before tokens named them.
	Repositories []string  `json:"repositories,omitempty"`
	Created      time.Time `json:"created"`
	LastUsed     time.Time `json:"last_used,omitzero"`
	Revoked      time.Time `json:"revoked,omitzero"`
}

// Errors of Verify. Callers answer both the same way (401), so a caller cannot tell a revoked
// token from one that never existed.
var (
	ErrUnknownToken = errors.New("unknown token")
	ErrRevoked      = errors.New("token revoked")
)

var tokenName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

// repositoryName is GitHub's owner/name: an owner of 1 to 39 of A-Z a-z 0-9 -, a name of 1 to 100
// of A-Z a-z 0-9 . _ -.
var repositoryName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9-]{0,38}/[A-Za-z0-9._-]{1,100}$`)

// ErrRepositoryNotAllowed is MayActOn's error: the token may not act on the repository (403).
var ErrRepositoryNotAllowed = errors.New("repository not allowed for this token")

// MayActOn reports whether the token may act on repository ("owner/name", compared without
// regard to case). A token names the repositories it may act on; one made before tokens named
// them keeps working only where the server serves a single repository (served lists those it
// serves), so that upgrading widens no token, and is refused elsewhere with what to do.
func (t Token) MayActOn(repository string, served []string) error {
	if len(t.Repositories) > 0 {
		for _, r := range t.Repositories {
			if strings.EqualFold(r, repository) {
				return nil
			}
		}
		return fmt.Errorf("%w: token %s may act on %s, not %s", ErrRepositoryNotAllowed, t.Name, strings.Join(t.Repositories, ", "), repository)
	}
	if len(served) == 1 && strings.EqualFold(served[0], repository) {
		return nil
	}
	return fmt.Errorf("%w: token %s was made before tokens named their repositories, and this server serves %d repositories, so it acts on none: "+
		"make a new one with parley tokens create %s --identity %s --repository %s", ErrRepositoryNotAllowed, t.Name, len(served), t.Name+"-2", t.Identity, repository)
}

// cleanRepositories checks a token's repositories and drops repeats.
func cleanRepositories(repos []string) ([]string, error) {
	if len(repos) == 0 {
		return nil, errors.New("a token needs at least one repository it may act on (owner/name)")
	}
	var out []string
	for _, r := range repos {
		r = strings.TrimSpace(r)
		if !repositoryName.MatchString(r) {
			return nil, fmt.Errorf("repository %q: want owner/name", r)
		}
		if !slices.ContainsFunc(out, func(o string) bool { return strings.EqualFold(o, r) }) {
			out = append(out, r)
		}
	}
	return out, nil
}

func splitRepositories(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// ParseIdentity reads "source:id" (e.g. aws-principal:arn:aws:iam::123456789012:role/kafka-agent,
// k8s-user:system:serviceaccount:ops:scaler) with one of the identity sources the policy knows.
func ParseIdentity(s string) (core.Identity, error) {
	src, id, ok := strings.Cut(s, ":")
	if !ok || id == "" {
		return core.Identity{}, fmt.Errorf("identity %q: want SOURCE:ID, e.g. aws-principal:arn:aws:iam::123456789012:role/kafka-agent", s)
	}
	for _, known := range core.KnownSources() {
		if string(known) == src {
			return core.Identity{Source: known, ID: id}, nil
		}
	}
	var names []string
	for _, known := range core.KnownSources() {
		names = append(names, string(known))
	}
	return core.Identity{}, fmt.Errorf("identity %q: unknown source %q (want one of %s)", s, src, strings.Join(names, ", "))
}

// Create makes a token named name (unique, 1-63 of A-Z a-z 0-9 . _ -) for identity, allowed to act
// on repositories (at least one, owner/name), and returns the token itself, which is not stored
// and cannot be shown again.
func (d *DB) Create(ctx context.Context, name string, identity core.Identity, repositories []string, now time.Time) (string, Token, error) {
	if !tokenName.MatchString(name) {
		return "", Token{}, fmt.Errorf("token name %q: want 1 to 63 of A-Z a-z 0-9 . _ - starting with a letter or digit", name)
	}
	if identity.ID == "" || identity.Source == "" {
		return "", Token{}, errors.New("a token needs an identity (SOURCE:ID)")
	}
	repos, err := cleanRepositories(repositories)
	if err != nil {
		return "", Token{}, err
	}
	id, secret := randomID(8), randomSecret()
	t := Token{ID: id, Name: name, Identity: identity, Repositories: repos, Created: now.UTC()}
	_, err = d.db.ExecContext(ctx, d.q(`INSERT INTO {tokens} (id, name, secret_sha256, identity_source, identity_id, repositories, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)`),
		id, name, digest(secret), string(identity.Source), identity.ID, strings.Join(repos, ","), now.UnixNano())
	if err != nil {
		if strings.Contains(err.Error(), "UNIQUE") || strings.Contains(err.Error(), "duplicate key") {
			return "", Token{}, fmt.Errorf("a token named %q exists already: revoke it or choose another name", name)
		}
		return "", Token{}, fmt.Errorf("agent store %s: create token: %w", d.path, err)
	}
	return "parley_" + id + "_" + secret, t, nil
}

// Verify finds the token a bearer credential names and checks its secret. It records the use
// (at most once a minute per token, to keep writes off the request path).
func (d *DB) Verify(ctx context.Context, bearer string, now time.Time) (Token, error) {
	rest, ok := strings.CutPrefix(bearer, "parley_")
	id, secret, ok2 := strings.Cut(rest, "_")
	if !ok || !ok2 || id == "" || secret == "" {
		return Token{}, ErrUnknownToken
	}
	var t Token
	var sum, src, repos string
	var created, used, revoked int64
	err := d.db.QueryRowContext(ctx, d.q(`SELECT id, name, secret_sha256, identity_source, identity_id, repositories, created_at, last_used_at, revoked_at FROM {tokens} WHERE id = ?`), id).
		Scan(&t.ID, &t.Name, &sum, &src, &t.Identity.ID, &repos, &created, &used, &revoked)
	if errors.Is(err, sql.ErrNoRows) {
		digest(secret) // the same work as a known id, so timing tells nothing
		return Token{}, ErrUnknownToken
	}
	if err != nil {
		return Token{}, fmt.Errorf("agent store %s: %w", d.path, err)
	}
	if subtle.ConstantTimeCompare([]byte(sum), []byte(digest(secret))) != 1 {
		return Token{}, ErrUnknownToken
	}
	t.Identity.Source = core.IdentitySource(src)
	t.Repositories = splitRepositories(repos)
	t.Created, t.LastUsed, t.Revoked = fromNanos(created), fromNanos(used), fromNanos(revoked)
	if !t.Revoked.IsZero() {
		return Token{}, ErrRevoked
	}
	if now.Sub(t.LastUsed) > time.Minute {
		if _, err := d.db.ExecContext(ctx, d.q(`UPDATE {tokens} SET last_used_at = ? WHERE id = ?`), now.UnixNano(), t.ID); err != nil {
			return Token{}, fmt.Errorf("agent store %s: %w", d.path, err)
		}
	}
	return t, nil
}

// List returns every token, revoked ones included, by name.
func (d *DB) List(ctx context.Context) ([]Token, error) {
	rows, err := d.db.QueryContext(ctx, d.q(`SELECT id, name, identity_source, identity_id, repositories, created_at, last_used_at, revoked_at FROM {tokens} ORDER BY name`))
	if err != nil {
		return nil, fmt.Errorf("agent store %s: %w", d.path, err)
	}
	defer rows.Close()
	var out []Token
	for rows.Next() {
		var t Token
		var src, repos string
		var created, used, revoked int64
		if err := rows.Scan(&t.ID, &t.Name, &src, &t.Identity.ID, &repos, &created, &used, &revoked); err != nil {
			return nil, err
		}
		t.Identity.Source = core.IdentitySource(src)
		t.Repositories = splitRepositories(repos)
		t.Created, t.LastUsed, t.Revoked = fromNanos(created), fromNanos(used), fromNanos(revoked)
		out = append(out, t)
	}
	return out, rows.Err()
}

// Revoke ends the token named nameOrID at once. Revoking a revoked token is not an error.
func (d *DB) Revoke(ctx context.Context, nameOrID string, now time.Time) (Token, error) {
	res, err := d.db.ExecContext(ctx, d.q(`UPDATE {tokens} SET revoked_at = ? WHERE (name = ? OR id = ?) AND revoked_at = 0`), now.UnixNano(), nameOrID, nameOrID)
	if err != nil {
		return Token{}, fmt.Errorf("agent store %s: %w", d.path, err)
	}
	n, _ := res.RowsAffected()
	ts, err := d.List(ctx)
	if err != nil {
		return Token{}, err
	}
	for _, t := range ts {
		if t.Name == nameOrID || t.ID == nameOrID {
			return t, nil
		}
	}
	if n == 0 {
		return Token{}, fmt.Errorf("no token named %q", nameOrID)
	}
	return Token{}, nil
}

// Proposal is one answered proposal, as logged.
type Proposal struct {
	ID             string
	TokenID        string
	IdempotencyKey string
	Repository     string
	RequestSHA256  string // of the request body, to refuse a key reused for another request
	Status         int    // the HTTP status answered
	Response       []byte // the answer's body
	Accepted       int
	Refused        int
	At             time.Time
}

// ErrKeyReused is Record's error when the token already used the idempotency key for another
// request.
var ErrKeyReused = errors.New("idempotency key already used for a different request")

// Lookup returns the proposal a token made under an idempotency key, if any.
func (d *DB) Lookup(ctx context.Context, tokenID, key string) (Proposal, bool, error) {
	if key == "" {
		return Proposal{}, false, nil
	}
	var p Proposal
	var at int64
	err := d.db.QueryRowContext(ctx, d.q(`SELECT id, token_id, idempotency_key, repository, request_sha256, status, response, accepted, refused, at
		FROM {proposals} WHERE token_id = ? AND idempotency_key = ?`), tokenID, key).
		Scan(&p.ID, &p.TokenID, &p.IdempotencyKey, &p.Repository, &p.RequestSHA256, &p.Status, &p.Response, &p.Accepted, &p.Refused, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return Proposal{}, false, nil
	}
	if err != nil {
		return Proposal{}, false, fmt.Errorf("agent store %s: %w", d.path, err)
	}
	p.At = fromNanos(at)
	return p, true, nil
}

// Record logs an answered proposal. A second record under the same token and key keeps the first
// (a concurrent retry): the caller gets the first back, or ErrKeyReused when the requests differ.
func (d *DB) Record(ctx context.Context, p Proposal) (Proposal, error) {
	_, err := d.db.ExecContext(ctx, d.q(`INSERT INTO {proposals} (id, token_id, idempotency_key, repository, request_sha256, status, response, accepted, refused, at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`),
		p.ID, p.TokenID, p.IdempotencyKey, p.Repository, p.RequestSHA256, p.Status, p.Response, p.Accepted, p.Refused, p.At.UnixNano())
	if err != nil {
		return Proposal{}, fmt.Errorf("agent store %s: record proposal %s: %w", d.path, p.ID, err)
	}
	if p.IdempotencyKey == "" {
		return p, nil
	}
	first, ok, err := d.Lookup(ctx, p.TokenID, p.IdempotencyKey)
	if err != nil || !ok {
		return p, err
	}
	if first.RequestSHA256 != p.RequestSHA256 {
		return first, ErrKeyReused
	}
	return first, nil
}

// ProposalID is the id of a token's proposal under an idempotency key: the same for every retry,
// so that the claims a retried proposal records are recorded once. Without a key it is random.
func ProposalID(tokenID, key string) string {
	if key == "" {
		return "prop-" + randomID(12)
	}
	sum := sha256.Sum256([]byte(tokenID + "\x00" + key))
	return "prop-" + hex.EncodeToString(sum[:12])
}

// RequestDigest is the SHA-256 of a request body, hex.
func RequestDigest(body []byte) string {
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:])
}

func digest(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

func randomID(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b)
}

func randomSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func fromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}
