// Package reconcile is the one invariant checker of a settle database:
// balances equal their ledger rows, one effect per identity, every effect
// published once, the hash chains, nothing waiting for a settled target,
// no hold active past its expiry, Kafka's offsets not ahead of PostgreSQL's,
// and, given what the topics hold, the usage topic against the identities
// and the identities against the settlements topic. `settle reconcile`, the
// tests and the benchmark read their verdict from it.
//
// It only reads, in one REPEATABLE READ READ ONLY transaction, and never
// repairs what it finds: each finding says what to do.
package reconcile

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/settlehq/settle/internal/money"
	"github.com/settlehq/settle/settle"
)

var (
	sqlReconcileBalance           = mustQuery("reconcile_balance.sql")
	sqlReconcileLedgerOrphan      = mustQuery("reconcile_ledger_orphan.sql")
	sqlReconcileEffectRepeat      = mustQuery("reconcile_effect_repeat.sql")
	sqlReconcileSettlementMissing = mustQuery("reconcile_settlement_missing.sql")
	sqlReconcileOutboxUnpublished = mustQuery("reconcile_outbox_unpublished.sql")
	sqlReconcileOutboxParked      = mustQuery("reconcile_outbox_parked.sql")
	sqlReconcileIdentities        = mustQuery("reconcile_identities.sql")
	sqlReconcileDeliveries        = mustQuery("reconcile_deliveries.sql")
	sqlReconcileIdentityKeys      = mustQuery("reconcile_identity_keys.sql")
	sqlReconcileHashChain         = mustQuery("reconcile_hash_chain.sql")
	sqlReconcileReferences        = mustQuery("reconcile_references.sql")
	sqlReconcileWaitingSettled    = mustQuery("reconcile_waiting_target_settled.sql")
	sqlReconcileHoldOverdue       = mustQuery("reconcile_hold_overdue.sql")
)

// Discrepancy classes: what reconcile found, one per kind of difference.
const (
	// Invariants of the database.
	ClassBalanceMismatch       = "balance_mismatch"                 // cached balance/held ≠ sum of ledger rows
	ClassLedgerNoIdentity      = "ledger_row_without_identity"      // a ledger row whose identity does not exist
	ClassLedgerNoAccount       = "ledger_row_without_account"       // a ledger row whose account does not exist
	ClassLedgerUnsettled       = "ledger_row_of_unsettled_identity" // a ledger row of a refused or quarantined identity
	ClassLedgerTenantMismatch  = "ledger_row_tenant_mismatch"       // a ledger row of another tenant's identity or account
	ClassEffectRepeated        = "effect_repeated"                  // one identity's rows written by several transactions
	ClassSettlementMissing     = "settlement_missing"               // a settled effect with no outbox row for the settlements topic
	ClassSettlementDuplicated  = "settlement_duplicated"            // more than one outbox row for one settlement_id
	ClassOutboxUnpublished     = "outbox_unpublished"               // an outbox row older than the grace period, not published
	ClassOutboxParked          = "outbox_parked"                    // an outbox row the broker refused for good: parked, never published
	ClassKafkaOffsetAhead      = "kafka_offset_ahead"               // the group's Kafka commit is past PostgreSQL's offset
	ClassSourceNotSettled      = "source_not_settled"               // a usage record behind the group's offset with no delivery row
	ClassSourceIdentityMissing = "source_identity_missing"          // a usage record delivered, but its identity is not stored
	ClassIdentityNoSource      = "identity_without_source"          // a stored identity whose usage record is not on the topic
	ClassSettlementNotOnTopic  = "settlement_not_on_topic"          // a settlement marked published but absent from the settlements topic
	ClassSettlementNoIdentity  = "settlement_without_identity"      // a settlements-topic message no stored identity explains
	ClassChainBroken           = "ledger_chain_broken"              // a ledger row whose hash does not follow its account's chain
	ClassChainHeadMismatch     = "ledger_chain_head_mismatch"       // an account's chain head is not its newest row's hash
	ClassDeliveryNoIdentity    = "delivery_without_identity"        // a delivery row naming an identity that does not exist
	ClassIdentityNoAccount     = "identity_without_account"         // an identity naming an account that does not exist
	ClassIdentityRefMissing    = "identity_reference_missing"       // an identity whose root or target identity does not exist
	ClassWaitingTargetSettled  = "waiting_target_settled"           // an operation still waiting although its target settled
	ClassHoldOverdue           = "hold_overdue"                     // a hold still active past its expires_at and the grace period
)

