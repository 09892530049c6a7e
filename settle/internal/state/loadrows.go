package state

import (
	"fmt"

	"github.com/settlehq/settle/fingerprint"
	"github.com/settlehq/settle/internal/money"
	"github.com/settlehq/settle/internal/pgq"
	"github.com/settlehq/settle/record"
	"github.com/settlehq/settle/settle/internal/db"
	"github.com/settlehq/settle/settle/message"
)

// ReadHolds reads locked hold rows (hold_lock.sql); their accounts are
// attached by the caller once locked.
func (st *State) ReadHolds(r *db.HoldLockBatchResults) error {
	rows, err := pgq.Rows(r.Query)
	if err != nil {
		return fmt.Errorf("lock holds: %w", err)
	}
	for _, row := range rows {
		if st.Holds[row.IdentityID] != nil {
			continue
		}
		st.Holds[row.IdentityID] = &Hold{
			IdentityID: row.IdentityID, Tenant: row.TenantID, AccountID: row.AccountID,
			Amount: money.MustParse(row.Amount), Remaining: money.MustParse(row.Remaining),
			ExpiresAt: row.ExpiresAt, Status: row.Status, ClosedBy: row.ClosedBy, rev: row.Rev,
			Key:          record.Identity{TenantID: row.TenantID, AccountPeriod: row.AccountPeriod, RecordID: row.RecordID, Operation: record.KindHold},
			SettlementID: row.SettlementID,
		}
	}
	return nil
}

func (st *State) readDeliveries(res *db.DeliveryLookupBatchResults) error {
	if res == nil {
		return nil // no record to probe: nothing was queued
	}
	rows, err := pgq.Rows(res.Query)
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
		st.Redelivered[c] = r
	}
	return nil
}

// addIdentities adds identity rows read by identity_lookup.
func (st *State) addIdentities(rows []db.IdentityLookupRow, byIdentity bool) {
	for i := range rows {
		st.addIdentity(&rows[i], byIdentity)
	}
}

// addIdentity adds an identity row read by identity_lookup (byIdentity) or
// target_lookup: the two return the same columns, so the generated target
// row converts to the identity row.
func (st *State) addIdentity(row *db.IdentityLookupRow, byIdentity bool) {
	id := &IdentityRow{
		ID: row.ID, Key: record.Identity{TenantID: row.TenantID, AccountPeriod: row.AccountPeriod, RecordID: row.RecordID, Operation: record.Kind(row.Operation)},
		Outcome: message.Outcome(row.Outcome), Reason: row.Reason, FP: uint64(row.Fingerprint), Version: int(row.CanonicalVersion),
		Canonical: row.Canonical, Response: row.Response, SettlementID: row.SettlementID, Subject: row.Subject,
		Currency: row.Currency, AccountID: row.AccountID, RootID: row.RootID,
		Source: message.Coordinates{Topic: row.Topic, Partition: row.Partition, Offset: row.Offset},
	}
	if prior, ok := st.Identities[id.Key]; ok {
		// Found by both look-ups: keep one value.
		if !byIdentity {
			st.Index(prior)
		}
		return
	}
	st.Identities[id.Key] = id
	if !byIdentity || CanBeTarget(id.Key.Operation) {
		st.Index(id)
	}
}

// Index makes an identity findable as a target.
func (st *State) Index(id *IdentityRow) {
	if !CanBeTarget(id.Key.Operation) || id.Key.Operation == record.KindExpire {
		return
	}
	k := RecKey{id.Key.TenantID, id.Key.AccountPeriod, id.Key.RecordID}
	for _, x := range st.ByRecord[k] {
		if x == id {
			return
		}
	}
	st.ByRecord[k] = append(st.ByRecord[k], id)
}

func (st *State) readWaiting(res *db.WaitingLookupBatchResults) ([]*Waiting, error) {
	rows, err := pgq.Rows(res.Query)
	if err != nil {
		return nil, fmt.Errorf("read waiting operations: %w", err)
	}
	var out []*Waiting
	for i := range rows {
		row := &rows[i]
		id := record.Identity{TenantID: row.TenantID, AccountPeriod: row.AccountPeriod, RecordID: row.RecordID, Operation: record.Kind(row.Operation)}
		if _, seen := st.WaitingByID[id]; seen {
			continue
		}
		w := Waiting{
			id: row.ID, Target: RecKey{row.TenantID, row.TargetPeriod, row.TargetRecordID}, FP: uint64(row.Fingerprint),
			Canonical: row.Canonical, Response: row.Response, Status: row.Status, CaseID: row.CaseID,
		}
		in := message.Input{Key: row.Key, Value: row.Value, Topic: row.Topic, Partition: row.Partition, Offset: row.Offset}
		var err error
		if in.Headers, err = pgq.DecodeHeaders(row.Headers); err != nil {
			return nil, fmt.Errorf("waiting operation %s: headers: %w", id, err)
		}
		// A waiting operation is stored as the bytes it arrived with.
		p := fingerprint.Prepare(st.Shared.Decoder, in.Value, in.Headers)
		d := ItemOf(&in, &p)
		if d.Err != nil {
			return nil, fmt.Errorf("waiting operation %s no longer decodes: %w", id, d.Err)
		}
		w.Item = &d
		st.WaitingByID[id] = &w
		st.WaitingByTarget[w.Target] = append(st.WaitingByTarget[w.Target], &w)
		out = append(out, &w)
	}
	return out, nil
}

// ReadAccounts reads locked account rows; want >= 0 asserts their number.
func (st *State) ReadAccounts(r AccountReads, want int) error {
	if r.insert != nil {
		if err := pgq.Run(r.insert.Exec); err != nil {
			return fmt.Errorf("create accounts: %w", err)
		}
	}
	var rows []db.AccountReadRow
	if r.lock != nil {
		if err := pgq.Run(r.lock.Exec); err != nil {
			return fmt.Errorf("lock accounts: %w", err)
		}
		var err error
		if rows, err = pgq.Rows(r.read.Query); err != nil {
			return fmt.Errorf("read accounts: %w", err)
		}
	}
	n := len(rows)
	for i := range r.kept {
		a := &r.kept[i]
		if st.AccountsByID[a.ID] == nil {
			st.Accounts[a.Key] = a
			st.AccountsByID[a.ID] = a
		}
	}
	for _, row := range rows {
		if st.AccountsByID[row.ID] != nil {
			continue
		}
		a := &Account{
			ID: row.ID, Key: AccountKey{row.TenantID, row.Subject, row.Currency},
			Balance: money.MustParse(row.Balance), Held: money.MustParse(row.Held),
			Seq: row.Seq, seqBefore: row.Seq, Head: row.ChainHead, EntryID: row.EntryID, entryBefore: row.EntryID,
		}
		st.Accounts[a.Key] = a
		st.AccountsByID[a.ID] = a
	}
	if want >= 0 && n != want {
		// An account this process knew is gone: the database was restored
		// or replaced under it. Forget what it knew and try again.
		st.Shared.Accounts.forget()
		return fmt.Errorf("lock accounts: locked %d of %d: %w", n, want, ErrLostRace)
	}
	return nil
}
