package inspect

import (
	"context"
	"time"

	"github.com/settlehq/settle/canary"
	"github.com/settlehq/settle/settle/dberr"
	"github.com/settlehq/settle/settle/internal/db"
	"github.com/settlehq/settle/settle/message"
)

// OutcomeCount is the number of deliveries with one outcome and reason.
type OutcomeCount struct {
	Outcome message.Outcome
	Reason  string
	Count   int64
}

// OutcomeCounts counts every delivery by outcome and reason, for summaries.
func (s *Store) OutcomeCounts(ctx context.Context) ([]OutcomeCount, error) {
	rows, err := db.On(s.pool).DeliveryCount(ctx)
	if err != nil {
		return nil, dberr.Wrap("count deliveries", err)
	}
	var out []OutcomeCount
	for _, r := range rows {
		out = append(out, OutcomeCount{Outcome: message.Outcome(r.Outcome), Reason: r.Reason, Count: r.Count})
	}
	return out, nil
}

// OpenConflictCases counts the open conflict cases (for the gauge).
func (s *Store) OpenConflictCases(ctx context.Context) (int64, error) {
	n, err := db.On(s.pool).ReconcileOpenCases(ctx)
	if err != nil {
		return 0, dberr.Wrap("count open conflict cases", err)
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
// overview's outcomes over time, of one tenant ("" = every tenant but the
// canary's).
func (s *Store) OutcomeTimeline(ctx context.Context, tenant string, since time.Time) ([]OutcomeBucket, error) {
	rows, err := db.On(s.pool).DeliveryTimeline(ctx, db.DeliveryTimelineParams{Since: since, Tenant: tenant, Hidden: canary.Tenant})
	if err != nil {
		return nil, dberr.Wrap("count deliveries per hour", err)
	}
	out := make([]OutcomeBucket, 0, len(rows))
	for _, r := range rows {
		out = append(out, OutcomeBucket{Hour: r.Hour, Outcome: r.Outcome, Count: r.Count})
	}
	return out, nil
}

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
	rows, err := db.On(s.pool).SettledTimes(ctx)
	if err != nil {
		return nil, dberr.Wrap("read settled times", err)
	}
	out := make([]SettledTime, 0, len(rows))
	for _, r := range rows {
		out = append(out, SettledTime{Identity: r.Identity, FirstSeen: r.FirstSeenAt, TxBegan: r.LastAttemptedAt})
	}
	return out, nil
}

// Attention is what the overview puts first.
type Attention struct {
	// DeadLettersSince counts the dead letters written since the time
	// asked for (the overview asks for the last 24 hours).
	DeadLettersSince int64 `json:"dead_letters_since"`
	// Waiting counts the records still waiting for their target;
	// OldestWaitingSeconds is how long the oldest has waited (0: none).
	Waiting              int64 `json:"waiting"`
	OldestWaitingSeconds int64 `json:"oldest_waiting_seconds"`
	// OldestWaiting is that record (absent when none waits).
	OldestWaiting *RecordRef `json:"oldest_waiting,omitempty"`
}

// RecordRef names one record: its tenant, period and record_id.
type RecordRef struct {
	TenantID      string `json:"tenant_id"`
	AccountPeriod string `json:"account_period"`
	RecordID      string `json:"record_id"`
}

// Attention reads what the overview puts first, of one tenant ("" = every
// tenant but the canary's).
func (s *Store) Attention(ctx context.Context, tenant string, since time.Time) (*Attention, error) {
	r, err := db.On(s.pool).Attention(ctx, db.AttentionParams{Since: since, Tenant: tenant, Hidden: canary.Tenant})
	if err != nil {
		return nil, dberr.Wrap("count what needs attention", err)
	}
	a := &Attention{DeadLettersSince: r.DeadLettersSince, Waiting: r.Waiting, OldestWaitingSeconds: r.OldestWaitingSeconds}
	if len(r.OldestWaiting) == 3 {
		a.OldestWaiting = &RecordRef{TenantID: r.OldestWaiting[0], AccountPeriod: r.OldestWaiting[1], RecordID: r.OldestWaiting[2]}
	}
	return a, nil
}

// SettledHour is what settled in one hour in one currency: the records
// that moved an account of it, what they charged (the balance rows below
// zero, as a positive sum) and what they credited (the rows above zero),
// each a decimal as PostgreSQL's numeric prints it.
type SettledHour struct {
	Hour     time.Time `json:"hour"`
	Currency string    `json:"currency"`
	Settled  int64     `json:"settled"`
	Charged  string    `json:"charged"`
	Credited string    `json:"credited"`
}

// SettledByHour reads the settled records and amounts per hour and
// currency since since, of one tenant ("" = every tenant but the
// canary's, whose records are the service testing itself).
func (s *Store) SettledByHour(ctx context.Context, tenant string, since time.Time) ([]SettledHour, error) {
	rows, err := db.On(s.pool).SettledByHour(ctx, db.SettledByHourParams{Since: since, Tenant: tenant, Hidden: canary.Tenant})
	if err != nil {
		return nil, dberr.Wrap("sum settled amounts per hour", err)
	}
	out := make([]SettledHour, 0, len(rows))
	for _, r := range rows {
		out = append(out, SettledHour{Hour: r.Hour, Currency: r.Currency, Settled: r.Settled, Charged: r.Charged, Credited: r.Credited})
	}
	return out, nil
}
