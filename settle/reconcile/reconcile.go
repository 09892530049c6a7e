// Package reconcile is month end in one place. It is the one invariant
// checker of a settle database:
// balances equal their ledger rows, one effect per identity, every effect
// published once, the hash chains, nothing waiting for a settled target,
// no hold active past its expiry, one identity per key, gapless per-account
// sequences, one delivery row per record and none missing below
// PostgreSQL's offsets; and, given what the topics hold, Kafka's offsets
// not ahead of PostgreSQL's, the usage topic against the identities, the
// identities against the settlements topic, and for a finished run every
// record below the end offsets delivered and answered on the results
// topic; given a model of a known input, the accounts, identities and
// delivery outcomes against it. `settle reconcile`, the tests (e2e/faults/,
// e2e/) and the benchmark read their verdict from it; it never talks to a
// broker in Run: ReadTopics reads the topics and the caller passes what
// they hold. Month end against a source system's own export is
// CheckSource (sourcecheck.go), over SourceReader (sourcefile.go).
//
// It only reads, in one REPEATABLE READ READ ONLY transaction, and never
// repairs what it finds: each finding says what to do.
package reconcile

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/dberr"
	"github.com/settlehq/settle/settle/message"
)

// Discrepancy classes: what reconcile found, one per kind of difference.
const (
	// Invariants of the database.
	ClassBalanceMismatch       = "balance_mismatch"                 // balance/held (the newest ledger row's) ≠ sum of ledger rows
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
	ClassSettlementNoIdentity  = "settlement_without_identity"      // a settlements-topic message no stored effect explains
	ClassChainBroken           = "ledger_chain_broken"              // a ledger row whose hash does not follow its account's chain
	ClassChainHeadMismatch     = "ledger_chain_head_mismatch"       // an account's chain head is not its newest row's hash
	ClassDeliveryNoIdentity    = "delivery_without_identity"        // a delivery row naming an identity that does not exist
	ClassIdentityNoAccount     = "identity_without_account"         // an identity naming an account that does not exist
	ClassIdentityRefMissing    = "identity_reference_missing"       // an identity whose root or target identity does not exist
	ClassChainNoAccount        = "chain_without_account"            // a chain naming an account that does not exist
	ClassChainRefMissing       = "chain_reference_missing"          // a chain whose root, refund or reclaim identity does not exist
	ClassHoldNoAccount         = "hold_without_account"             // a hold naming an account that does not exist
	ClassHoldRefMissing        = "hold_reference_missing"           // a hold whose own identity or closing identity does not exist
	ClassWaitingTargetSettled  = "waiting_target_settled"           // an operation still waiting although its target settled
	ClassHoldOverdue           = "hold_overdue"                     // a hold still active past its expires_at and the grace period
	ClassIdentityDuplicated    = "identity_duplicated"              // one (tenant, period, record_id, operation) stored more than once
	ClassSequenceBroken        = "settlement_sequence_broken"       // an account's settlements do not carry the sequences 1..seq, each once
	ClassDeliveryRepeated      = "delivery_repeated"                // more than one delivery row for one record's coordinates
	ClassDeliveryGap           = "delivery_gap"                     // an offset below PostgreSQL's next offset with no delivery row

	// Given the end offsets of a finished run, and the results topic.
	ClassRecordNotDelivered = "record_not_delivered" // a record below its topic's end offset with no delivery row
	ClassDeliveryPastEnd    = "delivery_past_end"    // a delivery row at or past its topic's end offset
	ClassResultMissing      = "result_missing"       // a record below its topic's end offset that no results message names

	// Given the settlements topic, beyond the identities.
	ClassSettlementHeaderMismatch   = "settlement_header_mismatch"   // a message whose settlement_id header differs from its body's
	ClassSettlementSequenceMismatch = "settlement_sequence_mismatch" // a message whose sequence differs from the one settle stored

	// Given a model of a known input (tests, the benchmark).
	ClassAccountModelMismatch    = "account_model_mismatch"     // an account missing or holding another balance or held than the model
	ClassIdentityModelMismatch   = "identity_model_mismatch"    // an identity whose outcome or ledger rows differ from the model's
	ClassIdentityNotExpected     = "identity_not_expected"      // a stored identity the model does not have
	ClassIdentityExpectedMissing = "identity_expected_missing"  // an identity of the model not stored
	ClassOutcomesModelMismatch   = "delivery_outcomes_mismatch" // delivery rows by outcome differ from the model's counts
	ClassKeyAnswerMismatch       = "key_answer_mismatch"        // an Idempotency-Key not done, or done with other bytes than its clients got
)

