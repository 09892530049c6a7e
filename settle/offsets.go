package settle

import (
	"context"
	"fmt"

	"github.com/settlehq/settle/settle/dberr"
	"github.com/settlehq/settle/settle/internal/db"
)

// ConsumerOffsets returns the next offset PostgreSQL holds for every
// partition group has settled records of, by topic and partition.
//
// These offsets are written by the settling transaction itself (see
// Settle), so they can never be ahead of what the database holds. The
// consumer compares them with the group's Kafka commits when it is given
// partitions: a Kafka offset ahead of PostgreSQL's means the database was
// restored from a backup, and the records in between must be read again.
func (s *Store) ConsumerOffsets(ctx context.Context, group string) (map[string]map[int32]int64, error) {
	out, err := ConsumerOffsetsIn(ctx, s.pool, group)
	if err != nil {
		return nil, dberr.Wrap(fmt.Sprintf("read consumer offsets of group %s", group), err)
	}
	return out, nil
}

// Querier is a pool, a connection or a transaction.
type Querier = db.DBTX

// ConsumerOffsetsIn reads group's offsets through q (the pool, or a
// transaction whose snapshot they must share).
func ConsumerOffsetsIn(ctx context.Context, q Querier, group string) (map[string]map[int32]int64, error) {
	rows, err := db.On(q).ConsumerOffsetLookup(ctx, group)
	if err != nil {
		return nil, err
	}
	out := map[string]map[int32]int64{}
	for _, r := range rows {
		if out[r.Topic] == nil {
			out[r.Topic] = map[int32]int64{}
		}
		out[r.Topic][r.Partition] = r.NextOffset
	}
	return out, nil
}
