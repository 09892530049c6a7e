package settle

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/settlehq/settle/record"
)

// The statements of write, all queued in its one pipeline.
var (
	sqlAccountUpdate        = mustQuery("account_update.sql")
	sqlDeliveryInsert       = mustQuery("delivery_insert.sql")
	sqlOutboxInsert         = mustQuery("outbox_insert.sql")
	sqlDeadLetterInsert     = mustQuery("dead_letter_insert.sql")
	sqlConsumerOffsetUpsert = mustQuery("consumer_offset_upsert.sql")
	sqlChainInsert          = mustQuery("chain_insert.sql")
	sqlChainUpdate          = mustQuery("chain_update.sql")
	sqlHoldInsert           = mustQuery("hold_insert.sql")
	sqlHoldUpdate           = mustQuery("hold_update.sql")
	sqlWaitingInsert        = mustQuery("waiting_insert.sql")
	sqlWaitingUpdate        = mustQuery("waiting_update.sql")
	sqlConflictCaseClose    = mustQuery("conflict_case_close.sql")
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
		record.Header{Key: "version", Value: []byte(strconv.Itoa(SchemaVersionOutput))},
	)
	if truncated {
		hs = append(hs, record.Header{Key: DeadLetterValueTruncatedHeader, Value: strconv.AppendInt(nil, int64(len(dl.in.Value)), 10)})
	}
	return encodeHeaders(hs)
}

// write writes every row of the batch: the identities and ledger entries
// with COPY, first (the outbox's webhook trigger reads the identities),
// then everything else in one pipelined round trip.
func (st *txState) write(ctx context.Context, group string) error {
	if err := st.copyIdentities(ctx); err != nil {
		return err
	}
	if err := st.copyEntries(ctx); err != nil {
		return err
	}
	b := &pgx.Batch{}
	st.queueAccounts(b)
	st.queueDeliveries(b)
	st.queueDeadLetters(b)
	st.queueOutbox(b)
	st.queueOffsets(b, group)
	st.queueChains(b)
	st.queueHolds(b)
	st.queueWaiting(b)
	if len(st.closedCases) > 0 {
		b.Queue(sqlConflictCaseClose, st.closedCases)
	}
	return st.send(ctx, b)
}

// send sends b as one pipeline and checks every statement's result, the
// guarded updates' row counts included.
func (st *txState) send(ctx context.Context, b *pgx.Batch) error {
	if b.Len() == 0 {
		return nil
	}
	br := st.tx.SendBatch(ctx, b)
	defer func() { _ = br.Close() }() // for the early returns; the last step checks Close
	for i := 0; i < b.Len(); i++ {
		tag, err := br.Exec()
		if err != nil {
			return fmt.Errorf("%s: %w", queryName(b.QueuedQueries[i].SQL), err)
		}
		// The guarded updates assert that nothing changed what this
		// transaction locked and read.
		if want, ok := st.guarded[i]; ok && int(tag.RowsAffected()) != want {
			return fmt.Errorf("%s: guarded update matched %d of %d rows", queryName(b.QueuedQueries[i].SQL), tag.RowsAffected(), want)
		}
	}
	return br.Close()
}

// identityColumns are the columns copyIdentities writes, in the order of
// identityRow's values.
var identityColumns = []string{"id", "tenant_id", "account_period", "record_id", "operation", "fingerprint",
	"canonical_version", "canonical", "outcome", "reason", "response", "settlement_id",
	"account_id", "root_id", "source", "attributes", "topic", "partition", "offset",
	"first_seen_at", "last_attempted_at", "attempts", "subject", "currency", "target_id"}

// copyIdentities writes the identities first seen in this batch with COPY:
// append-only rows, the widest of the transaction, for which PostgreSQL's
// COPY costs a fraction of an INSERT ... SELECT FROM unnest (BENCHMARKS.md,
// "What each decision bought"). A concurrent claim of the same identity
// fails it on identities_scope_key, as the insert did.
func (st *txState) copyIdentities(ctx context.Context) error {
	if len(st.newIdentities) == 0 {
		return nil
	}
	row := make([]any, len(identityColumns))
	_, err := st.tx.CopyFrom(ctx, pgx.Identifier{"identities"}, identityColumns,
		pgx.CopyFromSlice(len(st.newIdentities), func(i int) ([]any, error) {
			st.identityRow(st.newIdentities[i], row)
			return row, nil
		}))
	if err != nil {
		return fmt.Errorf("copy identities: %w", err)
	}
	return nil
}

