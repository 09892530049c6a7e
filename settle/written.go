package settle

import (
	"sync"

	"github.com/settlehq/settle/settle/internal/db"
)

// Written is a settlement message this process committed to the outbox,
// kept in memory so that the relay of the same process need not read back
// what it has just written: the outbox row's topic, key and stored headers
// (the trace context), its identity's stored response (the message's
// value) and the parts of its settlement headers. The relay reads the
// same from the tables for a row it does not find here (written by another
// process, before a restart, or let go).
type Written struct {
	Topic        string
	Key          []byte
	Headers      []byte // the outbox row's stored headers (db.EncodeHeaders)
	Response     []byte
	SettlementID string
	TenantID     string
	Sequence     int64
	Kind         string
}

// writtenMax bounds the settlements kept for the relay (≈ 1 KB each): a
// relay that lags, or that leads in another process, reads the rest from
// the tables.
const writtenMax = 20_000

// writtenCache is the settlements kept, by outbox row id, the oldest let
// go first.
type writtenCache struct {
	mu    sync.Mutex
	byID  map[int64]Written
	order []int64 // ids in the order kept; some already taken
}

// WrittenMessage returns the settlement this process committed as outbox
// row id, if it still keeps it.
func (s *Store) WrittenMessage(id int64) (Written, bool) {
	c := &s.written
	c.mu.Lock()
	defer c.mu.Unlock()
	w, ok := c.byID[id]
	return w, ok
}

// ForgetWritten lets go of the settlements of outbox rows ids: the relay
// published or parked them.
func (s *Store) ForgetWritten(ids []int64) {
	c := &s.written
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range ids {
		delete(c.byID, id)
	}
	if len(c.byID) == 0 {
		c.order = c.order[:0]
	}
}

// keep keeps the settlements of a committed transaction: rows are the
// outbox ids its insert returned, with their identities' ids.
func (c *writtenCache) keep(st *txState, rows []db.OutboxInsertRow) {
	if len(rows) == 0 {
		return
	}
	byIdentity := make(map[int64]*outboxRow, len(st.outbox))
	for i := range st.outbox {
		if o := &st.outbox[i]; o.identity != nil {
			byIdentity[o.identity.id] = o
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byID == nil {
		c.byID = make(map[int64]Written)
	}
	for _, r := range rows {
		o := byIdentity[r.IdentityID]
		if o == nil {
			continue // not a settlement
		}
		c.byID[r.ID] = Written{Topic: o.topic, Key: o.key, Headers: o.headers, Response: o.identity.response,
			SettlementID: o.identity.settlementID, TenantID: o.tenant, Sequence: o.sequence, Kind: o.kind}
		c.order = append(c.order, r.ID)
	}
	for len(c.byID) > writtenMax && len(c.order) > 0 {
		delete(c.byID, c.order[0])
		c.order = c.order[1:]
	}
	if len(c.order) > 4*writtenMax { // taken ids pile up at the front
		live := c.order[:0]
		for _, id := range c.order {
			if _, ok := c.byID[id]; ok {
				live = append(live, id)
			}
		}
		c.order = live
	}
}
