package state

import (
	"context"
	"fmt"
	"sort"

	"github.com/settlehq/settle/internal/pgq"
	"github.com/settlehq/settle/record"
	"github.com/settlehq/settle/settle/internal/db"
)

// ownAccount is the account a record moves by its own fields, if any.
func ownAccount(r *record.Record) (AccountKey, bool) {
	switch r.Kind {
	case record.KindUsage, record.KindGrant, record.KindHold, record.KindCorrection:
		// A resolution's correction has no subject until its chain is
		// found: it moves the chain's account.
		return AccountKey{r.TenantID, r.Subject, r.Currency}, r.Subject != ""
	}
	return AccountKey{}, false
}

// Target is the record an operation names, if it has one.
func Target(r *record.Record) (RecKey, bool) {
	switch r.Kind {
	case record.KindCorrection, record.KindReversal:
		return RecKey{r.TenantID, r.TargetPeriod(), r.Corrects}, true
	case record.KindRefund, record.KindReclaim, record.KindHoldRelease:
		return RecKey{r.TenantID, r.AccountPeriod, r.RecordID}, true
	case record.KindUsage:
		if r.HoldID != "" {
			return RecKey{r.TenantID, r.HoldTargetPeriod(), r.HoldID}, true
		}
	}
	return RecKey{}, false
}

// CanBeTarget says whether a settled record of this kind is looked up by
// waiting operations (as their target, or as a record of the wrong kind
// at their target's record_id).
func CanBeTarget(k record.Kind) bool {
	switch k {
	case record.KindRefund, record.KindReclaim, record.KindHoldRelease:
		return false
	}
	return true
}

