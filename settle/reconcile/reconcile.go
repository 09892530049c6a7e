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
	"context"
	"embed"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/settlehq/settle/settle"
)

var (
	sqlReconcileBalance           = mustQuery("reconcile_balance.sql")
	sqlReconcileLedgerOrphan      = mustQuery("reconcile_ledger_orphan.sql")
	sqlReconcileEffectRepeat      = mustQuery("reconcile_effect_repeat.sql")
	sqlReconcileSettlementMissing = mustQuery("reconcile_settlement_missing.sql")
	sqlReconcileOutboxUnpublished = mustQuery("reconcile_outbox_unpublished.sql")
	sqlReconcileOutboxParked      = mustQuery("reconcile_outbox_parked.sql")
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
