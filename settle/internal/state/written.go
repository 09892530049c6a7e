package state

import (
	"sync"

	"github.com/settlehq/settle/settle/internal/db"
	"github.com/settlehq/settle/settle/message"
)

// writtenMax bounds the settlements kept for the relay (≈ 1 KB each): a
// relay that lags, or that leads in another process, reads the rest from
// the tables.
const writtenMax = 20_000

// WrittenRow is an outbox row this process wrote, as the relay's read of the tables gives it
// (relay/outbox's outbox.sql, OutboxPending): the same fields, in the same
// order, so that the relay converts one to its own row type, and a change
// to either fails to compile until the other follows.
type WrittenRow struct {
	ID                 int64
	Topic              string
	Key                []byte
	Value              []byte
	Response           []byte
	StoredHeaders      []byte
	SettlementID       *string
	SettlementTenantID string
	Sequence           *int64
	Kind               *string
	Version            *int16
}

// WrittenCache is the settlement messages this process committed to the
// outbox, by outbox row id, as the relay's read of the tables gives them
// (relay/outbox's outbox.sql), so that the relay of the same process need not read
// back what it has just written. Full, it is emptied: the relay then reads
// what it held from the tables, and what a relay will never take (rows it
// published before they were kept, rows another process's relay published)
// does not pile up.
type WrittenCache struct {
	mu   sync.Mutex
	byID map[int64]WrittenRow
}

// Message returns the outbox row id as the relay's read of the tables
// would give it, if this process wrote it (a settlement) and still keeps it.
func (c *WrittenCache) Message(id int64) (WrittenRow, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.byID[id]
	return r, ok
}

// Forget lets go of outbox rows ids: the relay published or parked them.
func (c *WrittenCache) Forget(ids []int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range ids {
		delete(c.byID, id)
	}
}

// Keep keeps the settlements of a committed transaction: rows are the
// outbox ids its insert returned, with their identities' ids.
func (c *WrittenCache) Keep(st *State, rows []db.OutboxSettlementsInsertRow) {
	if len(rows) == 0 {
		return
	}
	byIdentity := make(map[int64]*OutboxRow, len(st.Outbox))
	for i := range st.Outbox {
		if o := &st.Outbox[i]; o.Identity != nil {
			byIdentity[o.Identity.ID] = o
		}
	}
	version := int16(message.SchemaVersionOutput)
	n := 0
	for _, r := range rows {
		n += len(r.Ids)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byID == nil || len(c.byID)+n > writtenMax {
		c.byID = make(map[int64]WrittenRow, n)
	}
	for _, r := range rows {
		for j, oid := range r.Ids {
			o := byIdentity[r.IdentityIds[j]]
			if o == nil {
				continue
			}
			id := o.Identity
			c.byID[oid] = WrittenRow{ID: oid, Topic: o.Topic, Key: o.Key, Response: id.Response,
				StoredHeaders: o.Headers, SettlementID: &id.SettlementID, SettlementTenantID: o.Tenant,
				Sequence: &o.Sequence, Kind: &o.Kind, Version: &version}
		}
	}
}
