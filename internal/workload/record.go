package workload

import "strconv"

// Record is one generated input record.
type Record struct {
	// Key is "tenant/subject" ("tenant/subject/retry" for a cross-partition
	// retry). Key and Value are the caller's: a duplicate may share its
	// original's Value slice, so neither is to be modified.
	Key, Value []byte
	// Partition is the partition the record belongs on: FNV-1a of its
	// account's key modulo Config.Partitions (another one for a
	// cross-partition retry).
	Partition int32
	// Offset is the record's offset when the stream is produced, in order,
	// to an empty topic: its index among the records of its partition.
	Offset int64
	// Identity is the record's identity (the zero Identity for poison).
	Identity Identity
	// What says how the generator made the record: grant, usage, capture,
	// correction, refund, hold, hold_release (new identities), or
	// duplicate, retry (a duplicate on another partition), conflict,
	// poison.
	What string
	// Expect is the outcome the model predicts for the record, settled in
	// stream order. A cross-partition retry and its original may swap:
	// whichever settles first is settled, the other a duplicate.
	Expect Expect
}

// New reports whether the record is expected to be the first of its
// identity: a stored identity follows from it (settled, refused or
// quarantined by a rule), where a duplicate, a conflicting repeat or a
// dead letter leaves none.
func (r *Record) New() bool { return r.Expect.New() }

// The What of each way a record is made.
const (
	WhatGrant       = "grant"
	WhatUsage       = "usage"
	WhatCapture     = "capture"
	WhatCorrection  = "correction"
	WhatRefund      = "refund"
	WhatHold        = "hold"
	WhatHoldRelease = "hold_release"
	WhatDuplicate   = "duplicate"
	WhatRetry       = "retry"
	WhatConflict    = "conflict"
	WhatPoison      = "poison"
)

// Identity is a record's identity as the contract defines it (section 2).
type Identity struct {
	Tenant, Period, RecordID, Operation string
}

// String is "tenant/period/record_id/operation".
func (id Identity) String() string {
	return id.Tenant + "/" + id.Period + "/" + id.RecordID + "/" + id.Operation
}

// Outcomes, as the contract names them (section 4).
const (
	OutcomeSettled      = "settled"
	OutcomeDuplicate    = "duplicate"
	OutcomeQuarantined  = "quarantined"
	OutcomeRefused      = "refused"
	OutcomeDeadLettered = "dead_lettered"
)

// Reasons the workload's records can end with.
const (
	ReasonFingerprintMismatch = "fingerprint_mismatch"
	ReasonTargetRefunded      = "target_refunded"
	ReasonInsufficientFunds   = "insufficient_funds"
	ReasonNothingToRefund     = "nothing_to_refund"
	ReasonInvalidJSON         = "invalid_json"
	ReasonInvalidField        = "invalid_field"
)

// Expect is an outcome with its reason ("" for settled and duplicate).
type Expect struct {
	Outcome, Reason string
}

// String is "outcome" or "outcome/reason".
func (e Expect) String() string {
	if e.Reason == "" {
		return e.Outcome
	}
	return e.Outcome + "/" + e.Reason
}

// New reports whether a record of this outcome stores a new identity.
func (e Expect) New() bool {
	switch e.Outcome {
	case OutcomeDuplicate, OutcomeDeadLettered:
		return false
	case OutcomeQuarantined:
		return e.Reason != ReasonFingerprintMismatch
	}
	return true
}

// Amount is an exact amount of money in cents (hundredths of the currency
// unit). Every amount the workload generates has at most two decimals, and
// a balance is a sum of them, so int64 is exact (to 92 million million
// units per account).
type Amount int64

// String is the decimal form: "-12.05", "0.00", "1000000000.00".
func (a Amount) String() string { return string(a.append(nil)) }

func (a Amount) append(b []byte) []byte {
	if a < 0 {
		b = append(b, '-')
		a = -a
	}
	b = strconv.AppendInt(b, int64(a/100), 10)
	b = append(b, '.')
	if c := a % 100; c < 10 {
		b = append(b, '0')
		b = strconv.AppendInt(b, int64(c), 10)
	} else {
		b = strconv.AppendInt(b, int64(c), 10)
	}
	return b
}
