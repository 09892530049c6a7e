// Package corrections decides how an adjustment links to its original: the
// rules of chains (a root usage and its corrections and reversals) and of
// the refund-then-recover pair that acts on a chain.
//
// It is pure: it takes a chain's state and a request and returns a decision.
// It never reads or writes storage; settle/ loads the chain under a row lock,
// asks here, and writes the decision in the same transaction, guarded on the
// state it read.
package corrections

import (
	"github.com/settlehq/settle/internal/money"
	"github.com/settlehq/settle/record"
)

// Chain is the state of one chain.
type Chain struct {
	// NetCharge is the root's charge plus its adjustments (positive when the
	// chain charged the account); refunds and reclaims never count.
	NetCharge money.Dec
	// Version is the chain's current finalization_version.
	Version int64
	// Refunded is set once the chain was refunded; Refund is the amount.
	Refunded bool
	Refund   money.Dec
	// Reclaimed: the refund was taken back. Recovered: a success signal
	// arrived before any refund (no ledger row).
	Reclaimed bool
	Recovered bool
}

// Verdict is what to do with a request.
type Verdict int

// The verdicts.
const (
	Apply      Verdict = iota // settle it with Decision.Delta
	Refuse                    // store a refusal with Decision.Reason
	Quarantine                // open a case with Decision.Reason
)

// Decision is the outcome of a request against a chain.
type Decision struct {
	Verdict Verdict
	Reason  string
	// Delta is the movement of the account's balance (credits: a charge is
	// negative). Zero with Apply means a settlement without money movement,
	// such as a success recorded before any refund, or a correction that
	// states the same total.
	Delta money.Dec
	// WritesRow says whether the applied decision writes a ledger row.
	WritesRow bool
	// Next is the chain after the decision (unchanged unless Apply).
	Next Chain
}

// Reason codes.
const (
	ReasonSuperseded       = "superseded"
	ReasonVersionConflict  = "version_conflict"
	ReasonTargetRefunded   = "target_refunded"
	ReasonNothingToRefund  = "nothing_to_refund"
	ReasonAlreadyRecovered = "already_recovered"
	ReasonAlreadyRefunded  = "already_refunded"
	ReasonAlreadyReclaimed = "already_reclaimed"
)

// Correct states a chain's new total. version is the correction's
// finalization_version; 0 (a reversal that carries none) means the chain's
// current version + 1. The link (tenant, subject, currency) is checked by
// the caller first; then the version, then whether the chain is refunded.
func Correct(c Chain, newTotal money.Dec, version int64) Decision {
	if version == 0 {
		version = c.Version + 1
	}
	switch {
	case version < c.Version:
		return Decision{Verdict: Refuse, Reason: ReasonSuperseded, Next: c}
	case version == c.Version:
		return Decision{Verdict: Quarantine, Reason: ReasonVersionConflict, Next: c}
	case c.Refunded && !c.Reclaimed:
		return Decision{Verdict: Quarantine, Reason: ReasonTargetRefunded, Next: c}
	}
	next := c
	next.NetCharge, next.Version = newTotal, version
	return Decision{Verdict: Apply, Delta: c.NetCharge.Sub(newTotal), WritesRow: true, Next: next}
}

// Restate states a chain's new total on an analyst's decision (an accepted
// conflict case): the delta against the chain as it is, at the chain's
// current version, which it leaves as it is, so the producer's later
// versions still apply in order. A refunded chain that is not reclaimed is
// not restated, as it is not corrected.
func Restate(c Chain, newTotal money.Dec) Decision {
	if c.Refunded && !c.Reclaimed {
		return Decision{Verdict: Quarantine, Reason: ReasonTargetRefunded, Next: c}
	}
	next := c
	next.NetCharge = newTotal
	return Decision{Verdict: Apply, Delta: c.NetCharge.Sub(newTotal), WritesRow: true, Next: next}
}

// RefundChain returns the net charge once, only if the chain is charged and
// neither refunded nor recovered.
func RefundChain(c Chain) Decision {
	switch {
	case c.Reclaimed || c.Recovered:
		return Decision{Verdict: Refuse, Reason: ReasonAlreadyRecovered, Next: c}
	case c.Refunded:
		return Decision{Verdict: Refuse, Reason: ReasonAlreadyRefunded, Next: c}
	case c.NetCharge.Sign() <= 0:
		return Decision{Verdict: Refuse, Reason: ReasonNothingToRefund, Next: c}
	}
	next := c
	next.Refunded, next.Refund = true, c.NetCharge
	return Decision{Verdict: Apply, Delta: c.NetCharge, WritesRow: true, Next: next}
}

// ReclaimChain takes the refund back once, for exactly the refunded amount.
// Before any refund it records the success (no ledger row), so that a refund
// arriving later is refused.
func ReclaimChain(c Chain) Decision {
	switch {
	case c.Reclaimed || c.Recovered:
		return Decision{Verdict: Refuse, Reason: ReasonAlreadyReclaimed, Next: c}
	case !c.Refunded:
		next := c
		next.Recovered = true
		return Decision{Verdict: Apply, Next: next}
	}
	next := c
	next.Reclaimed = true
	return Decision{Verdict: Apply, Delta: c.Refund.Neg(), WritesRow: true, Next: next}
}

// Target is how the records at the record_id an operation names resolve.
type Target int

// The resolutions of a target.
const (
	TargetMissing Target = iota // nothing there yet: the operation waits
	TargetFound                 // one chain
	TargetInvalid               // a record of the wrong kind, or members of more than one chain: invalid_link
)

// ChainTarget resolves the chain a correction, reversal, refund or reclaim
// names, the way the contract resolves targets by kind: the usage,
// correction or reversal with that record_id, each standing for its
// chain's root. Feed it every record at the named (tenant, period,
// record_id) that counts (the settling path leaves out quarantined ones);
// a record of another kind there makes the link invalid, and so do members
// of two chains. Refunds, reclaims and releases share their target's
// record_id and are operations on it, never targets: they are skipped.
//
// The settling path and month end's source check both resolve through it,
// so a source export's chains are the chains settle settles.
type ChainTarget struct {
	root    int64
	invalid bool
}

// Add counts one record at the named record_id: its kind and the id of its
// chain's root (0 when it is in no chain).
func (t *ChainTarget) Add(kind record.Kind, root int64) {
	switch kind {
	case record.KindRefund, record.KindReclaim, record.KindHoldRelease, record.KindExpire:
		return
	case record.KindUsage, record.KindCorrection, record.KindReversal:
		if root == 0 || (t.root != 0 && t.root != root) {
			t.invalid = true
		}
		t.root = root
	default:
		t.invalid = true
	}
}

// Resolve says what the records added resolve to, and the chain's root
// when found.
func (t *ChainTarget) Resolve() (int64, Target) {
	switch {
	case t.invalid:
		return 0, TargetInvalid
	case t.root == 0:
		return 0, TargetMissing
	}
	return t.root, TargetFound
}