// identityRow fills row with id's values, in identityColumns' order.
func (st *txState) identityRow(id *identity, row []any) {
	d := id.d
	var attrs *string
	if len(d.rec.Attributes) > 0 {
		a := string(d.rec.Attributes)
		attrs = &a
	}
	row[0], row[1], row[2], row[3], row[4] = id.id, id.key.TenantID, id.key.AccountPeriod, id.key.RecordID, string(id.key.Operation)
	row[5], row[6], row[7], row[8], row[9] = int64(id.fp), int16(id.version), id.canonical, string(id.outcome), id.reason
	row[10], row[11], row[12], row[13], row[14] = string(id.response), nullEmpty(id.settlementID), nullZeroID(id.accountID), nullZeroID(id.rootID), d.rec.Source
	row[15], row[16], row[17], row[18] = attrs, d.in.Topic, d.in.Partition, d.in.Offset
	row[19], row[20], row[21], row[22], row[23] = st.firstSeen, st.attemptStart, int32(st.attempt), id.subject, id.currency
	row[24] = nullZeroID(id.targetID)
}

// ledgerColumns are the columns copyEntries writes.
var ledgerColumns = []string{"identity_id", "account_id", "tenant_id", "bucket", "amount", "chain_hash"}

// copyEntries writes the ledger entries with COPY (see copyIdentities).
func (st *txState) copyEntries(ctx context.Context) error {
	if len(st.entries) == 0 {
		return nil
	}
	row := make([]any, len(ledgerColumns))
	_, err := st.tx.CopyFrom(ctx, pgx.Identifier{"ledger_entries"}, ledgerColumns,
		pgx.CopyFromSlice(len(st.entries), func(i int) ([]any, error) {
			e := &st.entries[i]
			var amount pgtype.Numeric
			if err := amount.Scan(e.amount.String()); err != nil {
				return nil, fmt.Errorf("ledger amount %s: %w", e.amount.String(), err)
			}
			row[0], row[1], row[2], row[3], row[4], row[5] = e.identityID, e.accountID, e.tenant, e.bucket, amount, e.hash
			return row, nil
		}))
	if err != nil {
		return fmt.Errorf("copy ledger entries: %w", err)
	}
	return nil
}

// queueAccounts queues the balance and chain-head updates of the accounts the
// batch changed, guarded on the sequence each was read at.
func (st *txState) queueAccounts(b *pgx.Batch) {
	as := st.changedAccounts()
	if len(as) == 0 {
		return
	}
	var (
		ids, before, after []int64
		bd, hd             []string
		heads              [][]byte
	)
	for _, a := range as {
		ids, before, after = append(ids, a.id), append(before, a.seqBefore), append(after, a.seq)
		bd, hd, heads = append(bd, a.balanceDelta.String()), append(hd, a.heldDelta.String()), append(heads, nonNil(a.head))
	}
	b.Queue(sqlAccountUpdate, ids, bd, hd, before, after, heads)
	st.guard(b, len(ids))
}

// queueDeliveries queues the insert of one delivery row per input record that
// needs one.
func (st *txState) queueDeliveries(b *pgx.Batch) {
	if len(st.deliveries) == 0 {
		return
	}
	var (
		topics, tenants, outs, reas []string
		parts                       []int32
		offs, idents, cases         []int64
	)
	for _, dl := range st.deliveries {
		topics, parts, offs = append(topics, dl.in.Topic), append(parts, dl.in.Partition), append(offs, dl.in.Offset)
		tenants, idents, cases = append(tenants, dl.tenant), append(idents, dl.identityID), append(cases, dl.caseID)
		outs, reas = append(outs, string(dl.outcome)), append(reas, dl.reason)
	}
	b.Queue(sqlDeliveryInsert, topics, parts, offs, tenants, idents, cases, outs, reas)
}

