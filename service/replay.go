package service

import (
	"context"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/settlehq/settle/internal/kafkahdr"
	"github.com/settlehq/settle/outlet"
	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/inspect"
	"github.com/settlehq/settle/settle/message"
	"github.com/settlehq/settle/settle/retention"
)

// ReplayHeader names the dead letter a replayed record came from, for
// operators; it is not material (headers never are, except a binary
// CloudEvent's ce_* ones), so the replayed record keeps its identity and
// fingerprint and a second replay is a duplicate.
const ReplayHeader = inspect.ReplayHeader

// replayRecord is the record a replay of d produces: its original key,
// value and headers, to its source topic, with ReplayHeader naming where
// it came from.
func replayRecord(d inspect.DeadLetter) *kgo.Record {
	r := &kgo.Record{Topic: d.Source.Topic, Key: d.Key, Value: d.Value, Headers: kafkahdr.ToKafka(d.Headers)}
	r.Headers = append(r.Headers, kgo.RecordHeader{Key: ReplayHeader,
		Value: []byte(d.Source.Topic + "/" + strconv.Itoa(int(d.Source.Partition)) + "/" + strconv.FormatInt(d.Source.Offset, 10))})
	return r
}

// ProduceDeadLetters produces ds back to their source topics on cl,
// through the outlet, and returns where each landed, in the order of ds: a
// batch_too_large letter as its batch's records, one by one
// (produceBatchLetter), landed where its first did. A replay makes one
// attempt (the client's own retries within ctx): a record the broker does
// not take, refused for good or not, is the operator's error, and its dead
// letter stays. On an error it returns the coordinates of the dead letters
// before the first that failed.
func ProduceDeadLetters(ctx context.Context, cl *kgo.Client, ds []inspect.DeadLetter) ([]message.Coordinates, error) {
	o := outlet.New(cl, outlet.Config{Attempts: 1})
	out := make([]message.Coordinates, 0, len(ds))
	for start := 0; start < len(ds); {
		if ds[start].Reason == message.ReasonBatchTooLarge {
			to, err := produceBatchLetter(ctx, o, ds[start])
			if err != nil {
				return out, fmt.Errorf("replay dead letter %d (a record batch) to %s: %w (%d replayed before it)", ds[start].ID, ds[start].Source.Topic, err, len(out))
			}
			out, start = append(out, to), start+1
			continue
		}
		end := start + 1
		for end < len(ds) && ds[end].Reason != message.ReasonBatchTooLarge {
			end++
		}
		to, err := produceRecords(ctx, o, ds[start:end])
		out = append(out, to...)
		if err != nil {
			return out, fmt.Errorf("%w (%d replayed before it)", err, len(out))
		}
		start = end
	}
	return out, nil
}

// produceRecords produces ds, dead letters of one record each, back to
// their source topics, as ProduceDeadLetters does.
func produceRecords(ctx context.Context, o *outlet.Outlet, ds []inspect.DeadLetter) ([]message.Coordinates, error) {
	recs := make([]*kgo.Record, len(ds))
	for i, d := range ds {
		recs[i] = replayRecord(d)
	}
	s, _ := o.Produce(ctx, recs...) // each record's outcome is read below
	out := make([]message.Coordinates, len(ds))
	for i := range ds {
		if err := s.Outcome(i); err != nil {
			return out[:i], fmt.Errorf("replay dead letter %d to %s: %w", ds[i].ID, ds[i].Source.Topic, err)
		}
		r := s.Record(i)
		out[i] = message.Coordinates{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}
	}
	return out, nil
}

// ReplayDeadLetters produces ds back to their source topics on cl
// (ProduceDeadLetters) and records, for those the broker took, where each
// went (retention.Store.DeadLettersReplayed): a replayed dead letter is
// operational history settle prune removes. It returns the coordinates of
// the dead letters replayed, in order, as ProduceDeadLetters does.
func ReplayDeadLetters(ctx context.Context, cl *kgo.Client, store *settle.Store, ds []inspect.DeadLetter) ([]message.Coordinates, error) {
	to, err := ProduceDeadLetters(ctx, cl, ds)
	ids := make([]int64, len(to))
	for i := range to {
		ids[i] = ds[i].ID
	}
	if rerr := retention.New(store).DeadLettersReplayed(context.WithoutCancel(ctx), ids, to); rerr != nil && err == nil {
		err = rerr
	}
	return to, err
}

// kafkaReplayer is the analysts' page's way to the broker
// (analyst.Replayer): it replays on the producer the service opens with
// its own settings (brokers, TLS, SASL), every in-sync replica
// acknowledging.
type kafkaReplayer struct {
	cl    *kgo.Client
	store *settle.Store
}

func (r kafkaReplayer) Replay(ctx context.Context, ds []inspect.DeadLetter) ([]message.Coordinates, error) {
	return ReplayDeadLetters(ctx, r.cl, r.store, ds)
}
