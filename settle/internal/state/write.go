package state

import (
	"cmp"
	"context"
	"slices"
	"strconv"
	"time"

	"github.com/settlehq/settle/internal/pgq"
	"github.com/settlehq/settle/record"
	"github.com/settlehq/settle/settle/internal/db"
	"github.com/settlehq/settle/settle/message"
)

// DeadLetterRow is an input record given up on: its dead_letters row and
// its message to the dead-letter topic.
type DeadLetterRow struct {
	In       *message.Input
	ID       record.Identity // what the letter says of its record (Item.LetterIdentity): "" where it could not be read
	Reason   string
	Class    string
	Err      string
	Attempts int
}

// LetterIdentity is what a dead letter of d says of its record: its
// identity when it decoded, else what its bytes say (record.Written); zero
// for a compressed batch. Its tenant is the tenant the letter is stored
// under, and a redelivery looks for it there.
func (d *Item) LetterIdentity() record.Identity {
	switch {
	case d.Err == nil && d.ID.TenantID != "":
		return d.ID
	case d.In.Batch != nil:
		return record.Identity{}
	}
	return record.Written(d.In.Value)
}

// OutboxHeaders are the dead-letter message's headers: the original ones
// plus why, where from, how often it was tried and, for a message sent
// without its value, the value's length.
func (dl DeadLetterRow) OutboxHeaders(truncated bool) []byte {
	hs := append([]record.Header(nil), dl.In.Headers...)
	hs = append(hs,
		record.Header{Key: "dlq_reason", Value: []byte(dl.Reason)},
		record.Header{Key: "dlq_error_class", Value: []byte(dl.Class)},
		record.Header{Key: "dlq_error", Value: []byte(dl.Err)},
		record.Header{Key: "dlq_source_topic", Value: []byte(dl.In.Topic)},
		record.Header{Key: "dlq_source_partition", Value: []byte(strconv.Itoa(int(dl.In.Partition)))},
		record.Header{Key: "dlq_source_offset", Value: []byte(strconv.FormatInt(dl.In.Offset, 10))},
		record.Header{Key: "dlq_attempts", Value: []byte(strconv.Itoa(dl.Attempts))},
		record.Header{Key: "version", Value: []byte(strconv.Itoa(message.SchemaVersionOutput))},
	)
	if b := dl.In.Batch; b != nil {
		hs = append(hs, record.Header{Key: message.DeadLetterSourceNextOffsetHeader, Value: strconv.AppendInt(nil, b.NextOffset, 10)})
	}
	if truncated {
		hs = append(hs, record.Header{Key: message.DeadLetterValueTruncatedHeader, Value: strconv.AppendInt(nil, int64(len(dl.In.Value)), 10)})
	}
	return pgq.EncodeHeaders(hs)
}

// Write writes every row of the batch: the identities and ledger entries
// first (the outbox's webhook trigger reads the identities), with COPY from
// CopyRowsMin rows, then queues everything else in one pipeline, which the
// caller may add to and sends with the COMMIT (Store.commit): one round
// trip.
func (st *State) Write(ctx context.Context, group string) (*pgq.Pipeline, error) {
	p := pgq.NewPipeline(st.Tx)
	q := db.New(p)
	if err := st.writeIdentities(ctx, q); err != nil {
		return nil, err
	}
	if err := st.writeEntries(ctx, q); err != nil {
		return nil, err
	}
	st.queueAccountKept(ctx, q)
	st.queueDeliveries(ctx, q)
	st.queueDeadLetters(ctx, q)
	st.queueOutbox(ctx, q)
	st.queueOffsets(ctx, q, group)
	st.queueChains(ctx, q)
	st.queueHolds(ctx, q)
	st.queueWaiting(ctx, q)
	if len(st.ClosedCases) > 0 {
		_ = q.ConflictCaseClose(ctx, st.ClosedCases) // queued: Send reports its error
	}
	if r := st.Resolution; r != nil {
		_ = q.CaseResolutionInsert(ctx, *r)
		_ = q.ConflictCaseResolve(ctx, db.ConflictCaseResolveParams{ID: r.CaseID, Status: ResolvedStatus(r.Decision)})
	}
	return p, nil
}

// CopyRowsMin is the number of rows from which a batch's identities and
// ledger entries are written with COPY. A COPY is a statement and two
// round trips of its own, streamed by pgx from goroutines of their own:
// for the few rows of a small batch (a group of the HTTP edge, a quiet
// stream) that cost more than the rows, and they are queued in the last
// pipeline instead (BENCHMARKS.md, "Measured choices in the code").
const CopyRowsMin = 100

