package settle

import (
	"cmp"
	"context"
	"slices"
	"strconv"
	"time"

	"github.com/settlehq/settle/record"
	"github.com/settlehq/settle/settle/internal/db"
	"github.com/settlehq/settle/settle/message"
)

type deadLetterRow struct {
	in       *Input
	reason   string
	class    string
	err      string
	attempts int
}

// outboxHeaders are the dead-letter message's headers: the original ones
// plus why, where from, how often it was tried and, for a message sent
// without its value, the value's length.
func (dl deadLetterRow) outboxHeaders(truncated bool) []byte {
	hs := append([]record.Header(nil), dl.in.Headers...)
	hs = append(hs,
		record.Header{Key: "dlq_reason", Value: []byte(dl.reason)},
		record.Header{Key: "dlq_error_class", Value: []byte(dl.class)},
		record.Header{Key: "dlq_error", Value: []byte(dl.err)},
		record.Header{Key: "dlq_source_topic", Value: []byte(dl.in.Topic)},
		record.Header{Key: "dlq_source_partition", Value: []byte(strconv.Itoa(int(dl.in.Partition)))},
		record.Header{Key: "dlq_source_offset", Value: []byte(strconv.FormatInt(dl.in.Offset, 10))},
		record.Header{Key: "dlq_attempts", Value: []byte(strconv.Itoa(dl.attempts))},
		record.Header{Key: "version", Value: []byte(strconv.Itoa(message.SchemaVersionOutput))},
	)
	if truncated {
		hs = append(hs, record.Header{Key: DeadLetterValueTruncatedHeader, Value: strconv.AppendInt(nil, int64(len(dl.in.Value)), 10)})
	}
	return db.EncodeHeaders(hs)
}

// write writes every row of the batch: the identities and ledger entries
// first (the outbox's webhook trigger reads the identities), with COPY from
// copyRowsMin rows, then queues everything else in one pipeline, which the
// caller may add to and sends with the COMMIT (Store.commit): one round
// trip.
func (st *txState) write(ctx context.Context, group string) (*db.Pipeline, error) {
	p := db.NewPipeline(st.tx)
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
	if len(st.closedCases) > 0 {
		_ = q.ConflictCaseClose(ctx, st.closedCases) // queued: Send reports its error
	}
	if r := st.resolution; r != nil {
		_ = q.CaseResolutionInsert(ctx, *r)
		_ = q.ConflictCaseResolve(ctx, db.ConflictCaseResolveParams{ID: r.CaseID, Status: resolvedStatus(r.Decision)})
	}
	return p, nil
}

// copyRowsMin is the number of rows from which a batch's identities and
// ledger entries are written with COPY. A COPY is a statement and two
// round trips of its own, streamed by pgx from goroutines of their own:
// for the few rows of a small batch (a group of the HTTP edge, a quiet
// stream) that cost more than the rows, and they are queued in the last
// pipeline instead (BENCHMARKS.md, "Measured choices in the code").
const copyRowsMin = 100

