package inspect

import (
	"context"

	"github.com/settlehq/settle/settle"
)

var (
	sqlDeliveryCount = mustQuery("delivery_count.sql")
	sqlOpenCases     = mustQuery("reconcile_open_cases.sql")
)

// OutcomeCount is the number of deliveries with one outcome and reason.
type OutcomeCount struct {
	Outcome settle.Outcome
	Reason  string
	Count   int64
}

// OutcomeCounts counts every delivery by outcome and reason, for summaries.
func (s *Store) OutcomeCounts(ctx context.Context) ([]OutcomeCount, error) {
	rows, err := s.pool.Query(ctx, sqlDeliveryCount)
	if err != nil {
		return nil, wrapStoreErr("count deliveries", err)
	}
	defer rows.Close()
	var out []OutcomeCount
	for rows.Next() {
		var c OutcomeCount
		if err := rows.Scan(&c.Outcome, &c.Reason, &c.Count); err != nil {
			return nil, wrapStoreErr("count deliveries", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, wrapStoreErr("count deliveries", err)
	}
	return out, nil
}

// OpenConflictCases counts the open conflict cases (for the gauge).
func (s *Store) OpenConflictCases(ctx context.Context) (int64, error) {
	var n int64
	if err := s.pool.QueryRow(ctx, sqlOpenCases).Scan(&n); err != nil {
		return 0, wrapStoreErr("count open conflict cases", err)
	}
	return n, nil
}