// writeIdentities writes the identities first seen in this batch: with
// COPY (identity_copy.sql), or queued on q (identity_insert.sql).
func (st *State) writeIdentities(ctx context.Context, q *db.Queries) error {
	n := len(st.NewIdentities)
	if n == 0 {
		return nil
	}
	rows := make([]db.IdentityCopyParams, n)
	for i, id := range st.NewIdentities {
		st.identityRow(id, &rows[i])
	}
	if n >= CopyRowsMin {
		_, err := db.On(st.Tx).IdentityCopy(ctx, rows)
		return err
	}
	u := db.IdentityInsertParams{FirstSeenAt: rows[0].FirstSeenAt, LastAttemptedAt: rows[0].LastAttemptedAt, Attempts: rows[0].Attempts}
	for i := range rows {
		r := &rows[i]
		u.ID, u.TenantID, u.AccountPeriod = append(u.ID, r.ID), append(u.TenantID, r.TenantID), append(u.AccountPeriod, r.AccountPeriod)
		u.RecordID, u.Operation, u.Fingerprint = append(u.RecordID, r.RecordID), append(u.Operation, r.Operation), append(u.Fingerprint, r.Fingerprint)
		u.CanonicalVersion, u.Canonical = append(u.CanonicalVersion, r.CanonicalVersion), append(u.Canonical, r.Canonical)
		u.Outcome, u.Reason, u.Response = append(u.Outcome, r.Outcome), append(u.Reason, r.Reason), append(u.Response, r.Response)
		u.SettlementID, u.AccountID = append(u.SettlementID, deref(r.SettlementID)), append(u.AccountID, deref(r.AccountID))
		u.RootID, u.TargetID = append(u.RootID, deref(r.RootID)), append(u.TargetID, deref(r.TargetID))
		u.Source, u.Attributes, u.Topic = append(u.Source, r.Source), append(u.Attributes, r.Attributes), append(u.Topic, r.Topic)
		u.Partition, u.Offset = append(u.Partition, r.Partition), append(u.Offset, r.Offset)
		u.Subject, u.Currency = append(u.Subject, r.Subject), append(u.Currency, r.Currency)
	}
	_ = q.IdentityInsert(ctx, u) // queued: Send reports its error
	return nil
}

// deref is *v, or v's zero value for nil: identity_insert.sql's null.
func deref[T any](v *T) T {
	if v == nil {
		var zero T
		return zero
	}
	return *v
}

// identityRow fills row with id's values.
func (st *State) identityRow(id *IdentityRow, row *db.IdentityCopyParams) {
	d := id.Item
	*row = db.IdentityCopyParams{
		ID: id.ID, TenantID: id.Key.TenantID, AccountPeriod: id.Key.AccountPeriod, RecordID: id.Key.RecordID,
		Operation: string(id.Key.Operation), Fingerprint: int64(id.FP), CanonicalVersion: int16(id.Version),
		Canonical: id.Canonical, Outcome: string(id.Outcome), Reason: id.Reason, Response: id.Response,
		SettlementID: nullEmpty(id.SettlementID), AccountID: nullZeroID(id.AccountID), RootID: nullZeroID(id.RootID),
		Source: d.Rec.Source, Topic: d.In.Topic, Partition: d.In.Partition, Offset: d.In.Offset,
		FirstSeenAt: st.firstSeen, LastAttemptedAt: st.AttemptStart, Attempts: int32(st.attempt),
		Subject: id.Subject, Currency: id.Currency, TargetID: nullZeroID(id.TargetID),
	}
	if len(d.Rec.Attributes) > 0 {
		row.Attributes = d.Rec.Attributes
	}
}

