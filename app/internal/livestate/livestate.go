// Package livestate keeps what people tell Parley on pull requests: claims and yields made with
// /parley commands, overrides, and holds. It is a small SQLite database beside the delivery store;
// with several replicas of parley serve it lives in their shared PostgreSQL database instead
// (OpenPostgres).
//
// A comment's commands are kept as its author last wrote them (ApplyComment): an edit that drops a
// command, or the comment's deletion, withdraws it; a redelivered or edited comment never applies a
// command twice. Versions are ordered by GitHub's timestamps, not by when deliveries arrive, so an
// old version delivered late changes nothing. Every command is bound to the pull request's head
// commit it was given for: ForPR replays only those given for the head being judged. Which commit
// that was is read from the heads GitHub showed at known times (RecordHead, HeadBefore), never
// from the head when the comment happens to be processed.
package livestate

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	_ "modernc.org/sqlite" // the pure-Go SQLite driver, registered as "sqlite"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/internal/sqldb"
)

// DB is the live state of every repository Parley serves.
type DB struct {
	db     *sql.DB
	engine sqldb.Engine
	owned  bool // Close closes db: a SQLite file this DB opened, not a shared PostgreSQL pool
}

// sqliteMigrations are the schema of a live.db file, applied in order (sqldb.MigrateSQLite; the
// first is written IF NOT EXISTS for files made before migrations were versioned). Never edit a
// released one: append.
var sqliteMigrations = []string{
	`CREATE TABLE IF NOT EXISTS commands (
	repo TEXT NOT NULL, pr INTEGER NOT NULL, comment INTEGER NOT NULL, line INTEGER NOT NULL, text TEXT NOT NULL,
	kind TEXT NOT NULL, field TEXT NOT NULL DEFAULT '', claim TEXT NOT NULL DEFAULT '', actor TEXT NOT NULL, reason TEXT NOT NULL DEFAULT '',
	at TEXT NOT NULL,
	PRIMARY KEY (repo, pr, comment, line, text));
CREATE INDEX IF NOT EXISTS commands_pr ON commands (repo, pr);`,
	`CREATE TABLE judged (
	repo TEXT NOT NULL, pr INTEGER NOT NULL, head TEXT NOT NULL, title TEXT NOT NULL, at TEXT NOT NULL, verdicts TEXT NOT NULL,
	PRIMARY KEY (repo, pr));`,
	// Commands recorded before this migration name no head commit, so they apply to none: an
	// override must be given again for the commit it is meant for.
	`ALTER TABLE commands ADD COLUMN head TEXT NOT NULL DEFAULT '';
CREATE TABLE comments (repo TEXT NOT NULL, comment INTEGER NOT NULL, at_ns INTEGER NOT NULL, deleted INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (repo, comment));`,
	// Which commit each pull request's head was at which time, as GitHub showed it (RecordHead).
	`CREATE TABLE heads (repo TEXT NOT NULL, pr INTEGER NOT NULL, sha TEXT NOT NULL, at_ns INTEGER NOT NULL,
	PRIMARY KEY (repo, pr, at_ns, sha));`,
}

// postgresMigrations are the schema on PostgreSQL, applied in order (sqldb.MigratePostgres). Never
// edit a released one: append.
var postgresMigrations = []string{
	`CREATE TABLE livestate_commands (
	repo TEXT NOT NULL, pr BIGINT NOT NULL, comment BIGINT NOT NULL, line INTEGER NOT NULL, text TEXT NOT NULL,
	kind TEXT NOT NULL, field TEXT NOT NULL DEFAULT '', claim TEXT NOT NULL DEFAULT '', actor TEXT NOT NULL, reason TEXT NOT NULL DEFAULT '',
	at TEXT NOT NULL,
	PRIMARY KEY (repo, pr, comment, line, text));
CREATE INDEX livestate_commands_pr ON livestate_commands (repo, pr);`,
	`CREATE TABLE livestate_judged (
	repo TEXT NOT NULL, pr BIGINT NOT NULL, head TEXT NOT NULL, title TEXT NOT NULL, at TEXT NOT NULL, verdicts TEXT NOT NULL,
	PRIMARY KEY (repo, pr));`,
	`ALTER TABLE livestate_commands ADD COLUMN head TEXT NOT NULL DEFAULT '';
CREATE TABLE livestate_comments (repo TEXT NOT NULL, comment BIGINT NOT NULL, at_ns BIGINT NOT NULL, deleted INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (repo, comment));`,
	`CREATE TABLE livestate_heads (repo TEXT NOT NULL, pr BIGINT NOT NULL, sha TEXT NOT NULL, at_ns BIGINT NOT NULL,
	PRIMARY KEY (repo, pr, at_ns, sha));`,
}

