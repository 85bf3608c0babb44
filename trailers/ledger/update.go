package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"golang.org/x/sync/errgroup"

	"github.com/parleyhq/parley/core"
)

// Progress is how far an Update has come: Done of Total commits indexed.
type Progress struct {
	Branch      string
	Done, Total int
}

// UpdateStats says what an Update did.
type UpdateStats struct {
	Branch   string // full ref name, e.g. refs/heads/main
	From     string // the checkpoint before the update; "" when the branch was not indexed
	To       string // the tip now indexed
	Commits  int    // commits read and indexed by this update
	Claims   int    // claims recorded (implicit, explicit and yields)
	Problems int    // problems recorded
	// Rebuilt is true when the checkpoint was no longer on the branch's first-parent history (the
	// branch was rewritten, e.g. force-pushed) and the branch's ledger was rebuilt from its root.
	Rebuilt bool
	// PathsChanged is true when the branch had been indexed with other Options.Paths (the
	// policy's ledger block changed) and was rebuilt from its root.
	PathsChanged bool
	// KeysChanged is true when the branch's commits had been verified against other OpenPGP keys
	// (Options.OpenPGPKeys) and the branch was rebuilt from its root.
	KeysChanged bool
	Duration    time.Duration
}

// parseJob is a raw commit handed to the parse workers; ready is closed when its files are parsed.
type parseJob struct {
	rc    rawCommit
	ready chan struct{}
}

// claimKind says how a commit made a claim. Stored in the index; never renumber.
type claimKind int

const (
	kindChange        claimKind = 0 // the commit changed the field (implicit claim)
	kindChangeClaimed claimKind = 1 // the commit changed the field and named it in a Claim trailer
	kindClaim         claimKind = 2 // a Claim trailer on a field the commit did not change
	kindYield         claimKind = 3 // a Yield trailer (a field or a pattern)
)

// record is one commit turned into ledger rows.
type record struct {
	hash           string
	authorName     string
	authorEmail    string
	at             time.Time
	subject        string
	intent         core.Intent
	intentDeclared bool
	motivation     core.Motivation
	expires        time.Time
	pr             int
	parents        int
	proof          core.Proof
	claims         []claimRow
	problems       []Problem
}

type claimRow struct {
	addr     string // canonical field address or Yield pattern
	pattern  bool
	kind     claimKind
	hasValue bool
	value    core.Value
}