// writeEntries writes the batch's ledger entries: with COPY
// (ledger_entry_copy.sql) from CopyRowsMin, or queued on q
// (ledger_entry_insert.sql).
func (st *State) writeEntries(ctx context.Context, q *db.Queries) error {
	n := len(st.Entries)
	if n == 0 {
		return nil
	}
	// In key order: two transactions that append to the same accounts
	// wait for each other's keys in one order, never in a cycle.
	slices.SortFunc(st.Entries, func(a, b EntryRow) int {
		return cmp.Or(cmp.Compare(a.AccountID, b.AccountID), cmp.Compare(a.ID, b.ID))
	})
	if n < CopyRowsMin {
		var u db.LedgerEntryInsertParams
		for i := range st.Entries {
			e := &st.Entries[i]
			u.ID = append(u.ID, e.ID)
			u.IdentityID, u.AccountID, u.TenantID = append(u.IdentityID, e.IdentityID), append(u.AccountID, e.AccountID), append(u.TenantID, e.Tenant)
			u.Bucket, u.Amount, u.ChainHash = append(u.Bucket, e.Bucket), append(u.Amount, e.Amount.String()), append(u.ChainHash, e.Hash)
			u.Seq, u.BalanceAfter, u.HeldAfter = append(u.Seq, e.Seq), append(u.BalanceAfter, e.Balance.String()), append(u.HeldAfter, e.Held.String())
		}
		_ = q.LedgerEntryInsert(ctx, u) // queued: Send reports its error
		return nil
	}
	rows := make([]db.LedgerEntryCopyParams, n)
	for i := range st.Entries {
		e, r := &st.Entries[i], &rows[i]
		r.ID, r.IdentityID, r.AccountID, r.TenantID = e.ID, e.IdentityID, e.AccountID, e.Tenant
		r.Bucket, r.ChainHash, r.Seq = e.Bucket, e.Hash, &e.Seq
		r.Amount, _ = e.Amount.NumericValue() // never fails
		r.BalanceAfter, _ = e.Balance.NumericValue()
		r.HeldAfter, _ = e.Held.NumericValue()
	}
	_, err := db.On(st.Tx).LedgerEntryCopy(ctx, rows)
	return err
}

// The queue functions below queue their statement on write's pipeline: the
// generated method returns at once, and Send reports its error.

// queueAccountKept queues the check of the kept states the transaction
// used (account_kept.sql): each one's newest row is still there, and those
// that answers used without writing a row to their account are still the
// account's newest. A row written from a state another writer moved past
// is refused by the primary key; a state whose rows are gone (a database
// restored under the process), or an answer alone, is not (AccountCache).
func (st *State) queueAccountKept(ctx context.Context, q *db.Queries) {
	var r db.AccountKeptParams
	for _, a := range st.AccountsByID {
		if a.Kept {
			r.TenantIds, r.Ids, r.EntryIds = append(r.TenantIds, a.Key.Tenant), append(r.Ids, a.ID), append(r.EntryIds, a.entryBefore)
			r.Newest = append(r.Newest, a.Answered && a.Seq == a.seqBefore)
		}
	}
	if len(r.Ids) > 0 {
		_ = q.AccountKept(ctx, r)
	}
}

// queueDeliveries queues the insert of one delivery row per input record that
// needs one.
func (st *State) queueDeliveries(ctx context.Context, q *db.Queries) {
	if len(st.Deliveries) == 0 {
		return
	}
	var u db.DeliveryInsertParams
	for _, dl := range st.Deliveries {
		u.Topic, u.Partition, u.Offset = append(u.Topic, dl.In.Topic), append(u.Partition, dl.In.Partition), append(u.Offset, dl.In.Offset)
		u.TenantID, u.IdentityID, u.CaseID = append(u.TenantID, dl.Tenant), append(u.IdentityID, dl.IdentityID), append(u.CaseID, dl.CaseID)
		u.Outcome, u.Reason = append(u.Outcome, string(dl.Outcome)), append(u.Reason, dl.Reason)
	}
	_ = q.DeliveryInsert(ctx, u)
}

// queueDeadLetters queues the insert of the dead letters.
func (st *State) queueDeadLetters(ctx context.Context, q *db.Queries) {
	if len(st.DeadLetters) == 0 {
		return
	}
	var u db.DeadLetterInsertParams
	for _, dl := range st.DeadLetters {
		u.Topic, u.Partition, u.Offset = append(u.Topic, dl.In.Topic), append(u.Partition, dl.In.Partition), append(u.Offset, dl.In.Offset)
		u.Key, u.Value, u.Headers = append(u.Key, dl.In.Key), append(u.Value, NonNil(dl.In.Value)), append(u.Headers, pgq.EncodeHeaders(dl.In.Headers))
		u.Reason, u.ErrorClass, u.Error = append(u.Reason, dl.Reason), append(u.ErrorClass, dl.Class), append(u.Error, dl.Err)
		u.Attempts, u.TenantID = append(u.Attempts, int32(dl.Attempts)), append(u.TenantID, dl.ID.TenantID)
		u.AccountPeriod, u.RecordID = append(u.AccountPeriod, dl.ID.AccountPeriod), append(u.RecordID, dl.ID.RecordID)
	}
	_ = q.DeadLetterInsert(ctx, u)
}

