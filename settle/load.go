package settle

import (
	"context"
	"fmt"
	"sort"

	"github.com/settlehq/settle/record"
	"github.com/settlehq/settle/settle/internal/db"
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
	st.presize(len(ds) + len(wake))
	k := loadKeys{tgtKeys: newKeyList(len(ds)), ownKeys: newKeyList(len(ds)),
		accKeys: accountList{known: &st.s.accounts, seen: make(map[accountKey]bool, len(ds))}}
	st.collectLoadKeys(&k, ds, wake)
	st.s.probed.Add(int64(len(k.dTopics)))

	p := db.NewPipeline(st.tx)
	defer p.Close() // for the early returns; the last step is Send
	q := db.New(p)
	// Queued in the order readLoad reads them (the delivery look-up if any record is probed).
	r := loadReads{locks: st.queueLocks(ctx, q)}
	if len(k.dTopics) > 0 {
		r.deliveries = q.DeliveryLookup(ctx, []db.DeliveryLookupParams{{Topic: k.dTopics, Partition: k.dParts, Offset: k.dOffsets, TenantID: k.dTenants}})
	}
	r.identities = q.IdentityLookup(ctx, []db.IdentityLookupParams{{TenantID: k.idKeys[0], AccountPeriod: k.idKeys[1], RecordID: k.idKeys[2], Operation: k.idKeys[3]}})
	r.targets = q.TargetLookup(ctx, []db.TargetLookupParams{{TenantID: k.tgtKeys.t, AccountPeriod: k.tgtKeys.p, RecordID: k.tgtKeys.r}})
	r.waiting = q.WaitingLookup(ctx, []db.WaitingLookupParams{{
		TenantID: k.idKeys[0], AccountPeriod: k.idKeys[1], RecordID: k.idKeys[2], Operation: k.idKeys[3],
		TargetTenantID: k.ownKeys.t, TargetPeriod: k.ownKeys.p, TargetRecordID: k.ownKeys.r,
	}})
	r.accounts = queueAccounts(ctx, q, &k.accKeys)
	r.reserve = q.IdentityReserve(ctx, []int32{int32(len(ds))})
	waits, err := st.readLoad(r, &k)
	if err != nil {
		return err
	}
	if err := p.Send(ctx); err != nil {
		return err
	}
	if waits, err = st.loadWaitingLevels(ctx, waits); err != nil {
		return err
	}
	return st.loadLinked(ctx, waits, k.reserving)
}

