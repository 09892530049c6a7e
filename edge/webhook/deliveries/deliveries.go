// Package deliveries owns the webhook rows: the deliveries of settlements to
// an external endpoint, as table webhook_deliveries holds them, and the
// fenced writes that move them along. Package edge/webhook sends them over
// HTTP through a Store.
//
// The settling transaction queues the deliveries, not this package: a
// trigger on the outbox (outbox_webhook_enqueue) puts every outbox row of a
// subscribed topic on webhook_deliveries inside the transaction that writes
// it, so none is skipped. Each delivery is claimed by one attempt with a
// lease; only that attempt can mark it done, retried or dead (a write fenced
// on its attempt id, dberr.ErrClaimLost otherwise). A lease that runs out is
// taken over by the next claim, which gives the row a new attempt id. Right
// before it POSTs, an attempt renews its lease and counts the send
// (StartAttempt): the column attempts counts sends started, not claims, and
// failures the attempts that finished and failed.
//
// Its statements are the files in sql/, one per table, run through the
// methods sqlc generates from them (internal/db). It never settles anything, never
// writes the outbox and never speaks HTTP; its errors say what was being
// done and carry dberr.ErrUnavailable when the database itself failed
// (dberr.Wrap).
package deliveries

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/settlehq/settle/edge/webhook/deliveries/internal/db"
	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/dberr"
)

// ClaimDeliveriesMax bounds the deliveries of one claim.
const ClaimDeliveriesMax = 1000

// Store reads and writes the webhook rows of one settle database.
type Store struct {
	pool *pgxpool.Pool
}

// New returns the webhook rows of the database of s, over its pool.
func New(s *settle.Store) *Store { return &Store{pool: s.Pool()} }

// Delivery is one claimed delivery of a settlement.
type Delivery struct {
	ID        int64
	OutboxID  int64
	AttemptID string
	// Sent counts the sends of this delivery started before this claim.
	Sent int
	// Failed counts the attempts before this claim that finished and
	// failed. Sent - Failed sends never wrote a result (their attempt
	// crashed or stalled).
	Failed int
	// TookOver says the claim took the delivery over from an attempt whose
	// lease ran out before it wrote a result (it crashed or stalled).
	TookOver bool
	// Attempt is the number of this attempt's send, Sent+1, once
	// StartAttempt counted it; 0 before.
	Attempt      int
	TenantID     string
	SettlementID string
	// Body is the settlement message, as on the settlements topic.
	Body []byte
}

// DeadLetter is a delivery given up: its last attempt failed, or too many
// of its sends never wrote a result.
type DeadLetter struct {
	ID           int64  `json:"id"`
	TenantID     string `json:"tenant_id"`
	SettlementID string `json:"settlement_id"`
	OutboxID     int64  `json:"outbox_id"`
	// Attempts counts the sends started; Failures the attempts that
	// finished and failed.
	Attempts   int       `json:"attempts"`
	Failures   int       `json:"failures"`
	LastStatus int       `json:"last_status,omitempty"`
	LastError  string    `json:"last_error"`
	DeadAt     time.Time `json:"dead_at"`
}

// Subscribe queues every outbox row of topic written from now on for
// webhook delivery. Rows written before are not queued.
func (s *Store) Subscribe(ctx context.Context, topic string) error {
	if err := db.On(s.pool).WebhookSubscribe(ctx, topic); err != nil {
		return dberr.Wrap("subscribe webhook to topic "+topic, err)
	}
	return nil
}

// Subscription tells whether the outbox rows of topic are queued for
// webhook delivery (ok), since when, and how many deliveries wait to be
// sent: a service started without a webhook URL warns when they are.
func (s *Store) Subscription(ctx context.Context, topic string) (since time.Time, waiting int64, ok bool, err error) {
	rows, err := db.On(s.pool).WebhookSubscription(ctx, topic)
	if err != nil {
		return time.Time{}, 0, false, dberr.Wrap("read the webhook subscription of topic "+topic, err)
	}
	if len(rows) == 0 {
		return time.Time{}, 0, false, nil
	}
	return rows[0].CreatedAt, rows[0].Waiting, true, nil
}

// Claim claims up to limit deliveries that are due, or whose lease expired,
// each for a new attempt holding a lease of lease.
func (s *Store) Claim(ctx context.Context, limit int, lease time.Duration) ([]Delivery, error) {
	if limit <= 0 || limit > ClaimDeliveriesMax {
		return nil, fmt.Errorf("claim webhook deliveries: limit %d must be between 1 and %d", limit, ClaimDeliveriesMax)
	}
	if lease < time.Millisecond {
		return nil, fmt.Errorf("claim webhook deliveries: lease %s is too short", lease)
	}
	rows, err := db.On(s.pool).WebhookClaim(ctx, db.WebhookClaimParams{MaxRows: int32(limit), LeaseMs: lease.Milliseconds()})
	if err != nil {
		return nil, dberr.Wrap("claim webhook deliveries", err)
	}
	out := make([]Delivery, len(rows))
	for i, r := range rows {
		out[i] = Delivery{ID: r.ID, OutboxID: r.OutboxID, AttemptID: r.AttemptID, Sent: int(r.Attempts), Failed: int(r.Failures),
			TookOver: r.TookOver, TenantID: r.TenantID, SettlementID: r.SettlementID, Body: r.Body}
	}
	return out, nil
}

