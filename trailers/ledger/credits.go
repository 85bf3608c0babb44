package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/parleyhq/parley/core"
)

// Credit records who vouches for the author of commit when its signature proves nothing: the
// GitHub App credits a commit a merged pull request brought to the default branch to the pull
// request's author, whom GitHub authenticated. how says so in words. A zero id records that the
// lookup found nobody, so that it is made once. Claims of a credited commit carry id (with how as
// its Proof.Vouched) instead of the commit's author email; a commit whose signature verified keeps
// its author. Credits are keyed by commit, not branch, and survive rebuilds.
func (l *Ledger) Credit(ctx context.Context, commit string, id core.Identity, how string) error {
	if _, err := l.db.ExecContext(ctx, `INSERT INTO credits (hash, source, id, how) VALUES (?, ?, ?, ?)
		ON CONFLICT (hash) DO UPDATE SET source = excluded.source, id = excluded.id, how = excluded.how`,
		commit, string(id.Source), id.ID, how); err != nil {
		return fmt.Errorf("ledger %s: credit commit %s: %w", l.path, commit, err)
	}
	return nil
}

// Credited reports whether a credit was recorded for commit (found is false when none was looked
// up), and the identity it names (zero when the lookup found nobody).
func (l *Ledger) Credited(ctx context.Context, commit string) (id core.Identity, how string, found bool, err error) {
	var src string
	err = l.db.QueryRowContext(ctx, `SELECT source, id, how FROM credits WHERE hash = ?`, commit).Scan(&src, &id.ID, &how)
	if errors.Is(err, sql.ErrNoRows) {
		return core.Identity{}, "", false, nil
	}
	if err != nil {
		return core.Identity{}, "", false, fmt.Errorf("ledger %s: credit of commit %s: %w", l.path, commit, err)
	}
	id.Source = core.IdentitySource(src)
	return id, how, true, nil
}

// RecordVerification keeps what GitHub's verification of commit's signature proves: id, the GitHub
// user who both authored and committed it (how says so in words), or a zero id for nobody. The
// GitHub App records it the first time it asks, so that judging the same commits again asks
// GitHub nothing. It is separate from Credit: a verification says only what the signature proves,
// while a credit is the final word on a default-branch commit (a merged pull request's author
// first), and a pull request's commit that proves nobody may still be credited once it merges.
func (l *Ledger) RecordVerification(ctx context.Context, commit string, id core.Identity, how string) error {
	if _, err := l.db.ExecContext(ctx, `INSERT INTO verifications (hash, source, id, how) VALUES (?, ?, ?, ?)
		ON CONFLICT (hash) DO UPDATE SET source = excluded.source, id = excluded.id, how = excluded.how`,
		commit, string(id.Source), id.ID, how); err != nil {
		return fmt.Errorf("ledger %s: record verification of commit %s: %w", l.path, commit, err)
	}
	return nil
}

// Verification returns the verification recorded for commit (found is false when none was), and
// the identity it proves (zero for nobody).
func (l *Ledger) Verification(ctx context.Context, commit string) (id core.Identity, how string, found bool, err error) {
	var src string
	err = l.db.QueryRowContext(ctx, `SELECT source, id, how FROM verifications WHERE hash = ?`, commit).Scan(&src, &id.ID, &how)
	if errors.Is(err, sql.ErrNoRows) {
		return core.Identity{}, "", false, nil
	}
	if err != nil {
		return core.Identity{}, "", false, fmt.Errorf("ledger %s: verification of commit %s: %w", l.path, commit, err)
	}
	id.Source = core.IdentitySource(src)
	return id, how, true, nil
}
