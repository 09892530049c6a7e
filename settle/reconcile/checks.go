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
	"github.com/settlehq/settle/settle/internal/db"
	"github.com/settlehq/settle/settle/message"
)

func (s *checker) checkBalances(ctx context.Context, tx pgx.Tx, in Input) ([]Finding, error) {
	rows, err := db.On(tx).ReconcileBalance(ctx, in.TenantID)
	return findings(rows, err, func(r db.ReconcileBalanceRow) Finding {
		return Finding{Class: ClassBalanceMismatch, AccountID: r.ID, TenantID: r.TenantID,
			Detail: fmt.Sprintf("account %s/%s/%s: balance %s, held %s; its ledger rows sum to balance %s, held %s",
				r.TenantID, r.Subject, r.Currency, r.Balance, r.Held, r.RowsBalance, r.RowsHeld)}
	})
}

// checkHashChain recomputes every account's ledger hash chain (message.ChainHash)
// and compares it with the stored row hashes and the account's head. A row
// settle did not write (no hash) or whose fields were changed breaks it; so
// does a row removed from the end (the head no longer matches). It walks
// the rows as they arrive (every ledger row of the database, or of the
// tenant), never holding them all.
func (s *checker) checkHashChain(ctx context.Context, tx pgx.Tx, in Input) ([]Finding, error) {
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
	err := db.On(tx).ReconcileHashChainEach(ctx, in.TenantID, func(r db.ReconcileHashChainRow) error {
		if r.AccountID != account {
			closeHead()
			account, prev, head, tenant = r.AccountID, nil, r.ChainHead, r.TenantID
		}
		if r.ID == 0 {
			return nil // an account without rows: its head must be empty
		}
		amount, err := money.Parse(r.Amount)
		if err != nil {
			return err
		}
		want := message.ChainHash(prev, r.TenantID, r.Subject, r.Currency, r.SettlementID, r.Bucket, amount.String())
		switch {
		case r.ChainHash == nil:
			out = append(out, Finding{Class: ClassChainBroken, TenantID: r.TenantID, AccountID: r.AccountID, LedgerRowID: r.ID, SettlementID: r.SettlementID,
				Detail: fmt.Sprintf("ledger row %d (%s %s) has no chain hash: settle did not write it", r.ID, r.Bucket, r.Amount)})
			return nil // the chain goes on past a foreign row
		case !bytes.Equal(r.ChainHash, want):
			out = append(out, Finding{Class: ClassChainBroken, TenantID: r.TenantID, AccountID: r.AccountID, LedgerRowID: r.ID, SettlementID: r.SettlementID,
				Detail: fmt.Sprintf("ledger row %d (%s %s): hash %x, its chain says %x (the row or one before it was changed)", r.ID, r.Bucket, r.Amount, r.ChainHash, want)})
		}
		prev = r.ChainHash
		return nil
	})
	if err != nil {
		return nil, err
	}
	closeHead()
	return out, nil
}

// findings makes a Finding of each row of one check's generated query
// (nil for none, as the report counts them).
func findings[R any](rows []R, err error, finding func(R) Finding) ([]Finding, error) {
	if err != nil {
		return nil, err
	}
	var out []Finding
	for _, r := range rows {
		out = append(out, finding(r))
	}
	return out, nil
}

func (s *checker) checkLedgerOrphans(ctx context.Context, tx pgx.Tx, in Input) ([]Finding, error) {
	rows, err := db.On(tx).ReconcileLedgerOrphan(ctx, in.TenantID)
	return findings(rows, err, func(r db.ReconcileLedgerOrphanRow) Finding {
		return Finding{Class: r.Class, LedgerRowID: r.ID, TenantID: r.TenantID, AccountID: r.AccountID,
			Period: r.AccountPeriod, RecordID: r.RecordID, Operation: r.Operation,
			Detail: fmt.Sprintf("ledger row %d (amount %s, account %d) names identity %d: %s",
				r.ID, r.Amount, r.AccountID, r.IdentityID, r.Class)}
	})
}

// checkReferences finds the references that foreign keys no longer guard
// on the per-record tables (migrations 0003 and 0013).
func (s *checker) checkReferences(ctx context.Context, tx pgx.Tx, in Input) ([]Finding, error) {
	rows, err := db.On(tx).ReconcileReferences(ctx, in.TenantID)
	return findings(rows, err, func(r db.ReconcileReferencesRow) Finding {
		f := Finding{Class: r.Class, TenantID: r.TenantID, Period: r.AccountPeriod, RecordID: r.RecordID, Operation: r.Operation,
			Detail: fmt.Sprintf("%s: identity %d", r.Class, r.IdentityID)}
		if r.Topic != "" { // a chain or a hold has no coordinates of its own
			f.Source = &message.Coordinates{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}
			f.Detail += fmt.Sprintf(" (source %s/%d@%d)", r.Topic, r.Partition, r.Offset)
		}
		return f
	})
}

func (s *checker) checkEffectRepeats(ctx context.Context, tx pgx.Tx, in Input) ([]Finding, error) {
	rows, err := db.On(tx).ReconcileEffectRepeat(ctx, in.TenantID)
	return findings(rows, err, func(r db.ReconcileEffectRepeatRow) Finding {
		return Finding{Class: ClassEffectRepeated, TenantID: r.TenantID, Period: r.AccountPeriod, RecordID: r.RecordID,
			Operation: r.Operation, SettlementID: r.SettlementID,
			Detail: fmt.Sprintf("identity %d has %d ledger rows in %d buckets from %d transactions; an effect is written once, one row per bucket",
				r.ID, r.Rows, r.Buckets, r.Transactions)}
	})
}