// Finding is one difference reconcile found.
type Finding struct {
	Class        string               `json:"class"`
	TenantID     string               `json:"tenant_id,omitempty"`
	Period       string               `json:"account_period,omitempty"`
	RecordID     string               `json:"record_id,omitempty"`
	Operation    string               `json:"operation,omitempty"`
	SettlementID string               `json:"settlement_id,omitempty"`
	AccountID    int64                `json:"account_id,omitempty"`
	LedgerRowID  int64                `json:"ledger_row_id,omitempty"`
	OutboxRowID  int64                `json:"outbox_row_id,omitempty"`
	Source       *message.Coordinates `json:"source,omitempty"`
	Detail       string               `json:"detail"`
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
	Source    message.Coordinates
	RecordID  string
	Operation string
}

// PublishedSettlement is one message read from the settlements topic.
type PublishedSettlement struct {
	SettlementID string
	RecordID     string
	Operation    string
	Source       message.Coordinates

	// HeaderSettlementID is the message's settlement_id header, which
	// must equal the body's; Sequence is the per-account sequence the
	// body carries, which must be the one settle stored.
	HeaderSettlementID string
	Sequence           int64
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
	// partition; nil skips the offsets check, reported not run for
	// KafkaOffsetsNotRead ("" = no brokers given).
	KafkaOffsets        map[string]map[int32]int64
	KafkaOffsetsNotRead string

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

	// EndOffsets are the end offsets, by topic and partition, of topics
	// the caller knows were consumed to the end (a finished run): every
	// offset below has its delivery row and none lies at or past it. nil
	// skips the check.
	EndOffsets map[string]map[int32]int64

	// Results are the source coordinates the results topic's messages
	// name; ResultsRead says it was read. With EndOffsets, every record
	// below them has a result.
	Results     []message.Coordinates
	ResultsRead bool

	// What a known input must have produced, by a model of it (tests and
	// the benchmark; the CLI has none): every account's balance and held
	// amount, every identity's outcome and ledger rows (a stored account
	// or identity the model lacks is a finding too), and the delivery rows
	// of SourceTopic ("" = every topic) by outcome. nil skips each.
	ExpectedAccounts   []ExpectedAccount
	ExpectedIdentities []ExpectedIdentity
	ExpectedOutcomes   map[string]int64

	// TopicsOnly runs only the comparisons with the topics: for a caller
	// that checked the database as a whole already and compares one tenant
	// and period after another. The database's checks do not run.
	TopicsOnly bool

	// KeyAnswers are the answers clients of the HTTP edge got, by
	// Idempotency-Key: each key must be stored, done, with those bytes.
	// nil skips the check.
	KeyAnswers map[KeyRef][]byte
}

// KeyRef names one Idempotency-Key of a tenant.
type KeyRef struct{ TenantID, Key string }

