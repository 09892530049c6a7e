package settle

import (
	"context"
	"fmt"
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
// transactions committed, by group: a record at or past it was not settled
// by this process. A batch probes the coordinates of only the records
// below it for earlier deliveries (delivery_lookup.sql, where a redelivery's
// repeat, quarantine or dead letter is found): the others were delivered
// for the first time, unless another process settled them too (a consumer
// that has not yet noticed it lost the partition, or a database written by
// two deployments). Then a key on their coordinates refuses this
// transaction's second write of them (deliveries_pkey,
// dead_letters_source_key; a first delivery's identity is found by its scope
// key, not by these probes), and the attempt after it probes every record
// (TestRedeliveryProbesBelowCommittedOffsets).
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
// (Input.FirstDelivery), or it is a record of the transaction's group whose
// offset is at or past what its partition committed here. The first
// attempt of a batch trusts it; the attempts after a lost race do not. It
// reads the cache once per partition of the batch.
func (st *txState) firstDelivered() func(in *Input) bool {
	if st.attempt > 1 {
		return func(*Input) bool { return false }
	}
	type at struct {
		next int64
		ok   bool
	}
	seen := map[offsetKey]at{}
	c := &st.s.offsets
	return func(in *Input) bool {
		if in.FirstDelivery {
			return true
		}
		if st.group == "" {
			return false
		}
		k := offsetKey{st.group, in.Topic, in.Partition}
		a, read := seen[k]
		if !read {
			c.mu.Lock()
			a.next, a.ok = c.next[k]
			c.mu.Unlock()
			seen[k] = a
		}
		return a.ok && in.Offset >= a.next
	}
}