// loadKeys are the keys of the first round trip of load.
type loadKeys struct {
	dTopics          []string // the batch's coordinates, but for records first delivered (txState.firstDelivered)
	dParts           []int32
	dOffsets         []int64
	dTenants         []string    // each one's record's tenant ('' when it does not decode): its repeats are under it
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
	seenID := make(map[record.Identity]bool, len(ds))
	firstDelivered := st.firstDelivered()
	for i := range ds {
		d := &ds[i]
		if !firstDelivered(d.in) {
			tenant := d.id.TenantID
			if d.err != nil {
				tenant = ""
			}
			k.dTopics, k.dParts, k.dOffsets = append(k.dTopics, d.in.Topic), append(k.dParts, d.in.Partition), append(k.dOffsets, d.in.Offset)
			k.dTenants = append(k.dTenants, tenant)
		}
		if d.err != nil {
			continue
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

// loadReads are the results of load's first round trip.
type loadReads struct {
	locks      lockReads
	deliveries *db.DeliveryLookupBatchResults
	identities *db.IdentityLookupBatchResults
	targets    *db.TargetLookupBatchResults
	waiting    *db.WaitingLookupBatchResults
	accounts   accountReads
	reserve    *db.IdentityReserveBatchResults
}

// readLoad reads the results of load's first round trip, in the order
// load queued them, and returns the waiting operations it found.
func (st *txState) readLoad(r loadReads, k *loadKeys) ([]*waitingOp, error) {
	if err := st.readLocks(r.locks); err != nil {
		return nil, err
	}
	if err := st.readDeliveries(r.deliveries); err != nil {
		return nil, err
	}
	ids, err := db.Rows(r.identities.Query)
	if err != nil {
		return nil, fmt.Errorf("read identities: %w", err)
	}
	st.addIdentities(ids, true)
	targets, err := db.Rows(r.targets.Query)
	if err != nil {
		return nil, fmt.Errorf("read targets: %w", err)
	}
	for i := range targets {
		st.addIdentity((*db.IdentityLookupRow)(&targets[i]), false)
	}
	waits, err := st.readWaiting(r.waiting)
	if err != nil {
		return nil, err
	}
	if err := st.readAccounts(r.accounts, k.accKeys.len()); err != nil {
		return nil, err
	}
	st.accountsByKey = st.accountsByKey || len(k.accKeys.t) > 0
	return waits, st.readReserved(r.reserve)
}

// readReserved reads identity ids reserved (identity_reserve.sql) and the
// transaction's clock.
func (st *txState) readReserved(r *db.IdentityReserveBatchResults) error {
	rows, err := db.Rows(r.Query)
	if err != nil {
		return fmt.Errorf("reserve identity ids: %w", err)
	}
	for _, row := range rows {
		st.ids, st.now = append(st.ids, *row.ID), row.Now
	}
	return nil
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
		p := db.NewPipeline(st.tx)
		res := db.New(p).WaitingLookup(ctx, []db.WaitingLookupParams{{
			TenantID: []string{}, AccountPeriod: []string{}, RecordID: []string{}, Operation: []string{},
			TargetTenantID: keys.t, TargetPeriod: keys.p, TargetRecordID: keys.r,
		}})
		more, err := st.readWaiting(res)
		if serr := p.Send(ctx); err == nil {
			err = serr
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

// accountReads are the results of queueAccounts.
type accountReads struct {
	insert *db.AccountInsertBatchResults // nil: nothing to create
	lock   *db.AccountLockBatchResults   // nil, with read: nothing to read
	read   *db.AccountReadBatchResults
	kept   []account // states kept by this process, neither locked nor read
}

// queueAccounts queues the creation of the accounts of l not known to
// exist, the lock of every account of l (by key and by id) whose state
// this process does not keep, then the read of their state; readAccounts
// reads the results.
func queueAccounts(ctx context.Context, q *db.Queries, l *accountList) accountReads {
	r := accountReads{kept: l.kept}
	if len(l.t) > 0 {
		r.insert = q.AccountInsert(ctx, []db.AccountInsertParams{{TenantID: l.t, Subject: l.s, Currency: l.c}})
	}
	if l.len() > 0 {
		r.lock = q.AccountLock(ctx, []db.AccountLockParams{{Ids: l.ids, TenantID: l.t, Subject: l.s, Currency: l.c}})
		r.read = q.AccountRead(ctx, []db.AccountReadParams{{Ids: l.ids, TenantID: l.t, Subject: l.s, Currency: l.c}})
	}
	return r
}

// queueAccountsByID is queueAccounts for accounts known by id only
// (reached through a chain or a hold, or a sweep's), read fresh.
func queueAccountsByID(ctx context.Context, q *db.Queries, ids []int64) accountReads {
	return queueAccounts(ctx, q, &accountList{ids: ids})
}

// keyList collects distinct record keys as parallel arrays for unnest.
type keyList struct {
	seen    map[recKey]bool
	t, p, r []string
}

// newKeyList is a keyList with room for n keys.
func newKeyList(n int) keyList {
	return keyList{seen: make(map[recKey]bool, n), t: make([]string, 0, n), p: make([]string, 0, n), r: make([]string, 0, n)}
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

// accountList collects the distinct accounts a batch touches: the states
// this process keeps, the ids of the others known to exist
// (Store.accounts), the keys of the rest as parallel arrays.
type accountList struct {
	known   *accountCache
	seen    map[accountKey]bool
	kept    []account
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
		if a, ok := l.known.state(id); ok {
			l.kept = append(l.kept, a)
			return
		}
		l.ids = append(l.ids, id)
		return
	}
	l.t, l.s, l.c = append(l.t, k.tenant), append(l.s, k.subject), append(l.c, k.currency)
}

func (l *accountList) len() int { return len(l.ids) + len(l.t) }
