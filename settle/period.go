package settle

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

var sqlPeriodClose = mustQuery("period_close.sql")

// ClosePeriod marks a tenant's period closed: its later records still
// settle and are flagged late. Closing a closed period changes nothing
// (already is true). It holds the period's lock exclusively (periodLocks),
// so it waits for the transactions settling in the period, and every
// settlement committed after it returns is flagged late.
func (s *Store) ClosePeriod(ctx context.Context, tenant, period, by string) (already bool, err error) {
	err = pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		wholePeriod(tenant, period).queue(b)
		b.Queue(sqlPeriodClose, tenant, period, by)
		br := tx.SendBatch(ctx, b)
		defer func() { _ = br.Close() }() // for the early returns; the last step checks Close
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("lock period: %w", err)
		}
		var at time.Time
		err := br.QueryRow().Scan(&at)
		if errors.Is(err, pgx.ErrNoRows) {
			already = true
			err = nil
		}
		if err != nil {
			return fmt.Errorf("mark period closed: %w", err)
		}
		return br.Close()
	})
	if err != nil {
		return false, fmt.Errorf("close period tenant=%s period=%s: %w", tenant, period, err)
	}
	return already, nil
}
