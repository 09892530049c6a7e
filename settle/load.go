package settle

import (
	"context"
	"fmt"
	"sort"

	"github.com/jackc/pgx/v5"

	"github.com/settlehq/settle/record"
)

var (
	sqlDeliveryLookup   = mustQuery("delivery_lookup.sql")
	sqlIdentityLookup   = mustQuery("identity_lookup.sql")
	sqlTargetLookup     = mustQuery("target_lookup.sql")
	sqlWaitingLookup    = mustQuery("waiting_lookup.sql")
	sqlPeriodLookup     = mustQuery("period_lookup.sql")
	sqlAccountInsert    = mustQuery("account_insert.sql")
	sqlAccountLock      = mustQuery("account_lock.sql")
	sqlAccountRead      = mustQuery("account_read.sql")
	sqlAccountReadByID  = mustQuery("account_read_by_id.sql")
	sqlChainLock        = mustQuery("chain_lock.sql")
	sqlChainRoot        = mustQuery("chain_root.sql")
	sqlHoldLock         = mustQuery("hold_lock.sql")
	sqlIdentityReserve  = mustQuery("identity_reserve.sql")
	sqlConflictCaseOpen = mustQuery("conflict_case_open.sql")
)

// ownAccount is the account a record moves by its own fields, if any.
func ownAccount(r *record.Record) (accountKey, bool) {
	switch r.Kind {
	case record.KindUsage, record.KindGrant, record.KindHold, record.KindCorrection:
		// A resolution's correction has no subject until its chain is
		// found: it moves the chain's account.
		return accountKey{r.TenantID, r.Subject, r.Currency}, r.Subject != ""
	}
	return accountKey{}, false
}

// target is the record an operation names, if it has one.
func target(r *record.Record) (recKey, bool) {
	switch r.Kind {
	case record.KindCorrection, record.KindReversal:
		return recKey{r.TenantID, r.TargetPeriod(), r.Corrects}, true
	case record.KindRefund, record.KindReclaim, record.KindHoldRelease:
		return recKey{r.TenantID, r.AccountPeriod, r.RecordID}, true
	case record.KindUsage:
		if r.HoldID != "" {
			return recKey{r.TenantID, r.HoldTargetPeriod(), r.HoldID}, true
		}
	}
	return recKey{}, false
}

// canBeTarget says whether a settled record of this kind is looked up by
// waiting operations (as their target, or as a record of the wrong kind
// at their target's record_id).
func canBeTarget(k record.Kind) bool {
	switch k {
	case record.KindRefund, record.KindReclaim, record.KindHoldRelease:
		return false
	}
	return true
}

// load reads, in two pipelined round trips, everything the batch needs to
// decide its outcomes, locking what it may change: its periods first (see
// periodLocks), earlier deliveries of its coordinates, its identities
// already settled or waiting, the targets its operations name, the waiting
// operations it wakes, closed periods, and the accounts, chains and holds it
// touches. wake names targets, settled before, whose waiting operations the
// transaction applies (see WakeWaiting); their identities and waiting
// operations are loaded as if a record of the batch named them.
func (st *txState) load(ctx context.Context, ds []decoded, wake []recKey) error {
	var k loadKeys
	k.accKeys.known = &st.s.accountIDs
	st.collectLoadKeys(&k, ds, wake)

	b := &pgx.Batch{}
	st.queueLocks(b)
	b.Queue(sqlDeliveryLookup, k.dTopics, k.dParts, k.dOffsets, k.dTenants)
	b.Queue(sqlIdentityLookup, k.idKeys[0], k.idKeys[1], k.idKeys[2], k.idKeys[3])
	b.Queue(sqlTargetLookup, k.tgtKeys.t, k.tgtKeys.p, k.tgtKeys.r)
	b.Queue(sqlWaitingLookup, k.idKeys[0], k.idKeys[1], k.idKeys[2], k.idKeys[3], k.ownKeys.t, k.ownKeys.p, k.ownKeys.r)
	b.Queue(sqlAccountInsert, k.accKeys.t, k.accKeys.s, k.accKeys.c)
	queueAccounts(b, k.accKeys.t, k.accKeys.s, k.accKeys.c, k.accKeys.ids)
	b.Queue(sqlIdentityReserve, len(ds))
	br := st.tx.SendBatch(ctx, b)
	defer func() { _ = br.Close() }() // for the early returns; the last step checks Close
	waits, err := st.readLoad(br, &k)
	if err != nil {
		return err
	}
	if err := br.Close(); err != nil {
		return err
	}
	if waits, err = st.loadWaitingLevels(ctx, waits); err != nil {
		return err
	}
	return st.loadLinked(ctx, waits, k.reserving)
}

