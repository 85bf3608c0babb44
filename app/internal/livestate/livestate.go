// Package livestate keeps what people tell Parley on pull requests: claims and yields made with
// /parley commands, overrides, and holds. It is a small SQLite database beside the delivery store;
// every command is recorded once (keyed by its comment and line), so a redelivered or edited
// comment never applies a command twice. With several replicas of parley serve it lives in their
// shared PostgreSQL database instead (OpenPostgres).
package livestate

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
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
	At            time.Time
}

// Record stores a command; it reports false when the same command (same comment, line and text)
// was recorded before.
func (d *DB) Record(ctx context.Context, c Command) (bool, error) {
	var claim []byte
	if c.Kind == KindClaim {
		var err error
		if claim, err = json.Marshal(c.Claim); err != nil {
			return false, fmt.Errorf("encode claim: %w", err)
		}
	}
	field := ""
	if !c.Field.IsZero() {
		field = c.Field.String()
	}
	res, err := d.db.ExecContext(ctx, sqldb.Rebind(d.engine, `INSERT INTO `+d.table()+` (repo, pr, comment, line, text, kind, field, claim, actor, reason, at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`), c.Repo, c.PR, c.Comment, c.Line, c.Text, string(c.Kind), field, string(claim),
		c.Actor, c.Reason, c.At.UTC().Format(time.RFC3339Nano))
	if err != nil {
		return false, fmt.Errorf("record command on %s#%d: %w", c.Repo, c.PR, err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// PR is the live state of one pull request, as its commands left it.
type PR struct {
	Claims    []core.Claim           // the latest claim per field and actor
	Overrides map[core.Field]Command // the latest override per field
	Held      bool
	HeldBy    string
	// Contributors are who besides the opener acted on the pull request, in order, each once
	// per thing they did.
	Contributors []Command
}

// ForPR replays the commands of a pull request in order.
func (d *DB) ForPR(ctx context.Context, repo string, pr int) (PR, error) {
	rows, err := d.db.QueryContext(ctx, sqldb.Rebind(d.engine, `SELECT comment, line, text, kind, field, claim, actor, reason, at FROM `+d.table()+`
		WHERE repo = ? AND pr = ? ORDER BY at, comment, line`), repo, pr)
	if err != nil {
		return PR{}, fmt.Errorf("live state of %s#%d: %w", repo, pr, err)
	}
	defer rows.Close()
	out := PR{Overrides: map[core.Field]Command{}}
	latest := map[string]int{}
	for rows.Next() {
		var c Command
		var kind, field, claim, at string
		if err := rows.Scan(&c.Comment, &c.Line, &c.Text, &kind, &field, &claim, &c.Actor, &c.Reason, &at); err != nil {
			return PR{}, err
		}
		c.Kind, c.Repo, c.PR = Kind(kind), repo, pr
		c.At, _ = time.Parse(time.RFC3339Nano, at)
		if field != "" {
			if c.Field, err = core.ParseField(field); err != nil {
				return PR{}, fmt.Errorf("live state of %s#%d: %w", repo, pr, err)
			}
		}
		switch c.Kind {
		case KindClaim:
			var cl core.Claim
			if err := json.Unmarshal([]byte(claim), &cl); err != nil {
				return PR{}, fmt.Errorf("live state of %s#%d: decode claim: %w", repo, pr, err)
			}
			key := c.Field.String() + " " + c.Actor
			if i, ok := latest[key]; ok {
				out.Claims[i] = cl
			} else {
				latest[key] = len(out.Claims)
				out.Claims = append(out.Claims, cl)
			}
		case KindOverride:
			out.Overrides[c.Field] = c
		case KindHold:
			out.Held, out.HeldBy = true, c.Actor
		case KindUnhold:
			out.Held, out.HeldBy = false, ""
		case KindContribution:
			out.Contributors = append(out.Contributors, c)
		}
	}
	if err := rows.Err(); err != nil {
		return PR{}, err
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