// OpenPostgres uses the shared PostgreSQL database db (several replicas of parley serve),
// migrating it first. Close leaves db open: its owner closes it.
func OpenPostgres(ctx context.Context, db *sql.DB) (*DB, error) {
	if err := sqldb.MigratePostgres(ctx, db, "livestate", postgresMigrations); err != nil {
		return nil, fmt.Errorf("live state: %w", err)
	}
	return &DB{db: db, engine: sqldb.Postgres}, nil
}

// table is the commands table's name: PostgreSQL's database is shared by every store, so its
// tables carry the store's name.
func (d *DB) table() string {
	if d.engine == sqldb.Postgres {
		return "livestate_commands"
	}
	return "commands"
}

// Open opens (creating on first use) the database at path.
func Open(ctx context.Context, path string) (*DB, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)")
	if err != nil {
		return nil, fmt.Errorf("open live state %s: %w", path, err)
	}
	db.SetMaxOpenConns(1) // one writer; the data is small
	if err := sqldb.MigrateSQLite(ctx, db, "live state "+path, sqliteMigrations); err != nil {
		db.Close()
		return nil, err
	}
	return &DB{db: db, owned: true}, nil
}

// Close closes the database (a shared PostgreSQL pool stays open for its owner).
func (d *DB) Close() error {
	if !d.owned {
		return nil
	}
	return d.db.Close()
}

// Judged is the last judgement of a pull request, as its details page shows it.
type Judged struct {
	Repo     string
	PR       int
	Head     string
	Title    string
	At       time.Time
	Verdicts []core.Verdict
}

// SaveJudged keeps j as its pull request's last judgement, in place of the one before.
func (d *DB) SaveJudged(ctx context.Context, j Judged) error {
	vs, err := json.Marshal(j.Verdicts)
	if err != nil {
		return fmt.Errorf("encode the verdicts of %s#%d: %w", j.Repo, j.PR, err)
	}
	table := "judged"
	if d.engine == sqldb.Postgres {
		table = "livestate_judged"
	}
	_, err = d.db.ExecContext(ctx, sqldb.Rebind(d.engine, `INSERT INTO `+table+` (repo, pr, head, title, at, verdicts) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (repo, pr) DO UPDATE SET head = excluded.head, title = excluded.title, at = excluded.at, verdicts = excluded.verdicts`),
		j.Repo, j.PR, j.Head, j.Title, j.At.UTC().Format(time.RFC3339Nano), string(vs))
	if err != nil {
		return fmt.Errorf("save the judgement of %s#%d: %w", j.Repo, j.PR, err)
	}
	return nil
}

// LoadJudged returns a pull request's last judgement; false when it was never judged.
func (d *DB) LoadJudged(ctx context.Context, repo string, pr int) (Judged, bool, error) {
	table := "judged"
	if d.engine == sqldb.Postgres {
		table = "livestate_judged"
	}
	j := Judged{Repo: repo, PR: pr}
	var at, vs string
	err := d.db.QueryRowContext(ctx, sqldb.Rebind(d.engine, `SELECT head, title, at, verdicts FROM `+table+` WHERE repo = ? AND pr = ?`), repo, pr).
		Scan(&j.Head, &j.Title, &at, &vs)
	if errors.Is(err, sql.ErrNoRows) {
		return j, false, nil
	}
	if err != nil {
		return j, false, fmt.Errorf("the judgement of %s#%d: %w", repo, pr, err)
	}
	j.At, _ = time.Parse(time.RFC3339Nano, at)
	if err := json.Unmarshal([]byte(vs), &j.Verdicts); err != nil {
		return j, false, fmt.Errorf("the judgement of %s#%d: decode verdicts: %w", repo, pr, err)
	}
	return j, true, nil
}

// Kind is what a recorded command does.
type Kind string

// Kinds of command.
const (
	KindClaim    Kind = "claim" // a claim or a yield (Claim.Yield)
	KindOverride Kind = "override"
	KindHold     Kind = "hold"
	KindUnhold   Kind = "unhold"
	// KindContribution records someone other than the opener acting on the pull request (pushing
	// to it, adding an intent/ or motivation/ label, editing its body): Actor is their login,
	// Reason what they did. The pull request's claims are judged as each of them too.
	KindContribution Kind = "contribution"
)

