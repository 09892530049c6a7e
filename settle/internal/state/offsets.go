package state

import (
	"maps"
	"sync"

	"github.com/settlehq/settle/settle/message"
)

// OffsetCache is the next offset of every partition this process's
// transactions committed, by group. A batch probes for earlier deliveries
// only its records below it (firstDelivered); design.md, "Why offsets also
// live in PostgreSQL", says why the others need no probe.
type OffsetCache struct {
	mu   sync.Mutex
	next map[offsetKey]int64
}

type offsetKey struct {
	group, topic string
	partition    int32
}

// Learn keeps the next offsets a committed transaction of group wrote.
func (c *OffsetCache) Learn(group string, offsets map[message.Coordinates]int64) {
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
// (message.Input.FirstDelivery), or it is a record of the transaction's group at or
// past the offset its partition committed here. Only the first attempt of
// a batch trusts it: the attempts after a lost race probe every record.
func (st *State) firstDelivered() func(in *message.Input) bool {
	if st.attempt > 1 {
		return func(*message.Input) bool { return false }
	}
	var next map[offsetKey]int64
	if c := &st.Shared.Offsets; st.Group != "" {
		c.mu.Lock()
		next = maps.Clone(c.next)
		c.mu.Unlock()
	}
	return func(in *message.Input) bool {
		n, ok := next[offsetKey{st.Group, in.Topic, in.Partition}]
		return in.FirstDelivery || (st.Group != "" && ok && in.Offset >= n)
	}
}