// Finding is one difference reconcile found.
type Finding struct {
	Class        string              `json:"class"`
	TenantID     string              `json:"tenant_id,omitempty"`
	Period       string              `json:"account_period,omitempty"`
	RecordID     string              `json:"record_id,omitempty"`
	Operation    string              `json:"operation,omitempty"`
	SettlementID string              `json:"settlement_id,omitempty"`
	AccountID    int64               `json:"account_id,omitempty"`
	LedgerRowID  int64               `json:"ledger_row_id,omitempty"`
	OutboxRowID  int64               `json:"outbox_row_id,omitempty"`
	Source       *settle.Coordinates `json:"source,omitempty"`
	Detail       string              `json:"detail"`
}

// Check is one check reconcile ran and how many findings it produced.
type Check struct {
	Name     string `json:"name"`
	Findings int    `json:"findings"`
	Skipped  string `json:"skipped,omitempty"` // why the check did not run
}

// Report is what reconcile found. Clean reports no finding.
type Report struct {
	Checks   []Check   `json:"checks"`
	Findings []Finding `json:"findings"`
}

// Clean reports whether nothing was found.
func (r *Report) Clean() bool { return len(r.Findings) == 0 }

func (r *Report) add(check string, fs []Finding) {
	r.Checks = append(r.Checks, Check{Name: check, Findings: len(fs)})
	r.Findings = append(r.Findings, fs...)
}

func (r *Report) skip(check, why string) {
	r.Checks = append(r.Checks, Check{Name: check, Skipped: why})
}

// SourceRecord is one record read from the usage topic for reconcile,
// decoded by the caller (settle never reads Kafka). Identity is nil for a
// record that does not decode (it should be a dead letter).
type SourceRecord struct {
	Source    settle.Coordinates
	RecordID  string
	Operation string
}

// PublishedSettlement is one message read from the settlements topic.
type PublishedSettlement struct {
	SettlementID string
	RecordID     string
	Operation    string
	Source       settle.Coordinates
}

// Input says what to reconcile. The zero value checks the
// database's invariants for every tenant.
type Input struct {
	// TenantID limits the invariants to one tenant ("" = all) and, with
	// Period, names the tenant and period compared with the topics.
	TenantID, Period string

	// OutboxGrace is how old an unpublished outbox row must be to count
	// (the relay publishes within a second normally). 0 = 5 minutes.
	OutboxGrace time.Duration

	// HoldExpiryGrace is how long past its expires_at an active hold must
	// be to count (the sweep releases it within its interval). 0 = 5
	// minutes.
	HoldExpiryGrace time.Duration

	// Group is the consumer group whose offsets are compared. "" = "settle".
	Group string

	// KafkaOffsets are the group's committed offsets in Kafka by topic and
	// partition; nil skips the offsets check.
	KafkaOffsets map[string]map[int32]int64

	// Source is every record of the usage topic for TenantID and Period,
	// read by the caller; SourceRead says it was read (nil with SourceRead
	// false skips the topic comparison). SourceStart is each partition's
	// log start offset: identities older than it left the topic by
	// retention and are not reported.
	Source      []SourceRecord
	SourceRead  bool
	SourceTopic string
	SourceStart map[int32]int64

	// Published is every settlements-topic message of TenantID and Period;
	// PublishedRead says it was read.
	Published     []PublishedSettlement
	PublishedRead bool
}