// Command is one recorded command.
type Command struct {
	Repo          string
	PR            int
	Comment       int64
	Line          int
	Text          string
	Kind          Kind
	Field         core.Field // for claims and overrides
	Claim         core.Claim // for claims
	Actor, Reason string
	// Head is the pull request's head commit the command was given for; it applies to no other.
	Head string
	// At is when GitHub says the comment was written (created_at, or updated_at once edited).
	At time.Time
}

// Comment is one version of a comment, as a delivery shows it.
type Comment struct {
	Repo    string
	PR      int
	ID      int64
	At      time.Time // GitHub's created_at, or updated_at for an edit
	Deleted bool
}

// Applied is what ApplyComment changed.
type Applied struct {
	// Stale: a newer version of the comment (or its deletion) was applied before this one, which
	// therefore changed nothing.
	Stale     bool
	Added     []Command
	Withdrawn []Command
}

// Changed reports whether the commands in force changed.
func (a Applied) Changed() bool { return len(a.Added)+len(a.Withdrawn) > 0 }

func (d *DB) commentsTable() string {
	if d.engine == sqldb.Postgres {
		return "livestate_comments"
	}
	return "comments"
}

// ApplyComment makes cmds the commands in force from comment c, which they must all name: a
// command already recorded from it with the same text stays as it was recorded (its head commit
// and time), new ones are added and the others withdrawn. A version of the comment older than one
// applied before, or any version after its deletion, is stale and changes nothing.
func (d *DB) ApplyComment(ctx context.Context, c Comment, cmds []Command) (Applied, error) {
	fail := func(err error) (Applied, error) {
		return Applied{}, fmt.Errorf("apply comment %d on %s#%d: %w", c.ID, c.Repo, c.PR, err)
	}
	for _, cmd := range cmds {
		if cmd.Repo != c.Repo || cmd.PR != c.PR || cmd.Comment != c.ID {
			return fail(fmt.Errorf("command %q names comment %d on %s#%d", cmd.Text, cmd.Comment, cmd.Repo, cmd.PR))
		}
	}
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return fail(err)
	}
	defer func() { _ = tx.Rollback() }()
	q := func(s string) string { return sqldb.Rebind(d.engine, s) }
	// The comment's row is made first and then read for update, so that on PostgreSQL two replicas
	// applying versions of one comment take turns (SQLite has one connection).
	if _, err := tx.ExecContext(ctx, q(`INSERT INTO `+d.commentsTable()+` (repo, comment, at_ns, deleted) VALUES (?, ?, ?, 0) ON CONFLICT DO NOTHING`),
		c.Repo, c.ID, int64(-1)); err != nil {
		return fail(err)
	}
	lock := ""
	if d.engine == sqldb.Postgres {
		lock = " FOR UPDATE"
	}
	var atNs, deleted int64
	if err := tx.QueryRowContext(ctx, q(`SELECT at_ns, deleted FROM `+d.commentsTable()+` WHERE repo = ? AND comment = ?`+lock), c.Repo, c.ID).
		Scan(&atNs, &deleted); err != nil {
		return fail(err)
	}
	if deleted != 0 || atNs > c.At.UnixNano() {
		return Applied{Stale: true}, nil
	}
	old, err := d.commentCommands(ctx, tx, c)
	if err != nil {
		return fail(err)
	}
	var out Applied
	kept := make([]bool, len(old))
	for _, cmd := range cmds {
		found := false
		for i, o := range old {
			if !kept[i] && o.Text == cmd.Text {
				kept[i], found = true, true
				break
			}
		}
		if !found {
			out.Added = append(out.Added, cmd)
		}
	}
	for i, o := range old {
		if kept[i] {
			continue
		}
		if _, err := tx.ExecContext(ctx, q(`DELETE FROM `+d.table()+` WHERE repo = ? AND pr = ? AND comment = ? AND line = ? AND text = ?`),
			o.Repo, o.PR, o.Comment, o.Line, o.Text); err != nil {
			return fail(err)
		}
		out.Withdrawn = append(out.Withdrawn, o)
	}
	for _, cmd := range out.Added {
		var claim []byte
		if cmd.Kind == KindClaim {
			if claim, err = json.Marshal(cmd.Claim); err != nil {
				return fail(fmt.Errorf("encode claim: %w", err))
			}
		}
		field := ""
		if !cmd.Field.IsZero() {
			field = cmd.Field.String()
		}
		if _, err := tx.ExecContext(ctx, q(`INSERT INTO `+d.table()+` (repo, pr, comment, line, text, kind, field, claim, actor, reason, head, at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`), cmd.Repo, cmd.PR, cmd.Comment, cmd.Line, cmd.Text, string(cmd.Kind), field, string(claim),
			cmd.Actor, cmd.Reason, cmd.Head, cmd.At.UTC().Format(time.RFC3339Nano)); err != nil {
			return fail(err)
		}
	}
	del := int64(0)
	if c.Deleted {
		del = 1
	}
	if _, err := tx.ExecContext(ctx, q(`UPDATE `+d.commentsTable()+` SET at_ns = ?, deleted = ? WHERE repo = ? AND comment = ?`),
		c.At.UnixNano(), del, c.Repo, c.ID); err != nil {
		return fail(err)
	}
	if err := tx.Commit(); err != nil {
		return fail(err)
	}
	return out, nil
}

