// Package message is what settling hears and says, in the words of
// CONTRACT.md: the Input (a Kafka record with its coordinates and its
// decoding), the Result of every input record (the message on usage.results), the Response
// stored for every identity (replayed unchanged to every retry, and for a
// settlement the message on the settlements topic), their outcomes and
// reason codes, and the ledger's hash chain that every settlement carries.
//
// It is below every room that writes or reads these messages (the settling
// transaction, the consumer, the relay, the edge, the read side, the
// invariant checker), so that none of them imports another for its words.
package message

import (
	"encoding/json"
	"time"

	"github.com/settlehq/settle/record"
)

// Outcome is the final (or, for waiting, provisional) outcome of one input
// record, per CONTRACT.md section 4.
type Outcome string

// The outcomes.
const (
	OutcomeSettled      Outcome = "settled"
	OutcomeDuplicate    Outcome = "duplicate"
	OutcomeQuarantined  Outcome = "quarantined"
	OutcomeWaiting      Outcome = "waiting"
	OutcomeRefused      Outcome = "refused"
	OutcomeDeadLettered Outcome = "dead_lettered"
)

// Reason codes that go with quarantined, refused and dead_lettered.
const (
	ReasonFingerprintMismatch = "fingerprint_mismatch"
	ReasonOrphan              = "orphan"
	ReasonInvalidLink         = "invalid_link"
	ReasonTargetRefunded      = "target_refunded"
	ReasonVersionConflict     = "version_conflict"

	ReasonInsufficientFunds = "insufficient_funds"
	ReasonExpired           = "expired"
	ReasonSuperseded        = "superseded"
	ReasonNothingToRefund   = "nothing_to_refund"
	ReasonAlreadyRecovered  = "already_recovered"
	ReasonAlreadyRefunded   = "already_refunded"
	ReasonAlreadyReclaimed  = "already_reclaimed"

	ReasonInvalidJSON        = record.ReasonInvalidJSON
	ReasonTooLarge           = record.ReasonTooLarge
	ReasonInvalidField       = record.ReasonInvalidField
	ReasonTransientExhausted = "transient_exhausted"
	// ReasonBatchTooLarge: a compressed record batch that would decompress
	// past the consumer's limit; one dead letter holds the whole batch.
	ReasonBatchTooLarge = "batch_too_large"
)

// SchemaVersionOutput is the `version` of every message settle writes.
const SchemaVersionOutput = 1

// IdentityJSON is an identity as it appears in messages.
type IdentityJSON struct {
	TenantID      string `json:"tenant_id"`
	AccountPeriod string `json:"account_period"`
	RecordID      string `json:"record_id"`
	Operation     string `json:"operation"`
}

// IdentityOf is id as messages name it.
func IdentityOf(id record.Identity) IdentityJSON {
	return IdentityJSON{id.TenantID, id.AccountPeriod, id.RecordID, string(id.Operation)}
}

// Entry is one ledger row of a settlement.
type Entry struct {
	Bucket string `json:"bucket"` // balance or held
	Amount string `json:"amount"` // signed decimal: a charge is negative
}

// Links names the records a settlement is linked to.
type Links struct {
	Corrects     string `json:"corrects,omitempty"`      // record_id corrected
	Root         string `json:"root,omitempty"`          // settlement_id of the chain's root
	RefundTarget string `json:"refund_target,omitempty"` // settlement_id of the refund a reclaim takes back
	Hold         string `json:"hold,omitempty"`          // settlement_id of the hold captured or released
	Case         int64  `json:"case,omitempty"`          // conflict case a resolution settles
}

// Response is the stored response of an identity: what a settled, refused or
// quarantined record answered, repeated unchanged to every retry. For a
// settled record it is also the message on the settlements topic.
type Response struct {
	Version      int          `json:"version"`
	Outcome      Outcome      `json:"outcome"`
	Reason       string       `json:"reason,omitempty"`
	Detail       string       `json:"detail,omitempty"`
	SettlementID string       `json:"settlement_id,omitempty"`
	Identity     IdentityJSON `json:"identity"`
	Kind         string       `json:"kind"`
	Subject      string       `json:"subject,omitempty"`
	Currency     string       `json:"currency,omitempty"`
	Entries      []Entry      `json:"entries,omitempty"`
	Links        *Links       `json:"links,omitempty"`
	BalanceAfter string       `json:"balance_after,omitempty"`
	HeldAfter    string       `json:"held_after,omitempty"`
	Sequence     int64        `json:"sequence,omitempty"`
	ChainHash    string       `json:"chain_hash,omitempty"` // the account's ledger hash chain head after this settlement
	CaseID       int64        `json:"case_id,omitempty"`
	CommittedAt  time.Time    `json:"committed_at"`
	Late         bool         `json:"late,omitempty"`
	OccurredAt   *time.Time   `json:"occurred_at,omitempty"`
	SourceRecord *Coordinates `json:"source,omitempty"`
}

// Coordinates name one Kafka record.
type Coordinates struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
}

// Result is the outcome of one input record: the message published to the
// results topic. A redelivered input record (same coordinates) gets its
// stored result again, with Redelivered set.
type Result struct {
	Version     int             `json:"version"`
	Source      Coordinates     `json:"source"`
	Identity    *IdentityJSON   `json:"identity,omitempty"`
	Outcome     Outcome         `json:"outcome"`
	Reason      string          `json:"reason,omitempty"`
	Error       string          `json:"error,omitempty"`
	CaseID      int64           `json:"case_id,omitempty"`
	Replayed    bool            `json:"replayed,omitempty"`
	Redelivered bool            `json:"redelivered,omitempty"`
	Response    json.RawMessage `json:"response,omitempty"`

	// Timestamp is the input record's timestamp (not serialised): callers
	// measure end-to-end latency from it.
	Timestamp time.Time `json:"-"`
	// Key is the results topic key: the input record's key.
	Key []byte `json:"-"`
	// ResponseOf is the identity whose stored response Response is, byte
	// for byte (0: none, or not known here): an Idempotency-Key's answer
	// names it instead of holding a copy (not serialised).
	ResponseOf int64 `json:"-"`
}