// queueOutbox queues the insert of the outbox messages: the settlements
// in one statement (a row per tenant and block of ids), whose ids the
// commit reads (Store.commit), and the other messages in another.
func (st *State) queueOutbox(ctx context.Context, q *db.Queries) {
	if len(st.Outbox) == 0 {
		return
	}
	var msgs db.OutboxInsertParams
	var settlements []*OutboxRow
	for i := range st.Outbox {
		o := &st.Outbox[i]
		if o.Identity == nil {
			msgs.Topic, msgs.Key, msgs.Value = append(msgs.Topic, o.Topic), append(msgs.Key, o.Key), append(msgs.Value, o.Value)
			msgs.Headers, msgs.TenantID = append(msgs.Headers, o.Headers), append(msgs.TenantID, o.Tenant)
			continue
		}
		settlements = append(settlements, o)
	}
	if len(msgs.Topic) > 0 {
		_ = q.OutboxInsert(ctx, msgs) // queued: Send reports its error
	}
	if len(settlements) > 0 {
		st.OutboxWritten = q.OutboxSettlementsInsert(ctx, []db.OutboxSettlementsInsertParams{settlementRows(st.Shared.SettlementsTopic, settlements)})
	}
}

// settlementRows lays the settlements out as outbox_settlements_insert.sql
// takes them: a row per tenant and block of at most db.IDBlock, each a
// slice of the flat arrays, a tenant's settlements in their order.
func settlementRows(topic string, settlements []*OutboxRow) db.OutboxSettlementsInsertParams {
	set := db.OutboxSettlementsInsertParams{Topic: topic, Version: int16(message.SchemaVersionOutput)}
	byTenant := map[string][]*OutboxRow{}
	var tenants []string
	for _, o := range settlements {
		if _, seen := byTenant[o.Tenant]; !seen {
			tenants = append(tenants, o.Tenant)
		}
		byTenant[o.Tenant] = append(byTenant[o.Tenant], o)
	}
	for _, t := range tenants {
		for i, o := range byTenant[t] {
			if i%db.IDBlock == 0 {
				set.TenantID, set.Lo = append(set.TenantID, t), append(set.Lo, int32(len(set.IdentityID)+1)) // arrays start at 1
				set.Hi = append(set.Hi, 0)
			}
			set.IdentityID, set.Key = append(set.IdentityID, o.Identity.ID), append(set.Key, o.Key)
			set.Sequence, set.Kind, set.Headers = append(set.Sequence, o.Sequence), append(set.Kind, o.Kind), append(set.Headers, o.Headers)
			set.Hi[len(set.Hi)-1] = int32(len(set.IdentityID))
		}
	}
	return set
}

// queueOffsets queues the consumer group's next offsets, committed in the
// same transaction as the records they cover; group "" commits none.
func (st *State) queueOffsets(ctx context.Context, q *db.Queries, group string) {
	if group == "" || len(st.Offsets) == 0 {
		return
	}
	var u db.ConsumerOffsetUpsertParams
	for k, v := range st.Offsets {
		u.GroupID, u.Topic = append(u.GroupID, group), append(u.Topic, k.Topic)
		u.Partition, u.NextOffset = append(u.Partition, k.Partition), append(u.NextOffset, v)
	}
	_ = q.ConsumerOffsetUpsert(ctx, u)
}

// nullZeroID is an id, or NULL for 0.
func nullZeroID(id int64) *int64 {
	if id == 0 {
		return nil
	}
	return &id
}

// nullEmpty is a string, or NULL for "".
func nullEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// NonNil is b, or an empty slice for nil: the bytea columns are NOT NULL.
func NonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