// RecordContribution stores that someone other than the opener acted on a pull request (c.Kind
// KindContribution, from no comment); it reports false when the same contribution (same actor
// and text) was recorded before. Contributions name no head commit: they apply to every head.
func (d *DB) RecordContribution(ctx context.Context, c Command) (bool, error) {
	if c.Kind != KindContribution || c.Comment != 0 {
		return false, fmt.Errorf("record contribution on %s#%d: %q is a %s from comment %d, not a contribution", c.Repo, c.PR, c.Text, c.Kind, c.Comment)
	}
	res, err := d.db.ExecContext(ctx, sqldb.Rebind(d.engine, `INSERT INTO `+d.table()+` (repo, pr, comment, line, text, kind, field, claim, actor, reason, head, at)
		VALUES (?, ?, 0, 0, ?, ?, '', '', ?, ?, '', ?) ON CONFLICT DO NOTHING`), c.Repo, c.PR, c.Text, string(c.Kind),
		c.Actor, c.Reason, c.At.UTC().Format(time.RFC3339Nano))
	if err != nil {
		return false, fmt.Errorf("record contribution on %s#%d: %w", c.Repo, c.PR, err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// CommentCommands returns the commands in force from comment c.
func (d *DB) CommentCommands(ctx context.Context, c Comment) ([]Command, error) {
	cmds, err := d.commentCommands(ctx, d.db, c)
	if err != nil {
		return nil, fmt.Errorf("commands of comment %d on %s#%d: %w", c.ID, c.Repo, c.PR, err)
	}
	return cmds, nil
}

type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

func (d *DB) commentCommands(ctx context.Context, q querier, c Comment) ([]Command, error) {
	return d.read(ctx, q, `WHERE repo = ? AND pr = ? AND comment = ?`, c.Repo, c.PR, c.ID)
}

// read returns the commands a WHERE clause selects, in the order GitHub wrote them.
func (d *DB) read(ctx context.Context, q querier, where string, args ...any) ([]Command, error) {
	rows, err := q.QueryContext(ctx, sqldb.Rebind(d.engine, `SELECT repo, pr, comment, line, text, kind, field, claim, actor, reason, head, at FROM `+
		d.table()+` `+where), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Command
	for rows.Next() {
		var c Command
		var kind, field, claim, at string
		if err := rows.Scan(&c.Repo, &c.PR, &c.Comment, &c.Line, &c.Text, &kind, &field, &claim, &c.Actor, &c.Reason, &c.Head, &at); err != nil {
			return nil, err
		}
		c.Kind = Kind(kind)
		if c.At, err = time.Parse(time.RFC3339Nano, at); err != nil {
			return nil, fmt.Errorf("command %q: time %q: %w", c.Text, at, err)
		}
		if field != "" {
			if c.Field, err = core.ParseField(field); err != nil {
				return nil, fmt.Errorf("command %q: %w", c.Text, err)
			}
		}
		if c.Kind == KindClaim {
			if err := json.Unmarshal([]byte(claim), &c.Claim); err != nil {
				return nil, fmt.Errorf("command %q: decode claim: %w", c.Text, err)
			}
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	// Sorted here rather than by SQL: the times are text, and RFC 3339 with fractions of a second
	// does not sort as text.
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if !a.At.Equal(b.At) {
			return a.At.Before(b.At)
		}
		if a.Comment != b.Comment {
			return a.Comment < b.Comment
		}
		return a.Line < b.Line
	})
	return out, nil
}

// PR is the live state of one pull request at one head commit, as its commands left it.
type PR struct {
	Claims    []core.Claim           // the latest claim per field and actor
	Overrides map[core.Field]Command // the latest override per field
	Held      bool
	HeldBy    string
	// OtherHeads are the latest override per field given for another head commit: they do not
	// apply, and the verdict says which commit they were for.
	OtherHeads map[core.Field]Command
	// Contributors are who besides the opener acted on the pull request, in order, each once
	// per thing they did.
	Contributors []Command
}

// ForPR replays, in the order GitHub timestamped them, the commands of a pull request given for
// its head commit head; commands given for any other commit do not apply.
func (d *DB) ForPR(ctx context.Context, repo string, pr int, head string) (PR, error) {
	cmds, err := d.read(ctx, d.db, `WHERE repo = ? AND pr = ?`, repo, pr)
	if err != nil {
		return PR{}, fmt.Errorf("live state of %s#%d: %w", repo, pr, err)
	}
	out := PR{Overrides: map[core.Field]Command{}, OtherHeads: map[core.Field]Command{}}
	latest := map[string]int{}
	for _, c := range cmds {
		if c.Kind == KindContribution {
			// Who pushed, labelled or edited stays behind the pull request whatever its head.
			out.Contributors = append(out.Contributors, c)
			continue
		}
		if c.Head != head {
			if c.Kind == KindOverride {
				out.OtherHeads[c.Field] = c
			}
			continue
		}
		switch c.Kind {
		case KindClaim:
			key := c.Field.String() + " " + c.Actor
			if i, ok := latest[key]; ok {
				out.Claims[i] = c.Claim
			} else {
				latest[key] = len(out.Claims)
				out.Claims = append(out.Claims, c.Claim)
			}
		case KindOverride:
			out.Overrides[c.Field] = c
		case KindHold:
			out.Held, out.HeldBy = true, c.Actor
		case KindUnhold:
			out.Held, out.HeldBy = false, ""
		}
	}
	for f := range out.Overrides {
		delete(out.OtherHeads, f)
	}
	return out, nil
}

// Live implements review.LiveState for one pull request's command claims that have not expired.
type Live struct{ Claims []core.Claim }

// Live returns the unexpired claims on f.
func (l Live) Live(f core.Field, now time.Time) ([]core.Claim, error) {
	var out []core.Claim
	for _, c := range l.Claims {
		if c.Field == f && !c.ExpiredAt(now) {
			out = append(out, c)
		}
	}
	return out, nil
}

func (d *DB) headsTable() string {
	if d.engine == sqldb.Postgres {
		return "livestate_heads"
	}
	return "heads"
}

// Head is a pull request's head commit as GitHub showed it at a time (GitHub's clock): the head was
// SHA at At.
type Head struct {
	SHA string
	At  time.Time
}

// RecordHead keeps that GitHub showed sha as the head of repo#pr at time at: a pull_request
// delivery (the payload's head and updated_at), or a read of the pull request (the answer's Date).
// Recording the same observation twice keeps one.
func (d *DB) RecordHead(ctx context.Context, repo string, pr int, h Head) error {
	if h.SHA == "" || h.At.IsZero() {
		return fmt.Errorf("record the head of %s#%d: %q at %v names no commit or no time", repo, pr, h.SHA, h.At)
	}
	if _, err := d.db.ExecContext(ctx, sqldb.Rebind(d.engine, `INSERT INTO `+d.headsTable()+` (repo, pr, sha, at_ns) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING`),
		repo, pr, h.SHA, h.At.UnixNano()); err != nil {
		return fmt.Errorf("record the head of %s#%d: %w", repo, pr, err)
	}
	return nil
}

// HeadBefore returns the latest head recorded for repo#pr strictly before t; false when none was,
// or when two different commits were recorded at that latest time (which of them was the head
// then is unknown, so neither is returned).
func (d *DB) HeadBefore(ctx context.Context, repo string, pr int, t time.Time) (Head, bool, error) {
	rows, err := d.db.QueryContext(ctx, sqldb.Rebind(d.engine, `SELECT sha, at_ns FROM `+d.headsTable()+`
		WHERE repo = ? AND pr = ? AND at_ns = (SELECT MAX(at_ns) FROM `+d.headsTable()+` WHERE repo = ? AND pr = ? AND at_ns < ?)`),
		repo, pr, repo, pr, t.UnixNano())
	if err != nil {
		return Head{}, false, fmt.Errorf("the head of %s#%d before %v: %w", repo, pr, t, err)
	}
	defer rows.Close()
	var out []Head
	for rows.Next() {
		var h Head
		var ns int64
		if err := rows.Scan(&h.SHA, &ns); err != nil {
			return Head{}, false, fmt.Errorf("the head of %s#%d before %v: %w", repo, pr, t, err)
		}
		h.At = time.Unix(0, ns).UTC()
		out = append(out, h)
	}
	if err := rows.Err(); err != nil {
		return Head{}, false, fmt.Errorf("the head of %s#%d before %v: %w", repo, pr, t, err)
	}
	if len(out) != 1 {
		return Head{}, false, nil
	}
	return out[0], true, nil
}
