package settle

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

var (
	sqlConsumerOffsetLookup = mustQuery("consumer_offset_lookup.sql")
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
		return nil, wrapStoreErr(fmt.Sprintf("read consumer offsets of group %s", group), err)
	}
	return out, nil
}

// Querier is a pool or a transaction.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// ConsumerOffsetsIn reads group's offsets through q (the pool, or a
// transaction whose snapshot they must share).
func ConsumerOffsetsIn(ctx context.Context, q Querier, group string) (map[string]map[int32]int64, error) {
	rows, err := q.Query(ctx, sqlConsumerOffsetLookup, group)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]map[int32]int64{}
	for rows.Next() {
		var (
			topic string
			p     int32
			next  int64
		)
		if err := rows.Scan(&topic, &p, &next); err != nil {
			return nil, err
		}
		if out[topic] == nil {
			out[topic] = map[int32]int64{}
		}
		out[topic][p] = next
	}
	return out, rows.Err()
}