// queueDeadLetters queues the insert of the dead letters.
func (st *txState) queueDeadLetters(b *pgx.Batch) {
	if len(st.deadLetters) == 0 {
		return
	}
	var (
		topics, reas, classes, errs []string
		parts, attempts             []int32
		offs                        []int64
		keys, values                [][]byte
		headers                     []string
	)
	for _, dl := range st.deadLetters {
		topics, parts, offs = append(topics, dl.in.Topic), append(parts, dl.in.Partition), append(offs, dl.in.Offset)
		keys, values, headers = append(keys, dl.in.Key), append(values, nonNil(dl.in.Value)), append(headers, string(encodeHeaders(dl.in.Headers)))
		reas, classes, errs, attempts = append(reas, dl.reason), append(classes, dl.class), append(errs, dl.err), append(attempts, int32(dl.attempts))
	}
	b.Queue(sqlDeadLetterInsert, topics, parts, offs, keys, values, headers, reas, classes, errs, attempts)
}

// queueOutbox queues the insert of the outbox messages.
func (st *txState) queueOutbox(b *pgx.Batch) {
	n := len(st.outbox)
	if n == 0 {
		return
	}
	var (
		topics, kinds = make([]string, 0, n), make([]*string, 0, n)
		keys, values  = make([][]byte, 0, n), make([][]byte, 0, n)
		headers       = make([]string, 0, n)
		identityIDs   = make([]int64, 0, n)
		sequences     = make([]*int64, 0, n)
		tenants       = make([]string, 0, n)
	)
	for i := range st.outbox {
		o := &st.outbox[i]
		topics, keys, values, headers = append(topics, o.topic), append(keys, o.key), append(values, o.value), append(headers, string(o.headers))
		identityIDs, tenants = append(identityIDs, o.identityID), append(tenants, o.tenant)
		if o.identityID != 0 {
			sequences, kinds = append(sequences, &o.sequence), append(kinds, &o.kind)
		} else {
			sequences, kinds = append(sequences, nil), append(kinds, nil)
		}
	}
	b.Queue(sqlOutboxInsert, topics, keys, values, headers, identityIDs, sequences, kinds, int16(SchemaVersionOutput), tenants)
}

