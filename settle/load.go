package settle

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/settlehq/settle/internal/money"
	"github.com/settlehq/settle/record"
)

var (
	sqlDeliveryLookup       = mustQuery("delivery_lookup.sql")
	sqlIdentityLookup       = mustQuery("identity_lookup.sql")
	sqlTargetLookup         = mustQuery("target_lookup.sql")
	sqlWaitingLookup        = mustQuery("waiting_lookup.sql")
	sqlPeriodLookup         = mustQuery("period_lookup.sql")
	sqlAccountInsert        = mustQuery("account_insert.sql")
	sqlAccountLock          = mustQuery("account_lock.sql")
	sqlAccountLockByID      = mustQuery("account_lock_by_id.sql")
	sqlChainLock            = mustQuery("chain_lock.sql")
	sqlChainRoot            = mustQuery("chain_root.sql")
	sqlHoldLock             = mustQuery("hold_lock.sql")
	sqlIdentityReserve      = mustQuery("identity_reserve.sql")
	sqlIdentityInsert       = mustQuery("identity_insert.sql")
	sqlLedgerEntryInsert    = mustQuery("ledger_entry_insert.sql")
	sqlAccountUpdate        = mustQuery("account_update.sql")
	sqlDeliveryInsert       = mustQuery("delivery_insert.sql")
	sqlOutboxInsert         = mustQuery("outbox_insert.sql")
	sqlDeadLetterInsert     = mustQuery("dead_letter_insert.sql")
	sqlConsumerOffsetUpsert = mustQuery("consumer_offset_upsert.sql")
	sqlConflictCaseOpen     = mustQuery("conflict_case_open.sql")
	sqlChainInsert          = mustQuery("chain_insert.sql")
	sqlChainUpdate          = mustQuery("chain_update.sql")
	sqlHoldInsert           = mustQuery("hold_insert.sql")
	sqlHoldUpdate           = mustQuery("hold_update.sql")
	sqlWaitingInsert        = mustQuery("waiting_insert.sql")
	sqlWaitingUpdate        = mustQuery("waiting_update.sql")
	sqlConflictCaseClose    = mustQuery("conflict_case_close.sql")
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
	var (
		dTopics          []string
		dParts           []int32
		dOffsets         []int64
		idKeys           [4][]string
		tgtKeys, ownKeys keyList
	)
	for _, k := range wake {
		tgtKeys.add(k)
		ownKeys.add(k)
		st.locks.add(recordLock(k.tenant, k.period, k.record), false)
	}
	accKeys := accountList{known: &st.s.accountIDs}
	seenID := map[record.Identity]bool{}
	var reserving []accountKey // accounts whose available funds the batch looks at
	for i := range ds {
		d := &ds[i]
		dTopics, dParts, dOffsets = append(dTopics, d.in.Topic), append(dParts, d.in.Partition), append(dOffsets, d.in.Offset)
		if d.err != nil || d.in.Exhausted != nil {
			continue
		}
		if !seenID[d.id] {
			seenID[d.id] = true
			idKeys[0], idKeys[1] = append(idKeys[0], d.id.TenantID), append(idKeys[1], d.id.AccountPeriod)
			idKeys[2], idKeys[3] = append(idKeys[2], d.id.RecordID), append(idKeys[3], string(d.id.Operation))
		}
		st.locks.add(recordLock(d.id.TenantID, d.id.AccountPeriod, d.id.RecordID), false)
		if k, ok := target(&d.rec); ok {
			tgtKeys.add(k)
		}
		if canBeTarget(d.rec.Kind) {
			ownKeys.add(recKey{d.rec.TenantID, d.rec.AccountPeriod, d.rec.RecordID})
		}
		if k, ok := ownAccount(&d.rec); ok {
			accKeys.add(k)
			if d.rec.Kind == record.KindHold {
				reserving = append(reserving, k)
			}
		}
	}

	b := &pgx.Batch{}
	st.queueLocks(b)
	b.Queue(sqlDeliveryLookup, dTopics, dParts, dOffsets)
	b.Queue(sqlIdentityLookup, idKeys[0], idKeys[1], idKeys[2], idKeys[3])
	b.Queue(sqlTargetLookup, tgtKeys.t, tgtKeys.p, tgtKeys.r)
	b.Queue(sqlWaitingLookup, idKeys[0], idKeys[1], idKeys[2], idKeys[3], ownKeys.t, ownKeys.p, ownKeys.r)
	b.Queue(sqlAccountInsert, accKeys.t, accKeys.s, accKeys.c)
	b.Queue(sqlAccountLock, accKeys.t, accKeys.s, accKeys.c, accKeys.ids)
	b.Queue(sqlIdentityReserve, len(ds))
	br := st.tx.SendBatch(ctx, b)
	defer func() { _ = br.Close() }() // for the early returns; the last step checks Close

	if err := st.readLocks(br); err != nil {
		return err
	}
	if err := st.readDeliveries(br); err != nil {
		return err
	}
	if err := st.readIdentities(br, true); err != nil {
		return err
	}
	if err := st.readIdentities(br, false); err != nil {
		return err
	}
	waits, err := st.readWaiting(br)
	if err != nil {
		return err
	}
	if _, err := br.Exec(); err != nil {
		return fmt.Errorf("create accounts: %w", err)
	}
	if err := st.readAccounts(br, accKeys.len()); err != nil {
		return err
	}
	st.accountsByKey = st.accountsByKey || len(accKeys.t) > 0
	rows, _ := br.Query()
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id, &st.now); err != nil {
			return fmt.Errorf("reserve identity ids: %w", err)
		}
		st.ids = append(st.ids, id)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("reserve identity ids: %w", err)
	}
	if err := br.Close(); err != nil {
		return err
	}
	// Operations waiting for a waiting operation the batch may apply: load
	// them too, level by level (each level is one round trip; chains of
	// waiting operations are short).
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
			return fmt.Errorf("waiting operations: %w", cerr)
		}
		if err != nil {
			return err
		}
		waits, next = append(waits, more...), more
	}
	// Arrival order within each target: loaded at different levels, they
	// are sorted once here (new ones, appended later, come after).
	for _, ws := range st.waitingByTarget {
		sort.Slice(ws, func(i, j int) bool { return ws[i].id < ws[j].id })
	}
	return st.loadLinked(ctx, waits, reserving)
}