// Run checks the invariants of the database and, when given what the
// topics hold for a tenant and period, compares them with what was settled,
// by identity. It only reads; it runs in one REPEATABLE READ READ ONLY
// transaction so every check sees the same snapshot.
func Run(ctx context.Context, store *settle.Store, in Input) (*Report, error) {
	s := &checker{pool: store.Pool(), cfg: store.Config()}
	if in.OutboxGrace == 0 {
		in.OutboxGrace = 5 * time.Minute
	}
	if in.HoldExpiryGrace == 0 {
		in.HoldExpiryGrace = 5 * time.Minute
	}
	if in.Group == "" {
		in.Group = "settle"
	}
	if (in.TenantID == "") != (in.Period == "") && (in.SourceRead || in.PublishedRead) {
		return nil, fmt.Errorf("reconcile: comparing topics needs both a tenant and a period")
	}
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, wrapStoreErr("reconcile: begin", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	r := &Report{Findings: []Finding{}}
	steps := []struct {
		name string
		fn   func(context.Context, pgx.Tx, Input) ([]Finding, error)
	}{
		{"balance_equals_sum_of_rows", s.checkBalances},
		{"ledger_rows_have_identity", s.checkLedgerOrphans},
		{"references_resolve", s.checkReferences},
		{"one_effect_per_identity", s.checkEffectRepeats},
		{"every_effect_has_one_settlement", s.checkSettlementMissing},
		{"every_outbox_row_published", s.checkOutboxUnpublished},
		{"no_outbox_row_parked", s.checkOutboxParked},
		{"ledger_hash_chain", s.checkHashChain},
		{"no_operation_waits_for_a_settled_target", s.checkWaitingTargetSettled},
		{"no_hold_active_past_expiry", s.checkHoldOverdue},
	}
	for _, st := range steps {
		fs, err := st.fn(ctx, tx, in)
		if err != nil {
			return nil, fmt.Errorf("reconcile %s: %w", st.name, err)
		}
		r.add(st.name, fs)
	}
	if in.KafkaOffsets == nil {
		r.skip("kafka_offsets_not_ahead", "no brokers given")
	} else {
		fs, err := s.checkOffsets(ctx, tx, in)
		if err != nil {
			return nil, fmt.Errorf("reconcile offsets: %w", err)
		}
		r.add("kafka_offsets_not_ahead", fs)
	}
	if in.TenantID == "" || in.Period == "" {
		r.skip("usage_topic_vs_identities", "no --tenant and --period")
		r.skip("identities_vs_settlements_topic", "no --tenant and --period")
		return r, nil
	}
	ids, err := loadPeriodIdentities(ctx, tx, in.TenantID, in.Period, s.cfg.SettlementsTopic)
	if err != nil {
		return nil, fmt.Errorf("reconcile tenant=%s period=%s: %w", in.TenantID, in.Period, err)
	}
	if in.SourceRead {
		fs, err := s.compareSource(ctx, tx, in, ids)
		if err != nil {
			return nil, fmt.Errorf("reconcile tenant=%s period=%s: usage topic: %w", in.TenantID, in.Period, err)
		}
		r.add("usage_topic_vs_identities", fs)
	} else {
		r.skip("usage_topic_vs_identities", "no brokers given")
	}
	if in.PublishedRead {
		r.add("identities_vs_settlements_topic", compareSettlements(in, ids))
	} else {
		r.skip("identities_vs_settlements_topic", "no brokers given")
	}
	return r, nil
}

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
			f      = Finding{Class: ClassEffectRepeated}
			id, tx int64
		)
		err := rows.Scan(&id, &f.TenantID, &f.Period, &f.RecordID, &f.Operation, &f.SettlementID, &tx)
		f.Detail = fmt.Sprintf("identity %d has ledger rows from %d transactions; an effect is written once", id, tx)
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

// periodIdentity is one stored identity of the tenant and period compared.
type periodIdentity struct {
	id           int64
	recordID, op string
	outcome      string
	settlementID string
	source       settle.Coordinates
	hasLedger    bool
	marked       bool // its settlement's outbox row is marked published
}

func loadPeriodIdentities(ctx context.Context, tx pgx.Tx, tenant, period, settlementsTopic string) ([]periodIdentity, error) {
	rows, err := tx.Query(ctx, sqlReconcileIdentities, tenant, period, settlementsTopic)
	if err != nil {
		return nil, err
	}
	var out []periodIdentity
	for rows.Next() {
		var pi periodIdentity
		if err := rows.Scan(&pi.id, &pi.recordID, &pi.op, &pi.outcome, &pi.settlementID,
			&pi.source.Topic, &pi.source.Partition, &pi.source.Offset, &pi.hasLedger, &pi.marked); err != nil {
			rows.Close()
			return nil, err
		}
		out = append(out, pi)
	}
	return out, rows.Err()
}