func (st *State) queueChains(ctx context.Context, q *db.Queries) {
	var ins db.ChainInsertParams
	var upd db.ChainUpdateParams
	for _, ch := range st.Chains {
		if !ch.Dirty {
			continue
		}
		refunded := ""
		if ch.Rules.Refunded {
			refunded = ch.Rules.Refund.String()
		}
		net := ch.Rules.NetCharge.String()
		if ch.IsNew {
			ins.RootID, ins.TenantID, ins.AccountID = append(ins.RootID, ch.RootID), append(ins.TenantID, ch.Account.Key.Tenant), append(ins.AccountID, ch.Account.ID)
			ins.NetCharge, ins.Version = append(ins.NetCharge, net), append(ins.Version, ch.Rules.Version)
			ins.RefundID, ins.Refunded = append(ins.RefundID, ch.RefundID), append(ins.Refunded, refunded)
			ins.ReclaimID, ins.Recovered = append(ins.ReclaimID, ch.ReclaimID), append(ins.Recovered, ch.Rules.Recovered)
			continue
		}
		upd.RootID, upd.NetCharge, upd.Version = append(upd.RootID, ch.RootID), append(upd.NetCharge, net), append(upd.Version, ch.Rules.Version)
		upd.RefundID, upd.Refunded = append(upd.RefundID, ch.RefundID), append(upd.Refunded, refunded)
		upd.ReclaimID, upd.Recovered = append(upd.ReclaimID, ch.ReclaimID), append(upd.Recovered, ch.Rules.Recovered)
		upd.Rev = append(upd.Rev, ch.rev)
	}
	if len(ins.RootID) > 0 {
		_ = q.ChainInsert(ctx, ins)
	}
	if len(upd.RootID) > 0 {
		_ = q.ChainUpdate(ctx, upd)
	}
}

func (st *State) queueHolds(ctx context.Context, q *db.Queries) {
	var ins db.HoldInsertParams
	var upd db.HoldUpdateParams
	for _, h := range st.Holds {
		if !h.Dirty {
			continue
		}
		if h.IsNew {
			exp := ""
			if h.ExpiresAt != nil {
				exp = h.ExpiresAt.Truncate(time.Microsecond).Format(time.RFC3339Nano)
			}
			ins.IdentityID, ins.TenantID, ins.AccountID = append(ins.IdentityID, h.IdentityID), append(ins.TenantID, h.Tenant), append(ins.AccountID, h.Account.ID)
			ins.Amount, ins.Remaining = append(ins.Amount, h.Amount.String()), append(ins.Remaining, h.Remaining.String())
			ins.ExpiresAtText, ins.Status, ins.ClosedBy = append(ins.ExpiresAtText, exp), append(ins.Status, h.Status), append(ins.ClosedBy, h.ClosedBy)
			continue
		}
		upd.IdentityID, upd.Remaining = append(upd.IdentityID, h.IdentityID), append(upd.Remaining, h.Remaining.String())
		upd.Status, upd.ClosedBy, upd.Rev = append(upd.Status, h.Status), append(upd.ClosedBy, h.ClosedBy), append(upd.Rev, h.rev)
	}
	if len(ins.IdentityID) > 0 {
		_ = q.HoldInsert(ctx, ins)
	}
	if len(upd.IdentityID) > 0 {
		_ = q.HoldUpdate(ctx, upd)
	}
}

func (st *State) queueWaiting(ctx context.Context, q *db.Queries) {
	var ins db.WaitingInsertParams
	for _, w := range st.WaitingList {
		d := w.Item
		ins.TenantID, ins.AccountPeriod = append(ins.TenantID, d.ID.TenantID), append(ins.AccountPeriod, d.ID.AccountPeriod)
		ins.RecordID, ins.Operation = append(ins.RecordID, d.ID.RecordID), append(ins.Operation, string(d.ID.Operation))
		ins.TargetPeriod, ins.TargetRecordID = append(ins.TargetPeriod, w.Target.Period), append(ins.TargetRecordID, w.Target.Record)
		ins.Fingerprint, ins.Canonical = append(ins.Fingerprint, int64(w.FP)), append(ins.Canonical, w.Canonical)
		ins.Key, ins.Value, ins.Headers = append(ins.Key, d.In.Key), append(ins.Value, NonNil(d.In.Value)), append(ins.Headers, pgq.EncodeHeaders(d.In.Headers))
		ins.Topic, ins.Partition, ins.Offset = append(ins.Topic, d.In.Topic), append(ins.Partition, d.In.Partition), append(ins.Offset, d.In.Offset)
		ins.Response, ins.Status = append(ins.Response, w.Response), append(ins.Status, w.Status)
	}
	var upd db.WaitingUpdateParams
	for _, ws := range st.WaitingByTarget {
		for _, w := range ws {
			if w.Dirty && !w.IsNew {
				upd.ID, upd.Status, upd.CaseID = append(upd.ID, w.id), append(upd.Status, w.Status), append(upd.CaseID, w.CaseID)
			}
		}
	}
	if len(ins.TenantID) > 0 {
		_ = q.WaitingInsert(ctx, ins)
	}
	if len(upd.ID) > 0 {
		_ = q.WaitingUpdate(ctx, upd)
	}
}
