package service

import (
	"context"
	"log/slog"
	"time"

	"github.com/settlehq/settle/settle/retention"
)

// sweepStore is what the sweeper needs of the store; *settle.Store
// implements it. Each method settles what it finds under each item's own
// identity and returns how many items it handled.
type sweepStore interface {
	ExpireHolds(ctx context.Context) (int, error)
	WakeWaiting(ctx context.Context) (int, error)
	SweepOrphans(ctx context.Context, orphanAfter time.Duration) (int, error)
}

// pruner is what the sweeper needs to prune operational history;
// *retention.Store implements it.
type pruner interface {
	Prune(ctx context.Context, opts retention.Options) ([]retention.Count, error)
}

// sweeper runs the core's periodic work: releasing expired holds nobody
// looks at, settling operations whose target has settled since, and
// handling operations that waited past the orphan timeout.
type sweeper struct {
	store       sweepStore
	pruner      pruner
	orphanAfter time.Duration
	interval    time.Duration
	log         *slog.Logger

	// pruneEvery > 0: operational history is pruned at most this often
	// (the first time one interval after start), dead letters older than
	// pruneDeadLettersAfter (> 0) with it.
	pruneEvery            time.Duration
	pruneDeadLettersAfter time.Duration
	pruneCanaryKeep       time.Duration // > 0: the canary's older accounts too
	lastPrune             time.Time
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
		s.prune(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// prune removes operational history when pruneEvery has passed since the
// last time (or since the sweeper started). A failure is logged and tried
// again next round.
func (s *sweeper) prune(ctx context.Context) {
	now := time.Now()
	if s.lastPrune.IsZero() {
		s.lastPrune = now
	}
	if s.pruneEvery <= 0 || now.Sub(s.lastPrune) < s.pruneEvery || ctx.Err() != nil {
		return
	}
	opts := retention.Options{}
	if s.pruneDeadLettersAfter > 0 {
		opts.DeadLettersBefore = now.Add(-s.pruneDeadLettersAfter)
	}
	if s.pruneCanaryKeep > 0 {
		opts.CanaryBefore = now.Add(-s.pruneCanaryKeep)
	}
	cs, err := s.pruner.Prune(ctx, opts)
	if err != nil {
		s.log.Warn("prune failed; trying again later", "err", err)
		return
	}
	s.lastPrune = now
	args := []any{}
	for _, c := range cs {
		args = append(args, c.Table, c.Rows)
	}
	s.log.Info("pruned operational history", args...)
}
