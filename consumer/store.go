package consumer

import (
	"context"

	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/message"
)

// Store is what the consumer needs of the settling store: its batch size,
// the decoding and settling of a batch, and the offsets its transactions
// recorded (where a partition resumes). *settle.Store is one.
type Store interface {
	Config() settle.Config
	Decode(ins []message.Input) []message.Input
	Settle(ctx context.Context, group string, inputs []message.Input) ([]message.Result, error)
	ConsumerOffsets(ctx context.Context, group string) (map[string]map[int32]int64, error)
}

var _ Store = (*settle.Store)(nil)