// loadKeys are the keys of the first round trip of load.
type loadKeys struct {
	dTopics          []string // the batch's coordinates
	dParts           []int32
	dOffsets         []int64
	dTenants         []string    // the tenant each is looked up under: '' for every record, and a decoded record's own
	idKeys           [4][]string // identities: tenant, period, record, operation
	tgtKeys, ownKeys keyList     // targets named, records that can be targets
	accKeys          accountList
	reserving        []accountKey // accounts whose available funds the batch looks at
}

// collectLoadKeys gathers into k the keys of every record of the batch and of
// the targets wake names, and adds their record locks.
func (st *txState) collectLoadKeys(k *loadKeys, ds []decoded, wake []recKey) {
	for _, w := range wake {
		k.tgtKeys.add(w)
		k.ownKeys.add(w)
		st.locks.add(recordLock(w.tenant, w.period, w.record), false)
	}
	seenID := map[record.Identity]bool{}
	for i := range ds {
		d := &ds[i]
		k.dTopics, k.dParts, k.dOffsets = append(k.dTopics, d.in.Topic), append(k.dParts, d.in.Partition), append(k.dOffsets, d.in.Offset)
		k.dTenants = append(k.dTenants, "") // dead-lettered: no tenant
		if d.err != nil {
			continue
		}
		if d.id.TenantID != "" {
			k.dTopics, k.dParts, k.dOffsets = append(k.dTopics, d.in.Topic), append(k.dParts, d.in.Partition), append(k.dOffsets, d.in.Offset)
			k.dTenants = append(k.dTenants, d.id.TenantID)
		}
		if d.in.Exhausted != nil {
			continue
		}
		if !seenID[d.id] {
			seenID[d.id] = true
			k.idKeys[0], k.idKeys[1] = append(k.idKeys[0], d.id.TenantID), append(k.idKeys[1], d.id.AccountPeriod)
			k.idKeys[2], k.idKeys[3] = append(k.idKeys[2], d.id.RecordID), append(k.idKeys[3], string(d.id.Operation))
		}
		st.locks.add(recordLock(d.id.TenantID, d.id.AccountPeriod, d.id.RecordID), false)
		if t, ok := target(&d.rec); ok {
			k.tgtKeys.add(t)
		}
		if canBeTarget(d.rec.Kind) {
			k.ownKeys.add(recKey{d.rec.TenantID, d.rec.AccountPeriod, d.rec.RecordID})
		}
		if a, ok := ownAccount(&d.rec); ok {
			k.accKeys.add(a)
			if d.rec.Kind == record.KindHold {
				k.reserving = append(k.reserving, a)
			}
		}
	}
}

