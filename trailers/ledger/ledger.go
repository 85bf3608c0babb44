package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/filesystem"

	"github.com/parleyhq/parley/core"

	_ "modernc.org/sqlite" // registers the pure-Go "sqlite" database/sql driver
)

// Options tune a Ledger. The zero value is the usual setting.
type Options struct {
	// Path is the index database file. Default: <git dir>/parley/ledger.db, created on first use.
	Path string
	// Logger receives a line per update. Default: discard.
	Logger *slog.Logger
	// ObjectCacheBytes sizes go-git's object cache. Default 96 MiB: enough for the trees and recent
	// blobs of a large repository without making the garbage collector scan a huge heap.
	ObjectCacheBytes int64
	// ParseCacheBytes bounds the parsed file versions and YAML documents an update keeps, so that a
	// version or document seen again (the old side of the next commit, a revert, the unchanged
	// documents of a generated install.yaml) is not parsed again. Default 128 MiB.
	ParseCacheBytes int
	// Paths is which files the ledger reads (the policy's ledger block); nil lists are the
	// defaults. A branch indexed with other paths is rebuilt by its next Update.
	Paths core.PathFilter
	// Progress, when set, is called after each commit an Update indexes (from the update's own
	// goroutine: keep it quick).
	Progress func(Progress)
	// CheckpointCommits and CheckpointInterval say how often a long Update commits what it has
	// indexed so far, whichever comes first; an interrupted update resumes from the last
	// checkpoint. Defaults: 2,000 commits, 10 seconds.
	CheckpointCommits  int
	CheckpointInterval time.Duration
	// MaxFileBytes bounds the size of a file the ledger parses; larger files are recorded as a
	// problem. Default core.DefaultBudget's FileBytes (8 MiB), which review and discovery share.
	MaxFileBytes int64
	// OpenPGPKeys are the armored OpenPGP public keys commits are verified against (the policy's
	// signing_keys; see VerifyCommit). SSH signatures need none. A branch verified against other
	// keys is rebuilt by its next Update.
	OpenPGPKeys string
	// OpenBlobs, when set, opens the source an Update reads file contents from, over the git
	// directory; nil, or a source that fails, leaves them to go-git. Both read the same bytes.
	OpenBlobs func(ctx context.Context, gitDir string) (BlobSource, error)
	// OpenHistory, when set, opens the source an Update walks the first-parent history and
	// compares each commit's tree with its parent's through, over the git directory; nil, or a
	// source that cannot start, leaves them to go-git. Both give the same commits and files.
	OpenHistory func(ctx context.Context, gitDir string) (HistorySource, error)

	// loadFieldsCommits is the fewest commits for which an update loads every field of the index
	// at its start rather than looking up the addresses its claims name (newWriter); and
	// maxPendingClaims the most claims the writer holds back before a checkpoint. Tests lower
	// them to run the other path.
	loadFieldsCommits int
	maxPendingClaims  int
	// afterCheckpoint, when set, runs between a checkpoint's commit and the next transaction: a
	// test's other process updates the index there.
	afterCheckpoint func()
}

func (o Options) withDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.ObjectCacheBytes <= 0 {
		o.ObjectCacheBytes = 96 << 20
	}
	if o.ParseCacheBytes <= 0 {
		o.ParseCacheBytes = 128 << 20
	}
	if o.CheckpointCommits <= 0 {
		o.CheckpointCommits = 2000
	}
	if o.CheckpointInterval <= 0 {
		o.CheckpointInterval = 10 * time.Second
	}
	if o.loadFieldsCommits <= 0 {
		// Loading home-ops' 93,130 fields took 200-340 ms (a loaded 2-core machine), four times
		// the 50 ms an incremental update of 10 commits may take; looking up the addresses of a
		// few commits' claims takes well under 1 ms.
		o.loadFieldsCommits = 500
	}
	if o.maxPendingClaims <= 0 {
		o.maxPendingClaims = 1 << 17 // about 10 MiB of rows, sorted once instead of per batch
	}
	if o.MaxFileBytes <= 0 {
		o.MaxFileBytes = core.DefaultBudget().FileBytes
	}
	return o
}

// ErrNotRepository is returned by Open when the directory is not inside a git repository.
var ErrNotRepository = errors.New("not a git repository")

// ErrNoBranch is returned by Update when the repository has no such branch.
var ErrNoBranch = errors.New("no such branch")

// ErrNotIndexed is returned by queries on a branch that no Update has indexed yet.
var ErrNotIndexed = errors.New("branch not indexed")

