package ingest

import (
	"context"

	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/idempotency"
	"github.com/settlehq/settle/settle/message"
)

// Store is what the records API needs of the settling store: its
// configuration and the settling of a batch. *settle.Store is one.
type Store interface {
	Config() settle.Config
	Settle(ctx context.Context, group string, inputs []message.Input) ([]message.Result, error)
}

// Keys is what the records API needs of the Idempotency-Keys: the claims
// and answers of a group, the release of claims whose work failed, and the
// conflict cases of a reused key. *idempotency.Store is one.
type Keys interface {
	CompleteAndClaim(ctx context.Context, answers []idempotency.Answer,
		reqs []idempotency.Request) (lost []bool, claims []idempotency.Claim, err error)
	ReleaseMany(ctx context.Context, keyIDs []int64, attemptIDs []string) (int, error)
	OpenConflictCases(ctx context.Context, keyID int64, stored, incoming [][]byte) ([]idempotency.Conflict, error)
}

var (
	_ Store = (*settle.Store)(nil)
	_ Keys  = (*idempotency.Store)(nil)
)