// StartAttempt is called right before d is sent: it renews d's lease to
// lease from now and counts the send, setting d.Attempt. It returns
// dberr.ErrClaimLost, and changes nothing, when d's attempt no longer owns
// the delivery: then d must not be sent. A lease that lapsed without being
// taken over is still d's (the takeover changes the attempt id), so it is
// renewed.
func (s *Store) StartAttempt(ctx context.Context, d *Delivery, lease time.Duration) error {
	what := fmt.Sprintf("start webhook attempt: delivery %d settlement=%s", d.ID, d.SettlementID)
	if lease < time.Millisecond {
		return fmt.Errorf("%s: lease %s is too short", what, lease)
	}
	attempts, err := db.On(s.pool).WebhookAttemptStart(ctx, db.WebhookAttemptStartParams{ID: d.ID, AttemptID: d.AttemptID, LeaseMs: lease.Milliseconds()})
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%s: %w", what, dberr.ErrClaimLost)
	}
	if err != nil {
		return dberr.Wrap(what, err)
	}
	d.Attempt = int(attempts)
	return nil
}

// Complete marks d delivered (the receiver answered httpStatus). It
// returns dberr.ErrClaimLost, and changes nothing, when d's attempt no
// longer owns the delivery.
func (s *Store) Complete(ctx context.Context, d Delivery, httpStatus int) error {
	return fenced(d, "complete")(db.On(s.pool).WebhookComplete(ctx, db.WebhookCompleteParams{ID: d.ID, AttemptID: d.AttemptID, HttpStatus: int32(httpStatus)}))
}

// Retry counts d's failed attempt and puts d back to be tried again after
// backoff. Fenced like Complete.
func (s *Store) Retry(ctx context.Context, d Delivery, backoff time.Duration, httpStatus int, errText string) error {
	return fenced(d, "retry")(db.On(s.pool).WebhookRetry(ctx, db.WebhookRetryParams{
		ID: d.ID, AttemptID: d.AttemptID, BackoffMs: backoff.Milliseconds(), HttpStatus: int32(httpStatus), ErrorText: errText,
	}))
}

// DeadLetter gives d up (view webhook_dead_letters). When d's attempt sent
// it (StartAttempt), its failure is counted. Fenced like Complete.
func (s *Store) DeadLetter(ctx context.Context, d Delivery, httpStatus int, errText string) error {
	failed := 0
	if d.Attempt > 0 {
		failed = 1
	}
	return fenced(d, "dead-letter")(db.On(s.pool).WebhookDead(ctx, db.WebhookDeadParams{
		ID: d.ID, AttemptID: d.AttemptID, HttpStatus: int32(httpStatus), ErrorText: errText, Failed: int32(failed),
	}))
}

// fenced judges one write of d's attempt, guarded on the delivery and its
// attempt id: no row changed means the attempt no longer owns the
// delivery.
func fenced(d Delivery, what string) func(rows int64, err error) error {
	return func(rows int64, err error) error {
		what := fmt.Sprintf("%s webhook delivery %d settlement=%s attempt=%d", what, d.ID, d.SettlementID, d.Attempt)
		if err != nil {
			return dberr.Wrap(what, err)
		}
		if rows == 0 {
			return fmt.Errorf("%s: %w", what, dberr.ErrClaimLost)
		}
		return nil
	}
}

// DeadLetters lists up to limit dead-lettered deliveries, oldest first.
func (s *Store) DeadLetters(ctx context.Context, limit int) ([]DeadLetter, error) {
	rows, err := db.On(s.pool).WebhookDeadList(ctx, int32(limit))
	if err != nil {
		return nil, dberr.Wrap("list webhook dead letters", err)
	}
	out := make([]DeadLetter, len(rows))
	for i, r := range rows {
		out[i] = DeadLetter{ID: r.ID, TenantID: r.TenantID, SettlementID: r.SettlementID, OutboxID: r.OutboxID,
			Attempts: int(r.Attempts), Failures: int(r.Failures), LastStatus: int(r.LastStatus), LastError: r.LastError}
		if r.DeadAt != nil {
			out[i].DeadAt = *r.DeadAt
		}
	}
	return out, nil
}