// Run checks the invariants of the database and, when given what the
// topics hold for a tenant and period, compares them with what was settled,
// by identity. It only reads; it runs in one REPEATABLE READ READ ONLY
// transaction so every check sees the same snapshot.
func Run(ctx context.Context, store *settle.Store, in Input) (*Report, error) {
	s := &checker{pool: store.Pool(), cfg: store.Config()}
	in.OutboxGrace = cmp.Or(in.OutboxGrace, 5*time.Minute)
	in.HoldExpiryGrace = cmp.Or(in.HoldExpiryGrace, 5*time.Minute)
	in.Group = cmp.Or(in.Group, "settle")
	if (in.TenantID == "") != (in.Period == "") && (in.SourceRead || in.PublishedRead) {
		return nil, fmt.Errorf("reconcile: comparing topics needs both a tenant and a period")
	}
	tx, err := s.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	r := &Report{Findings: []Finding{}}
	if !in.TopicsOnly {
		if err := s.runAlways(ctx, tx, in, r); err != nil {
			return nil, err
		}
		if err := s.runGiven(ctx, tx, in, r); err != nil {
			return nil, err
		}
	}
	if err := s.compareTopics(ctx, tx, in, r); err != nil {
		return nil, err
	}
	return r, nil
}

// beginReconcile begins a reconcile's transaction: one REPEATABLE READ READ
// ONLY snapshot whose statements are planned for the tables as they are at
// every run, in one round trip (as pgq.Tx begins a settling one). A
// connection's statement cache otherwise keeps the generic plan PostgreSQL
// settles on after five runs: a process that reconciles again and again
// (the fault tests' checker between rounds) kept a plan made while the
// tables were small, and the settlements check, which joins every identity
// to the messages counted by settlement id, nested its loops (75 s on a
// benchmark's 3,000 records grown seventeen times, 0.46 s planned for that
// size, in psql; TestReconcilePlansForTheTablesAsTheyAre). A reconcile is
// rare; planning its statements costs milliseconds.
const beginReconcile = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SET LOCAL plan_cache_mode = force_custom_plan"

// begin begins a reconcile's transaction (beginReconcile).
func (s *checker) begin(ctx context.Context) (pgx.Tx, error) {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{BeginQuery: beginReconcile})
	if err != nil {
		return nil, dberr.Wrap("reconcile: begin", err)
	}
	return tx, nil
}

// check is one named check of the database.
type check struct {
	name string
	fn   func(context.Context, pgx.Tx, Input) ([]Finding, error)
	// skipped, when not "", says why the check does not run.
	skipped string
	// programOnly: only a program gives its input (a model, a finished
	// run's end offsets and results, the edge's answers); not run, it is
	// left out of the report, as no user of settle reconcile could run it.
	programOnly bool
}

// runChecks runs cs in order and adds their findings (or why each was
// skipped) to r.
func runChecks(ctx context.Context, tx pgx.Tx, in Input, r *Report, cs []check) error {
	for _, c := range cs {
		if c.skipped != "" {
			if !c.programOnly {
				r.skip(c.name, c.skipped)
			}
			continue
		}
		fs, err := c.fn(ctx, tx, in)
		if err != nil {
			return fmt.Errorf("reconcile %s: %w", c.name, err)
		}
		r.add(c.name, fs)
	}
	return nil
}

// runAlways runs the checks of the database alone.
func (s *checker) runAlways(ctx context.Context, tx pgx.Tx, in Input, r *Report) error {
	return runChecks(ctx, tx, in, r, []check{
		{name: "balance_equals_sum_of_rows", fn: s.checkBalances},
		{name: "ledger_rows_have_identity", fn: s.checkLedgerOrphans},
		{name: "references_resolve", fn: s.checkReferences},
		{name: "one_effect_per_identity", fn: s.checkEffectRepeats},
		{name: "every_effect_has_one_settlement", fn: s.checkSettlementMissing},
		{name: "every_outbox_row_published", fn: s.checkOutboxUnpublished},
		{name: "no_outbox_row_parked", fn: s.checkOutboxParked},
		{name: "ledger_hash_chain", fn: s.checkHashChain},
		{name: "no_operation_waits_for_a_settled_target", fn: s.checkWaitingTargetSettled},
		{name: "no_hold_active_past_expiry", fn: s.checkHoldOverdue},
		{name: "one_identity_per_key", fn: s.checkIdentityDuplicates},
		{name: "settlement_sequences_gapless", fn: s.checkSequences},
		{name: "one_delivery_per_record", fn: s.checkDeliveryRepeated},
	})
}