// Ledger is the claim history of a repository's branches, read from Git and kept in an index.
//
// A Ledger is safe for concurrent use: updates are serialised, and queries read the last committed
// update.
type Ledger struct {
	repo    *git.Repository
	gitDir  string
	db      *sql.DB
	path    string
	opts    Options
	closeFn func() error
	stmts   readStmts // prepared hot read queries; closed before the database

	mu     sync.Mutex // serialises Update; guards branch
	branch string     // the branch the Ledger's own query methods answer for

	// goGitCommitReads counts the commits updates walked through go-git, for the tests that show
	// an update with a history source leaves go-git's object store alone.
	goGitCommitReads atomic.Int64
}

// Open opens the repository at repoDir (a work tree, any directory inside one, or a bare repository)
// and its ledger index, creating the index if needed.
func Open(repoDir string, opts Options) (*Ledger, error) {
	opts = opts.withDefaults()
	gitDir, common, err := findGitDir(repoDir)
	if err != nil {
		return nil, err
	}
	st := filesystem.NewStorageWithOptions(osfs.New(common), cache.NewObjectLRU(cache.FileSize(opts.ObjectCacheBytes)),
		filesystem.Options{KeepDescriptors: true})
	var repo *git.Repository
	if gitDir == common {
		repo, err = git.Open(st, nil)
	} else {
		// A linked work tree: let go-git resolve HEAD and refs through its commondir support.
		_ = st.Close()
		st = nil
		repo, err = git.PlainOpenWithOptions(repoDir, &git.PlainOpenOptions{DetectDotGit: true, EnableDotGitCommonDir: true})
	}
	if err != nil {
		if st != nil {
			_ = st.Close()
		}
		return nil, fmt.Errorf("ledger: open repository %s: %w", repoDir, err)
	}
	path := opts.Path
	if path == "" {
		path = filepath.Join(common, "parley", "ledger.db")
	}
	db, err := openDB(path)
	if err != nil {
		if st != nil {
			_ = st.Close()
		}
		return nil, err
	}
	l := &Ledger{repo: repo, gitDir: gitDir, db: db, path: path, opts: opts}
	l.closeFn = func() error {
		l.stmts.close()
		err := db.Close()
		if st != nil {
			if cerr := st.Close(); err == nil {
				err = cerr
			}
		}
		return err
	}
	return l, nil
}

// SetOpenPGPKeys changes the keys the next Updates verify OpenPGP signatures against; see
// Options.OpenPGPKeys.
func (l *Ledger) SetOpenPGPKeys(armored string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.opts.OpenPGPKeys = armored
}

// SetPaths changes which files the next Updates read; see Options.Paths.
func (l *Ledger) SetPaths(p core.PathFilter) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.opts.Paths = p
}

// FileAt returns the file at path on branch's tip; ok is false when the branch or the file does
// not exist.
func (l *Ledger) FileAt(branch, path string) (data []byte, ok bool, err error) {
	ref, err := l.resolveBranch(branch)
	if errors.Is(err, ErrNoBranch) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	c, err := l.repo.CommitObject(ref.Hash())
	if err != nil {
		return nil, false, fmt.Errorf("ledger: read %s: %w", ref.Name(), err)
	}
	f, err := c.File(path)
	if errors.Is(err, object.ErrFileNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("ledger: read %s on %s: %w", path, ref.Name(), err)
	}
	text, err := f.Contents()
	if err != nil {
		return nil, false, fmt.Errorf("ledger: read %s on %s: %w", path, ref.Name(), err)
	}
	return []byte(text), true, nil
}

// FileIDAt returns the object ID of the blob at path on branch's tip, without reading the blob:
// what a caller keys what it made of the file by. ok is false when the branch or the file does not
// exist (or path names a directory).
func (l *Ledger) FileIDAt(branch, path string) (id string, ok bool, err error) {
	ref, err := l.resolveBranch(branch)
	if errors.Is(err, ErrNoBranch) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	c, err := l.repo.CommitObject(ref.Hash())
	if err != nil {
		return "", false, fmt.Errorf("ledger: read %s: %w", ref.Name(), err)
	}
	tree, err := c.Tree()
	if err != nil {
		return "", false, fmt.Errorf("ledger: read %s: %w", ref.Name(), err)
	}
	e, err := tree.FindEntry(path)
	if errors.Is(err, object.ErrEntryNotFound) || errors.Is(err, object.ErrDirectoryNotFound) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("ledger: read %s on %s: %w", path, ref.Name(), err)
	}
	if !e.Mode.IsFile() {
		return "", false, nil
	}
	return e.Hash.String(), true, nil
}

