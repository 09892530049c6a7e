package settle

import (
	"sync"

	"github.com/settlehq/settle/settle/internal/db"
	"github.com/settlehq/settle/settle/message"
)

// writtenMax bounds the settlements kept for the relay (≈ 1 KB each): a
// relay that lags, or that leads in another process, reads the rest from
// the tables.
const writtenMax = 20_000

// writtenCache is the settlement messages this process committed to the
// outbox, by outbox row id, as the relay's read of the tables gives them
// (outbox_pending.sql), so that the relay of the same process need not read
// back what it has just written. Full, it is emptied: the relay then reads
// what it held from the tables, and what a relay will never take (rows it
// published before they were kept, rows another process's relay published)
// does not pile up.
type writtenCache struct {
	mu   sync.Mutex
	byID map[int64]db.OutboxPendingRow
}

// WrittenMessage returns the outbox row id as the relay's read of the
// tables would give it, if this process wrote it (a settlement) and still
// keeps it.
func (s *Store) WrittenMessage(id int64) (db.OutboxPendingRow, bool) {
	c := &s.written
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.byID[id]
	return r, ok
}

// ForgetWritten lets go of outbox rows ids: the relay published or parked
// them.
func (s *Store) ForgetWritten(ids []int64) {
	c := &s.written
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range ids {
		delete(c.byID, id)
	}
}

// keep keeps the settlements of a committed transaction: rows are the
// outbox ids its insert returned, with their identities' ids.
func (c *writtenCache) keep(st *txState, rows []db.OutboxSettlementsInsertRow) {
	if len(rows) == 0 {
		return
	}
	byIdentity := make(map[int64]*outboxRow, len(st.outbox))
	for i := range st.outbox {
		if o := &st.outbox[i]; o.identity != nil {
			byIdentity[o.identity.id] = o
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
		c.byID = make(map[int64]db.OutboxPendingRow, n)
	}
	for _, r := range rows {
		for j, oid := range r.Ids {
			o := byIdentity[r.IdentityIds[j]]
			if o == nil {
				continue
			}
			id := o.identity
			c.byID[oid] = db.OutboxPendingRow{ID: oid, Topic: o.topic, Key: o.key, Response: id.response,
				StoredHeaders: o.headers, SettlementID: &id.settlementID, SettlementTenantID: o.tenant,
				Sequence: &o.sequence, Kind: &o.kind, Version: &version}
		}
	}
}