// Load reads, in two pipelined round trips, everything the batch needs to
// decide its outcomes, locking what it may change: its periods first (see
// PeriodLocks), earlier deliveries of its coordinates, its identities
// already settled or waiting, the targets its operations name, the waiting
// operations it wakes, closed periods, and the accounts, chains and holds it
// touches. wake names targets, settled before, whose waiting operations the
// transaction applies (see WakeWaiting); their identities and waiting
// operations are loaded as if a record of the batch named them.
func (st *State) Load(ctx context.Context, ds []Item, wake []RecKey) error {
	st.presize(len(ds) + len(wake))
	k := loadKeys{tgtKeys: newKeyList(len(ds)), ownKeys: newKeyList(len(ds)),
		accKeys: accountList{known: &st.Shared.Accounts, seen: make(map[AccountKey]bool, len(ds))}}
	st.collectLoadKeys(&k, ds, wake)
	st.Shared.Probed.Add(int64(len(k.dTopics)))

	p := pgq.NewPipeline(st.Tx)
	defer p.Close() // for the early returns; the last step is Send
	q := db.New(p)
	// Queued in the order readLoad reads them (the delivery look-up if any
	// record is probed, the targets' if any operation names one).
	r := loadReads{locks: st.QueueLocks(ctx, q)}
	if len(k.dTopics) > 0 {
		r.deliveries = q.DeliveryLookup(ctx, []db.DeliveryLookupParams{{Topic: k.dTopics, Partition: k.dParts, Offset: k.dOffsets, TenantID: k.dTenants, LetterTenantID: k.lTenants}})
	}
	r.identities = q.IdentityLookup(ctx, []db.IdentityLookupParams{{TenantID: k.idKeys[0], AccountPeriod: k.idKeys[1], RecordID: k.idKeys[2], Operation: k.idKeys[3]}})
	if len(k.tgtKeys.t) > 0 {
		r.targets = q.TargetLookup(ctx, []db.TargetLookupParams{{TenantID: k.tgtKeys.t, AccountPeriod: k.tgtKeys.p, RecordID: k.tgtKeys.r}})
	}
	r.waiting = q.WaitingLookup(ctx, []db.WaitingLookupParams{{
		TenantID: k.idKeys[0], AccountPeriod: k.idKeys[1], RecordID: k.idKeys[2], Operation: k.idKeys[3],
		TargetTenantID: k.ownKeys.t, TargetPeriod: k.ownKeys.p, TargetRecordID: k.ownKeys.r,
		Tenants: distinct(k.idKeys[0], k.ownKeys.t),
	}})
	r.accounts = queueAccounts(ctx, q, &k.accKeys)
	r.reserve = q.IdentityReserve(ctx, []int32{db.Blocks(len(ds))})
	r.reserved = len(ds)
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

// loadKeys are the keys of the first round trip of Load.
type loadKeys struct {
	dTopics          []string // the batch's coordinates, but for records first delivered (State.firstDelivered)
	dParts           []int32
	dOffsets         []int64
	dTenants         []string    // each one's record's tenant ('' when it does not decode): its repeats are under it
	lTenants         []string    // the tenant its dead letter would be under (Item.LetterIdentity)
	idKeys           [4][]string // identities: tenant, period, record, operation
	tgtKeys, ownKeys keyList     // targets named, records that can be targets
	accKeys          accountList
	reserving        []AccountKey // accounts whose available funds the batch looks at
}

// collectLoadKeys gathers into k the keys of every record of the batch and of
// the targets wake names, and adds their record locks.
func (st *State) collectLoadKeys(k *loadKeys, ds []Item, wake []RecKey) {
	for _, w := range wake {
		k.tgtKeys.add(w)
		k.ownKeys.add(w)
		st.locks.Add(RecordLock(w.Tenant, w.Period, w.Record), false)
	}
	seenID := make(map[record.Identity]bool, len(ds))
	firstDelivered := st.firstDelivered()
	for i := range ds {
		d := &ds[i]
		if !firstDelivered(d.In) {
			tenant := d.ID.TenantID
			if d.Err != nil {
				tenant = ""
			}
			k.dTopics, k.dParts, k.dOffsets = append(k.dTopics, d.In.Topic), append(k.dParts, d.In.Partition), append(k.dOffsets, d.In.Offset)
			k.dTenants, k.lTenants = append(k.dTenants, tenant), append(k.lTenants, d.LetterIdentity().TenantID)
		}
		if d.Err != nil {
			continue
		}
		if d.In.Undecoded() {
			continue
		}
		if !seenID[d.ID] {
			seenID[d.ID] = true
			k.idKeys[0], k.idKeys[1] = append(k.idKeys[0], d.ID.TenantID), append(k.idKeys[1], d.ID.AccountPeriod)
			k.idKeys[2], k.idKeys[3] = append(k.idKeys[2], d.ID.RecordID), append(k.idKeys[3], string(d.ID.Operation))
		}
		st.locks.Add(RecordLock(d.ID.TenantID, d.ID.AccountPeriod, d.ID.RecordID), false)
		if t, ok := Target(&d.Rec); ok {
			k.tgtKeys.add(t)
		}
		if CanBeTarget(d.Rec.Kind) {
			k.ownKeys.add(RecKey{d.Rec.TenantID, d.Rec.AccountPeriod, d.Rec.RecordID})
		}
		if a, ok := ownAccount(&d.Rec); ok {
			k.accKeys.add(a)
			if d.Rec.Kind == record.KindHold {
				k.reserving = append(k.reserving, a)
			}
		}
	}
}

// loadReads are the results of Load's first round trip.
type loadReads struct {
	locks      LockReads
	deliveries *db.DeliveryLookupBatchResults
	identities *db.IdentityLookupBatchResults
	targets    *db.TargetLookupBatchResults
	waiting    *db.WaitingLookupBatchResults
	accounts   AccountReads
	reserve    *db.IdentityReserveBatchResults
	reserved   int // the ids reserve takes
}

// readLoad reads the results of Load's first round trip, in the order
// Load queued them, and returns the waiting operations it found.
func (st *State) readLoad(r loadReads, k *loadKeys) ([]*Waiting, error) {
	if err := st.ReadLocks(r.locks); err != nil {
		return nil, err
	}
	if err := st.readDeliveries(r.deliveries); err != nil {
		return nil, err
	}
	ids, err := pgq.Rows(r.identities.Query)
	if err != nil {
		return nil, fmt.Errorf("read identities: %w", err)
	}
	st.addIdentities(ids, true)
	if r.targets != nil { // queued only for a batch whose operations name targets
		targets, err := pgq.Rows(r.targets.Query)
		if err != nil {
			return nil, fmt.Errorf("read targets: %w", err)
		}
		for i := range targets {
			st.addIdentity((*db.IdentityLookupRow)(&targets[i]), false)
		}
	}
	waits, err := st.readWaiting(r.waiting)
	if err != nil {
		return nil, err
	}
	if err := st.ReadAccounts(r.accounts, k.accKeys.len()); err != nil {
		return nil, err
	}
	st.accountsByKey = st.accountsByKey || len(k.accKeys.t) > 0
	return waits, st.readReserved(r.reserve, r.reserved)
}

// readReserved reads n identity ids reserved (identity_reserve.sql) and
// the transaction's clock.
func (st *State) readReserved(r *db.IdentityReserveBatchResults, n int) error {
	rows, err := pgq.Rows(r.Query)
	if err != nil {
		return fmt.Errorf("reserve identity ids: %w", err)
	}
	starts := make([]int64, len(rows))
	for i, row := range rows {
		starts[i], st.Now = row.V, row.Now
	}
	st.ids = db.Reserved(st.ids, starts, n)
	return nil
}

// loadWaitingLevels loads the operations waiting for a waiting operation the
// batch may apply, level by level (each level is one round trip; chains of
// waiting operations are short), and returns waits with them appended.
func (st *State) loadWaitingLevels(ctx context.Context, waits []*Waiting) ([]*Waiting, error) {
	for level, next := 0, waits; len(next) > 0 && level < 16; level++ {
		var keys keyList
		for _, w := range next {
			if CanBeTarget(w.Item.Rec.Kind) {
				keys.add(RecKey{w.Item.ID.TenantID, w.Item.ID.AccountPeriod, w.Item.ID.RecordID})
			}
		}
		if len(keys.t) == 0 {
			break
		}
		p := pgq.NewPipeline(st.Tx)
		res := db.New(p).WaitingLookup(ctx, []db.WaitingLookupParams{{
			TenantID: []string{}, AccountPeriod: []string{}, RecordID: []string{}, Operation: []string{},
			TargetTenantID: keys.t, TargetPeriod: keys.p, TargetRecordID: keys.r, Tenants: distinct(keys.t),
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
	for _, ws := range st.WaitingByTarget {
		sort.Slice(ws, func(i, j int) bool { return ws[i].id < ws[j].id })
	}
	return waits, nil
}

// AccountReads are the results of queueAccounts.
type AccountReads struct {
	insert *db.AccountInsertBatchResults // nil: nothing to create
	lock   *db.AccountLockBatchResults   // nil, with read: nothing to read
	read   *db.AccountReadBatchResults
	kept   []Account // states kept by this process, neither locked nor read
}

// queueAccounts queues the creation of the accounts of l not known to
// exist, the lock of every account of l (by key and by id) whose state
// this process does not keep, then the read of their state; readAccounts
// reads the results.
func queueAccounts(ctx context.Context, q *db.Queries, l *accountList) AccountReads {
	r := AccountReads{kept: l.kept}
	if len(l.t) > 0 {
		r.insert = q.AccountInsert(ctx, []db.AccountInsertParams{{TenantID: l.t, Subject: l.s, Currency: l.c}})
	}
	if l.len() > 0 {
		r.lock = q.AccountLock(ctx, []db.AccountLockParams{{Ids: l.ids, TenantID: l.t, Subject: l.s, Currency: l.c}})
		r.read = q.AccountRead(ctx, []db.AccountReadParams{{Ids: l.ids, TenantID: l.t, Subject: l.s, Currency: l.c}})
	}
	return r
}

// QueueAccountsByID is queueAccounts for accounts known by id only
// (reached through a chain or a hold, or a sweep's), read fresh.
func QueueAccountsByID(ctx context.Context, q *db.Queries, ids []int64) AccountReads {
	return queueAccounts(ctx, q, &accountList{ids: ids})
}

// keyList collects distinct record keys as parallel arrays for unnest.
type keyList struct {
	seen    map[RecKey]bool
	t, p, r []string
}

// newKeyList is a keyList with room for n keys.
func newKeyList(n int) keyList {
	return keyList{seen: make(map[RecKey]bool, n), t: make([]string, 0, n), p: make([]string, 0, n), r: make([]string, 0, n)}
}

func (l *keyList) add(k RecKey) {
	if l.seen == nil {
		l.seen = map[RecKey]bool{}
	}
	if l.seen[k] {
		return
	}
	l.seen[k] = true
	l.t, l.p, l.r = append(l.t, k.Tenant), append(l.p, k.Period), append(l.r, k.Record)
}

// accountList collects the distinct accounts a batch touches: the states
// this process keeps, the ids of the others known to exist
// (Shared.Accounts), the keys of the rest as parallel arrays.
type accountList struct {
	known   *AccountCache
	seen    map[AccountKey]bool
	kept    []Account
	ids     []int64
	t, s, c []string
}

func (l *accountList) add(k AccountKey) {
	if l.seen == nil {
		l.seen = map[AccountKey]bool{}
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
	l.t, l.s, l.c = append(l.t, k.Tenant), append(l.s, k.Subject), append(l.c, k.Currency)
}

func (l *accountList) len() int { return len(l.ids) + len(l.t) }

// distinct returns the strings of the lists, each once (never nil: a
// NULL array would stand for none).
func distinct(lists ...[]string) []string {
	out := []string{}
	seen := map[string]bool{}
	for _, l := range lists {
		for _, s := range l {
			if !seen[s] {
				seen[s] = true
				out = append(out, s)
			}
		}
	}
	return out
}
