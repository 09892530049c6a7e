// Package kafkaread reads a topic to its end: from each partition's start
// (what retention left) to the end offsets listed when the read begins. It
// is the one way settle's checks read a topic whole (the end-to-end tests,
// the bench's check, month end); it never commits offsets or joins a group.
package kafkaread

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ErrNoTopic is ToEnd's error for a topic the broker does not know.
var ErrNoTopic = errors.New("topic not found")

// Offsets are the offsets a read went between, by partition: Starts[p] is
// the first offset the broker still held (records before it were left by
// retention), Ends[p] the end listed when the read began.
type Offsets struct {
	Starts, Ends map[int32]int64
}

// ToEnd reads topic on a client of brokers with opts (TLS, SASL, fetch
// sizes), calling fn for every record from each partition's start to its
// end offset listed when it begins, in offset order within a partition.
// Records produced after that are not read. It ends with ctx, with the
// context's error.
func ToEnd(ctx context.Context, brokers []string, opts []kgo.Opt, topic string, fn func(*kgo.Record)) (Offsets, error) {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, opts...)...)
	if err != nil {
		return Offsets{}, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return Offsets{}, fmt.Errorf("list end offsets of %s: %w", topic, err)
	}
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return Offsets{}, fmt.Errorf("list start offsets of %s: %w", topic, err)
	}
	if len(ends) == 0 {
		return Offsets{}, fmt.Errorf("%w: %s", ErrNoTopic, topic)
	}
	o := Offsets{Starts: map[int32]int64{}, Ends: map[int32]int64{}}
	consume := map[int32]kgo.Offset{}
	remaining := map[int32]int64{}
	var listErr error
	ends.Each(func(e kadm.ListedOffset) {
		if e.Err != nil {
			listErr = fmt.Errorf("end offset of %s/%d: %w", topic, e.Partition, e.Err)
			return
		}
		s, _ := starts.Lookup(topic, e.Partition)
		o.Starts[e.Partition], o.Ends[e.Partition] = s.Offset, e.Offset
		if e.Offset > s.Offset {
			consume[e.Partition] = kgo.NewOffset().At(s.Offset)
			remaining[e.Partition] = e.Offset
		}
	})
	if listErr != nil {
		return Offsets{}, listErr
	}
	if len(consume) == 0 {
		return o, nil
	}
	cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{topic: consume})
	for len(remaining) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return o, fmt.Errorf("read %s: %w (partitions not read to their end: %v)", topic, ctx.Err(), remaining)
		}
		var ferr error
		fs.EachError(func(_ string, p int32, err error) { ferr = fmt.Errorf("read %s/%d: %w", topic, p, err) })
		if ferr != nil {
			return o, ferr
		}
		fs.EachRecord(func(r *kgo.Record) {
			end, ok := remaining[r.Partition]
			if !ok || r.Offset >= end {
				return
			}
			fn(r)
			if r.Offset+1 >= end {
				delete(remaining, r.Partition)
			}
		})
	}
	return o, nil
}
