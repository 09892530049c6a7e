package ingest

import (
	"context"

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

var _ Store = (*settle.Store)(nil)