// loadLinked locks, in a second round trip, what the first one named: the
// chains and holds of the targets, their accounts, the accounts of waiting
// operations the batch may apply, and expired holds on accounts where the
// batch reserves (they are released before the funds are looked at).
func (st *txState) loadLinked(ctx context.Context, waits []*waitingOp, reserving []accountKey) error {
	var rootIDs, holdIDs, expiringAccs []int64
	accKeys := accountList{known: &st.s.accountIDs}
	for _, ids := range st.byRecord {
		for _, id := range ids {
			switch {
			case id.outcome == OutcomeQuarantined:
			case id.key.Operation == record.KindHold:
				holdIDs = append(holdIDs, id.id)
			case id.rootID != 0:
				if _, ok := st.chains[id.rootID]; !ok {
					rootIDs = append(rootIDs, id.rootID)
				}
			}
		}
	}
	slices.Sort(rootIDs)
	rootIDs = slices.Compact(rootIDs) // a root named twice in the batch is locked once
	for _, w := range waits {
		if k, ok := ownAccount(&w.d.rec); ok {
			accKeys.add(k)
		}
	}
	for _, k := range reserving {
		expiringAccs = append(expiringAccs, st.accounts[k].id)
	}
	if len(rootIDs)+len(holdIDs)+len(expiringAccs)+accKeys.len() == 0 {
		return nil
	}
	b := &pgx.Batch{}
	b.Queue(sqlAccountInsert, accKeys.t, accKeys.s, accKeys.c)
	b.Queue(sqlAccountLock, accKeys.t, accKeys.s, accKeys.c, accKeys.ids)
	b.Queue(sqlChainLock, rootIDs)
	b.Queue(sqlChainRoot, rootIDs)
	b.Queue(sqlHoldLock, holdIDs, expiringAccs)
	br := st.tx.SendBatch(ctx, b)
	defer func() { _ = br.Close() }() // for the early returns; the last step checks Close
	if _, err := br.Exec(); err != nil {
		return fmt.Errorf("create accounts: %w", err)
	}
	if err := st.readAccounts(br, -1); err != nil {
		return err
	}
	st.accountsByKey = st.accountsByKey || len(accKeys.t) > 0
	type pendingChain struct {
		ch        *chain
		accountID int64
	}
	var pending []pendingChain
	rows, _ := br.Query()
	for rows.Next() {
		var (
			ch            chain
			accountID     int64
			net, refunded string
			recovered     bool
		)
		if err := rows.Scan(&ch.rootID, &accountID, &net, &ch.c.Version, &ch.refundID, &refunded, &ch.reclaimID,
			&recovered, &ch.rev, &ch.rootSubject, &ch.rootCurrency, &ch.rootSettlement, &ch.refundSettlement); err != nil {
			return fmt.Errorf("lock chains: %w", err)
		}
		ch.c.NetCharge = money.MustParse(net)
		ch.c.Refunded, ch.c.Refund = ch.refundID != 0, money.MustParse(refunded)
		ch.c.Reclaimed, ch.c.Recovered = ch.reclaimID != 0 && !recovered, recovered
		pending = append(pending, pendingChain{&ch, accountID})
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("lock chains: %w", err)
	}
	// Chains without a row are their root usage alone. Two transactions
	// that both create one collide on chains_pkey and one retries.
	locked := map[int64]bool{}
	for _, p := range pending {
		locked[p.ch.rootID] = true
	}
	rows, _ = br.Query()
	for rows.Next() {
		var (
			ch        chain
			accountID int64
			canonical []byte
		)
		if err := rows.Scan(&ch.rootID, &canonical, &ch.rootSubject, &ch.rootCurrency, &ch.rootSettlement, &accountID); err != nil {
			return fmt.Errorf("read chain roots: %w", err)
		}
		if locked[ch.rootID] {
			continue
		}
		fields, err := record.CanonicalFields(canonical)
		if err != nil {
			return fmt.Errorf("chain root %d: %w", ch.rootID, err)
		}
		ch.c.NetCharge = money.MustParse(fields["amount"])
		if ch.c.Version, err = strconv.ParseInt(fields["finalization_version"], 10, 64); err != nil {
			return fmt.Errorf("chain root %d: finalization_version: %w", ch.rootID, err)
		}
		ch.isNew = true
		pending = append(pending, pendingChain{&ch, accountID})
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read chain roots: %w", err)
	}
	if err := st.readHolds(br); err != nil {
		return err
	}
	if err := br.Close(); err != nil {
		return err
	}
	// Accounts reached only through a chain or a hold: lock them too.
	var missing []int64
	for _, p := range pending {
		if st.accountsByID[p.accountID] == nil {
			missing = append(missing, p.accountID)
		}
	}
	for _, h := range st.holds {
		if st.accountsByID[h.accountID] == nil {
			missing = append(missing, h.accountID)
		}
	}
	if len(missing) > 0 {
		b := &pgx.Batch{}
		b.Queue(sqlAccountLockByID, missing)
		br := st.tx.SendBatch(ctx, b)
		if err := st.readAccounts(br, -1); err != nil {
			_ = br.Close() // the read's error is the one to report
			return err
		}
		if err := br.Close(); err != nil {
			return err
		}
	}
	for _, p := range pending {
		p.ch.a = st.accountsByID[p.accountID]
		st.chains[p.ch.rootID] = p.ch
	}
	for _, h := range st.holds {
		h.a = st.accountsByID[h.accountID]
	}
	return nil
}

