package main

import (
	"context"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/settlehq/settle/internal/kafkahdr"
	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/inspect"
)

// replayRecord is the record a replay of d produces: its original key,
// value and headers, to its source topic, with replayHeader naming where
// it came from.
func replayRecord(d inspect.DeadLetter) *kgo.Record {
	r := &kgo.Record{Topic: d.Source.Topic, Key: d.Key, Value: d.Value, Headers: kafkahdr.ToKafka(d.Headers)}
	r.Headers = append(r.Headers, kgo.RecordHeader{Key: replayHeader,
		Value: []byte(d.Source.Topic + "/" + strconv.Itoa(int(d.Source.Partition)) + "/" + strconv.FormatInt(d.Source.Offset, 10))})
	return r
}

// produceDeadLetters produces ds and returns where each landed, in the
// order of ds. ProduceSync gives its results in the order the broker
// acknowledged them, not the order of its arguments: each result is
// matched to its dead letter by its record. On an error it returns the
// coordinates of the dead letters before the first that failed.
func produceDeadLetters(ctx context.Context, cl *kgo.Client, ds []inspect.DeadLetter) ([]settle.Coordinates, error) {
	recs := make([]*kgo.Record, len(ds))
	index := make(map[*kgo.Record]int, len(ds))
	for i, d := range ds {
		recs[i] = replayRecord(d)
		index[recs[i]] = i
	}
	errs := make([]error, len(ds))
	out := make([]settle.Coordinates, len(ds))
	for _, res := range cl.ProduceSync(ctx, recs...) {
		i := index[res.Record]
		if errs[i] = res.Err; res.Err == nil {
			out[i] = settle.Coordinates{Topic: res.Record.Topic, Partition: res.Record.Partition, Offset: res.Record.Offset}
		}
	}
	for i, err := range errs {
		if err != nil {
			return out[:i], fmt.Errorf("replay dead letter %d to %s: %w (%d replayed before it)", ds[i].ID, ds[i].Source.Topic, err, i)
		}
	}
	return out, nil
}

// kafkaReplayer is the analysts' page's way to the broker: it replays with
// the service's own producer settings (brokers, TLS, SASL), every in-sync
// replica acknowledging.
type kafkaReplayer struct{ cl *kgo.Client }

// Replay implements analyst.Replayer.
func (k kafkaReplayer) Replay(ctx context.Context, ds []inspect.DeadLetter) ([]settle.Coordinates, error) {
	return produceDeadLetters(ctx, k.cl, ds)
}