// Close releases the index and the repository's open files.
func (l *Ledger) Close() error {
	if err := l.closeFn(); err != nil {
		return fmt.Errorf("ledger %s: close: %w", l.path, err)
	}
	return nil
}

// Path returns the index database file.
func (l *Ledger) Path() string { return l.path }

// DefaultBranch returns the branch HEAD points at (such as "main").
func (l *Ledger) DefaultBranch() (string, error) {
	ref, err := l.repo.Storer.Reference(plumbing.HEAD)
	if err != nil {
		return "", fmt.Errorf("ledger: read HEAD of %s: %w", l.gitDir, err)
	}
	if ref.Type() != plumbing.SymbolicReference {
		return "", fmt.Errorf("ledger: HEAD of %s is detached, name a branch: %w", l.gitDir, ErrNoBranch)
	}
	return ref.Target().Short(), nil
}

// findGitDir locates the repository holding dir: its git directory and the common directory that
// holds objects and refs (the same, except in a linked work tree).
func findGitDir(dir string) (gitDir, common string, err error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", "", fmt.Errorf("ledger: repository %s: %w", dir, err)
	}
	if _, err := os.Stat(abs); err != nil {
		return "", "", fmt.Errorf("ledger: repository %s: %w: %w", dir, ErrNotRepository, err)
	}
	for d := abs; ; d = filepath.Dir(d) {
		dot := filepath.Join(d, ".git")
		if fi, err := os.Stat(dot); err == nil {
			if fi.IsDir() {
				return dot, dot, nil
			}
			b, err := os.ReadFile(dot)
			if err != nil {
				return "", "", fmt.Errorf("ledger: repository %s: %w", dir, err)
			}
			target, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir:")
			if !ok {
				return "", "", fmt.Errorf("ledger: repository %s: %s is not a gitdir file", dir, dot)
			}
			g := strings.TrimSpace(target)
			if !filepath.IsAbs(g) {
				g = filepath.Join(d, g)
			}
			c := g
			if b, err := os.ReadFile(filepath.Join(g, "commondir")); err == nil {
				c = strings.TrimSpace(string(b))
				if !filepath.IsAbs(c) {
					c = filepath.Join(g, c)
				}
			}
			return g, filepath.Clean(c), nil
		}
		if isBare(d) {
			return d, d, nil
		}
		if filepath.Dir(d) == d {
			return "", "", fmt.Errorf("ledger: %s: %w", dir, ErrNotRepository)
		}
	}
}

func isBare(d string) bool {
	for _, name := range []string{"HEAD", "objects", "refs"} {
		if _, err := os.Stat(filepath.Join(d, name)); err != nil {
			return false
		}
	}
	return true
}

// schemaVersion is the index layout this code writes. The index is derived from Git, so a database
// with any other version is dropped and rebuilt instead of migrated.
const schemaVersion = 5