// queueOffsets queues the consumer group's next offsets, committed in the
// same transaction as the records they cover; group "" commits none.
func (st *txState) queueOffsets(b *pgx.Batch, group string) {
	if group == "" || len(st.offsets) == 0 {
		return
	}
	var (
		groups, topics []string
		parts          []int32
		next           []int64
	)
	for k, v := range st.offsets {
		groups, topics, parts, next = append(groups, group), append(topics, k.Topic), append(parts, k.Partition), append(next, v)
	}
	b.Queue(sqlConsumerOffsetUpsert, groups, topics, parts, next)
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

// guard records how many rows the update just queued on b must match.
func (st *txState) guard(b *pgx.Batch, rows int) {
	if st.guarded == nil {
		st.guarded = map[int]int{}
	}
	st.guarded[b.Len()-1] = rows
}

func (st *txState) queueChains(b *pgx.Batch) {
	var ins, upd struct {
		roots, accs, versions, refunds, reclaims []int64
		tenants, nets, refunded                  []string
		recovered                                []bool
		revs                                     []int32
	}
	for _, ch := range st.chains {
		if !ch.dirty {
			continue
		}
		x := &upd
		if ch.isNew {
			x = &ins
		}
		refunded := ""
		if ch.c.Refunded {
			refunded = ch.c.Refund.String()
		}
		x.roots, x.accs, x.versions = append(x.roots, ch.rootID), append(x.accs, ch.a.id), append(x.versions, ch.c.Version)
		x.refunds, x.reclaims = append(x.refunds, ch.refundID), append(x.reclaims, ch.reclaimID)
		x.tenants, x.nets, x.refunded = append(x.tenants, ch.a.key.tenant), append(x.nets, ch.c.NetCharge.String()), append(x.refunded, refunded)
		x.recovered, x.revs = append(x.recovered, ch.c.Recovered), append(x.revs, ch.rev)
	}
	if len(ins.roots) > 0 {
		b.Queue(sqlChainInsert, ins.roots, ins.tenants, ins.accs, ins.nets, ins.versions, ins.refunds, ins.refunded, ins.reclaims, ins.recovered)
	}
	if len(upd.roots) > 0 {
		b.Queue(sqlChainUpdate, upd.roots, upd.nets, upd.versions, upd.refunds, upd.refunded, upd.reclaims, upd.recovered, upd.revs)
		st.guard(b, len(upd.roots))
	}
}

func (st *txState) queueHolds(b *pgx.Batch) {
	var ins, upd struct {
		ids, accs, closed             []int64
		tenants, amounts, rems, stats []string
		exps                          []*time.Time
		revs                          []int32
	}
	for _, h := range st.holds {
		if !h.dirty {
			continue
		}
		x := &upd
		if h.isNew {
			x = &ins
		}
		x.ids, x.accs, x.closed = append(x.ids, h.identityID), append(x.accs, h.a.id), append(x.closed, h.closedBy)
		x.tenants, x.amounts = append(x.tenants, h.tenant), append(x.amounts, h.amount.String())
		x.rems, x.stats = append(x.rems, h.remaining.String()), append(x.stats, h.status)
		x.exps, x.revs = append(x.exps, h.expiresAt), append(x.revs, h.rev)
	}
	if len(ins.ids) > 0 {
		b.Queue(sqlHoldInsert, ins.ids, ins.tenants, ins.accs, ins.amounts, ins.rems, ins.exps, ins.stats, ins.closed)
	}
	if len(upd.ids) > 0 {
		b.Queue(sqlHoldUpdate, upd.ids, upd.rems, upd.stats, upd.closed, upd.revs)
		st.guard(b, len(upd.ids))
	}
}

func (st *txState) queueWaiting(b *pgx.Batch) {
	var ins struct {
		ts, ps, rs, ops, tps, trs, topics, stats []string
		fps, offs                                []int64
		canon, keys, values                      [][]byte
		headers, resps                           []string
		parts                                    []int32
	}
	var updIDs, updCases []int64
	var updStats []string
	for _, w := range st.waitingList {
		d := w.d
		ins.ts, ins.ps, ins.rs, ins.ops = append(ins.ts, d.id.TenantID), append(ins.ps, d.id.AccountPeriod), append(ins.rs, d.id.RecordID), append(ins.ops, string(d.id.Operation))
		ins.tps, ins.trs = append(ins.tps, w.target.period), append(ins.trs, w.target.record)
		ins.fps, ins.canon = append(ins.fps, int64(w.fp)), append(ins.canon, w.canonical)
		ins.keys, ins.values, ins.headers = append(ins.keys, d.in.Key), append(ins.values, nonNil(d.in.Value)), append(ins.headers, string(encodeHeaders(d.in.Headers)))
		ins.topics, ins.parts, ins.offs = append(ins.topics, d.in.Topic), append(ins.parts, d.in.Partition), append(ins.offs, d.in.Offset)
		ins.resps, ins.stats = append(ins.resps, string(w.response)), append(ins.stats, w.status)
	}
	for _, ws := range st.waitingByTarget {
		for _, w := range ws {
			if w.dirty && !w.isNew {
				updIDs, updStats, updCases = append(updIDs, w.id), append(updStats, w.status), append(updCases, w.caseID)
			}
		}
	}
	if len(ins.ts) > 0 {
		b.Queue(sqlWaitingInsert, ins.ts, ins.ps, ins.rs, ins.ops, ins.tps, ins.trs, ins.fps, ins.canon, ins.keys, ins.values,
			ins.headers, ins.topics, ins.parts, ins.offs, ins.resps, ins.stats)
	}
	if len(updIDs) > 0 {
		b.Queue(sqlWaitingUpdate, updIDs, updStats, updCases)
	}
}
