package reconcile

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settlehq/settle/internal/money"
	"github.com/settlehq/settle/settle"
)

func (s *checker) checkBalances(ctx context.Context, tx pgx.Tx, in Input) ([]Finding, error) {
	rows, err := tx.Query(ctx, sqlReconcileBalance, in.TenantID)
	if err != nil {
		return nil, err
	}
	var out []Finding
	for rows.Next() {
		var (
			f                             = Finding{Class: ClassBalanceMismatch}
			subject, currency             string
			balance, held, sumBal, sumHld string
		)
		if err := rows.Scan(&f.AccountID, &f.TenantID, &subject, &currency, &balance, &held, &sumBal, &sumHld); err != nil {
			rows.Close()
			return nil, err
		}
		f.Detail = fmt.Sprintf("account %s/%s/%s: balance %s, held %s; its ledger rows sum to balance %s, held %s",
			f.TenantID, subject, currency, balance, held, sumBal, sumHld)
		out = append(out, f)
	}
	return out, rows.Err()
}

// checkHashChain recomputes every account's ledger hash chain (settle.ChainHash)
// and compares it with the stored row hashes and the account's head. A row
// settle did not write (no hash) or whose fields were changed breaks it; so
// does a row removed from the end (the head no longer matches).
func (s *checker) checkHashChain(ctx context.Context, tx pgx.Tx, in Input) ([]Finding, error) {
	rows, err := tx.Query(ctx, sqlReconcileHashChain, in.TenantID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var (
		out       []Finding
		account   int64 = -1
		prev      []byte
		head      []byte
		tenant    string
		closeHead = func() {
			if account >= 0 && !bytes.Equal(prev, head) {
				out = append(out, Finding{Class: ClassChainHeadMismatch, TenantID: tenant, AccountID: account,
					Detail: fmt.Sprintf("account %d: head %x, but its newest row hashes to %x (a row removed or the head changed)", account, head, prev)})
			}
		}
	)
	for rows.Next() {
		var (
			id, acc                                       int64
			tn, subject, currency, sid, bucket, amountTxt string
			stored, accountHead                           []byte
		)
		if err := rows.Scan(&id, &acc, &tn, &subject, &currency, &sid, &bucket, &amountTxt, &stored, &accountHead); err != nil {
			return nil, err
		}
		if acc != account {
			closeHead()
			account, prev, head, tenant = acc, nil, accountHead, tn
		}
		if id == 0 {
			continue // an account without rows: its head must be empty
		}
		amount, err := money.Parse(amountTxt)
		if err != nil {
			return nil, err
		}
		want := settle.ChainHash(prev, tn, subject, currency, sid, bucket, amount.String())
		switch {
		case stored == nil:
			out = append(out, Finding{Class: ClassChainBroken, TenantID: tn, AccountID: acc, LedgerRowID: id, SettlementID: sid,
				Detail: fmt.Sprintf("ledger row %d (%s %s) has no chain hash: settle did not write it", id, bucket, amountTxt)})
			continue // the chain goes on past a foreign row
		case !bytes.Equal(stored, want):
			out = append(out, Finding{Class: ClassChainBroken, TenantID: tn, AccountID: acc, LedgerRowID: id, SettlementID: sid,
				Detail: fmt.Sprintf("ledger row %d (%s %s): hash %x, its chain says %x (the row or one before it was changed)", id, bucket, amountTxt, stored, want)})
		}
		prev = stored
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	closeHead()
	return out, nil
}

// findRows runs one check's query and makes a Finding of each row.
func findRows(ctx context.Context, tx pgx.Tx, sql string, args []any, row func(pgx.Rows) (Finding, error)) ([]Finding, error) {
	rows, err := tx.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Finding
	for rows.Next() {
		f, err := row(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, rows.Err()
}

func (s *checker) checkLedgerOrphans(ctx context.Context, tx pgx.Tx, in Input) ([]Finding, error) {
	return findRows(ctx, tx, sqlReconcileLedgerOrphan, []any{in.TenantID}, func(rows pgx.Rows) (Finding, error) {
		var (
			f          Finding
			identityID int64
			amount     string
		)
		err := rows.Scan(&f.LedgerRowID, &f.TenantID, &identityID, &f.AccountID, &amount, &f.Class,
			&f.Period, &f.RecordID, &f.Operation)
		f.Detail = fmt.Sprintf("ledger row %d (amount %s, account %d) names identity %d: %s",
			f.LedgerRowID, amount, f.AccountID, identityID, f.Class)
		return f, err
	})
}

// checkReferences finds the references that foreign keys no longer guard
// on the per-record tables (migration 0003).
func (s *checker) checkReferences(ctx context.Context, tx pgx.Tx, in Input) ([]Finding, error) {
	return findRows(ctx, tx, sqlReconcileReferences, []any{in.TenantID}, func(rows pgx.Rows) (Finding, error) {
		var (
			f  Finding
			id int64
			c  settle.Coordinates
		)
		err := rows.Scan(&f.Class, &f.TenantID, &id, &f.Period, &f.RecordID, &f.Operation, &c.Topic, &c.Partition, &c.Offset)
		f.Source = &c
		f.Detail = fmt.Sprintf("%s: identity %d (source %s/%d@%d)", f.Class, id, c.Topic, c.Partition, c.Offset)
		return f, err
	})
}

func (s *checker) checkEffectRepeats(ctx context.Context, tx pgx.Tx, in Input) ([]Finding, error) {
	return findRows(ctx, tx, sqlReconcileEffectRepeat, []any{in.TenantID}, func(rows pgx.Rows) (Finding, error) {
		var (
			f                     = Finding{Class: ClassEffectRepeated}
			id, tx, rowsN, bucket int64
		)
		err := rows.Scan(&id, &f.TenantID, &f.Period, &f.RecordID, &f.Operation, &f.SettlementID, &tx, &rowsN, &bucket)
		f.Detail = fmt.Sprintf("identity %d has %d ledger rows in %d buckets from %d transactions; an effect is written once, one row per bucket", id, rowsN, bucket, tx)
		return f, err
	})
}

func (s *checker) checkSettlementMissing(ctx context.Context, tx pgx.Tx, in Input) ([]Finding, error) {
	topic := s.cfg.SettlementsTopic
	return findRows(ctx, tx, sqlReconcileSettlementMissing, []any{in.TenantID, topic}, func(rows pgx.Rows) (Finding, error) {
		var (
			f     Finding
			id, n int64
		)
		err := rows.Scan(&id, &f.TenantID, &f.Period, &f.RecordID, &f.Operation, &f.SettlementID, &n)
		if n == 0 {
			f.Class = ClassSettlementMissing
			f.Detail = fmt.Sprintf("identity %d wrote ledger rows but no settlement for topic %s is in the outbox", id, topic)
		} else {
			f.Class = ClassSettlementDuplicated
			f.Detail = fmt.Sprintf("identity %d has %d outbox rows for topic %s; one is written per effect", id, n, topic)
		}
		return f, err
	})
}

func (s *checker) checkOutboxUnpublished(ctx context.Context, tx pgx.Tx, in Input) ([]Finding, error) {
	args := []any{in.OutboxGrace.Seconds(), s.cfg.SettlementsTopic}
	return findRows(ctx, tx, sqlReconcileOutboxUnpublished, args, func(rows pgx.Rows) (Finding, error) {
		var (
			f       = Finding{Class: ClassOutboxUnpublished}
			topic   string
			created time.Time
		)
		err := rows.Scan(&f.OutboxRowID, &topic, &created, &f.SettlementID)
		f.Detail = fmt.Sprintf("outbox row %d for topic %s written %s is not published (grace %s): is a relay running and leading?",
			f.OutboxRowID, topic, created.UTC().Format(time.RFC3339), in.OutboxGrace)
		return f, err
	})
}

func (s *checker) checkWaitingTargetSettled(ctx context.Context, tx pgx.Tx, in Input) ([]Finding, error) {
	return findRows(ctx, tx, sqlReconcileWaitingSettled, []any{in.TenantID}, func(rows pgx.Rows) (Finding, error) {
		f := Finding{Class: ClassWaitingTargetSettled}
		var targetPeriod, targetRecord, status string
		err := rows.Scan(&f.TenantID, &f.Period, &f.RecordID, &f.Operation, &targetPeriod, &targetRecord, &status)
		f.Detail = fmt.Sprintf("%s %s of period %s is %s although record %s of period %s has settled: the service's sweep applies it (is `settle run` running?)",
			f.Operation, f.RecordID, f.Period, status, targetRecord, targetPeriod)
		return f, err
	})
}

func (s *checker) checkHoldOverdue(ctx context.Context, tx pgx.Tx, in Input) ([]Finding, error) {
	return findRows(ctx, tx, sqlReconcileHoldOverdue, []any{in.TenantID, in.HoldExpiryGrace.Seconds()}, func(rows pgx.Rows) (Finding, error) {
		f := Finding{Class: ClassHoldOverdue, Operation: "hold"}
		var expires time.Time
		err := rows.Scan(&f.TenantID, &f.Period, &f.RecordID, &expires)
		f.Detail = fmt.Sprintf("hold %s of period %s expired at %s and is still active (grace %s): the service's sweep releases it (is `settle run` running?)",
			f.RecordID, f.Period, expires.UTC().Format(time.RFC3339), in.HoldExpiryGrace)
		return f, err
	})
}

// checkOutboxParked reports every parked row, for as long as it exists:
// its message never reached its topic (for a settlement, finance never saw
// it), which is a difference however old it is. It is its own class, with
// the broker's reason, so it is not mistaken for a relay that is not
// running; the relay publishes everything behind it.
func (s *checker) checkOutboxParked(ctx context.Context, tx pgx.Tx, in Input) ([]Finding, error) {
	return findRows(ctx, tx, sqlReconcileOutboxParked, []any{s.cfg.SettlementsTopic}, func(rows pgx.Rows) (Finding, error) {
		var (
			f             = Finding{Class: ClassOutboxParked}
			topic, reason string
			errText       string
			at            time.Time
		)
		err := rows.Scan(&f.OutboxRowID, &topic, &reason, &errText, &at, &f.SettlementID)
		f.Detail = fmt.Sprintf("outbox row %d for topic %s was parked %s, %s: the broker refused it for good (%s); "+
			"settle dlq list --parked lists it", f.OutboxRowID, topic, at.UTC().Format(time.RFC3339), reason, errText)
		if topic == s.cfg.DeadLetterTopic {
			f.Detail += "; the dead letter's bytes are in the database (settle dlq list, show, replay)"
		}
		return f, err
	})
}

func (s *checker) checkOffsets(ctx context.Context, tx pgx.Tx, in Input) ([]Finding, error) {
	pg, err := settle.ConsumerOffsetsIn(ctx, tx, in.Group)
	if err != nil {
		return nil, err
	}
	var out []Finding
	for topic, ps := range in.KafkaOffsets {
		for p, k := range ps {
			db, ok := pg[topic][p]
			if k > db || (!ok && k > 0) {
				out = append(out, Finding{Class: ClassKafkaOffsetAhead, Source: &settle.Coordinates{Topic: topic, Partition: p, Offset: k},
					Detail: fmt.Sprintf("group %s committed offset %d in Kafka for %s/%d, PostgreSQL holds %d: the database is behind (restored?); the consumer reads the partition again from PostgreSQL's offset on its next assignment", in.Group, k, topic, p, db)})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].Source, out[j].Source
		return a.Topic < b.Topic || (a.Topic == b.Topic && a.Partition < b.Partition)
	})
	return out, nil
}

// CheckKafkaOffsets runs only the kafka_offsets_not_ahead check of Run,
// for a caller that samples it while the pipeline runs (Run's every check
// is too much to repeat several times a second): the group's committed
// offsets in Kafka, read by the caller first, against PostgreSQL's.
func CheckKafkaOffsets(ctx context.Context, store *settle.Store, group string, kafka map[string]map[int32]int64) ([]Finding, error) {
	s := &checker{pool: store.Pool(), cfg: store.Config()}
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, wrapStoreErr("reconcile: begin", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if group == "" {
		group = "settle"
	}
	fs, err := s.checkOffsets(ctx, tx, Input{Group: group, KafkaOffsets: kafka})
	if err != nil {
		return nil, fmt.Errorf("reconcile offsets: %w", err)
	}
	return fs, nil
}