// compareSource compares the usage topic's records of the tenant and
// period with the deliveries and identities stored for them.
func (s *checker) compareSource(ctx context.Context, tx pgx.Tx, in Input, ids []periodIdentity) ([]Finding, error) {
	var out []Finding
	// Offsets PostgreSQL reached: a record past them is not settled yet
	// (lag), not a discrepancy.
	offsets, err := settle.ConsumerOffsetsIn(ctx, tx, in.Group)
	if err != nil {
		return nil, err
	}
	reached := offsets[in.SourceTopic]
	topics := make([]string, len(in.Source))
	parts := make([]int32, len(in.Source))
	offs := make([]int64, len(in.Source))
	for i, sr := range in.Source {
		topics[i], parts[i], offs[i] = sr.Source.Topic, sr.Source.Partition, sr.Source.Offset
	}
	delivered := map[settle.Coordinates]bool{}
	rows, err := tx.Query(ctx, sqlReconcileDeliveries, topics, parts, offs)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var (
			c          settle.Coordinates
			outcome    string
			identityID int64
		)
		if err := rows.Scan(&c.Topic, &c.Partition, &c.Offset, &outcome, &identityID); err != nil {
			rows.Close()
			return nil, err
		}
		delivered[c] = true
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	// Identities (settled, refused, quarantined, or still waiting) of the
	// records delivered.
	var recs, ops []string
	for _, sr := range in.Source {
		if delivered[sr.Source] {
			recs, ops = append(recs, sr.RecordID), append(ops, sr.Operation)
		}
	}
	exists := map[[2]string]bool{}
	rows, err = tx.Query(ctx, sqlReconcileIdentityKeys, in.TenantID, in.Period, recs, ops)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var (
			rid, op string
			ok      bool
		)
		if err := rows.Scan(&rid, &op, &ok); err != nil {
			rows.Close()
			return nil, err
		}
		exists[[2]string{rid, op}] = ok
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	seen := map[settle.Coordinates]bool{}
	for _, sr := range in.Source {
		c := sr.Source
		seen[c] = true
		switch {
		case !delivered[c] && c.Offset < reached[c.Partition]:
			out = append(out, Finding{Class: ClassSourceNotSettled, TenantID: in.TenantID, Period: in.Period,
				RecordID: sr.RecordID, Operation: sr.Operation, Source: &c,
				Detail: fmt.Sprintf("usage record at %s/%d/%d is behind the group's offset %d in PostgreSQL but has no delivery row", c.Topic, c.Partition, c.Offset, reached[c.Partition])})
		case delivered[c] && !exists[[2]string{sr.RecordID, sr.Operation}]:
			// A dead-lettered record's delivery names no identity; a
			// delivered record of this tenant and period decoded, so it
			// must have one (settled, refused, quarantined or waiting).
			out = append(out, Finding{Class: ClassSourceIdentityMissing, TenantID: in.TenantID, Period: in.Period,
				RecordID: sr.RecordID, Operation: sr.Operation, Source: &c,
				Detail: "usage record was delivered but its identity is neither stored nor waiting"})
		}
	}
	for _, pi := range ids {
		if pi.source.Topic != in.SourceTopic || seen[pi.source] {
			continue
		}
		if start, ok := in.SourceStart[pi.source.Partition]; ok && pi.source.Offset < start {
			continue // left the topic by retention
		}
		c := pi.source
		out = append(out, Finding{Class: ClassIdentityNoSource, TenantID: in.TenantID, Period: in.Period,
			RecordID: pi.recordID, Operation: pi.op, SettlementID: pi.settlementID, Source: &c,
			Detail: fmt.Sprintf("identity %d (%s) names usage record %s/%d/%d, which is not on the topic for this tenant and period", pi.id, pi.outcome, c.Topic, c.Partition, c.Offset)})
	}
	return out, nil
}

// compareSettlements compares the settlements topic's messages of the
// tenant and period with the stored effects, by settlement_id. A message
// published twice is at-least-once delivery, not a difference.
func compareSettlements(in Input, ids []periodIdentity) []Finding {
	published := map[string]bool{}
	for _, p := range in.Published {
		published[p.SettlementID] = true
	}
	known := map[string]bool{}
	var out []Finding
	for _, pi := range ids {
		if pi.settlementID == "" {
			continue
		}
		known[pi.settlementID] = true
		// Not yet marked published: the relay's pending work (the outbox
		// check reports it once it is older than the grace period).
		if pi.outcome == string(settle.OutcomeSettled) && pi.hasLedger && pi.marked && !published[pi.settlementID] {
			out = append(out, Finding{Class: ClassSettlementNotOnTopic, TenantID: in.TenantID, Period: in.Period,
				RecordID: pi.recordID, Operation: pi.op, SettlementID: pi.settlementID,
				Detail: fmt.Sprintf("identity %d wrote ledger rows and its outbox row is marked published, but its settlement is not on the settlements topic", pi.id)})
		}
	}
	reported := map[string]bool{}
	for _, p := range in.Published {
		if known[p.SettlementID] || reported[p.SettlementID] {
			continue
		}
		reported[p.SettlementID] = true
		c := p.Source
		out = append(out, Finding{Class: ClassSettlementNoIdentity, TenantID: in.TenantID, Period: in.Period,
			RecordID: p.RecordID, Operation: p.Operation, SettlementID: p.SettlementID, Source: &c,
			Detail: "a message on the settlements topic names a settlement no stored identity made"})
	}
	return out
}

// checker runs the checks against one database.
type checker struct {
	pool *pgxpool.Pool
	cfg  settle.Config
}

//go:embed sql/*.sql
var sqlFiles embed.FS

// mustQuery loads one embedded query; a missing file is a build defect.
func mustQuery(name string) string {
	b, err := sqlFiles.ReadFile("sql/" + name)
	if err != nil {
		panic(errors.New("reconcile: missing embedded query " + name))
	}
	return string(b)
}

func wrapStoreErr(what string, err error) error { return settle.StoreError(what, err) }