func (s *checker) checkSettlementMissing(ctx context.Context, tx pgx.Tx, in Input) ([]Finding, error) {
	topic := s.cfg.SettlementsTopic
	rows, err := db.On(tx).ReconcileSettlementMissing(ctx, db.ReconcileSettlementMissingParams{TenantID: in.TenantID, SettlementsTopic: topic})
	return findings(rows, err, func(r db.ReconcileSettlementMissingRow) Finding {
		f := Finding{TenantID: r.TenantID, Period: r.AccountPeriod, RecordID: r.RecordID, Operation: r.Operation, SettlementID: r.SettlementID}
		if r.OutboxRows == 0 {
			f.Class = ClassSettlementMissing
			f.Detail = fmt.Sprintf("identity %d wrote ledger rows but no settlement for topic %s is in the outbox", r.ID, topic)
		} else {
			f.Class = ClassSettlementDuplicated
			f.Detail = fmt.Sprintf("identity %d has %d outbox rows for topic %s; one is written per effect", r.ID, r.OutboxRows, topic)
		}
		return f
	})
}

func (s *checker) checkOutboxUnpublished(ctx context.Context, tx pgx.Tx, in Input) ([]Finding, error) {
	rows, err := db.On(tx).ReconcileOutboxUnpublished(ctx, db.ReconcileOutboxUnpublishedParams{
		GraceSeconds: in.OutboxGrace.Seconds(), SettlementsTopic: s.cfg.SettlementsTopic})
	return findings(rows, err, func(r db.ReconcileOutboxUnpublishedRow) Finding {
		return Finding{Class: ClassOutboxUnpublished, OutboxRowID: r.ID, SettlementID: r.SettlementID,
			Detail: fmt.Sprintf("outbox row %d for topic %s written %s is not published (grace %s): is a relay running and leading?",
				r.ID, r.Topic, r.CreatedAt.UTC().Format(time.RFC3339), in.OutboxGrace)}
	})
}

func (s *checker) checkWaitingTargetSettled(ctx context.Context, tx pgx.Tx, in Input) ([]Finding, error) {
	rows, err := db.On(tx).ReconcileWaitingTargetSettled(ctx, in.TenantID)
	return findings(rows, err, func(r db.ReconcileWaitingTargetSettledRow) Finding {
		return Finding{Class: ClassWaitingTargetSettled, TenantID: r.TenantID, Period: r.AccountPeriod, RecordID: r.RecordID, Operation: r.Operation,
			Detail: fmt.Sprintf("%s %s of period %s is %s although record %s of period %s has settled: the service's sweep applies it (is `settle run` running?)",
				r.Operation, r.RecordID, r.AccountPeriod, r.Status, r.TargetRecordID, r.TargetPeriod)}
	})
}

func (s *checker) checkHoldOverdue(ctx context.Context, tx pgx.Tx, in Input) ([]Finding, error) {
	rows, err := db.On(tx).ReconcileHoldOverdue(ctx, db.ReconcileHoldOverdueParams{TenantID: in.TenantID, GraceSeconds: in.HoldExpiryGrace.Seconds()})
	return findings(rows, err, func(r db.ReconcileHoldOverdueRow) Finding {
		return Finding{Class: ClassHoldOverdue, Operation: "hold", TenantID: r.TenantID, Period: r.AccountPeriod, RecordID: r.RecordID,
			Detail: fmt.Sprintf("hold %s of period %s expired at %s and is still active (grace %s): the service's sweep releases it (is `settle run` running?)",
				r.RecordID, r.AccountPeriod, r.ExpiresAt.UTC().Format(time.RFC3339), in.HoldExpiryGrace)}
	})
}

// checkOutboxParked reports every parked row, for as long as it exists:
// its message never reached its topic (for a settlement, finance never saw
// it), which is a difference however old it is. It is its own class, with
// the broker's reason, so it is not mistaken for a relay that is not
// running; the relay publishes everything behind it.
func (s *checker) checkOutboxParked(ctx context.Context, tx pgx.Tx, _ Input) ([]Finding, error) {
	rows, err := db.On(tx).ReconcileOutboxParked(ctx, s.cfg.SettlementsTopic)
	return findings(rows, err, func(r db.ReconcileOutboxParkedRow) Finding {
		f := Finding{Class: ClassOutboxParked, OutboxRowID: r.ID, SettlementID: r.SettlementID,
			Detail: fmt.Sprintf("outbox row %d for topic %s was parked %s, %s: the broker refused it for good (%s); "+
				"settle dlq list --parked lists it", r.ID, r.Topic, r.At.UTC().Format(time.RFC3339), r.Reason, r.Error)}
		if r.Topic == s.cfg.DeadLetterTopic {
			f.Detail += "; the dead letter's bytes are in the database (settle dlq list, show, replay)"
		}
		return f
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
			have, ok := pg[topic][p]
			if k > have || (!ok && k > 0) {
				out = append(out, Finding{Class: ClassKafkaOffsetAhead, Source: &message.Coordinates{Topic: topic, Partition: p, Offset: k},
					Detail: fmt.Sprintf("group %s committed offset %d in Kafka for %s/%d, PostgreSQL holds %d: the database is behind (restored?); the consumer reads the partition again from PostgreSQL's offset on its next assignment", in.Group, k, topic, p, have)})
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
	tx, err := s.begin(ctx)
	if err != nil {
		return nil, err
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
