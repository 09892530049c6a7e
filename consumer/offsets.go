package consumer

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/settlehq/settle/internal/backoff"
)

// adjustOffsets runs when the group assigns partitions, after Kafka's
// committed offsets are fetched and before fetching starts. A partition
// whose Kafka offset is ahead of the one PostgreSQL holds lost records in a
// database restore: it is read again from PostgreSQL's offset (see the
// package doc). A partition whose Kafka offset is behind keeps it: the
// records in between are redeliveries, and their results are published
// again, which a crash before the commit may have skipped.
//
// It waits out a database outage (ctx ends when the group session does):
// starting from an offset that was not checked could skip records.
func (c *Consumer) adjustOffsets(ctx context.Context, offsets map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
	b := backoff.New(c.cfg.retryPolicy())
	var (
		pg  map[string]map[int32]int64
		err error
	)
	for tries := 1; ; tries++ {
		if pg, err = c.store.ConsumerOffsets(ctx, c.cfg.Group); err == nil {
			// An outage seen here ends here: with no record to settle,
			// nothing else would say the database is back (Ready).
			if c.dbDown.Swap(false) {
				c.log.Info("database available again; resuming")
			}
			break
		}
		c.dbDown.Store(true)
		if tries == 1 || tries%10 == 0 {
			c.log.Warn("reading consumer offsets from the database failed; retrying before consuming", "tries", tries, "err", err)
		}
		if !b.Wait(ctx, nil) {
			return nil, err
		}
	}
	for topic, ps := range offsets {
		for p, o := range ps {
			kafkaNext := o.EpochOffset().Offset
			if kafkaNext < 0 {
				continue // no commit in Kafka: the reset offset (the start) applies
			}
			pgNext := pg[topic][p] // none: the database has nothing of this partition
			if kafkaNext > pgNext {
				c.log.Warn("kafka's committed offset is ahead of the database's (was the database restored?); reading again from the database's offset",
					"topic", topic, "partition", p, "kafka_offset", kafkaNext, "database_offset", pgNext)
				ps[p] = kgo.NewOffset().At(pgNext).WithEpoch(-1)
			}
		}
	}
	return offsets, nil
}
