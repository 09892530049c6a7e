package settle

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settlehq/settle/internal/pgq"
	"github.com/settlehq/settle/settle/internal/db"
	"github.com/settlehq/settle/settle/internal/state"
)

// ClosePeriod marks a tenant's period closed: its later records still
// settle and are flagged late. Closing a closed period changes nothing
// (already is true). It holds the period's lock exclusively (state.PeriodLocks),
// so it waits for the transactions settling in the period, and every
// settlement committed after it returns is flagged late.
func (s *Store) ClosePeriod(ctx context.Context, tenant, period, by string) (already bool, err error) {
	err = pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
		p := pgq.NewPipeline(tx)
		defer p.Close() // for the early returns; the last step is Send
		q := db.New(p)
		lock := state.WholePeriod(tenant, period).Queue(ctx, q)
		closed := q.PeriodClose(ctx, []db.PeriodCloseParams{{TenantID: tenant, AccountPeriod: period, ClosedBy: by}})
		if err := pgq.Run(lock.Exec); err != nil {
			return fmt.Errorf("lock period: %w", err)
		}
		var err error
		closed.QueryRow(func(_ int, _ time.Time, e error) { err = e })
		if errors.Is(err, pgx.ErrNoRows) {
			already = true
			err = nil
		}
		if err != nil {
			return fmt.Errorf("mark period closed: %w", err)
		}
		return p.Send(ctx)
	})
	if err != nil {
		return false, fmt.Errorf("close period tenant=%s period=%s: %w", tenant, period, err)
	}
	return already, nil
}
