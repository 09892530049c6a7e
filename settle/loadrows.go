package settle

import (
	"fmt"

	"github.com/settlehq/settle/internal/money"
	"github.com/settlehq/settle/record"
	"github.com/settlehq/settle/settle/internal/db"
	"github.com/settlehq/settle/settle/message"
)

// readHolds reads locked hold rows (hold_lock.sql); their accounts are
// attached by the caller once locked.
func (st *txState) readHolds(r *db.HoldLockBatchResults) error {
	rows, err := db.Rows(r.Query)
	if err != nil {
		return fmt.Errorf("lock holds: %w", err)
	}
	for _, row := range rows {
		if st.holds[row.IdentityID] != nil {
			continue
		}
		st.holds[row.IdentityID] = &hold{
			identityID: row.IdentityID, tenant: row.TenantID, accountID: row.AccountID,
			amount: money.MustParse(row.Amount), remaining: money.MustParse(row.Remaining),
			expiresAt: row.ExpiresAt, status: row.Status, closedBy: row.ClosedBy, rev: row.Rev,
			key:          record.Identity{TenantID: row.TenantID, AccountPeriod: row.AccountPeriod, RecordID: row.RecordID, Operation: record.KindHold},
			settlementID: row.SettlementID,
		}
	}
	return nil
}

func (st *txState) readDeliveries(res *db.DeliveryLookupBatchResults) error {
	if res == nil {
		return nil // no record to probe: nothing was queued
	}
	rows, err := db.Rows(res.Query)
	if err != nil {
		return fmt.Errorf("read deliveries: %w", err)
	}
	for _, row := range rows {
		c := message.Coordinates{Topic: row.Topic, Partition: row.Partition, Offset: row.Offset}
		r := message.Result{Version: message.SchemaVersionOutput, Source: c, Outcome: message.Outcome(row.Outcome), Reason: row.Reason, Error: row.Error, CaseID: row.CaseID, Redelivered: true}
		if row.TenantID != nil {
			r.Identity = &message.IdentityJSON{TenantID: *row.TenantID, AccountPeriod: *row.AccountPeriod, RecordID: *row.RecordID, Operation: *row.Operation}
			if r.Outcome != message.OutcomeQuarantined || r.Reason != message.ReasonFingerprintMismatch {
				r.Response = row.Response
			}
			r.Replayed = r.Outcome == message.OutcomeDuplicate
		}
		st.redelivered[c] = r
	}
	return nil
}

// addIdentities adds identity rows read by identity_lookup.
func (st *txState) addIdentities(rows []db.IdentityLookupRow, byIdentity bool) {
	for i := range rows {
		st.addIdentity(&rows[i], byIdentity)
	}
}

// addIdentity adds an identity row read by identity_lookup (byIdentity) or
// target_lookup: the two return the same columns, so the generated target
// row converts to the identity row.
func (st *txState) addIdentity(row *db.IdentityLookupRow, byIdentity bool) {
	id := &identity{
		id: row.ID, key: record.Identity{TenantID: row.TenantID, AccountPeriod: row.AccountPeriod, RecordID: row.RecordID, Operation: record.Kind(row.Operation)},
		outcome: message.Outcome(row.Outcome), reason: row.Reason, fp: uint64(row.Fingerprint), version: int(row.CanonicalVersion),
		canonical: row.Canonical, response: row.Response, settlementID: row.SettlementID, subject: row.Subject,
		currency: row.Currency, accountID: row.AccountID, rootID: row.RootID,
		source: message.Coordinates{Topic: row.Topic, Partition: row.Partition, Offset: row.Offset},
	}
	if prior, ok := st.identities[id.key]; ok {
		// Found by both look-ups: keep one value.
		if !byIdentity {
			st.index(prior)
		}
		return
	}
	st.identities[id.key] = id
	if !byIdentity || canBeTarget(id.key.Operation) {
		st.index(id)
	}
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

func (st *txState) readWaiting(res *db.WaitingLookupBatchResults) ([]*waitingOp, error) {
	rows, err := db.Rows(res.Query)
	if err != nil {
		return nil, fmt.Errorf("read waiting operations: %w", err)
	}
	var out []*waitingOp
	for i := range rows {
		row := &rows[i]
		id := record.Identity{TenantID: row.TenantID, AccountPeriod: row.AccountPeriod, RecordID: row.RecordID, Operation: record.Kind(row.Operation)}
		if _, seen := st.waitingByID[id]; seen {
			continue
		}
		w := waitingOp{
			id: row.ID, target: recKey{row.TenantID, row.TargetPeriod, row.TargetRecordID}, fp: uint64(row.Fingerprint),
			canonical: row.Canonical, response: row.Response, status: row.Status, caseID: row.CaseID,
		}
		in := Input{Key: row.Key, Value: row.Value, Topic: row.Topic, Partition: row.Partition, Offset: row.Offset}
		var err error
		if in.Headers, err = db.DecodeHeaders(row.Headers); err != nil {
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
	return out, nil
}

// readAccounts reads locked account rows; want >= 0 asserts their number.
func (st *txState) readAccounts(r accountReads, want int) error {
	if r.insert != nil {
		if err := db.Run(r.insert.Exec); err != nil {
			return fmt.Errorf("create accounts: %w", err)
		}
	}
	var rows []db.AccountReadRow
	if r.lock != nil {
		if err := db.Run(r.lock.Exec); err != nil {
			return fmt.Errorf("lock accounts: %w", err)
		}
		var err error
		if rows, err = db.Rows(r.read.Query); err != nil {
			return fmt.Errorf("read accounts: %w", err)
		}
	}
	n := len(rows)
	for i := range r.kept {
		a := &r.kept[i]
		if st.accountsByID[a.id] == nil {
			st.accounts[a.key] = a
			st.accountsByID[a.id] = a
		}
	}
	for _, row := range rows {
		if st.accountsByID[row.ID] != nil {
			continue
		}
		a := &account{
			id: row.ID, key: accountKey{row.TenantID, row.Subject, row.Currency},
			balance: money.MustParse(row.Balance), held: money.MustParse(row.Held),
			seq: row.Seq, seqBefore: row.Seq, head: row.ChainHead, entryID: row.EntryID, entryBefore: row.EntryID,
		}
		st.accounts[a.key] = a
		st.accountsByID[a.id] = a
	}
	if want >= 0 && n != want {
		// An account this process knew is gone: the database was restored
		// or replaced under it. Forget what it knew and try again.
		st.s.accounts.forget()
		return fmt.Errorf("lock accounts: locked %d of %d: %w", n, want, errLostRace)
	}
	return nil
}
