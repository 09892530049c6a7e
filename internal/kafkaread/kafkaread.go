// Package kafkaread reads a topic to its end: from each partition's start
// (what retention left) to the end offsets listed when the read begins. It
// is the one way settle's checks read a topic whole (the end-to-end tests,
// the bench's check, month end, settle verify); it never commits offsets or
// joins a group.
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
// retention), From[p] where the read began (Starts[p], or the Reader's
// From when the broker still held it), Ends[p] the end listed when the
// read began.
type Offsets struct {
	Starts, From, Ends map[int32]int64
}

// Reader is a read that does not begin at each partition's start. The
// zero value is ToEnd's read.
type Reader struct {
	// From is where to begin each partition named, when the broker still
	// holds that offset (records before it were verified before, say);
	// a partition not named, or whose offset retention removed, begins at
	// its start.
	From map[int32]int64
	// Listed, when set, is told the offsets once they are listed, before
	// the first record is read (to report progress against them).
	Listed func(Offsets)
}

// ToEnd reads topic on a client of brokers with opts (TLS, SASL, fetch
// sizes), calling fn for every record from each partition's start to its
// end offset listed when it begins, in offset order within a partition.
// Records produced after that are not read. It ends with ctx, with the
// context's error.
func ToEnd(ctx context.Context, brokers []string, opts []kgo.Opt, topic string, fn func(*kgo.Record)) (Offsets, error) {
	return Reader{}.ToEnd(ctx, brokers, opts, topic, fn)
}

// ToEnd reads as the package's ToEnd does, from where r says.
func (r Reader) ToEnd(ctx context.Context, brokers []string, opts []kgo.Opt, topic string, fn func(*kgo.Record)) (Offsets, error) {
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
	o := Offsets{Starts: map[int32]int64{}, From: map[int32]int64{}, Ends: map[int32]int64{}}
	consume := map[int32]kgo.Offset{}
	remaining := map[int32]int64{}
	var listErr error
	ends.Each(func(e kadm.ListedOffset) {
		if e.Err != nil {
			listErr = fmt.Errorf("end offset of %s/%d: %w", topic, e.Partition, e.Err)
			return
		}
		s, _ := starts.Lookup(topic, e.Partition)
		from := s.Offset
		if at, ok := r.From[e.Partition]; ok && at > from {
			from = at
		}
		o.Starts[e.Partition], o.From[e.Partition], o.Ends[e.Partition] = s.Offset, from, e.Offset
		if e.Offset > from {
			consume[e.Partition] = kgo.NewOffset().At(from)
			remaining[e.Partition] = e.Offset
		}
	})
	if listErr != nil {
		return Offsets{}, listErr
	}
	if r.Listed != nil {
		r.Listed(o)
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
		fs.EachRecord(func(rec *kgo.Record) {
			end, ok := remaining[rec.Partition]
			if !ok || rec.Offset >= end {
				return
			}
			fn(rec)
			if rec.Offset+1 >= end {
				delete(remaining, rec.Partition)
			}
		})
	}
	return o, nil
}