// runGiven runs the checks that need what the caller gives them (offsets,
// a finished run's end offsets and results, a model); each is skipped,
// with why, when it is not given.
func (s *checker) runGiven(ctx context.Context, tx pgx.Tx, in Input, r *Report) error {
	wasPruned, _, err := pruned(ctx, tx, "")
	if err != nil {
		return fmt.Errorf("reconcile: %w", err)
	}
	return runChecks(ctx, tx, in, r, []check{
		{"no_delivery_gap_below_offsets", s.checkDeliveryGaps, skipIf(wasPruned, "settle prune removed delivery rows"), false},
		{"kafka_offsets_not_ahead", s.checkOffsets, skipIf(in.KafkaOffsets == nil, cmp.Or(in.KafkaOffsetsNotRead, "no brokers given")), false},
		{"every_record_delivered", s.checkEveryRecordDelivered, skipIf(in.EndOffsets == nil, "no end offsets of a finished run given"), true},
		{"every_record_has_a_result", func(context.Context, pgx.Tx, Input) ([]Finding, error) { return resultsMissing(in), nil },
			skipIf(in.EndOffsets == nil || !in.ResultsRead, "no end offsets and results topic given"), true},
		{"accounts_match_model", s.compareAccounts, skipIf(in.ExpectedAccounts == nil, "no model given"), true},
		{"identities_match_model", s.compareIdentities, skipIf(in.ExpectedIdentities == nil, "no model given"), true},
		{"delivery_outcomes_match_model", s.compareOutcomes, skipIf(in.ExpectedOutcomes == nil, "no model given"), true},
		{"keys_answered_as_stored", s.compareKeyAnswers, skipIf(in.KeyAnswers == nil, "no answers given"), true},
	})
}

// compareTopics compares one tenant's period with the usage topic and
// the settlements topic, when the caller read them.
func (s *checker) compareTopics(ctx context.Context, tx pgx.Tx, in Input, r *Report) error {
	if in.TenantID == "" || in.Period == "" {
		r.skip("usage_topic_vs_identities", "no --tenant and --period")
		r.skip("identities_vs_settlements_topic", "no --tenant and --period")
		return nil
	}
	if _, canaryPruned, err := pruned(ctx, tx, in.TenantID); err != nil {
		return fmt.Errorf("reconcile tenant=%s period=%s: %w", in.TenantID, in.Period, err)
	} else if canaryPruned {
		// The canary's retention removed whole accounts of this tenant:
		// their records and settlements stay on the topics without rows,
		// which is no finding (docs/operations.md, Canary).
		why := "the canary's retention (settle prune --canary-keep) removed this tenant's older accounts"
		r.skip("usage_topic_vs_identities", why)
		r.skip("identities_vs_settlements_topic", why)
		return nil
	}
	ids, err := loadPeriodIdentities(ctx, tx, in.TenantID, in.Period, s.cfg.SettlementsTopic)
	if err != nil {
		return fmt.Errorf("reconcile tenant=%s period=%s: %w", in.TenantID, in.Period, err)
	}
	if in.SourceRead {
		fs, err := s.compareSource(ctx, tx, in, ids)
		if err != nil {
			return fmt.Errorf("reconcile tenant=%s period=%s: usage topic: %w", in.TenantID, in.Period, err)
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
	return nil
}

// skipIf is why a check is skipped: why when skip, else "" (it runs).
func skipIf(skip bool, why string) string {
	if skip {
		return why
	}
	return ""
}

// checker runs the checks against one database.
type checker struct {
	pool *pgxpool.Pool
	cfg  settle.Config
}