// writeIdentities writes the identities first seen in this batch: with
// COPY (identity_copy.sql), or queued on q (identity_insert.sql).
func (st *txState) writeIdentities(ctx context.Context, q *db.Queries) error {
	n := len(st.newIdentities)
	if n == 0 {
		return nil
	}
	rows := make([]db.IdentityCopyParams, n)
	for i, id := range st.newIdentities {
		st.identityRow(id, &rows[i])
	}
	if n >= copyRowsMin {
		_, err := db.On(st.tx).IdentityCopy(ctx, rows)
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
func (st *txState) identityRow(id *identity, row *db.IdentityCopyParams) {
	d := id.d
	*row = db.IdentityCopyParams{
		ID: id.id, TenantID: id.key.TenantID, AccountPeriod: id.key.AccountPeriod, RecordID: id.key.RecordID,
		Operation: string(id.key.Operation), Fingerprint: int64(id.fp), CanonicalVersion: int16(id.version),
		Canonical: id.canonical, Outcome: string(id.outcome), Reason: id.reason, Response: id.response,
		SettlementID: nullEmpty(id.settlementID), AccountID: nullZeroID(id.accountID), RootID: nullZeroID(id.rootID),
		Source: d.rec.Source, Topic: d.in.Topic, Partition: d.in.Partition, Offset: d.in.Offset,
		FirstSeenAt: st.firstSeen, LastAttemptedAt: st.attemptStart, Attempts: int32(st.attempt),
		Subject: id.subject, Currency: id.currency, TargetID: nullZeroID(id.targetID),
	}
	if len(d.rec.Attributes) > 0 {
		row.Attributes = d.rec.Attributes
	}
}

// writeEntries writes the batch's ledger entries: with COPY
// (ledger_entry_copy.sql) from copyRowsMin, or queued on q
// (ledger_entry_insert.sql).
func (st *txState) writeEntries(ctx context.Context, q *db.Queries) error {
	n := len(st.entries)
	if n == 0 {
		return nil
	}
	// In key order: two transactions that append to the same accounts
	// wait for each other's keys in one order, never in a cycle.
	slices.SortFunc(st.entries, func(a, b entryRow) int {
		return cmp.Or(cmp.Compare(a.accountID, b.accountID), cmp.Compare(a.id, b.id))
	})
	if n < copyRowsMin {
		var u db.LedgerEntryInsertParams
		for i := range st.entries {
			e := &st.entries[i]
			u.ID = append(u.ID, e.id)
			u.IdentityID, u.AccountID, u.TenantID = append(u.IdentityID, e.identityID), append(u.AccountID, e.accountID), append(u.TenantID, e.tenant)
			u.Bucket, u.Amount, u.ChainHash = append(u.Bucket, e.bucket), append(u.Amount, e.amount.String()), append(u.ChainHash, e.hash)
			u.Seq, u.BalanceAfter, u.HeldAfter = append(u.Seq, e.seq), append(u.BalanceAfter, e.balance.String()), append(u.HeldAfter, e.held.String())
		}
		_ = q.LedgerEntryInsert(ctx, u) // queued: Send reports its error
		return nil
	}
	rows := make([]db.LedgerEntryCopyParams, n)
	for i := range st.entries {
		e, r := &st.entries[i], &rows[i]
		r.ID, r.IdentityID, r.AccountID, r.TenantID = e.id, e.identityID, e.accountID, e.tenant
		r.Bucket, r.ChainHash, r.Seq = e.bucket, e.hash, &e.seq
		r.Amount, _ = e.amount.NumericValue() // never fails
		r.BalanceAfter, _ = e.balance.NumericValue()
		r.HeldAfter, _ = e.held.NumericValue()
	}
	_, err := db.On(st.tx).LedgerEntryCopy(ctx, rows)
	return err
}

// The queue functions below queue their statement on write's pipeline: the
// generated method returns at once, and Send reports its error.

// queueAccountKept queues the check of the kept states the transaction
// used (account_kept.sql): each one's newest row is still there, and those
// that answers used without writing a row to their account are still the
// account's newest. A row written from a state another writer moved past
// is refused by the primary key; a state whose rows are gone (a database
// restored under the process), or an answer alone, is not (accountCache).
func (st *txState) queueAccountKept(ctx context.Context, q *db.Queries) {
	var r db.AccountKeptParams
	for _, a := range st.accountsByID {
		if a.kept {
			r.TenantIds, r.Ids, r.EntryIds = append(r.TenantIds, a.key.tenant), append(r.Ids, a.id), append(r.EntryIds, a.entryBefore)
			r.Newest = append(r.Newest, a.answered && a.seq == a.seqBefore)
		}
	}
	if len(r.Ids) > 0 {
		_ = q.AccountKept(ctx, r)
	}
}

// queueDeliveries queues the insert of one delivery row per input record that
// needs one.
func (st *txState) queueDeliveries(ctx context.Context, q *db.Queries) {
	if len(st.deliveries) == 0 {
		return
	}
	var u db.DeliveryInsertParams
	for _, dl := range st.deliveries {
		u.Topic, u.Partition, u.Offset = append(u.Topic, dl.in.Topic), append(u.Partition, dl.in.Partition), append(u.Offset, dl.in.Offset)
		u.TenantID, u.IdentityID, u.CaseID = append(u.TenantID, dl.tenant), append(u.IdentityID, dl.identityID), append(u.CaseID, dl.caseID)
		u.Outcome, u.Reason = append(u.Outcome, string(dl.outcome)), append(u.Reason, dl.reason)
	}
	_ = q.DeliveryInsert(ctx, u)
}

// queueDeadLetters queues the insert of the dead letters.
func (st *txState) queueDeadLetters(ctx context.Context, q *db.Queries) {
	if len(st.deadLetters) == 0 {
		return
	}
	var u db.DeadLetterInsertParams
	for _, dl := range st.deadLetters {
		u.Topic, u.Partition, u.Offset = append(u.Topic, dl.in.Topic), append(u.Partition, dl.in.Partition), append(u.Offset, dl.in.Offset)
		u.Key, u.Value, u.Headers = append(u.Key, dl.in.Key), append(u.Value, nonNil(dl.in.Value)), append(u.Headers, db.EncodeHeaders(dl.in.Headers))
		u.Reason, u.ErrorClass, u.Error = append(u.Reason, dl.reason), append(u.ErrorClass, dl.class), append(u.Error, dl.err)
		u.Attempts = append(u.Attempts, int32(dl.attempts))
	}
	_ = q.DeadLetterInsert(ctx, u)
}

// queueOutbox queues the insert of the outbox messages: the settlements
// in one statement (a row per tenant), whose ids the commit reads
// (Store.commit), and the other messages in another.
func (st *txState) queueOutbox(ctx context.Context, q *db.Queries) {
	if len(st.outbox) == 0 {
		return
	}
	var msgs db.OutboxInsertParams
	set := db.OutboxSettlementsInsertParams{Topic: st.s.cfg.SettlementsTopic, Version: int16(message.SchemaVersionOutput)}
	for i := range st.outbox {
		o := &st.outbox[i]
		if o.identity == nil {
			msgs.Topic, msgs.Key, msgs.Value = append(msgs.Topic, o.topic), append(msgs.Key, o.key), append(msgs.Value, o.value)
			msgs.Headers, msgs.TenantID = append(msgs.Headers, o.headers), append(msgs.TenantID, o.tenant)
			continue
		}
		set.TenantID, set.IdentityID, set.Key = append(set.TenantID, o.tenant), append(set.IdentityID, o.identity.id), append(set.Key, o.key)
		set.Sequence, set.Kind, set.Headers = append(set.Sequence, o.sequence), append(set.Kind, o.kind), append(set.Headers, o.headers)
	}
	if len(msgs.Topic) > 0 {
		_ = q.OutboxInsert(ctx, msgs) // queued: Send reports its error
	}
	if len(set.IdentityID) > 0 {
		st.outboxWritten = q.OutboxSettlementsInsert(ctx, []db.OutboxSettlementsInsertParams{set})
	}
}

// queueOffsets queues the consumer group's next offsets, committed in the
// same transaction as the records they cover; group "" commits none.
func (st *txState) queueOffsets(ctx context.Context, q *db.Queries, group string) {
	if group == "" || len(st.offsets) == 0 {
		return
	}
	var u db.ConsumerOffsetUpsertParams
	for k, v := range st.offsets {
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

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

func (st *txState) queueChains(ctx context.Context, q *db.Queries) {
	var ins db.ChainInsertParams
	var upd db.ChainUpdateParams
	for _, ch := range st.chains {
		if !ch.dirty {
			continue
		}
		refunded := ""
		if ch.c.Refunded {
			refunded = ch.c.Refund.String()
		}
		net := ch.c.NetCharge.String()
		if ch.isNew {
			ins.RootID, ins.TenantID, ins.AccountID = append(ins.RootID, ch.rootID), append(ins.TenantID, ch.a.key.tenant), append(ins.AccountID, ch.a.id)
			ins.NetCharge, ins.Version = append(ins.NetCharge, net), append(ins.Version, ch.c.Version)
			ins.RefundID, ins.Refunded = append(ins.RefundID, ch.refundID), append(ins.Refunded, refunded)
			ins.ReclaimID, ins.Recovered = append(ins.ReclaimID, ch.reclaimID), append(ins.Recovered, ch.c.Recovered)
			continue
		}
		upd.RootID, upd.NetCharge, upd.Version = append(upd.RootID, ch.rootID), append(upd.NetCharge, net), append(upd.Version, ch.c.Version)
		upd.RefundID, upd.Refunded = append(upd.RefundID, ch.refundID), append(upd.Refunded, refunded)
		upd.ReclaimID, upd.Recovered = append(upd.ReclaimID, ch.reclaimID), append(upd.Recovered, ch.c.Recovered)
		upd.Rev = append(upd.Rev, ch.rev)
	}
	if len(ins.RootID) > 0 {
		_ = q.ChainInsert(ctx, ins)
	}
	if len(upd.RootID) > 0 {
		_ = q.ChainUpdate(ctx, upd)
	}
}

func (st *txState) queueHolds(ctx context.Context, q *db.Queries) {
	var ins db.HoldInsertParams
	var upd db.HoldUpdateParams
	for _, h := range st.holds {
		if !h.dirty {
			continue
		}
		if h.isNew {
			exp := ""
			if h.expiresAt != nil {
				exp = h.expiresAt.Truncate(time.Microsecond).Format(time.RFC3339Nano)
			}
			ins.IdentityID, ins.TenantID, ins.AccountID = append(ins.IdentityID, h.identityID), append(ins.TenantID, h.tenant), append(ins.AccountID, h.a.id)
			ins.Amount, ins.Remaining = append(ins.Amount, h.amount.String()), append(ins.Remaining, h.remaining.String())
			ins.ExpiresAtText, ins.Status, ins.ClosedBy = append(ins.ExpiresAtText, exp), append(ins.Status, h.status), append(ins.ClosedBy, h.closedBy)
			continue
		}
		upd.IdentityID, upd.Remaining = append(upd.IdentityID, h.identityID), append(upd.Remaining, h.remaining.String())
		upd.Status, upd.ClosedBy, upd.Rev = append(upd.Status, h.status), append(upd.ClosedBy, h.closedBy), append(upd.Rev, h.rev)
	}
	if len(ins.IdentityID) > 0 {
		_ = q.HoldInsert(ctx, ins)
	}
	if len(upd.IdentityID) > 0 {
		_ = q.HoldUpdate(ctx, upd)
	}
}

func (st *txState) queueWaiting(ctx context.Context, q *db.Queries) {
	var ins db.WaitingInsertParams
	for _, w := range st.waitingList {
		d := w.d
		ins.TenantID, ins.AccountPeriod = append(ins.TenantID, d.id.TenantID), append(ins.AccountPeriod, d.id.AccountPeriod)
		ins.RecordID, ins.Operation = append(ins.RecordID, d.id.RecordID), append(ins.Operation, string(d.id.Operation))
		ins.TargetPeriod, ins.TargetRecordID = append(ins.TargetPeriod, w.target.period), append(ins.TargetRecordID, w.target.record)
		ins.Fingerprint, ins.Canonical = append(ins.Fingerprint, int64(w.fp)), append(ins.Canonical, w.canonical)
		ins.Key, ins.Value, ins.Headers = append(ins.Key, d.in.Key), append(ins.Value, nonNil(d.in.Value)), append(ins.Headers, db.EncodeHeaders(d.in.Headers))
		ins.Topic, ins.Partition, ins.Offset = append(ins.Topic, d.in.Topic), append(ins.Partition, d.in.Partition), append(ins.Offset, d.in.Offset)
		ins.Response, ins.Status = append(ins.Response, w.response), append(ins.Status, w.status)
	}
	var upd db.WaitingUpdateParams
	for _, ws := range st.waitingByTarget {
		for _, w := range ws {
			if w.dirty && !w.isNew {
				upd.ID, upd.Status, upd.CaseID = append(upd.ID, w.id), append(upd.Status, w.status), append(upd.CaseID, w.caseID)
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