// readLoad reads the results of load's first round trip, in the order
// load queued them, and returns the waiting operations it found.
func (st *txState) readLoad(br pgx.BatchResults, k *loadKeys) ([]*waitingOp, error) {
	if err := st.readLocks(br); err != nil {
		return nil, err
	}
	if err := st.readDeliveries(br); err != nil {
		return nil, err
	}
	if err := st.readIdentities(br, true); err != nil {
		return nil, err
	}
	if err := st.readIdentities(br, false); err != nil {
		return nil, err
	}
	waits, err := st.readWaiting(br)
	if err != nil {
		return nil, err
	}
	if _, err := br.Exec(); err != nil {
		return nil, fmt.Errorf("create accounts: %w", err)
	}
	if err := st.readAccounts(br, k.accKeys.len()); err != nil {
		return nil, err
	}
	st.accountsByKey = st.accountsByKey || len(k.accKeys.t) > 0
	rows, _ := br.Query()
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id, &st.now); err != nil {
			return nil, fmt.Errorf("reserve identity ids: %w", err)
		}
		st.ids = append(st.ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reserve identity ids: %w", err)
	}
	return waits, nil
}

// loadWaitingLevels loads the operations waiting for a waiting operation the
// batch may apply, level by level (each level is one round trip; chains of
// waiting operations are short), and returns waits with them appended.
func (st *txState) loadWaitingLevels(ctx context.Context, waits []*waitingOp) ([]*waitingOp, error) {
	for level, next := 0, waits; len(next) > 0 && level < 16; level++ {
		var keys keyList
		for _, w := range next {
			if canBeTarget(w.d.rec.Kind) {
				keys.add(recKey{w.d.id.TenantID, w.d.id.AccountPeriod, w.d.id.RecordID})
			}
		}
		if len(keys.t) == 0 {
			break
		}
		b := &pgx.Batch{}
		b.Queue(sqlWaitingLookup, []string{}, []string{}, []string{}, []string{}, keys.t, keys.p, keys.r)
		br := st.tx.SendBatch(ctx, b)
		more, err := st.readWaiting(br)
		if cerr := br.Close(); err == nil && cerr != nil {
			return nil, fmt.Errorf("waiting operations: %w", cerr)
		}
		if err != nil {
			return nil, err
		}
		waits, next = append(waits, more...), more
	}
	// Arrival order within each target: loaded at different levels, they
	// are sorted once here (new ones, appended later, come after).
	for _, ws := range st.waitingByTarget {
		sort.Slice(ws, func(i, j int) bool { return ws[i].id < ws[j].id })
	}
	return waits, nil
}

// queueAccounts queues the lock of the accounts named by key (t, s, c)
// and by id, then the read of their state; readAccounts reads both
// results.
func queueAccounts(b *pgx.Batch, t, s, c []string, ids []int64) {
	b.Queue(sqlAccountLock, t, s, c, ids)
	b.Queue(sqlAccountRead, t, s, c, ids)
}

// queueAccountsByID is queueAccounts for accounts known by id only.
func queueAccountsByID(b *pgx.Batch, ids []int64) {
	b.Queue(sqlAccountLock, []string{}, []string{}, []string{}, ids)
	b.Queue(sqlAccountReadByID, ids)
}

// keyList collects distinct record keys as parallel arrays for unnest.
type keyList struct {
	seen    map[recKey]bool
	t, p, r []string
}

func (l *keyList) add(k recKey) {
	if l.seen == nil {
		l.seen = map[recKey]bool{}
	}
	if l.seen[k] {
		return
	}
	l.seen[k] = true
	l.t, l.p, l.r = append(l.t, k.tenant), append(l.p, k.period), append(l.r, k.record)
}

// accountList collects the distinct accounts a batch touches: the ids of
// those known to exist (Store.accountIDs), the keys of the others as
// parallel arrays.
type accountList struct {
	known   *accountCache
	seen    map[accountKey]bool
	ids     []int64
	t, s, c []string
}

func (l *accountList) add(k accountKey) {
	if l.seen == nil {
		l.seen = map[accountKey]bool{}
	}
	if l.seen[k] {
		return
	}
	l.seen[k] = true
	if id, ok := l.known.get(k); ok {
		l.ids = append(l.ids, id)
		return
	}
	l.t, l.s, l.c = append(l.t, k.tenant), append(l.s, k.subject), append(l.c, k.currency)
}

func (l *accountList) len() int { return len(l.ids) + len(l.t) }