// readHolds reads locked hold rows (hold_lock.sql); their accounts are
// attached by the caller once locked.
func (st *txState) readHolds(br pgx.BatchResults) error {
	rows, _ := br.Query()
	for rows.Next() {
		var (
			h                 hold
			amount, remaining string
		)
		if err := rows.Scan(&h.identityID, &h.tenant, &h.accountID, &amount, &remaining, &h.expiresAt, &h.status, &h.closedBy, &h.rev,
			&h.key.AccountPeriod, &h.key.RecordID, &h.settlementID); err != nil {
			return fmt.Errorf("lock holds: %w", err)
		}
		h.amount, h.remaining = money.MustParse(amount), money.MustParse(remaining)
		h.key.TenantID, h.key.Operation = h.tenant, record.KindHold
		if st.holds[h.identityID] == nil {
			st.holds[h.identityID] = &h
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("lock holds: %w", err)
	}
	return nil
}

func (st *txState) readDeliveries(br pgx.BatchResults) error {
	rows, _ := br.Query()
	for rows.Next() {
		var (
			c             Coordinates
			outcome       string
			r             Result
			t, p, rid, op *string
			response      []byte
		)
		if err := rows.Scan(&c.Topic, &c.Partition, &c.Offset, &outcome, &r.Reason, &r.Error, &r.CaseID, &t, &p, &rid, &op, &response); err != nil {
			return fmt.Errorf("read deliveries: %w", err)
		}
		r.Version, r.Source, r.Outcome, r.Redelivered = SchemaVersionOutput, c, Outcome(outcome), true
		if t != nil {
			r.Identity = &IdentityJSON{*t, *p, *rid, *op}
			if r.Outcome != OutcomeQuarantined || r.Reason != ReasonFingerprintMismatch {
				r.Response = response
			}
			r.Replayed = r.Outcome == OutcomeDuplicate
		}
		st.redelivered[c] = r
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read deliveries: %w", err)
	}
	return nil
}

// readIdentities reads identity rows (identity_lookup or target_lookup).
func (st *txState) readIdentities(br pgx.BatchResults, byIdentity bool) error {
	rows, _ := br.Query()
	for rows.Next() {
		var (
			id      identity
			op, out string
			fp      int64
		)
		if err := rows.Scan(&id.id, &id.key.TenantID, &id.key.AccountPeriod, &id.key.RecordID, &op, &out, &id.reason,
			&fp, &id.version, &id.canonical, &id.response, &id.settlementID, &id.subject, &id.currency,
			&id.accountID, &id.rootID); err != nil {
			return fmt.Errorf("read identities: %w", err)
		}
		id.key.Operation, id.fp, id.outcome = record.Kind(op), uint64(fp), Outcome(out)
		if prior, ok := st.identities[id.key]; ok {
			// Found by both look-ups: keep one value.
			if !byIdentity {
				st.index(prior)
			}
			continue
		}
		st.identities[id.key] = &id
		if !byIdentity || canBeTarget(id.key.Operation) {
			st.index(&id)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read identities: %w", err)
	}
	return nil
}

// index makes an identity findable as a target.
func (st *txState) index(id *identity) {
	if !canBeTarget(id.key.Operation) || id.key.Operation == record.KindExpire {
		return
	}
	k := recKey{id.key.TenantID, id.key.AccountPeriod, id.key.RecordID}
	for _, x := range st.byRecord[k] {
		if x == id {
			return
		}
	}
	st.byRecord[k] = append(st.byRecord[k], id)
}

func (st *txState) readWaiting(br pgx.BatchResults) ([]*waitingOp, error) {
	var out []*waitingOp
	rows, _ := br.Query()
	for rows.Next() {
		var (
			w       waitingOp
			in      Input
			id      record.Identity
			op      string
			fp      int64
			headers []byte
		)
		if err := rows.Scan(&w.id, &id.TenantID, &id.AccountPeriod, &id.RecordID, &op, &w.target.period, &w.target.record,
			&fp, &w.canonical, &in.Key, &in.Value, &headers, &in.Topic, &in.Partition, &in.Offset,
			&w.response, &w.status, &w.caseID); err != nil {
			return nil, fmt.Errorf("read waiting operations: %w", err)
		}
		id.Operation, w.fp, w.target.tenant = record.Kind(op), uint64(fp), id.TenantID
		if _, seen := st.waitingByID[id]; seen {
			continue
		}
		var err error
		if in.Headers, err = DecodeHeaders(headers); err != nil {
			return nil, fmt.Errorf("waiting operation %s: headers: %w", id, err)
		}
		// A waiting operation is stored as the bytes it arrived with.
		p := st.s.dec.Prepare(in.Value, in.Headers)
		d := decodedOf(&in, &p)
		if d.err != nil {
			return nil, fmt.Errorf("waiting operation %s no longer decodes: %w", id, d.err)
		}
		w.d = &d
		st.waitingByID[id] = &w
		st.waitingByTarget[w.target] = append(st.waitingByTarget[w.target], &w)
		out = append(out, &w)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read waiting operations: %w", err)
	}
	return out, nil
}

// readAccounts reads locked account rows; want >= 0 asserts their number.
func (st *txState) readAccounts(br pgx.BatchResults, want int) error {
	rows, _ := br.Query()
	n := 0
	for rows.Next() {
		var (
			a             account
			balance, held string
		)
		if err := rows.Scan(&a.id, &a.key.tenant, &a.key.subject, &a.key.currency, &balance, &held, &a.seq, &a.head); err != nil {
			return fmt.Errorf("lock accounts: %w", err)
		}
		n++
		if st.accountsByID[a.id] != nil {
			continue
		}
		a.balance, a.held = money.MustParse(balance), money.MustParse(held)
		a.seqBefore = a.seq
		st.accounts[a.key] = &a
		st.accountsByID[a.id] = &a
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("lock accounts: %w", err)
	}
	if want >= 0 && n != want {
		// An account this process knew is gone: the database was restored
		// or replaced under it. Forget what it knew and try again.
		st.s.accountIDs.forget()
		return fmt.Errorf("lock accounts: locked %d of %d: %w", n, want, errLostRace)
	}
	return nil
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
