package edge

import (
	"context"
	"time"

	"github.com/settlehq/settle/settle"
)

// Store is what the records API needs of the settling store: its
// configuration, the settling of a batch, and the Idempotency-Keys of a
// group. *settle.Store is one.
type Store interface {
	Config() settle.Config
	Settle(ctx context.Context, group string, inputs []settle.Input) ([]settle.Result, error)
	CompleteAndClaimIdempotencyKeys(ctx context.Context, answers []settle.IdempotencyAnswer,
		reqs []settle.IdempotencyRequest) (lost []bool, claims []settle.IdempotencyClaim, err error)
	ReleaseIdempotencyKeys(ctx context.Context, keyIDs []int64, attemptIDs []string) (int, error)
	OpenKeyConflictCases(ctx context.Context, keyID int64, stored, incoming [][]byte) ([]settle.KeyConflict, error)
}

// WebhookStore is what webhook delivery needs of the settling store: the
// deliveries' claims and their fenced results. *settle.Store is one.
type WebhookStore interface {
	SubscribeWebhook(ctx context.Context, topic string) error
	ClaimWebhookDeliveries(ctx context.Context, limit int, lease time.Duration) ([]settle.WebhookDelivery, error)
	StartWebhookAttempt(ctx context.Context, d *settle.WebhookDelivery, lease time.Duration) error
	CompleteWebhookDelivery(ctx context.Context, d settle.WebhookDelivery, httpStatus int) error
	RetryWebhookDelivery(ctx context.Context, d settle.WebhookDelivery, backoff time.Duration, httpStatus int, errText string) error
	DeadLetterWebhookDelivery(ctx context.Context, d settle.WebhookDelivery, httpStatus int, errText string) error
}

var (
	_ Store        = (*settle.Store)(nil)
	_ WebhookStore = (*settle.Store)(nil)
)
