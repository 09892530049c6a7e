package ingest

import (
	"context"

	"github.com/settlehq/settle/edge/idempotency"
	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/message"
)

// Store is what the records API needs of the settling store: its
// configuration and the settling of a group's records with its keys
// (an idempotency.Group riding the transaction). *settle.Store is one.
type Store interface {
	Config() settle.Config
	SettleWith(ctx context.Context, group string, inputs []message.Input, rider settle.Rider) ([]message.Result, error)
}

// Keys is what the records API needs of the Idempotency-Keys beside the
// group's transaction: the conflict cases of a reused key.
// *idempotency.Store is one.
type Keys interface {
	OpenConflictCases(ctx context.Context, keyID int64, stored, incoming [][]byte) ([]idempotency.Conflict, error)
}

var (
	_ Store = (*settle.Store)(nil)
	_ Keys  = (*idempotency.Store)(nil)
)
