package settle

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Webhook delivery of settlements (package edge sends them): the outbox
// rows of a subscribed topic are queued in table webhook_deliveries by a
// trigger, inside the settling transaction, so none is skipped. Each
// delivery is claimed by one attempt with a lease; only that attempt can
// mark it done, retried or dead (fenced writes). A lease that runs out is
// taken over by the next claim, which gives the row a new attempt id.
// Right before it POSTs, an attempt renews its lease and counts the send
// (StartWebhookAttempt): the column attempts counts sends started, not
// claims, and failures the attempts that finished and failed.

var (
	sqlWebhookSubscribe = mustQuery("webhook_subscribe.sql")
	sqlWebhookClaim     = mustQuery("webhook_claim.sql")
	sqlWebhookStart     = mustQuery("webhook_attempt_start.sql")
	sqlWebhookComplete  = mustQuery("webhook_complete.sql")
	sqlWebhookRetry     = mustQuery("webhook_retry.sql")
	sqlWebhookDead      = mustQuery("webhook_dead.sql")
	sqlWebhookDeadList  = mustQuery("webhook_dead_list.sql")
)

// webhookClaimMax bounds one claim.
const webhookClaimMax = 1000

// WebhookDelivery is one claimed delivery of a settlement.
type WebhookDelivery struct {
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
	// StartWebhookAttempt counted it; 0 before.
	Attempt      int
	TenantID     string
	SettlementID string
	// Body is the settlement message, as on the settlements topic.
	Body []byte
}

// WebhookDeadLetter is a delivery given up: its last attempt failed, or
// too many of its sends never wrote a result.
type WebhookDeadLetter struct {
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

// SubscribeWebhook queues every outbox row of topic written from now on for
// webhook delivery. Rows written before are not queued.
func (s *Store) SubscribeWebhook(ctx context.Context, topic string) error {
	if _, err := s.pool.Exec(ctx, sqlWebhookSubscribe, topic); err != nil {
		return wrapStoreErr("subscribe webhook to topic "+topic, err)
	}
	return nil
}

// ClaimWebhookDeliveries claims up to limit deliveries that are due, or
// whose lease expired, each for a new attempt holding a lease of lease.
func (s *Store) ClaimWebhookDeliveries(ctx context.Context, limit int, lease time.Duration) ([]WebhookDelivery, error) {
	if limit <= 0 || limit > webhookClaimMax {
		return nil, fmt.Errorf("claim webhook deliveries: limit %d must be between 1 and %d", limit, webhookClaimMax)
	}
	if lease < time.Millisecond {
		return nil, fmt.Errorf("claim webhook deliveries: lease %s is too short", lease)
	}
	rows, err := s.pool.Query(ctx, sqlWebhookClaim, limit, lease.Milliseconds())
	if err != nil {
		return nil, wrapStoreErr("claim webhook deliveries", err)
	}
	defer rows.Close()
	var out []WebhookDelivery
	for rows.Next() {
		var d WebhookDelivery
		if err := rows.Scan(&d.ID, &d.OutboxID, &d.AttemptID, &d.Sent, &d.Failed, &d.TookOver, &d.TenantID, &d.SettlementID, &d.Body); err != nil {
			return nil, wrapStoreErr("claim webhook deliveries", err)
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, wrapStoreErr("claim webhook deliveries", err)
	}
	return out, nil
}

// StartWebhookAttempt is called right before d is sent: it renews d's
// lease to lease from now and counts the send, setting d.Attempt. It
// returns ErrClaimLost, and changes nothing, when d's attempt no longer
// owns the delivery: then d must not be sent. A lease that lapsed without
// being taken over is still d's (the takeover changes the attempt id), so
// it is renewed.
func (s *Store) StartWebhookAttempt(ctx context.Context, d *WebhookDelivery, lease time.Duration) error {
	what := fmt.Sprintf("start webhook attempt: delivery %d settlement=%s", d.ID, d.SettlementID)
	if lease < time.Millisecond {
		return fmt.Errorf("%s: lease %s is too short", what, lease)
	}
	var attempts int
	err := s.pool.QueryRow(ctx, sqlWebhookStart, d.ID, d.AttemptID, lease.Milliseconds()).Scan(&attempts)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%s: %w", what, ErrClaimLost)
	}
	if err != nil {
		return wrapStoreErr(what, err)
	}
	d.Attempt = attempts
	return nil
}

// CompleteWebhookDelivery marks d delivered (the receiver answered
// httpStatus). It returns ErrClaimLost, and changes nothing, when d's
// attempt no longer owns the delivery.
func (s *Store) CompleteWebhookDelivery(ctx context.Context, d WebhookDelivery, httpStatus int) error {
	return s.webhookFenced(ctx, d, "complete", sqlWebhookComplete, httpStatus)
}

// RetryWebhookDelivery counts d's failed attempt and puts d back to be
// tried again after backoff.
func (s *Store) RetryWebhookDelivery(ctx context.Context, d WebhookDelivery, backoff time.Duration, httpStatus int, errText string) error {
	return s.webhookFenced(ctx, d, "retry", sqlWebhookRetry, backoff.Milliseconds(), httpStatus, errText)
}

// DeadLetterWebhookDelivery gives d up. When d's attempt sent it
// (StartWebhookAttempt), its failure is counted.
func (s *Store) DeadLetterWebhookDelivery(ctx context.Context, d WebhookDelivery, httpStatus int, errText string) error {
	failed := 0
	if d.Attempt > 0 {
		failed = 1
	}
	return s.webhookFenced(ctx, d, "dead-letter", sqlWebhookDead, httpStatus, errText, failed)
}

func (s *Store) webhookFenced(ctx context.Context, d WebhookDelivery, what, sql string, args ...any) error {
	tag, err := s.pool.Exec(ctx, sql, append([]any{d.ID, d.AttemptID}, args...)...)
	what = fmt.Sprintf("%s webhook delivery %d settlement=%s attempt=%d", what, d.ID, d.SettlementID, d.Attempt)
	if err != nil {
		return wrapStoreErr(what, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%s: %w", what, ErrClaimLost)
	}
	return nil
}

// WebhookDeadLetters lists up to limit dead-lettered deliveries, oldest
// first.
func (s *Store) WebhookDeadLetters(ctx context.Context, limit int) ([]WebhookDeadLetter, error) {
	rows, err := s.pool.Query(ctx, sqlWebhookDeadList, limit)
	if err != nil {
		return nil, wrapStoreErr("list webhook dead letters", err)
	}
	defer rows.Close()
	var out []WebhookDeadLetter
	for rows.Next() {
		var d WebhookDeadLetter
		if err := rows.Scan(&d.ID, &d.TenantID, &d.SettlementID, &d.OutboxID, &d.Attempts, &d.Failures, &d.LastStatus, &d.LastError, &d.DeadAt); err != nil {
			return nil, wrapStoreErr("list webhook dead letters", err)
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, wrapStoreErr("list webhook dead letters", err)
	}
	return out, nil
}
