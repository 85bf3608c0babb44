package webhooks

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// Pruning is what the Retention needs of the store.
type Pruning interface {
	Prune(ctx context.Context, doneBefore, deadBefore time.Time) (deleted int, err error)
}

// Retention deletes stored deliveries once they are past their keeping: done ones after Done,
// dead letters after Dead (longer, so there is time to look at them and replay them). Without
// it the store grows with every delivery ever received. Deleting a delivery forgets its ID and
// body too: a redelivery or a replay of it after that is stored again, so keep Done above
// GitHub's 3 days of redelivery.
type Retention struct {
	Store Pruning
	// Done and Dead are how long done and dead-lettered deliveries are kept after they
	// finished; zero keeps them for ever.
	Done, Dead time.Duration
	// Every is how often Run prunes. Default: an hour, or a tenth of the shorter retention
	// when that is less.
	Every   time.Duration
	Metrics *Metrics
	Logger  *slog.Logger
	// Now defaults to time.Now.
	Now func() time.Time
}

// PruneOnce deletes what is past its retention at the time and returns how many deliveries it
// deleted.
func (r *Retention) PruneOnce(ctx context.Context) (int, error) {
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	var doneBefore, deadBefore time.Time
	if r.Done > 0 {
		doneBefore = now().Add(-r.Done)
	}
	if r.Dead > 0 {
		deadBefore = now().Add(-r.Dead)
	}
	if doneBefore.IsZero() && deadBefore.IsZero() {
		return 0, nil
	}
	n, err := r.Store.Prune(ctx, doneBefore, deadBefore)
	if n > 0 && r.Metrics != nil {
		r.Metrics.pruned.Add(float64(n))
	}
	return n, err
}

// Run prunes at once and then every Every until ctx ends. A failed prune is logged and tried
// again at the next tick: the deliveries stay, nothing is lost.
func (r *Retention) Run(ctx context.Context) {
	every := r.Every
	if every <= 0 {
		every = time.Hour
		for _, d := range []time.Duration{r.Done, r.Dead} {
			if d > 0 {
				every = min(every, max(d/10, time.Second))
			}
		}
	}
	log := orDiscard(r.Logger)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		n, err := r.PruneOnce(ctx)
		switch {
		case err != nil && !errors.Is(err, context.Canceled):
			log.Warn("pruning deliveries failed", slog.String(LogKeyError, err.Error()))
		case n > 0:
			log.Info("deliveries pruned", slog.Int("deleted", n))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
