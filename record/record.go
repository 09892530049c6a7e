// Package record turns the bytes of one input record into a validated
// Record and its scoped Identity; package fingerprint, above it, takes a
// Record to its versioned canonical form and hash.
//
// It owns the input grammar of CONTRACT.md section 2 and nothing else: it
// knows nothing of Kafka, SQL, money movements or canonical forms, and it
// never uses floating point. Every other package depends on it; it depends
// on none of them.
package record

import (
	"encoding/json"
	"time"
)

// Kind is what a record asks for; it is also the operation of its Identity.
type Kind string

// The kinds of CONTRACT.md section 2.
const (
	KindUsage       Kind = "usage"
	KindCorrection  Kind = "correction"
	KindReversal    Kind = "reversal"
	KindRefund      Kind = "refund"
	KindReclaim     Kind = "reclaim"
	KindHold        Kind = "hold"
	KindHoldRelease Kind = "hold_release"
	KindGrant       Kind = "grant"
)

// KindExpire is the operation of the release of an expired hold. No input
// record has it: settle makes it (identity: the hold's, operation expire),
// and its canonical form, like a release's, holds only the identity.
const KindExpire Kind = "expire"

// Kinds lists every valid kind, in the contract's order.
var Kinds = []Kind{KindUsage, KindCorrection, KindReversal, KindRefund, KindReclaim, KindHold, KindHoldRelease, KindGrant}

// Identity is the scoped identity of a logical record: the unit of
// exactly-once. Two records with equal identities are the same logical
// record; their fingerprints tell a retry from a conflict.
type Identity struct {
	TenantID      string
	AccountPeriod string
	RecordID      string
	Operation     Kind
}

// String renders the identity for logs and errors:
// tenant=acme period=2026-11 record=u-1 op=usage.
func (id Identity) String() string {
	return "tenant=" + id.TenantID + " period=" + id.AccountPeriod + " record=" + id.RecordID + " op=" + string(id.Operation)
}

// Header is one Kafka record header.
type Header struct {
	Key   string
	Value []byte
}

// HeaderValue is the value of the first of hs named key, and whether one
// is.
func HeaderValue(hs []Header, key string) (string, bool) {
	for _, h := range hs {
		if h.Key == key {
			return string(h.Value), true
		}
	}
	return "", false
}

// Record is one validated input record. Fields that do not apply to its Kind
// are left empty, so that two records that differ only in ignored fields are
// equal. Decimals are kept as their exact normalised text (see
// NormalizeDecimal); times are in UTC.
type Record struct {
	TenantID      string
	AccountPeriod string // YYYY-MM
	RecordID      string
	Kind          Kind
	Subject       string

	Amount   string // normalised decimal; "" when the kind takes none
	Currency string
	Meter    string
	Quantity string // normalised decimal; "" when absent
	Unit     string

	OccurredAt time.Time // UTC

	// FinalizationVersion is 0 when absent (only a reversal may omit it).
	FinalizationVersion int64

	// Corrects names the record a correction or reversal corrects.
	// CorrectsPeriod is "" when it equals AccountPeriod.
	Corrects       string
	CorrectsPeriod string

	// HoldID names the hold a usage captures. HoldPeriod is "" when it
	// equals AccountPeriod, and always "" when HoldID is "".
	HoldID     string
	HoldPeriod string

	ExpiresAt time.Time // zero when absent (hold only)

	Source     string          // provenance only; never fingerprinted
	Attributes json.RawMessage // compact JSON object or nil; never fingerprinted
}

// Identity returns the scoped identity of the record. For refund, reclaim and
// hold_release the RecordID names the target and the operation is the kind.
func (r *Record) Identity() Identity {
	return Identity{TenantID: r.TenantID, AccountPeriod: r.AccountPeriod, RecordID: r.RecordID, Operation: r.Kind}
}

// TargetPeriod is the account period of the record a correction or reversal
// corrects.
func (r *Record) TargetPeriod() string {
	if r.CorrectsPeriod != "" {
		return r.CorrectsPeriod
	}
	return r.AccountPeriod
}

// HoldTargetPeriod is the account period of the hold a usage captures.
func (r *Record) HoldTargetPeriod() string {
	if r.HoldPeriod != "" {
		return r.HoldPeriod
	}
	return r.AccountPeriod
}
