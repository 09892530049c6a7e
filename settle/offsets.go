package settle

import (
	"context"
	"fmt"
)

var (
	sqlConsumerOffsetLookup = mustQuery("consumer_offset_lookup.sql")
	sqlDeliveryCount        = mustQuery("delivery_count.sql")
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
	out, err := consumerOffsets(ctx, s.pool, group)
	if err != nil {
		return nil, wrapStoreErr(fmt.Sprintf("read consumer offsets of group %s", group), err)
	}
	return out, nil
}

// consumerOffsets reads group's offsets through q (the pool, or a
// transaction whose snapshot they must share).
func consumerOffsets(ctx context.Context, q querier, group string) (map[string]map[int32]int64, error) {
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

// OutcomeCount is the number of deliveries with one outcome and reason.
type OutcomeCount struct {
	Outcome Outcome
	Reason  string
	Count   int64
}

// OutcomeCounts counts every delivery by outcome and reason, for summaries.
func (s *Store) OutcomeCounts(ctx context.Context) ([]OutcomeCount, error) {
	rows, err := s.pool.Query(ctx, sqlDeliveryCount)
	if err != nil {
		return nil, wrapStoreErr("count deliveries", err)
	}
	defer rows.Close()
	var out []OutcomeCount
	for rows.Next() {
		var c OutcomeCount
		if err := rows.Scan(&c.Outcome, &c.Reason, &c.Count); err != nil {
			return nil, wrapStoreErr("count deliveries", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, wrapStoreErr("count deliveries", err)
	}
	return out, nil
}
