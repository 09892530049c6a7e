// Package webhooks owns the webhook rows: the deliveries of settlements to
// an external endpoint, as table webhook_deliveries holds them, and the
// fenced writes that move them along. Package edge/webhook sends them over
// HTTP through a Store.
//
// The settling transaction queues the deliveries, not this package: a
// trigger on the outbox (outbox_webhook_enqueue) puts every outbox row of a
// subscribed topic on webhook_deliveries inside the transaction that writes
// it, so none is skipped. Each delivery is claimed by one attempt with a
// lease; only that attempt can mark it done, retried or dead (a write fenced
// on its attempt id, settle.ErrClaimLost otherwise). A lease that runs out is
// taken over by the next claim, which gives the row a new attempt id. Right
// before it POSTs, an attempt renews its lease and counts the send
// (StartAttempt): the column attempts counts sends started, not claims, and
// failures the attempts that finished and failed.
//
// Its statements are the files in sql/. It never settles anything, never
// writes the outbox and never speaks HTTP; its errors say what was being
// done and carry settle.ErrUnavailable when the database itself failed
// (settle.StoreError).
package webhooks

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/settlehq/settle/settle"
)

// ClaimDeliveriesMax bounds the deliveries of one claim.
const ClaimDeliveriesMax = 1000

// Store reads and writes the webhook rows of one settle database.
type Store struct {
	pool *pgxpool.Pool
}

// New returns the webhook rows of the database of s, over its pool.
func New(s *settle.Store) *Store { return &Store{pool: s.Pool()} }

//go:embed sql/*.sql
var sqlFiles embed.FS

// mustQuery loads one embedded query; a missing file is a build defect.
func mustQuery(name string) string {
	b, err := sqlFiles.ReadFile("sql/" + name)
	if err != nil {
		panic(errors.New("webhooks: missing embedded query " + name))
	}
	return string(b)
}

var (
	sqlSubscribe = mustQuery("webhook_subscribe.sql")
	sqlClaim     = mustQuery("webhook_claim.sql")
	sqlStart     = mustQuery("webhook_attempt_start.sql")
	sqlComplete  = mustQuery("webhook_complete.sql")
	sqlRetry     = mustQuery("webhook_retry.sql")
	sqlDead      = mustQuery("webhook_dead.sql")
	sqlDeadList  = mustQuery("webhook_dead_list.sql")
)

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
	if _, err := s.pool.Exec(ctx, sqlSubscribe, topic); err != nil {
		return settle.StoreError("subscribe webhook to topic "+topic, err)
	}
	return nil
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
	rows, err := s.pool.Query(ctx, sqlClaim, limit, lease.Milliseconds())
	if err != nil {
		return nil, settle.StoreError("claim webhook deliveries", err)
	}
	defer rows.Close()
	var out []Delivery
	for rows.Next() {
		var d Delivery
		if err := rows.Scan(&d.ID, &d.OutboxID, &d.AttemptID, &d.Sent, &d.Failed, &d.TookOver, &d.TenantID, &d.SettlementID, &d.Body); err != nil {
			return nil, settle.StoreError("claim webhook deliveries", err)
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, settle.StoreError("claim webhook deliveries", err)
	}
	return out, nil
}

// StartAttempt is called right before d is sent: it renews d's lease to
// lease from now and counts the send, setting d.Attempt. It returns
// settle.ErrClaimLost, and changes nothing, when d's attempt no longer owns
// the delivery: then d must not be sent. A lease that lapsed without being
// taken over is still d's (the takeover changes the attempt id), so it is
// renewed.
func (s *Store) StartAttempt(ctx context.Context, d *Delivery, lease time.Duration) error {
	what := fmt.Sprintf("start webhook attempt: delivery %d settlement=%s", d.ID, d.SettlementID)
	if lease < time.Millisecond {
		return fmt.Errorf("%s: lease %s is too short", what, lease)
	}
	var attempts int
	err := s.pool.QueryRow(ctx, sqlStart, d.ID, d.AttemptID, lease.Milliseconds()).Scan(&attempts)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%s: %w", what, settle.ErrClaimLost)
	}
	if err != nil {
		return settle.StoreError(what, err)
	}
	d.Attempt = attempts
	return nil
}

// Complete marks d delivered (the receiver answered httpStatus). It
// returns settle.ErrClaimLost, and changes nothing, when d's attempt no
// longer owns the delivery.
func (s *Store) Complete(ctx context.Context, d Delivery, httpStatus int) error {
	return s.fenced(ctx, d, "complete", sqlComplete, httpStatus)
}

// Retry counts d's failed attempt and puts d back to be tried again after
// backoff. Fenced like Complete.
func (s *Store) Retry(ctx context.Context, d Delivery, backoff time.Duration, httpStatus int, errText string) error {
	return s.fenced(ctx, d, "retry", sqlRetry, backoff.Milliseconds(), httpStatus, errText)
}

// DeadLetter gives d up (view webhook_dead_letters). When d's attempt sent
// it (StartAttempt), its failure is counted. Fenced like Complete.
func (s *Store) DeadLetter(ctx context.Context, d Delivery, httpStatus int, errText string) error {
	failed := 0
	if d.Attempt > 0 {
		failed = 1
	}
	return s.fenced(ctx, d, "dead-letter", sqlDead, httpStatus, errText, failed)
}

// fenced runs one write of d's attempt: sql's first two parameters are
// the delivery and its attempt id, and no row changed means the attempt no
// longer owns the delivery.
func (s *Store) fenced(ctx context.Context, d Delivery, what, sql string, args ...any) error {
	tag, err := s.pool.Exec(ctx, sql, append([]any{d.ID, d.AttemptID}, args...)...)
	what = fmt.Sprintf("%s webhook delivery %d settlement=%s attempt=%d", what, d.ID, d.SettlementID, d.Attempt)
	if err != nil {
		return settle.StoreError(what, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%s: %w", what, settle.ErrClaimLost)
	}
	return nil
}

// DeadLetters lists up to limit dead-lettered deliveries, oldest first.
func (s *Store) DeadLetters(ctx context.Context, limit int) ([]DeadLetter, error) {
	rows, err := s.pool.Query(ctx, sqlDeadList, limit)
	if err != nil {
		return nil, settle.StoreError("list webhook dead letters", err)
	}
	defer rows.Close()
	var out []DeadLetter
	for rows.Next() {
		var d DeadLetter
		if err := rows.Scan(&d.ID, &d.TenantID, &d.SettlementID, &d.OutboxID, &d.Attempts, &d.Failures, &d.LastStatus, &d.LastError, &d.DeadAt); err != nil {
			return nil, settle.StoreError("list webhook dead letters", err)
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, settle.StoreError("list webhook dead letters", err)
	}
	return out, nil
}