// Update brings the ledger of branch up to date with the repository and makes branch the one the
// Ledger's query methods answer for. The first update of a branch replays its whole first-parent
// history; later ones read only the commits after the checkpoint. branch is a short name (main),
// a remote-tracking name (origin/main) or a full ref name.
func (l *Ledger) Update(ctx context.Context, branch string) (UpdateStats, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	started := time.Now()
	ref, err := l.resolveBranch(branch)
	if err != nil {
		return UpdateStats{}, err
	}
	name := ref.Name().String()
	stats := UpdateStats{Branch: name, To: ref.Hash().String()}

	// The transaction takes SQLite's write lock first (BEGIN IMMEDIATE), so that another process
	// updating the same index waits and then starts from the checkpoint this update leaves.
	tx, err := l.db.BeginTx(ctx, nil)
	if err != nil {
		return stats, fmt.Errorf("ledger %s: begin update of %s: %w", l.path, name, err)
	}
	defer func() { _ = tx.Rollback() }() // the transaction open when Update returns, if any
	var cpID int64
	var cpTip string
	var cpCommits int
	var builtWith, builtKeys string
	paths := l.opts.Paths.String()
	keys := keyringDigest(l.opts.OpenPGPKeys)
	err = tx.QueryRowContext(ctx, `SELECT id, tip, commits, paths, keyring FROM branches WHERE name = ?`, name).Scan(&cpID, &cpTip, &cpCommits, &builtWith, &builtKeys)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return stats, fmt.Errorf("ledger %s: read checkpoint of %s: %w", l.path, name, err)
	}
	if cpID != 0 && builtWith != paths {
		// Indexed with other paths, the branch holds other fields: it starts over from its root.
		stats.PathsChanged = true
		cpTip = ""
	}
	if cpID != 0 && builtKeys != keys {
		// Verified against other OpenPGP keys, the branch's commits may prove other authors.
		stats.KeysChanged = true
		cpTip = ""
	}
	stats.From = cpTip
	if cpTip == stats.To {
		l.branch = name
		stats.Duration = time.Since(started)
		return stats, nil
	}

	hist, rebuilt, err := l.walk(ctx, name, ref.Hash(), cpTip)
	if err != nil {
		return stats, err
	}
	defer hist.close()
	stats.Rebuilt = rebuilt

	seq := cpCommits
	if cpID == 0 {
		res, err := tx.ExecContext(ctx, `INSERT INTO branches (name, tip, commits, updated_at, paths, keyring) VALUES (?, '', 0, ?, ?, ?)`, name, time.Now().Unix(), paths, keys)
		if err != nil {
			return stats, fmt.Errorf("ledger %s: add branch %s: %w", l.path, name, err)
		}
		if cpID, err = res.LastInsertId(); err != nil {
			return stats, fmt.Errorf("ledger %s: add branch %s: %w", l.path, name, err)
		}
	} else if stats.Rebuilt || stats.PathsChanged || stats.KeysChanged {
		for _, table := range []string{"commits", "claims", "problems"} {
			if _, err := tx.ExecContext(ctx, `DELETE FROM `+table+` WHERE branch = ?`, cpID); err != nil {
				return stats, fmt.Errorf("ledger %s: clear branch %s to rebuild it: %w", l.path, name, err)
			}
		}
		if _, err := tx.ExecContext(ctx, `UPDATE branches SET tip = '', commits = 0, paths = ?, keyring = ? WHERE id = ?`, paths, keys, cpID); err != nil {
			return stats, fmt.Errorf("ledger %s: clear branch %s to rebuild it: %w", l.path, name, err)
		}
		seq = 0
	}
	w, err := newWriter(ctx, tx, cpID, nil, hist.len() >= l.opts.loadFieldsCommits, l.opts.maxPendingClaims)
	if err != nil {
		return stats, fmt.Errorf("ledger %s: update %s: %w", l.path, name, err)
	}
	defer func() { w.close() }()

	// A pipeline owned by this call: one goroutine reads Git objects, parse workers parse file
	// versions of several commits at once, one goroutine turns commits into records in order, and
	// this call's last goroutine writes SQLite. errgroup cancels the others when one fails, and
	// Wait returns only when all have stopped.
	g, gctx := errgroup.WithContext(ctx)
	// The buffers let the reader run ahead of a slow parse (a regenerated install.yaml) so that
	// every stage stays busy, without holding many commits' file contents at once: measured on
	// argo-cd, 2 and 4 per worker took 26 s, 8 and 24 took 20-22 s for 5% more memory (890 MiB),
	// 16 and 64 took 21 s for 1 GiB.
	workers := max(1, runtime.GOMAXPROCS(0))
	work := make(chan *parseJob, 8*workers)
	ordered := make(chan *parseJob, 24*workers)
	recs := make(chan *record, 64)
	snaps := newSnapCache(l.opts.ParseCacheBytes)
	rd := &reader{repo: l.repo, cache: snaps, maxBytes: l.opts.MaxFileBytes, paths: l.opts.Paths.WithDefaults()}
	rd.blobs = l.openBlobs(ctx)
	// The reader goroutine is the source's only user; by the time this runs, g.Wait has returned.
	defer func() {
		if rd.blobs != nil {
			_ = rd.blobs.Close()
		}
	}()
	// send hands a commit read to the extractor (in order) and to the parse workers.
	send := func(rc rawCommit, signed *object.Commit) error {
		rc.proof = VerifyCommit(signed, l.opts.OpenPGPKeys)
		job := &parseJob{rc: rc, ready: make(chan struct{})}
		// In order first, then to the workers: the extractor may wait on this job only after the
		// workers can see it.
		for _, ch := range []chan *parseJob{ordered, work} {
			select {
			case ch <- job:
			case <-gctx.Done():
				return gctx.Err()
			}
		}
		return nil
	}
	if src, ok := rd.blobs.(aheadBlobs); ok && !hist.readsGoGit() {
		// Two goroutines read: one walks the history and asks git for each commit's blobs, the
		// other receives them and sends the commits on, so that git works while the reader does.
		// (With go-git walking the history they would share go-git's object storage, which is not
		// safe for concurrent use: then one goroutine reads as below.)
		asked := make(chan *askedCommit, 16*workers)
		g.Go(func() error {
			defer close(asked)
			if err := hist.start(gctx); err != nil {
				return fmt.Errorf("ledger: update %s: %w", name, err)
			}
			asking := true
			for range hist.len() {
				rc, signed, err := hist.next(rd)
				if err != nil {
					return fmt.Errorf("ledger: update %s: %w", name, err)
				}
				c := &askedCommit{rc: rc, signed: signed}
				c.reads = rd.claimVersions(&c.rc)
				if asking {
					asking = ask(src, c.reads)
					c.asked = asking
				}
				select {
				case asked <- c:
				case <-gctx.Done():
					return gctx.Err()
				}
			}
			return nil
		})
		g.Go(func() error {
			defer close(work)
			defer close(ordered)
			recv := src
			for c := range asked {
				rd.receive(c, &recv)
				if err := send(c.rc, c.signed); err != nil {
					return err
				}
			}
			return nil
		})
	} else {
		g.Go(func() error {
			defer close(work)
			defer close(ordered)
			if err := hist.start(gctx); err != nil {
				return fmt.Errorf("ledger: update %s: %w", name, err)
			}
			for range hist.len() {
				rc, signed, err := hist.next(rd)
				if err != nil {
					return fmt.Errorf("ledger: update %s: %w", name, err)
				}
				rd.readVersions(&rc)
				if err := send(rc, signed); err != nil {
					return err
				}
			}
			return nil
		})
	}
	for range workers {
		g.Go(func() error {
			for job := range work {
				if err := gctx.Err(); err != nil {
					abandonFiles(&job.rc, snaps, err)
				} else {
					parseFiles(&job.rc, snaps)
				}
				close(job.ready)
			}
			return nil
		})
	}
	g.Go(func() error {
		defer close(recs)
		for job := range ordered {
			select {
			case <-job.ready:
			case <-gctx.Done():
				return gctx.Err()
			}
			rec := extract(job.rc)
			select {
			case recs <- rec:
			case <-gctx.Done():
				return gctx.Err()
			}
		}
		return nil
	})
	// A long replay commits a checkpoint now and then, so that an interrupted update (Ctrl-C, a
	// deploy, a crash) resumes from there instead of from the root.
	// gctx is the pipeline's: it ends when the pipeline does, and a transaction begun with it
	// would be rolled back then. The next transaction belongs to the update, ctx.
	checkpoint := func(gctx context.Context, tip string, seq int) error {
		if _, err := tx.ExecContext(gctx, `UPDATE branches SET tip = ?, commits = ?, updated_at = ? WHERE id = ?`,
			tip, seq, time.Now().Unix(), cpID); err != nil {
			return fmt.Errorf("ledger %s: record checkpoint of %s: %w", l.path, name, err)
		}
		if err := w.flush(gctx); err != nil {
			return fmt.Errorf("ledger %s: update %s: %w", l.path, name, err)
		}
		w.close()
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("ledger %s: commit checkpoint of %s: %w", l.path, name, err)
		}
		if l.opts.afterCheckpoint != nil {
			l.opts.afterCheckpoint()
		}
		if tx, err = l.db.BeginTx(ctx, nil); err != nil {
			return fmt.Errorf("ledger %s: continue update of %s: %w", l.path, name, err)
		}
		// Between the two transactions another process may have updated this branch's index.
		var nowTip string
		var nowCommits int
		if err := tx.QueryRowContext(ctx, `SELECT tip, commits FROM branches WHERE id = ?`, cpID).Scan(&nowTip, &nowCommits); err != nil {
			return fmt.Errorf("ledger %s: read checkpoint of %s: %w", l.path, name, err)
		}
		if nowTip != tip || nowCommits != seq {
			return fmt.Errorf("ledger %s: another process updated %s while this update ran; its work stands: run the update again", l.path, name)
		}
		w, err = newWriter(ctx, tx, cpID, w.fields, false, l.opts.maxPendingClaims)
		return err
	}
	g.Go(func() error {
		written, lastCheckpoint := 0, time.Now()
		for rec := range recs {
			seq++
			if err := w.write(gctx, seq, rec); err != nil {
				return fmt.Errorf("ledger %s: update %s: commit %s: %w", l.path, name, rec.hash, err)
			}
			stats.Commits++
			stats.Claims += len(rec.claims)
			stats.Problems += len(rec.problems)
			if l.opts.Progress != nil {
				l.opts.Progress(Progress{Branch: name, Done: stats.Commits, Total: hist.len()})
			}
			if written++; written >= l.opts.CheckpointCommits || time.Since(lastCheckpoint) >= l.opts.CheckpointInterval {
				if stats.Commits < hist.len() {
					if err := checkpoint(gctx, rec.hash, seq); err != nil {
						return err
					}
				}
				written, lastCheckpoint = 0, time.Now()
			}
		}
		return nil
	})
	if err := g.Wait(); err != nil {
		if ctx.Err() != nil {
			return stats, fmt.Errorf("ledger: update %s stopped after %d of %d commits (the index keeps its last checkpoint; the next update resumes there): %w",
				name, stats.Commits, hist.len(), ctx.Err())
		}
		return stats, err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE branches SET tip = ?, commits = ?, updated_at = ? WHERE id = ?`,
		stats.To, seq, time.Now().Unix(), cpID); err != nil {
		return stats, fmt.Errorf("ledger %s: record checkpoint of %s: %w", l.path, name, err)
	}
	if err := w.flush(ctx); err != nil {
		return stats, fmt.Errorf("ledger %s: update %s: %w", l.path, name, err)
	}
	w.close()
	if err := tx.Commit(); err != nil {
		return stats, fmt.Errorf("ledger %s: commit update of %s: %w", l.path, name, err)
	}
	l.branch = name
	stats.Duration = time.Since(started)
	l.opts.Logger.Info("ledger updated", "branch", name, "from", stats.From, "to", stats.To, "commits", stats.Commits,
		"claims", stats.Claims, "problems", stats.Problems, "rebuilt", stats.Rebuilt, "duration", stats.Duration)
	return stats, nil
}

// resolveBranch finds the reference a branch name means.
func (l *Ledger) resolveBranch(branch string) (*plumbing.Reference, error) {
	if branch == "" {
		b, err := l.DefaultBranch()
		if err != nil {
			return nil, err
		}
		branch = b
	}
	var candidates []plumbing.ReferenceName
	if strings.HasPrefix(branch, "refs/") {
		candidates = []plumbing.ReferenceName{plumbing.ReferenceName(branch)}
	} else {
		candidates = []plumbing.ReferenceName{plumbing.NewBranchReferenceName(branch), plumbing.ReferenceName("refs/remotes/" + branch)}
	}
	for _, c := range candidates {
		ref, err := l.repo.Reference(c, true)
		if err == nil {
			// Keep the branch's own name even when it is a symbolic ref.
			return plumbing.NewHashReference(c, ref.Hash()), nil
		}
		if !errors.Is(err, plumbing.ErrReferenceNotFound) {
			return nil, fmt.Errorf("ledger: resolve branch %q in %s: %w", branch, l.gitDir, err)
		}
	}
	return nil, fmt.Errorf("ledger: branch %q in %s: %w", branch, l.gitDir, ErrNoBranch)
}
