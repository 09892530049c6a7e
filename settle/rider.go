package settle

import (
	"context"

	"github.com/settlehq/settle/internal/pgq"
	"github.com/settlehq/settle/settle/message"
)

// A Rider is work of another room that commits with a batch or not at
// all: it rides the batch's settling transaction (SettleWith). The HTTP
// edge's Idempotency-Keys are one (edge/idempotency.Group): a group's
// keys are claimed, its records settled and its answers stored in one
// transaction.
//
// Every attempt of the transaction calls, in order: QueueFirst, to queue
// the rider's statements in the transaction's first round trip, which is
// its own; ReadFirst, to read them; Settles, once per input, to learn
// which inputs this attempt settles (ReadFirst may set an input's Offset
// and FirstDelivery); and QueueWrite, with the results of the inputs
// settled (the others' are zero), to queue the rider's writes in the
// commit's round trip. An attempt that settles no input writes and
// commits nothing. The rider queues its statements on the transaction's
// pipeline p through its own generated queries (db.New(p): the pipeline
// names their errors). An attempt that fails is rolled back, the rider's
// statements with it, and the next attempt starts again at QueueFirst.
type Rider interface {
	QueueFirst(ctx context.Context, p *pgq.Pipeline)
	ReadFirst() error
	Settles(input int) bool
	QueueWrite(ctx context.Context, p *pgq.Pipeline, results []message.Result) error
}
