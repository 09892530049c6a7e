package service

import (
	"context"
	"log/slog"
	"time"
)

// sweepStore is what the sweeper needs of the store; *settle.Store
// implements it. Each method settles what it finds under each item's own
// identity and returns how many items it handled.
type sweepStore interface {
	ExpireHolds(ctx context.Context) (int, error)
	WakeWaiting(ctx context.Context) (int, error)
	SweepOrphans(ctx context.Context, orphanAfter time.Duration) (int, error)
}

// sweeper runs the core's periodic work: releasing expired holds nobody
// looks at, settling operations whose target has settled since, and
// handling operations that waited past the orphan timeout.
type sweeper struct {
	store       sweepStore
	orphanAfter time.Duration
	interval    time.Duration
	log         *slog.Logger
}

// run sweeps every interval until ctx ends. A failed sweep is logged and
// tried again next time: its work is idempotent (each item is settled under
// its own identity).
func (s *sweeper) run(ctx context.Context) {
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		for _, job := range []struct {
			name string
			do   func(context.Context) (int, error)
		}{
			{"hold expiry", s.store.ExpireHolds},
			{"waiting operations whose target settled", s.store.WakeWaiting},
			{"orphans", func(ctx context.Context) (int, error) { return s.store.SweepOrphans(ctx, s.orphanAfter) }},
		} {
			for ctx.Err() == nil {
				n, err := job.do(ctx)
				if err != nil {
					s.log.Warn("sweep failed; trying again later", "job", job.name, "err", err)
					break
				}
				if n == 0 {
					break
				}
				s.log.Info("swept", "job", job.name, "items", n)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
