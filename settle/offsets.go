package settle

import (
	"context"
	"fmt"
	"maps"
	"sync"

	"github.com/settlehq/settle/settle/dberr"
	"github.com/settlehq/settle/settle/internal/db"
	"github.com/settlehq/settle/settle/message"
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

// offsetCache is the next offset of every partition this process's
// transactions committed, by group. A batch probes for earlier deliveries
// only its records below it (firstDelivered); design.md, "Why offsets also
// live in PostgreSQL", says why the others need no probe.
type offsetCache struct {
	mu   sync.Mutex
	next map[offsetKey]int64
}

type offsetKey struct {
	group, topic string
	partition    int32
}

// learn keeps the next offsets a committed transaction of group wrote.
func (c *offsetCache) learn(group string, offsets map[message.Coordinates]int64) {
	if group == "" || len(offsets) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.next == nil {
		c.next = map[offsetKey]int64{}
	}
	for k, v := range offsets {
		ok := offsetKey{group, k.Topic, k.Partition}
		c.next[ok] = max(c.next[ok], v)
	}
}

// firstDelivered returns a test of whether a record was delivered for the
// first time as far as this process knows: its caller says so
// (Input.FirstDelivery), or it is a record of the transaction's group at or
// past the offset its partition committed here. Only the first attempt of
// a batch trusts it: the attempts after a lost race probe every record.
func (st *txState) firstDelivered() func(in *Input) bool {
	if st.attempt > 1 {
		return func(*Input) bool { return false }
	}
	var next map[offsetKey]int64
	if c := &st.s.offsets; st.group != "" {
		c.mu.Lock()
		next = maps.Clone(c.next)
		c.mu.Unlock()
	}
	return func(in *Input) bool {
		n, ok := next[offsetKey{st.group, in.Topic, in.Partition}]
		return in.FirstDelivery || (st.group != "" && ok && in.Offset >= n)
	}
}