const schema = `
CREATE TABLE schema_version (version INTEGER NOT NULL);
CREATE TABLE branches (
	id         INTEGER PRIMARY KEY,
	name       TEXT    NOT NULL UNIQUE, -- full ref name, e.g. refs/heads/main
	tip        TEXT    NOT NULL,        -- the checkpoint: the last commit indexed
	commits    INTEGER NOT NULL,        -- commits indexed, = seq of tip
	updated_at INTEGER NOT NULL,        -- unix seconds
	paths      TEXT    NOT NULL,        -- the PathFilter the branch was indexed with (its String)
	keyring    TEXT    NOT NULL         -- digest of the OpenPGP keys its commits were verified against
);
CREATE TABLE commits (
	branch          INTEGER NOT NULL,
	seq             INTEGER NOT NULL,  -- 1 = the root of the first-parent history
	hash            TEXT    NOT NULL,
	author_name     TEXT    NOT NULL,
	author_email    TEXT    NOT NULL,
	at              INTEGER NOT NULL,  -- committer time, unix seconds
	subject         TEXT    NOT NULL,
	intent          TEXT    NOT NULL,
	intent_declared INTEGER NOT NULL,
	mot_kind        TEXT    NOT NULL,
	mot_ref         TEXT    NOT NULL,
	mot_severity    TEXT    NOT NULL,
	expires         INTEGER NOT NULL,  -- unix seconds, 0 = none
	pr              INTEGER NOT NULL,
	parents         INTEGER NOT NULL,
	sig_key         TEXT    NOT NULL,  -- id of the key whose signature verified; '' when none did
	sig_problem     TEXT    NOT NULL,  -- why the signature proves nothing, when sig_key is ''
	PRIMARY KEY (branch, seq)
) WITHOUT ROWID;
CREATE TABLE fields (
	id      INTEGER PRIMARY KEY,
	addr    TEXT    NOT NULL UNIQUE,   -- canonical field address, or a Yield pattern
	pattern INTEGER NOT NULL           -- 1 when addr holds wildcards
);
-- Yield patterns are few among many fields: queries read them through this partial index instead
-- of scanning every field.
CREATE INDEX fields_patterns ON fields (addr) WHERE pattern = 1;
CREATE TABLE claims (
	branch    INTEGER NOT NULL,
	field     INTEGER NOT NULL,
	seq       INTEGER NOT NULL,
	kind      INTEGER NOT NULL,        -- see claimKind
	has_value INTEGER NOT NULL,
	vjson     TEXT    NOT NULL,
	vexpr     TEXT    NOT NULL,
	PRIMARY KEY (branch, field, seq, kind)
) WITHOUT ROWID;
CREATE TABLE problems (
	branch  INTEGER NOT NULL,
	seq     INTEGER NOT NULL,
	path    TEXT    NOT NULL,
	line    INTEGER NOT NULL,
	key     TEXT    NOT NULL,
	value   TEXT    NOT NULL,
	message TEXT    NOT NULL
);
CREATE INDEX problems_by_commit ON problems (branch, seq);
-- Who vouches for a commit's author besides its signature, looked up once per commit (the GitHub
-- App: the merged pull request's author, or GitHub's verification of the signature). source and
-- id are '' when the lookup found nobody. Not derived from Git: kept when branches are rebuilt.
CREATE TABLE credits (
	hash   TEXT PRIMARY KEY,
	source TEXT NOT NULL,
	id     TEXT NOT NULL,
	how    TEXT NOT NULL
) WITHOUT ROWID;
-- GitHub's verification of a commit's signature, as the GitHub App read it: the GitHub user it
-- proves authored and committed the commit ('' when it proves nobody). A commit's hash covers its
-- signature and GitHub keeps a verification once made, so it is asked once per commit, whether the
-- commit is on a branch yet or only in a pull request. Not derived from Git: kept when branches
-- are rebuilt.
CREATE TABLE verifications (
	hash   TEXT PRIMARY KEY,
	source TEXT NOT NULL,
	id     TEXT NOT NULL,
	how    TEXT NOT NULL
) WITHOUT ROWID;
`

func openDB(path string) (*sql.DB, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("ledger index %s: %w", path, err)
	}
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(NORMAL)")
	// The statement journal of the writer's multi-row inserts (what SQLite keeps to undo one
	// statement that fails midway) stays in memory instead of a temporary file. It is no part of
	// what a commit makes durable: that is the WAL, as before. (A larger cache_size was measured
	// too: no faster, and 100 MB more peak memory on home-ops, as writer and reader each cached the
	// whole 48 MB index.)
	q.Add("_pragma", "temp_store(memory)")
	q.Add("_txlock", "immediate")
	db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: path}).EscapedPath()+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("ledger index %s: %w", path, err)
	}
	if err := ensureSchema(db); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("ledger index %s: %w", path, err)
	}
	return db, nil
}

func ensureSchema(db *sql.DB) error {
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin schema check: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	var version int
	err = tx.QueryRowContext(ctx, `SELECT version FROM schema_version`).Scan(&version)
	switch {
	case err == nil && version == schemaVersion:
		return nil
	case err == nil || errors.Is(err, sql.ErrNoRows) || strings.Contains(err.Error(), "no such table"):
		// New file, or another layout: drop what is there and build the current one.
		rows, err := tx.QueryContext(ctx, `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'`)
		if err != nil {
			return fmt.Errorf("list tables: %w", err)
		}
		var tables []string
		for rows.Next() {
			var name string
			if err := rows.Scan(&name); err != nil {
				rows.Close()
				return fmt.Errorf("list tables: %w", err)
			}
			tables = append(tables, name)
		}
		rows.Close()
		for _, t := range tables {
			if _, err := tx.ExecContext(ctx, `DROP TABLE "`+strings.ReplaceAll(t, `"`, `""`)+`"`); err != nil {
				return fmt.Errorf("drop old table %s: %w", t, err)
			}
		}
		if _, err := tx.ExecContext(ctx, schema); err != nil {
			return fmt.Errorf("create schema: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_version (version) VALUES (?)`, schemaVersion); err != nil {
			return fmt.Errorf("record schema version: %w", err)
		}
		return tx.Commit()
	default:
		return fmt.Errorf("read schema version: %w", err)
	}
}
