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
