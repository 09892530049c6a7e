package inspect

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settlehq/settle/settle"
)

var (
	sqlDeliveryCount    = mustQuery("delivery_count.sql")
	sqlOpenCases        = mustQuery("reconcile_open_cases.sql")
	sqlDeliveryTimeline = mustQuery("delivery_timeline.sql")
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

// OutcomeBucket is the number of deliveries with one outcome in one hour.
type OutcomeBucket struct {
	Hour    time.Time `json:"hour"`
	Outcome string    `json:"outcome"`
	Count   int64     `json:"count"`
}

// OutcomeTimeline counts deliveries per hour and outcome since since: the
// overview's outcomes over time.
func (s *Store) OutcomeTimeline(ctx context.Context, since time.Time) ([]OutcomeBucket, error) {
	rows, err := s.pool.Query(ctx, sqlDeliveryTimeline, since)
	if err != nil {
		return nil, wrapStoreErr("count deliveries per hour", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (OutcomeBucket, error) {
		var b OutcomeBucket
		err := r.Scan(&b.Hour, &b.Outcome, &b.Count)
		return b, err
	})
	if err != nil {
		return nil, wrapStoreErr("count deliveries per hour", err)
	}
	if out == nil {
		out = []OutcomeBucket{}
	}
	return out, nil
}

var sqlSettledTimes = mustQuery("settled_times.sql")

// SettledTime is when a settled identity was first seen and when the
// transaction that settled it began.
type SettledTime struct {
	Identity  string // tenant/period/record/operation
	FirstSeen time.Time
	TxBegan   time.Time
}

// SettledTimes lists every settled identity's times (the benchmark's
// latency stages).
func (s *Store) SettledTimes(ctx context.Context) ([]SettledTime, error) {
	rows, err := s.pool.Query(ctx, sqlSettledTimes)
	if err != nil {
		return nil, wrapStoreErr("read settled times", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (SettledTime, error) {
		var t SettledTime
		return t, r.Scan(&t.Identity, &t.FirstSeen, &t.TxBegan)
	})
	if err != nil {
		return nil, wrapStoreErr("read settled times", err)
	}
	return out, nil
}
